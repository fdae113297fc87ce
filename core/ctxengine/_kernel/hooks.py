"""The typed facade between the kernel and pluggy: the only place that calls ``pm.hook``.

Every call is pluggy's (``pm.hook.<name>(...)``): ``CTXENGINE_TRACE=1`` traces it,
``wrapper=True`` / ``hookwrapper=True`` / ``tryfirst`` / ``trylast`` implementations behave as
pluggy documents, and a plugin registered later is heard.

Failure isolation comes from :func:`guarded`: each plugin is registered as a stand-in whose
ordinary hook implementations catch what the plugin raises, log it with the plugin's name and
answer ``None`` (pluggy then asks the next implementation), so one broken plugin never silences
the others, takes the host down or loses a message. The facade turns what remains (nobody
answered, a wrapper raised) into the safe answer of each hook: no compaction, no markers, the
conversation unchanged.

An engine may name a *fallback* engine (``CTXENGINE_FALLBACK``) that the kernel loads beside it.
The fallback is registered like any plugin, so it hears every broadcast hook (usage, session
start, reset and end) and keeps its own state current, but the engine hooks
(``should_compress``, ``compress``, ``expose_tools``) reach only the selected engine; the
fallback's ``compress`` runs only when the engine asks for it (:meth:`Hooks.fallback_compress`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pluggy

from ctxengine._accounting.estimate import TokenEstimate
from ctxengine._accounting.usage import Usage
from ctxengine._config.core import Config
from ctxengine._config.spec import SettingsRegistry
from ctxengine._kernel.coordination import Coordinator
from ctxengine._messages.conversation import Conversation, Stage
from ctxengine._messages.markers import marker_positions
from ctxengine._plugin.commands import CommandRegistry
from ctxengine._plugin.context import CacheSettings, EngineContext, MarkedRequest
from ctxengine._plugin.results import CompressResult, GatewayVerdict
from ctxengine._plugin.tools import Tool, ToolRegistry

log = logging.getLogger("ctxengine")


@attrs.frozen
class HookFailure:
    """A plugin's hook implementation raised; it answered ``None`` instead."""

    plugin: str
    hook: str
    error: BaseException

    def describe(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


class _Failures(threading.local):
    """Failures recorded during the current hook call of this thread."""

    def __init__(self) -> None:
        self.items: list[HookFailure] = []


_failures = _Failures()


class ProvidedTools(list[Tool]):
    """The tools one plugin returned from ``expose_tools``, stamped with the plugin's name.

    A list, so wrappers see what the hookspec promises; the facade reads :attr:`provider`.
    """

    provider: str = "<unknown>"


_OWNED_ARGUMENTS = {"declare_settings": "settings", "register_commands": "commands"}
"""Hooks whose argument of that name is a registry handed to each plugin as its own view,
stamped with its name (``cache_strategy`` has a ``settings`` argument too, handed over as is)."""


def _guard(function: Callable[..., Any], hook: str, plugin: str) -> Callable[..., Any]:
    names = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    owned = _OWNED_ARGUMENTS.get(hook)
    at = names.index(owned) if owned in names else None

    @functools.wraps(function)  # keeps the marker attribute and, via __wrapped__, the argnames
    def guard(*args: Any) -> Any:
        if at is not None and isinstance(args[at], SettingsRegistry | CommandRegistry):
            args = (*args[:at], args[at].for_owner(plugin), *args[at + 1 :])
        try:
            result = function(*args)
        except Exception as exc:
            return _failed(plugin, hook, exc)
        if hook == "expose_tools":
            return _stamp_tools(result, plugin)
        return result

    return guard


def _failed(plugin: str, hook: str, exc: Exception) -> None:
    """Log (call it in the ``except`` block: the traceback is logged) and record that ``plugin``
    raised ``exc`` in ``hook``; its answer is ``None``."""
    log.exception("plugin %r raised in %s; it answers nothing this time", plugin, hook)
    _failures.items.append(HookFailure(plugin, hook, exc))


def _stamp_tools(result: object, plugin: str) -> ProvidedTools | None:
    if result is None:
        return None
    if not isinstance(result, list | tuple):
        log.error("plugin %r returned %r from expose_tools, not a list", plugin, result)
        return None
    tools = ProvidedTools()
    tools.provider = plugin
    for tool in result:
        if isinstance(tool, Tool):
            tools.append(tool)
        else:
            log.error("plugin %r offered %r, not a ctxengine.Tool", plugin, tool)
    return tools


class _StandIn:
    """The object registered for a plugin: its guarded hook functions as attributes (hashable and
    compared by identity, as pluggy's subset callers need)."""


def guarded(pm: pluggy.PluginManager, plugin: object, name: str) -> object:
    """A stand-in for ``plugin`` to register under ``name``: the same hook implementations
    with the same pluggy options, each guarded (see the module docstring).

    Wrappers (``wrapper=True``, ``hookwrapper=True``) are kept as they are: they wrap the call
    of every plugin, and an exception in one aborts that call, which the facade answers safely.
    """
    stand_in = _StandIn()
    for attr in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attr)
        if opts is None:
            continue
        function = getattr(plugin, attr)
        if opts.get("wrapper") or opts.get("hookwrapper"):
            setattr(stand_in, attr, function)
        else:
            setattr(stand_in, attr, _guard(function, attr, name))
    return stand_in


_ENGINE_HOOKS = ("should_compress", "compress", "expose_tools")
"""Hooks the selected engine answers and its fallback never does."""


class Hooks:
    """Typed calls into the plugins registered with one kernel's plugin manager.

    :param engine: the registered name of the selected engine.
    :param fallback: the registered name of the engine's fallback, when one was loaded.
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        *,
        engine: str | None = None,
        fallback: str | None = None,
    ) -> None:
        self._pm = pm
        self.fallback = fallback if fallback is not None and pm.has_plugin(fallback) else None
        # caller key -> its pluggy hook caller (the subsets below, the others on first use).
        self._callers: dict[str, Any] = {}
        if self.fallback is not None:
            # The pm is complete once the kernel built it, so the subsets are made once.
            without_fallback = [pm.get_plugin(self.fallback)]
            for hook in _ENGINE_HOOKS:
                self._callers[hook] = pm.subset_hook_caller(hook, without_fallback)
            if engine is not None and pm.has_plugin(engine):
                self._callers["fallback:compress"] = pm.subset_hook_caller(
                    "compress", [pm.get_plugin(engine)]
                )

    @property
    def plugin_names(self) -> list[str]:
        """Names of the registered plugins, in registration order."""
        return [name for name, _ in self._pm.list_name_plugin()]

    def _call(
        self, hook: str, *, caller_key: str | None = None, **kwargs: Any
    ) -> tuple[Any, list[HookFailure], bool]:
        """``pm.hook.<hook>(**kwargs)``: (result, failures of guarded plugins, whether the call
        itself raised, e.g. in a wrapper). Engine hooks skip the fallback engine;
        ``caller_key`` names another subset of the plugins."""
        key = caller_key or hook
        caller = self._callers.get(key)
        if caller is None:
            # pluggy keeps one caller per hook name for the manager's lifetime.
            caller = self._callers[key] = getattr(self._pm.hook, hook)
        previous = _failures.items
        _failures.items = []
        try:
            try:
                answer = caller(**kwargs)
                return answer, _failures.items, False
            except Exception as exc:
                log.exception("the %s hook call failed (in a wrapper); using the safe answer", hook)
                return None, [*_failures.items, HookFailure("<wrapper>", hook, exc)], True
        finally:
            _failures.items = previous

    def should_compress(
        self,
        ctx: EngineContext,
        prompt: TokenEstimate,
        stage: Stage,
        force: bool,
        message_count: int,
    ) -> bool:
        """First answer of ``should_compress``; ``False`` when nobody answers or a plugin fails."""
        return self.verdict(ctx, prompt, stage, force, message_count).compact

    def verdict(
        self,
        ctx: EngineContext,
        prompt: TokenEstimate,
        stage: Stage,
        force: bool,
        message_count: int,
    ) -> GatewayVerdict:
        """The first answer of ``should_compress`` as a :class:`GatewayVerdict` (a plain
        ``True``/``False`` becomes one without a reason; no answer is "no").

        Implementations get ``prompt`` and, for those that take plain numbers, its point
        estimate as ``prompt_tokens`` and ``prompt.measured`` as ``measured``."""
        answer, _, _ = self._call(
            "should_compress",
            ctx=ctx,
            prompt_tokens=prompt.value,
            measured=prompt.measured,
            stage=stage,
            force=force,
            message_count=message_count,
            prompt=prompt,
        )
        if isinstance(answer, GatewayVerdict):
            return answer
        return GatewayVerdict(bool(answer))

    def compress(
        self,
        ctx: EngineContext,
        conversation: Conversation,
        stage: Stage,
        force: bool,
        focus: str | None,
        tokens_before: Callable[[], int],
        message_budget: int | None = None,
    ) -> CompressResult:
        """The engine's ``compress`` result; an ``aborted`` record when it fails or answers none
        (``tokens_before()`` sizes that record)."""
        return self._compress(
            ctx.engine, None, ctx, conversation, stage, force, focus, tokens_before, message_budget
        )

    def fallback_compress(
        self,
        ctx: EngineContext,
        conversation: Conversation,
        stage: Stage,
        force: bool,
        focus: str | None,
        tokens_before: Callable[[], int],
        message_budget: int | None = None,
    ) -> CompressResult | None:
        """The fallback engine's ``compress`` (every plugin but the selected engine answers);
        ``None`` when no fallback is loaded. A failure is an ``aborted`` record naming it."""
        if self.fallback is None:
            return None
        return self._compress(
            self.fallback,
            "fallback:compress",
            ctx,
            conversation,
            stage,
            force,
            focus,
            tokens_before,
            message_budget,
        )

    def _compress(
        self,
        engine: str,
        caller_key: str | None,
        ctx: EngineContext,
        conversation: Conversation,
        stage: Stage,
        force: bool,
        focus: str | None,
        tokens_before: Callable[[], int],
        message_budget: int | None = None,
    ) -> CompressResult:
        """``engine``'s ``compress`` through ``caller_key``'s caller (``None``: the selected
        engine's); an ``aborted`` record sized by ``tokens_before()`` when it fails or answers
        none."""
        started = time.perf_counter()
        result, failures, _ = self._call(
            "compress",
            caller_key=caller_key,
            ctx=ctx,
            conversation=conversation,
            stage=stage,
            force=force,
            focus=focus,
            message_budget=message_budget,
        )
        if isinstance(result, CompressResult):
            return result
        if failures:
            failure = failures[-1]
            who = f"engine {engine!r}" if failure.plugin == engine else failure.plugin
            reason = f"{who} raised {failure.describe()}; no messages were dropped"
        else:
            reason = f"engine {engine!r} returned no compress result; no messages were dropped"
        return CompressResult.unchanged(
            "aborted",
            reason,
            conversation,
            engine=engine,
            tokens=tokens_before(),
            duration_s=time.perf_counter() - started,
        )

    def expose_tools(self, ctx: EngineContext) -> ToolRegistry:
        """Tools from every plugin, stamped with their provider.

        A plugin that raises offers no tools (logged); duplicate names raise
        :class:`~ctxengine._plugin.tools.DuplicateToolError` naming both plugins.
        """
        results, _, _ = self._call("expose_tools", ctx=ctx)
        registry = ToolRegistry()
        for tools in reversed(results or []):  # pluggy answers newest first
            provider = tools.provider if isinstance(tools, ProvidedTools) else "<wrapper>"
            for tool in tools if isinstance(tools, list | tuple) else ():
                if isinstance(tool, Tool):
                    registry.add(tool, provider)
        return registry

    def update_usage(self, ctx: EngineContext, usage: Usage) -> None:
        """Broadcast ``update_usage``; a failing plugin is logged and the others still run."""
        self._call("update_usage", ctx=ctx, usage=usage)

    def cache_strategy(
        self, ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
    ) -> MarkedRequest:
        """The marked request and its marker count (see :class:`MarkedRequest`; a strategy that
        answers with the bare request has the markers of that request counted); the request
        itself with no markers counted when no strategy answers or one fails."""
        marked, failures, _ = self._call(
            "cache_strategy", ctx=ctx, request=request, settings=settings
        )
        if failures:
            log.warning("sending the request without cache markers: the cache strategy failed")
        if isinstance(marked, MarkedRequest):
            return marked
        if isinstance(marked, dict):
            return MarkedRequest(marked, len(marker_positions(marked)))
        return MarkedRequest(request, 0)

    def declare_settings(self, registry: SettingsRegistry) -> list[HookFailure]:
        """Every plugin declares its settings into ``registry``; returns the plugins that
        failed (their keys are then not validated at load)."""
        _, failures, _ = self._call("declare_settings", settings=registry)
        return failures

    def coordinator(self, backend: str, config: Config, data_dir: Path) -> Coordinator | None:
        """The first plugin's coordinator for ``backend``; what that plugin raised is raised
        again (an unopened backend stops the kernel)."""
        found, failures, _ = self._call(
            "coordination_backend", backend=backend, config=config, data_dir=data_dir
        )
        if failures:
            raise failures[0].error
        return found if isinstance(found, Coordinator) else None

    def register_commands(self, registry: CommandRegistry) -> list[HookFailure]:
        """Every plugin adds its CLI commands to ``registry``; returns the failures."""
        _, failures, _ = self._call("register_commands", commands=registry)
        return failures

    def session_start(self, ctx: EngineContext) -> None:
        self._call("session_start", ctx=ctx)

    def session_reset(self, ctx: EngineContext) -> None:
        self._call("session_reset", ctx=ctx)

    def session_end(self, ctx: EngineContext) -> None:
        self._call("session_end", ctx=ctx)
