"""When to compact: the threshold, the failure cooldown and the anti-thrash guard (SPEC §2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine_compressor.state import CompressorState, get_state

if TYPE_CHECKING:
    from ctxengine import EngineContext, Usage

COOLDOWN_SECONDS = 60.0
"""How long compaction stays off after an aborted summary (auth, network, timeout, rate limit)."""

THRASH_SAVING = 0.10
"""A compaction that saved less than this fraction of the prompt counts towards anti-thrash."""

THRASH_RUN = 2
"""This many consecutive poor compactions switch automatic compaction off until ``force``."""


def threshold_tokens(ctx: EngineContext) -> int:
    """``threshold × (window − max_tokens reservation)`` for this session's model and config."""
    from ctxengine._config.core import budgets

    return budgets(
        ctx.config.compression, ctx.model.context_length, ctx.config.model.max_tokens or None
    ).threshold_tokens


def is_thrashing(state: CompressorState) -> bool:
    """True after ``THRASH_RUN`` consecutive compactions that saved < ``THRASH_SAVING``."""
    recent = state.recent_savings[-THRASH_RUN:]
    return len(recent) == THRASH_RUN and all(saving < THRASH_SAVING for saving in recent)


def should_compress(ctx: EngineContext, prompt_tokens: int, force: bool) -> bool:
    """The agent-stage decision. ``prompt_tokens`` is real usage when the kernel has it (it passes
    an estimate before the first response and right after a compaction)."""
    if not ctx.config.compression.enabled:
        return False
    if prompt_tokens < threshold_tokens(ctx):
        return False
    if force:
        return True
    state = get_state(ctx)
    if ctx.clock() < state.cooldown_until:
        ctx.log.debug(
            "compressor: over threshold but cooling down after a failed summary (%s)",
            state.cooldown_reason,
        )
        return False
    if state.retry_above_tokens is not None and prompt_tokens < state.retry_above_tokens:
        ctx.log.debug(
            "compressor: the last compaction would not pay; waiting until the prompt passes "
            "%d tokens",
            state.retry_above_tokens,
        )
        return False
    if is_thrashing(state):
        ctx.log.debug(
            "compressor: over threshold but the last %d compactions saved < %d %%; "
            "waiting for a forced compaction",
            THRASH_RUN,
            int(THRASH_SAVING * 100),
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
    if state.awaiting_measurement and state.savings_baseline and state.recent_savings:
        state.recent_savings[-1] = 1.0 - prompt / state.savings_baseline
    state.awaiting_measurement = False
