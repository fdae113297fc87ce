"""``CTXENGINE_TRACE=1``: one compact log line before and after every hook call.

Arguments and results are summarised (a conversation as its size and format, a request as its
message count, a context as its session id), never dumped: a long conversation would otherwise
write megabytes per request. Lines go to the ``ctxengine.trace`` logger (a child of ``ctxengine``)
at INFO, so a host or the CLI can show them without ctxengine's other INFO lines.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pluggy

from ctxengine._accounting.usage import Usage
from ctxengine._messages.conversation import Conversation
from ctxengine._plugin.context import EngineContext
from ctxengine._plugin.results import CompressResult

_MAX_TEXT = 60


def summarize(value: object) -> str:
    """A short description of a hook argument or result."""
    if isinstance(value, EngineContext):
        return f"<session {value.session_id!r}>"
    if isinstance(value, Conversation):
        return f"<{len(value.messages)} {value.format} messages>"
    if isinstance(value, CompressResult):
        return f"<{value.status}: {value.messages_before} -> {value.messages_after} messages>"
    if isinstance(value, Usage):
        return f"<usage prompt={value.prompt_tokens} output={value.output_tokens}>"
    if isinstance(value, Mapping):
        messages = value.get("messages")
        if isinstance(messages, list):
            return f"<request with {len(messages)} messages>"
        return f"<mapping of {len(value)} keys>"
    if isinstance(value, list | tuple):
        return f"<{len(value)} items>"
    text = repr(value)
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def enable_tracing(pm: pluggy.PluginManager, log: logging.Logger) -> None:
    """Log every hook call of ``pm`` compactly (public pluggy monitoring API, so wrappers and
    every dispatch rule are traced as they run)."""
    clock = threading.local()  # hooks run on many threads; each keeps its own start times

    def stack() -> list[float]:
        if not hasattr(clock, "started"):
            clock.started = []
        started: list[float] = clock.started
        return started

    def before(
        hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]
    ) -> None:
        stack().append(time.perf_counter())
        args = ", ".join(f"{k}={summarize(v)}" for k, v in kwargs.items())
        plugins = ", ".join(impl.plugin_name for impl in hook_impls) or "none"
        log.info("hook %s(%s) -> plugins: %s", hook_name, args, plugins)

    def after(
        outcome: pluggy.Result[Any],
        hook_name: str,
        hook_impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:
        started = stack()
        elapsed = (time.perf_counter() - started.pop()) * 1000 if started else 0.0
        if outcome.exception is not None:
            result = f"raised {type(outcome.exception).__name__}"
        else:
            result = summarize(outcome.get_result())
        log.info("hook %s done in %.2f ms: %s", hook_name, elapsed, result)

    pm.add_hookcall_monitoring(before, after)
