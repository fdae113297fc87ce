"""SDK wrappers: the whole ctxengine loop behind the ``anthropic`` and ``openai`` clients.

Private: hosts use :func:`ctxengine.wrap` and the record types exported from ``ctxengine``.
Nothing here imports ``anthropic`` or ``openai``; clients are recognised by their class.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxengine._wrap.base import WrappedClient
from ctxengine._wrap.clients import (
    WrappedAnthropic,
    WrappedAsyncAnthropic,
    WrappedAsyncOpenAI,
    WrappedOpenAI,
)
from ctxengine._wrap.record import CallRecord, RoundRecord
from ctxengine._wrap.turn import ToolMode, WrappedConversation

if TYPE_CHECKING:
    from ctxengine._kernel.kernel import ConfigLike, Kernel
    from ctxengine._kernel.session import Session

__all__ = ["CallRecord", "RoundRecord", "WrappedClient", "wrap"]


def _wrapper_class(client: Any) -> Callable[[Any, WrappedConversation], WrappedClient]:
    """The wrapper for ``client``'s SDK (anthropic or openai), sync or async by its class name."""
    if isinstance(client, WrappedClient):
        raise TypeError("this client is already wrapped by ctxengine; wrap the SDK client once")
    packages = {cls.__module__.split(".", 1)[0] for cls in type(client).__mro__}
    is_async = type(client).__name__.startswith("Async")
    if "anthropic" in packages and hasattr(client, "messages"):
        return WrappedAsyncAnthropic if is_async else WrappedAnthropic
    if "openai" in packages and hasattr(client, "chat") and hasattr(client, "responses"):
        return WrappedAsyncOpenAI if is_async else WrappedOpenAI
    raise TypeError(
        "ctxengine.wrap takes an anthropic client (Anthropic, AsyncAnthropic) or an openai "
        f"client (OpenAI, AsyncOpenAI); got {type(client).__module__}.{type(client).__name__}"
    )


def wrap(
    client: Any,
    *,
    kernel: Kernel | None = None,
    session_id: str | None = None,
    session: Session | None = None,
    config: ConfigLike = None,
    tools: ToolMode = "answer",
    max_tool_rounds: int = 8,
    keep_records: int = 1000,
    on_record: Callable[[CallRecord], None] | None = None,
) -> Any:
    """Wrap an ``anthropic`` or ``openai`` client so that its model calls run the ctxengine loop.

    The wrapped client is used exactly like the SDK client: ``messages.create`` /
    ``messages.stream`` / ``messages.parse`` (``anthropic``, and ``beta.messages``),
    ``chat.completions.create`` / ``.parse`` and ``responses.create`` / ``.parse``
    (``openai``), sync or async, streamed or not. On each call it compacts the history when the
    engine says so, adds the engine's tools, marks the request for prompt caching, sends it,
    records the provider's usage (from the final event of a stream), and, when the model calls
    only engine tools, runs them and asks again. It returns what the SDK returned for the last
    request (a stream over every request's events when streaming). Everything else about the
    request is the host's: it is never changed beyond what ctxengine is configured to do. The
    host keeps its own history and passes all of it every time; the wrapper remembers what it
    sent for it (see ``docs/integrations.md``).

    One wrapped client is one conversation (one session). Calls on it must not overlap.

    :param client: ``anthropic.Anthropic`` / ``AsyncAnthropic`` or ``openai.OpenAI`` /
        ``AsyncOpenAI`` (or a subclass with the same resources).
    :param kernel: the kernel to use; default ``ctxengine.load(config)``.
    :param session_id: the session's id on ``kernel``; default a new random id.
    :param session: an existing session instead of ``kernel`` and ``session_id``.
    :param config: passed to :func:`ctxengine.load` when no kernel or session is given.
    :param tools: ``"answer"``: the wrapper runs engine tool calls (calls mixed with the host's
        own tools are handed back with the response and their results supplied in the next
        request); ``"return"``: the tools are offered and every call is handed back for the host
        to run with ``wrapped.session.call_tool``; ``"off"``: the engine's tools are not offered.
    :param max_tool_rounds: the most requests one call sends while answering engine tools.
    :param keep_records: how many call records ``wrapped.records`` keeps.
    :param on_record: called with each call's :class:`CallRecord` (e.g. to log it).
    :returns: the wrapped client; also ``.session``, ``.records``, ``.last_record``,
        ``.engine_tool_names``, ``.reset_history()`` and ``.unwrapped``.
    :raises TypeError: for a client that is not an anthropic or openai client, or wrapped twice.
    :raises ValueError: for conflicting or invalid options.
    """
    wrapper = _wrapper_class(client)
    if session is not None:
        if kernel is not None or session_id is not None or config is not None:
            raise ValueError("pass either session, or kernel / session_id / config, not both")
    else:
        if kernel is not None and config is not None:
            raise ValueError("pass either kernel or config, not both")
        if kernel is None:
            from ctxengine._kernel.kernel import load

            kernel = load(config)
        session = kernel.session(session_id or f"wrap-{uuid.uuid4().hex[:12]}")
    conversation = WrappedConversation(
        session,
        tools=tools,
        max_tool_rounds=max_tool_rounds,
        keep_records=keep_records,
        on_record=on_record,
    )
    return wrapper(client, conversation)
