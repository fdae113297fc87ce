"""ctxengine behind a pydantic-ai agent: a history processor with accounting, caching and tools.

:class:`Ctxengine` is a pydantic-ai capability (``Agent(..., capabilities=[Ctxengine(...)])``).
At heart it is a history processor: before every model request it asks the selected engine
whether the conversation is due and, when it is, compacts it and replaces the run's history
(``RunContext.messages``) with the result, so ``result.all_messages()`` is the compacted,
valid history for every provider (engines return histories that open with the user and
alternate, the strict route profile). Around that:

- **caching**: the selected cache strategy marks the request; its marks are carried over to
  what pydantic-ai can express: a ``CachePoint`` after a marked user prompt (on a copy, sent
  only with this request), ``anthropic_cache_instructions`` for a marked system prompt and
  ``anthropic_cache_messages`` for a marked last message. Marks on earlier tool returns or
  model responses have no pydantic-ai equivalent and are left out;
- **accounting**: each response's ``usage`` goes to the session (real thresholds, calibrated
  estimates, cache statistics);
- **tools**: the engine's tools (the lossless engine's ``lcm_grep``...) as a toolset.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    CachePoint,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

import ctxengine
from ctxengine_pydantic_ai.convert import Converter

COMPACTIONS_KEPT = 100


def usage_from_pydantic_ai(usage: Any) -> ctxengine.Usage:
    """A ctxengine :class:`~ctxengine.Usage` from pydantic-ai's ``RequestUsage``, whose
    ``input_tokens`` include cache reads and writes (``cache_write_1h_tokens`` is part of
    ``cache_write_tokens``)."""
    read = int(usage.cache_read_tokens or 0)
    written = int(usage.cache_write_tokens or 0)
    long_ttl = int(getattr(usage, "cache_write_1h_tokens", 0) or 0)
    return ctxengine.Usage(
        input_tokens=max(0, int(usage.input_tokens or 0) - read - written),
        output_tokens=int(usage.output_tokens or 0),
        cache_read_tokens=read,
        cache_write_5m_tokens=max(0, written - long_ttl),
        cache_write_1h_tokens=long_ttl,
        reasoning_tokens=int((usage.details or {}).get("reasoning_tokens", 0) or 0),
    )


@dataclasses.dataclass
class Ctxengine(AbstractCapability[Any]):
    """ctxengine for one pydantic-ai agent (see the module docstring).

    :param kernel: the kernel (engine, cache strategy, accounting); default ``ctxengine.load()``.
    :param session_id: the session; default: the run's ``conversation_id``.
    :param offer_tools: whether the agent gets the engine's tools.
    """

    kernel: ctxengine.Kernel | None = None
    session_id: str | None = None
    offer_tools: bool = True
    compactions: collections.deque[ctxengine.CompressResult] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=COMPACTIONS_KEPT)
    )
    """Every compaction attempted (any status), newest last."""

    def __post_init__(self) -> None:
        if self.kernel is None:
            self.kernel = ctxengine.load()
        self._converters: dict[str, Converter] = {}
        self._current: str | None = None

    # -- sessions ---------------------------------------------------------------------------

    def _kernel(self) -> ctxengine.Kernel:
        assert self.kernel is not None  # set in __post_init__
        return self.kernel

    def session_for(self, ctx: RunContext[Any]) -> ctxengine.Session:
        """The session of the run ``ctx`` belongs to."""
        key = self.session_id or ctx.conversation_id
        if key is None:
            raise RuntimeError(
                "Ctxengine needs a session: pass session_id=..., or run the agent with a "
                "conversation_id"
            )
        self._current = key
        return self._kernel().session(key)

    def _converter(self, session: ctxengine.Session) -> Converter:
        return self._converters.setdefault(session.id, Converter())

    # -- tools ------------------------------------------------------------------------------

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """The engine's tools, answered by the session of the run that calls them."""
        if not self.offer_tools:
            return None
        probe = self._kernel().session(self.session_id or "ctxengine-pydantic-ai-tools")
        tools = []
        for entry in probe.tools():
            name = entry.tool.name

            async def call(ctx: RunContext[Any], _name: str = name, **arguments: Any) -> str:
                return await self.session_for(ctx).acall_tool(_name, arguments)

            tools.append(
                Tool.from_schema(
                    call,
                    name=name,
                    description=entry.tool.description,
                    json_schema=dict(entry.tool.input_schema),
                    takes_ctx=True,
                )
            )
        return FunctionToolset(tools) if tools else None

    # -- the history processor --------------------------------------------------------------

    def compact(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history processor: ``messages`` compacted when the engine says it is due."""
        session = self.session_for(ctx)
        converter = self._converter(session)
        dicts = converter.to_dicts(messages)
        if not session.should_compress(dicts):
            return messages
        result = session.compress(dicts, format="openai")
        self.compactions.append(result)
        if not result.compacted:
            return messages
        compacted = converter.to_messages(result.messages)
        converter.retain(compacted)
        return compacted

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Compact (persistently) when due, then mark this request for prompt caching."""
        messages = list(request_context.messages)
        compacted = await asyncio.to_thread(self.compact, ctx, messages)
        if compacted is not messages:
            ctx.messages[:] = compacted
        request_context.messages = self._marked(ctx, list(compacted), request_context)
        return request_context

    def _marked(
        self,
        ctx: RunContext[Any],
        messages: list[ModelMessage],
        request_context: ModelRequestContext,
    ) -> list[ModelMessage]:
        kernel = self._kernel()
        settings = kernel.cache_settings
        session = self.session_for(ctx)
        converter = self._converter(session)
        dicts = converter.to_dicts(messages)
        prepared = session.prepare({"model": session.ctx.model.name, "messages": dicts})
        if settings is None:
            return messages
        sent = prepared.get("messages") or dicts
        marked_users: set[int] = set()
        flags: dict[str, Any] = {}
        for index, (before, after) in enumerate(zip(dicts, sent, strict=True)):
            if after is before or not _has_marker(after):
                continue
            origin = converter._known(before)
            part = origin[1] if origin is not None else None
            if isinstance(part, UserPromptPart):
                marked_users.add(id(part))
            elif isinstance(part, SystemPromptPart):
                flags["anthropic_cache_instructions"] = settings.ttl
            elif index == len(dicts) - 1:
                flags["anthropic_cache_messages"] = settings.ttl
        if flags:
            merged = {**(request_context.model_settings or {}), **flags}
            request_context.model_settings = cast(ModelSettings, merged)
        if not marked_users:
            return messages
        return [_with_cache_points(m, marked_users) for m in messages]

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        """Record the response's usage with the session."""
        self.session_for(ctx).update_usage(usage_from_pydantic_ai(response.usage))
        return response


def _has_marker(message: Mapping[str, Any]) -> bool:
    if isinstance(message.get("cache_control"), Mapping):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, Mapping) and isinstance(p.get("cache_control"), Mapping) for p in content
    )


def _with_cache_points(message: ModelMessage, marked: set[int]) -> ModelMessage:
    """A copy of ``message`` with a ``CachePoint`` after each marked user prompt."""
    if not isinstance(message, ModelRequest) or not any(id(p) in marked for p in message.parts):
        return message
    parts: list[ModelRequestPart] = []
    for part in message.parts:
        if id(part) in marked and isinstance(part, UserPromptPart):
            content = [part.content] if isinstance(part.content, str) else list(part.content)
            parts.append(dataclasses.replace(part, content=[*content, CachePoint()]))
        else:
            parts.append(part)
    return dataclasses.replace(message, parts=parts)
