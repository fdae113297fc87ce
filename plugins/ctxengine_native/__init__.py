"""The built-in engine ``native``: the provider compacts the conversation on its server.

On Anthropic routes the engine asks the Messages API to compact (``compact_20260112``, beta
``compact-2026-01-12``) once the prompt reaches ``engines.native.threshold``, and puts the
``compaction`` block the server returns, verbatim, where the API reads it: first in the
conversation, in place of everything it summarises. On OpenAI Responses routes it does the same
with ``responses.compact`` and its compaction item. Whenever the server cannot or will not
compact (an error, ``content: null``, a model or route without support), the conversation goes
to the fallback engine, the built-in ``compressor``, which the kernel loads beside this one
(:data:`CTXENGINE_FALLBACK`): nothing is lost and the result says why. See
``docs/builtins/native.md``.

Modules: :mod:`.settings` (the keys), :mod:`.server` (the SDK calls and how a refusal is named),
:mod:`.engine` (``compress``), :mod:`.state` (per-session state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine import hookimpl

if TYPE_CHECKING:
    from ctxengine import (
        CompressResult,
        Conversation,
        EngineContext,
        PluginSettings,
        Stage,
        TokenEstimate,
        Usage,
    )

CTXENGINE_KIND = "engine"
CTXENGINE_FALLBACK = "compressor"
"""The engine that compacts when the server does not (loaded by the kernel beside this one)."""


@hookimpl
def declare_settings(settings: PluginSettings) -> None:
    """The ``engines.native`` keys."""
    from ctxengine_native.settings import SETTINGS

    settings.add(SETTINGS)


@hookimpl
def should_compress(
    ctx: EngineContext, prompt: TokenEstimate, stage: Stage, force: bool
) -> bool | None:
    """At the threshold (guarded by the cooldown and anti-thrash), or at once after a response
    in which the server compacted; no opinion on the gateway stage."""
    if stage == "gateway":
        return None
    if not ctx.config.context.compaction:
        return False
    from ctxengine_native.settings import settings
    from ctxengine_native.state import get_state

    state = get_state(ctx)
    if state.inband:
        return True
    if not prompt.reaches(ctx.fraction_of_window(settings(ctx).threshold)):
        return False
    held = state.guard.holds(ctx.clock(), force=force)
    if held is not None:
        ctx.log.debug("native: over threshold but %s", held)
        return False
    return True


@hookimpl
def compress(
    ctx: EngineContext,
    conversation: Conversation,
    stage: Stage,
    force: bool,
    focus: str | None,
    message_budget: int | None,
) -> CompressResult:
    """See :func:`ctxengine_native.engine.compress`."""
    from ctxengine_native import engine

    return engine.compress(ctx, conversation, stage, force, focus, message_budget)


@hookimpl
def update_usage(ctx: EngineContext, usage: Usage) -> None:
    """A response whose server compacted while answering: drop what it replaced next time."""
    if usage.compacted:
        from ctxengine_native.state import get_state

        get_state(ctx).inband = True


@hookimpl
def session_reset(ctx: EngineContext) -> None:
    """Forget the session's state and close its clients."""
    from ctxengine_native.state import STATE_KEY, NativeState

    state = ctx.state.pop(STATE_KEY, None)
    if isinstance(state, NativeState):
        state.close()


@hookimpl
def session_end(ctx: EngineContext) -> None:
    """Close the session's clients."""
    from ctxengine_native.state import STATE_KEY, NativeState

    state = ctx.state.get(STATE_KEY)
    if isinstance(state, NativeState):
        state.close()
