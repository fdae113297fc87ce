"""The LangChain v1 agent middleware: compaction, prompt caching, accounting and engine tools.

:class:`CtxengineMiddleware` plugs into ``langchain.agents.create_agent(middleware=[...])``:

- ``before_model``: asks the engine whether the conversation is due for compaction and, when it
  is, compacts it and **replaces the agent's state** with the result (``RemoveMessage`` of all
  messages, then the compacted list), so the checkpointed history is the compacted one (valid
  for every provider as it is: engines return histories that open with the user and
  alternate, the strict route profile);
- ``wrap_model_call``: marks the request for prompt caching with the selected cache strategy
  (``cache_control`` on the system prompt and the last messages, on copies sent to the model,
  never in the state), calls the model, and records the response's usage (LangChain's
  ``usage_metadata``) so thresholds run on real counts and the local estimate is calibrated;
- ``tools``: the engine's tools (the lossless engine's ``lcm_grep``...) as LangChain tools that
  the agent runs like its own.

One middleware instance serves one conversation, or every thread of an agent when no
``session_id`` is given (the session is then the run's ``thread_id``).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES

import ctxengine
from ctxengine_langchain.convert import Converter, with_cache_marker

COMPACTIONS_KEPT = 100


def usage_from_metadata(metadata: Mapping[str, Any]) -> ctxengine.Usage:
    """A ctxengine :class:`~ctxengine.Usage` from LangChain's provider-neutral ``usage_metadata``.

    LangChain's ``input_tokens`` include cache reads and writes (``input_token_details``:
    ``cache_read``, ``cache_creation`` or its ``ephemeral_5m/1h_input_tokens`` split);
    ``output_token_details.reasoning`` is the reasoning share of ``output_tokens``.

    :raises ValueError: when a count is missing or not a non-negative integer.
    """
    details = metadata.get("input_token_details") or {}
    out_details = metadata.get("output_token_details") or {}
    write_1h = int(details.get("ephemeral_1h_input_tokens") or 0)
    write_5m = int(details.get("ephemeral_5m_input_tokens") or 0)
    if not write_1h and not write_5m:
        write_5m = int(details.get("cache_creation") or 0)
    read = int(details.get("cache_read") or 0)
    total = metadata.get("input_tokens")
    output = metadata.get("output_tokens")
    for key, value in (("input_tokens", total), ("output_tokens", output)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"usage_metadata.{key} must be a non-negative integer, got {value!r}")
    assert isinstance(total, int) and isinstance(output, int)
    return ctxengine.Usage(
        input_tokens=max(0, total - read - write_5m - write_1h),
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
        reasoning_tokens=int(out_details.get("reasoning") or 0),
    )


class CtxengineMiddleware(AgentMiddleware):
    """ctxengine behind a LangChain agent (see the module docstring).

    :param kernel: the kernel (engine, cache strategy, accounting); default
        ``ctxengine.load(config)``.
    :param session_id: the conversation's session; default: the run's ``thread_id``.
    :param config: passed to :func:`ctxengine.load` when no kernel is given.
    :param offer_tools: whether the agent gets the engine's tools.
    """

    def __init__(
        self,
        kernel: ctxengine.Kernel | None = None,
        *,
        session_id: str | None = None,
        config: Any = None,
        offer_tools: bool = True,
    ) -> None:
        super().__init__()
        if kernel is not None and config is not None:
            raise ValueError("pass either kernel or config, not both")
        self.kernel = kernel if kernel is not None else ctxengine.load(config)
        self.session_id = session_id
        self._converters: dict[str, Converter] = {}
        self.compactions: collections.deque[ctxengine.CompressResult] = collections.deque(
            maxlen=COMPACTIONS_KEPT
        )
        """Every compaction attempted (any status), newest last."""
        self.tools: list[BaseTool] = self._engine_tools() if offer_tools else []

    # -- sessions ---------------------------------------------------------------------------

    def session_key(self) -> str:
        """The session id of the current run.

        :raises RuntimeError: without ``session_id`` when the run has no ``thread_id``.
        """
        if self.session_id is not None:
            return self.session_id
        try:
            configurable = get_config().get("configurable") or {}
        except RuntimeError:
            configurable = {}
        thread = configurable.get("thread_id")
        if thread is None:
            raise RuntimeError(
                "CtxengineMiddleware needs a session: pass session_id=..., or run the agent with "
                "config={'configurable': {'thread_id': ...}}"
            )
        return str(thread)

    def session(self) -> ctxengine.Session:
        """The ctxengine session of the current run."""
        return self.kernel.session(self.session_key())

    def _converter(self) -> Converter:
        return self._converters.setdefault(self.session_key(), Converter())

    # -- tools ------------------------------------------------------------------------------

    def _engine_tools(self) -> list[BaseTool]:
        # The schemas are the engine's; which session answers is decided per call.
        probe = self.kernel.session(self.session_id or "ctxengine-langchain-tools")
        tools: list[BaseTool] = []
        for entry in probe.tools():
            name = entry.tool.name

            def run(_name: str = name, **arguments: Any) -> str:
                return self.session().call_tool(_name, arguments)

            async def arun(_name: str = name, **arguments: Any) -> str:
                return await self.session().acall_tool(_name, arguments)

            tools.append(
                StructuredTool.from_function(
                    func=run,
                    coroutine=arun,
                    name=name,
                    description=entry.tool.description,
                    args_schema=dict(entry.tool.input_schema),
                )
            )
        return tools

    # -- compaction -------------------------------------------------------------------------

    def _compact(self, messages: list[BaseMessage]) -> dict[str, Any] | None:
        session = self.session()
        converter = self._converter()
        dicts = converter.to_dicts(messages)
        if not session.should_compress(dicts):
            return None
        result = session.compress(dicts, format="openai")
        self.compactions.append(result)
        if not result.compacted:
            return None
        compacted = converter.to_messages(result.messages)
        converter.retain(compacted)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *compacted]}

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Compact the agent's history when the engine says it is due."""
        return self._compact(list(state["messages"]))

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`before_model` in a worker thread (engines may block on I/O)."""
        return await asyncio.to_thread(self._compact, list(state["messages"]))

    # -- the model call ---------------------------------------------------------------------

    def _marked(self, request: ModelRequest) -> ModelRequest:
        session = self.session()
        converter = self._converter()
        system = request.system_message
        head = converter.to_dicts([system]) if system is not None else []
        dicts = [*head, *converter.to_dicts(request.messages)]
        prepared = session.prepare({"model": session.ctx.model.name, "messages": dicts})
        sent = prepared.get("messages") or dicts
        offset = 1 if system is not None else 0
        new_system = system
        messages: list[AnyMessage] = list(request.messages)
        for i, (before, after) in enumerate(zip(dicts, sent, strict=True)):
            marker = None if after is before else _marker_of(after)
            if marker is None:
                continue
            if i < offset and system is not None:
                new_system = with_cache_marker(system, marker)
            else:
                messages[i - offset] = with_cache_marker(messages[i - offset], marker)
        return request.override(system_message=new_system, messages=messages)

    def _record(self, response: Any) -> None:
        messages = response.result if isinstance(response, ModelResponse) else [response]
        for message in messages:
            if isinstance(message, AIMessage) and message.usage_metadata:
                self.session().update_usage(usage_from_metadata(message.usage_metadata))

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Any],
    ) -> Any:
        """Mark the request for prompt caching, call the model, record its usage."""
        response = handler(self._marked(request))
        self._record(response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[Any]],
    ) -> Any:
        """:meth:`wrap_model_call` for async runs."""
        response = await handler(self._marked(request))
        self._record(response)
        return response


def _marker_of(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``cache_control`` a cache strategy put on an OpenAI chat dict, if any."""
    marker = message.get("cache_control")
    if isinstance(marker, Mapping):
        return marker
    content = message.get("content")
    if isinstance(content, list):
        for part in reversed(content):
            if isinstance(part, Mapping) and isinstance(part.get("cache_control"), Mapping):
                found: Mapping[str, Any] = part["cache_control"]
                return found
    return None
