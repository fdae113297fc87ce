"""The typed facade between the kernel and pluggy: the only place that touches ``pm.hook``.

Every call is guarded: a plugin that raises is logged with its name and the call degrades to the
safe answer (no compaction, no markers, the conversation handed back unchanged), so a broken
third-party plugin never takes the host down and never loses a message.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pluggy

from ctxengine._accounting.usage import Usage
from ctxengine._messages.conversation import Conversation, Stage
from ctxengine._plugin.context import CacheSettings, EngineContext
from ctxengine._plugin.results import CompressResult
from ctxengine._plugin.tools import Tool, ToolRegistry

log = logging.getLogger("ctxengine")


class Hooks:
    """Typed calls into the plugins registered with one kernel's plugin manager."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._pm = pm

    @property
    def plugin_names(self) -> list[str]:
        """Names of the registered plugins, in registration order."""
        return [name for name, _ in self._pm.list_name_plugin()]

    def should_compress(
        self,
        ctx: EngineContext,
        prompt_tokens: int,
        measured: bool,
        stage: Stage,
        force: bool,
        message_count: int,
    ) -> bool:
        """First answer of ``should_compress``; ``False`` when nobody answers or a plugin fails."""
        try:
            answer = self._pm.hook.should_compress(
                ctx=ctx,
                prompt_tokens=prompt_tokens,
                measured=measured,
                stage=stage,
                force=force,
                message_count=message_count,
            )
        except Exception:
            log.exception("should_compress failed in a plugin; not compacting this turn")
            return False
        return bool(answer)

    def compress(
        self,
        ctx: EngineContext,
        conversation: Conversation,
        stage: Stage,
        force: bool,
        focus: str | None,
        tokens_before: int,
    ) -> CompressResult:
        """The engine's ``compress`` result; an ``aborted`` record when it fails or answers none."""
        started = time.perf_counter()
        try:
            result = self._pm.hook.compress(
                ctx=ctx, conversation=conversation, stage=stage, force=force, focus=focus
            )
        except Exception as exc:
            log.exception("engine %r raised in compress; conversation left unchanged", ctx.engine)
            reason = (
                f"engine {ctx.engine!r} raised {type(exc).__name__}: {exc}; "
                "no messages were dropped"
            )
        else:
            if isinstance(result, CompressResult):
                return result
            reason = f"engine {ctx.engine!r} returned no compress result; no messages were dropped"
        return CompressResult.unchanged(
            "aborted",
            reason,
            conversation,
            engine=ctx.engine,
            tokens=tokens_before,
            duration_s=time.perf_counter() - started,
        )

    def expose_tools(self, ctx: EngineContext) -> ToolRegistry:
        """Tools from every plugin, stamped with their provider.

        Each implementation is asked on its own so the registry can name the plugin behind each
        tool. A plugin that raises offers no tools (logged); duplicate names raise
        :class:`~ctxengine.tools.DuplicateToolError` naming both plugins.
        """
        registry = ToolRegistry()
        for impl in self._pm.hook.expose_tools.get_hookimpls():  # registration order
            kwargs: dict[str, Any] = {"ctx": ctx}
            try:
                tools: object = impl.function(**{k: kwargs[k] for k in impl.argnames})
            except Exception:
                log.exception(
                    "plugin %r raised in expose_tools; it offers no tools", impl.plugin_name
                )
                continue
            if tools is None:
                continue
            if not isinstance(tools, list | tuple):
                log.error(
                    "plugin %r returned %r from expose_tools, not a list", impl.plugin_name, tools
                )
                continue
            for tool in tools:
                if not isinstance(tool, Tool):
                    log.error("plugin %r offered %r, not a ctxengine.Tool", impl.plugin_name, tool)
                    continue
                registry.add(tool, impl.plugin_name)
        return registry

    def update_usage(self, ctx: EngineContext, usage: Usage) -> None:
        """Broadcast ``update_usage``; a failing plugin is logged and the others still run."""
        self._broadcast("update_usage", ctx=ctx, usage=usage)

    def cache_strategy(
        self, ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
    ) -> dict[str, Any]:
        """The marked request; the request itself when no strategy answers or one fails."""
        try:
            marked = self._pm.hook.cache_strategy(ctx=ctx, request=request, settings=settings)
        except Exception:
            log.exception("cache strategy failed; sending the request without cache markers")
            return request
        return marked if isinstance(marked, dict) else request

    def session_start(self, ctx: EngineContext) -> None:
        self._broadcast("session_start", ctx=ctx)

    def session_reset(self, ctx: EngineContext) -> None:
        self._broadcast("session_reset", ctx=ctx)

    def session_end(self, ctx: EngineContext) -> None:
        self._broadcast("session_end", ctx=ctx)

    def _broadcast(self, hook_name: str, **kwargs: Any) -> None:
        # Called per implementation so one failing plugin does not silence the rest.
        caller = getattr(self._pm.hook, hook_name)
        for impl in reversed(caller.get_hookimpls()):
            try:
                impl.function(**{k: kwargs[k] for k in impl.argnames})
            except Exception:
                log.exception("plugin %r raised in %s; continuing", impl.plugin_name, hook_name)
