"""The hook specifications every ctxengine plugin implements a subset of.

Each docstring starts with its dispatch rule. The kernel calls these only through
:class:`ctxengine._kernel.hooks.Hooks`, which goes through pluggy for every call. See
``docs/architecture.md``.

Engines are selected by name (``context.engine``) and cache strategies by
``prompt_caching.strategy``; only the selected ones are registered with a kernel's plugin
manager, so "first result" hooks see one engine, one cache strategy and the always-on extensions
(such as gateway hygiene).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    from ctxengine._accounting.estimate import TokenEstimate
    from ctxengine._accounting.usage import Usage
    from ctxengine._config.core import Config
    from ctxengine._config.spec import PluginSettings
    from ctxengine._kernel.coordination import Coordinator
    from ctxengine._messages.conversation import Conversation, Stage
    from ctxengine._plugin.commands import PluginCommands
    from ctxengine._plugin.context import CacheSettings, EngineContext, MarkedRequest
    from ctxengine._plugin.results import CompressResult, GatewayVerdict
    from ctxengine._plugin.tools import Tool

PROJECT = "ctxengine"
"""One name for the markers, the plugin manager and the entry-point group."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def should_compress(
    ctx: EngineContext,
    prompt_tokens: int,
    measured: bool,
    stage: Stage,
    force: bool,
    message_count: int,
    prompt: TokenEstimate,
) -> bool | GatewayVerdict | None:
    """First result: should this session compact now? ``None`` means no opinion.

    Compare thresholds with ``prompt.reaches(threshold)``: it gives the answer exact token counts
    would give and counts exactly only when the threshold lies within the estimate's error, so
    a decision costs next to nothing while the prompt is clearly below or above it.

    :param ctx: the session's engine context (config, model, token counter, state).
    :param prompt_tokens: ``prompt.value``, the point estimate of the prompt size: the same
        however the host handed the history over, but an estimate (comparing it with a threshold
        can differ from the exact answer when the two are close).
    :param measured: ``prompt.measured``: the size rests on the provider's last usage.
    :param stage: ``"agent"`` in the agent loop, ``"gateway"`` before the agent runs.
    :param force: the caller asks to ignore cooldowns and anti-thrash guards.
    :param message_count: how many messages the conversation holds.
    :param prompt: the prompt size in the provider's tokens (see
        :meth:`ctxengine.Session.prompt`): bounds, a point estimate, the exact count on demand.
    :returns: ``True``/``False``, or ``None`` to let the next implementation decide (the kernel
        treats an unanswered call as ``False``). At the gateway stage a
        :class:`~ctxengine.GatewayVerdict` may say why and pass a message budget on to the
        engine.
    """


@hookspec(firstresult=True)
def compress(
    ctx: EngineContext,
    conversation: Conversation,
    stage: Stage,
    force: bool,
    focus: str | None,
    message_budget: int | None,
) -> CompressResult | None:
    """First result: compact ``conversation`` and report what happened.

    Implementations never mutate ``conversation.messages`` and return a conversation in the same
    format. ``noop`` and ``aborted`` results hand the input back unchanged.

    :param force: an explicit request (``stage="agent"``) or the gateway's decision
        (``stage="gateway"``): ignore cooldowns and thresholds. Only an agent-stage ``force``
        passes an open summary-provider breaker (``call_summary(..., force=...)``).
    :param focus: an optional topic the summary should keep in most detail.
    :param message_budget: the most messages the result may hold (the gateway's hard message
        limit), or ``None``; an engine that cannot meet it compacts what it can and the kernel
        reports the shortfall.
    :returns: the :class:`~ctxengine.CompressResult`, or ``None`` for "not mine".
    """


@hookspec
def expose_tools(ctx: EngineContext) -> list[Tool] | None:
    """Collected: the tools this plugin offers the agent for this session.

    The kernel stamps each tool with the plugin that returned it and rejects two tools with the
    same name, naming both plugins.

    :returns: a list of :class:`~ctxengine.Tool` (or ``None`` for none).
    """


@hookspec
def update_usage(ctx: EngineContext, usage: Usage) -> None:
    """Broadcast: the provider's normalised usage for the session's last response.

    Engines keep their own counters from it (e.g. real prompt tokens, anti-thrash savings).
    """


@hookspec(firstresult=True)
def cache_strategy(
    ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
) -> MarkedRequest | dict[str, Any] | None:
    """First result: ``request`` marked with ``cache_control`` breakpoints.

    ``request`` holds the keyword arguments of the API call (``messages`` and, for Anthropic,
    ``system``/``tools``). Implementations return a new dict and never mutate the caller's objects;
    they copy only what they mark. Applying a strategy twice gives the same request.

    :returns: a :class:`~ctxengine.MarkedRequest` (the marked request and how many markers it
        carries, which the kernel reports as ``RoundRecord.breakpoints`` without counting them
        again); or the marked request alone, whose markers the kernel then counts itself; or
        ``None`` to leave it unmarked.
    """


@hookspec
def session_start(ctx: EngineContext) -> None:
    """Broadcast: a session was created; plugins may set up per-session state in ``ctx.state``."""


@hookspec
def session_reset(ctx: EngineContext) -> None:
    """Broadcast: the host started the session over (e.g. ``/new``); drop per-session state."""


@hookspec
def session_end(ctx: EngineContext) -> None:
    """Broadcast: the session is closed; release files, locks and connections."""


@hookspec
def declare_settings(settings: PluginSettings) -> None:
    """Broadcast: declare the configuration keys this plugin reads.

    Called once per kernel, for every loaded plugin, before the configuration is validated.
    Call ``settings.add(spec)`` with a :class:`~ctxengine.SettingsSpec` per section (the
    plugin's own ``engines.<name>``, ``strategies.<name>`` or ``gateways.<name>``, or keys added
    to ``prompt_caching`` / ``coordination``); the kernel then validates those keys at
    :func:`ctxengine.load` with the same messages as its own, shows them in ``ctxengine config``,
    and serves their values through ``ctx.config.settings(spec)``.

    :param settings: the registry, stamped with this plugin's name.
    """


@hookspec(firstresult=True)
def coordination_backend(backend: str, config: Config, data_dir: Path) -> Coordinator | None:
    """First result: the coordinator for ``coordination.backend: <backend>``, opened.

    Asked once per kernel when ``backend`` is not ``process`` (the kernel's own), after loading
    the extension plugin named ``coordination.<backend>`` for it (only then). What an
    implementation raises stops :func:`ctxengine.load`: a backend that cannot be opened must not
    leave the workers running unshared.

    :param backend: the ``coordination.backend`` value.
    :param config: the validated configuration; the plugin reads its keys with
        ``config.settings(SPEC)``.
    :param data_dir: ``$CTXENGINE_HOME``, where a backend keeps its files by default.
    :returns: a :class:`~ctxengine.coordination.Coordinator`, or ``None`` for "not mine".
    :raises CoordinationError: the backend cannot be reached or used (the message says why).
    """


@hookspec
def register_commands(commands: PluginCommands) -> None:
    """Broadcast: add sub-commands to the ``ctxengine`` CLI (e.g. ``ctxengine lcm status``).

    Called for every loaded plugin, selected or not, when the CLI starts.
    """
