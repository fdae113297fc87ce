"""The trigger: threshold, cooldown, anti-thrash, force, update_usage."""

from __future__ import annotations

import ctxengine_compressor as plugin
from ctxengine import TokenEstimate, Usage, config_from_mapping
from ctxengine_compressor.state import get_state

from .helpers import Clock, make_ctx

known = TokenEstimate.known
"""A prompt size known exactly (the engine's decisions are tested on exact sizes)."""

# 16,000-token window, threshold 0.5 -> 8,000.


def test_threshold_on_the_window() -> None:
    ctx = make_ctx()
    assert plugin.should_compress(ctx, known(7_999), "agent", False) is False
    assert plugin.should_compress(ctx, known(8_000), "agent", False) is True
    assert plugin.should_compress(ctx, known(8_000), "agent", False) is True


def test_max_tokens_reservation_lowers_the_threshold() -> None:
    ctx = make_ctx()
    ctx.config = config_from_mapping({"model": {"context_length": 16_000, "max_tokens": 4_000}})
    # threshold = 0.5 x (16,000 - 4,000)
    assert plugin.should_compress(ctx, known(6_000), "agent", False) is True
    assert plugin.should_compress(ctx, known(5_999), "agent", False) is False


def test_gateway_stage_has_no_opinion_and_disabled_never_fires() -> None:
    assert plugin.should_compress(make_ctx(), known(50_000), "gateway", True) is None
    assert plugin.should_compress(make_ctx(compaction=False), known(50_000), "agent", True) is False


def test_cooldown_blocks_until_it_expires_or_force() -> None:
    clock = Clock()
    ctx = make_ctx(clock=clock)
    get_state(ctx).guard.start_cooldown(clock(), "timeout")
    assert plugin.should_compress(ctx, known(9_000), "agent", False) is False
    assert plugin.should_compress(ctx, known(9_000), "agent", True) is True
    clock.now += 59.9
    assert plugin.should_compress(ctx, known(9_000), "agent", False) is False
    clock.now += 0.2
    assert plugin.should_compress(ctx, known(9_000), "agent", False) is True


def test_anti_thrash_after_two_poor_compactions_measured_by_real_usage() -> None:
    ctx = make_ctx()
    state = get_state(ctx)
    # Estimated savings looked fine, but the next real prompts show 5 % and 8 %.
    state.record_saving(0.5, baseline=10_000)
    plugin.update_usage(ctx, Usage(input_tokens=9_500))
    assert round(state.guard.recent_savings[-1], 3) == 0.05
    assert plugin.should_compress(ctx, known(9_000), "agent", False) is True
    state.record_saving(0.5, baseline=10_000)
    plugin.update_usage(ctx, Usage(input_tokens=9_000, cache_read_tokens=200))
    assert round(state.guard.recent_savings[-1], 3) == 0.08
    assert plugin.should_compress(ctx, known(9_000), "agent", False) is False
    assert plugin.should_compress(ctx, known(9_000), "agent", True) is True
    # A later real usage does not rewrite the measured saving again.
    plugin.update_usage(ctx, Usage(input_tokens=1_000))
    assert round(state.guard.recent_savings[-1], 3) == 0.08
    # A good compaction ends the thrash.
    state.record_saving(0.6, baseline=None)
    assert plugin.should_compress(ctx, known(9_000), "agent", False) is True


def test_session_reset_forgets_state() -> None:
    ctx = make_ctx()
    get_state(ctx).compactions = 3
    plugin.session_reset(ctx)
    assert get_state(ctx).compactions == 0
