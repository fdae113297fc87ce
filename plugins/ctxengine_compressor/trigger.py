"""When to compact: the threshold, then the SDK's failure cooldown and anti-thrash guard, then
the compressor's own "the last compaction would not pay" wait."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine_compressor.settings import budgets
from ctxengine_compressor.state import get_state

if TYPE_CHECKING:
    from ctxengine import EngineContext, TokenEstimate, Usage


def threshold_tokens(ctx: EngineContext) -> int:
    """``threshold × (window − max_tokens reservation)`` for this session's model and config."""
    return budgets(ctx).threshold_tokens


def should_compress(ctx: EngineContext, prompt: TokenEstimate, force: bool) -> bool:
    """The agent-stage decision. ``prompt`` rests on real usage when the kernel has it (an
    estimate before the first response and right after a compaction); every comparison is
    :meth:`~ctxengine.TokenEstimate.reaches`, so it is the one exact counts give."""
    if not ctx.config.context.compaction:
        return False
    if not prompt.reaches(threshold_tokens(ctx)):
        return False
    if force:
        return True
    state = get_state(ctx)
    held = state.guard.holds(ctx.clock(), force=False)
    if held is not None:
        ctx.log.debug("compressor: over threshold but %s", held)
        return False
    if state.retry_above_tokens is not None and not prompt.reaches(state.retry_above_tokens):
        ctx.log.debug(
            "compressor: the last compaction would not pay; waiting until the prompt passes "
            "%d tokens",
            state.retry_above_tokens,
        )
        return False
    return True


def update_usage(ctx: EngineContext, usage: Usage) -> None:
    """Keep the real prompt size; replace the last compaction's estimated saving by the real one."""
    state = get_state(ctx)
    prompt = usage.prompt_tokens
    if prompt <= 0:
        return
    state.last_prompt_tokens = prompt
    state.usage_fresh = True
    if state.awaiting_measurement and state.savings_baseline:
        state.guard.correct_last_saving(1.0 - prompt / state.savings_baseline)
    state.awaiting_measurement = False
