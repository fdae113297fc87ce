"""Adaptive TTL (``prompt_caching.cache_ttl: auto``): the decision rule, and the kernel handing
each request's TTLs to the strategy."""

from __future__ import annotations

from typing import Any

import pytest

import ctxengine
from ctxengine._accounting.ttl import MAX_CHECKPOINT_INTERVAL, TTLPlanner
from ctxengine._messages.markers import marker_positions
from ctxengine.testing.markers import marker_problems


def run(
    planner: TTLPlanner, gaps: list[float], growth: int = 1_000, start: int = 20_000
) -> list[str]:
    now, tokens = 0.0, start
    ttls: list[str] = []
    for gap in [0.0, *gaps]:
        now += gap
        tokens += growth
        ttls.append(planner.choose(now, tokens).ttl)
    return ttls


def test_short_gaps_stay_5m() -> None:
    planner = TTLPlanner()
    ttls = run(planner, [30.0] * 60)
    # A weak prior: a rare request may become a cheap checkpoint, almost all are 5m.
    assert ttls.count("5m") >= 0.9 * len(ttls)
    assert planner.choose(60 * 31.0, 90_000).stable_ttl == "5m"


def test_long_gaps_go_1h_after_the_first_one() -> None:
    planner = TTLPlanner()
    ttls = run(planner, [1_200.0] * 20)
    assert ttls[0] == "5m"  # nothing measured yet
    assert set(ttls[1:]) == {"1h"}
    choice = planner.choose(30_000.0, 50_000)
    assert (choice.ttl, choice.stable_ttl) == ("1h", "1h")


def test_gaps_over_an_hour_help_neither_ttl() -> None:
    planner = TTLPlanner()
    ttls = run(planner, [7_200.0] * 10)
    assert planner.mid_gaps == 0
    assert ttls.count("5m") >= 9


def test_mixed_gaps_checkpoint_between_5m_requests() -> None:
    planner = TTLPlanner()
    gaps = ([30.0] * 9 + [1_200.0]) * 6
    ttls = run(planner, gaps)
    later = ttls[20:]
    assert "1h" in later and "5m" in later
    # A checkpoint is never further back than the provider's look-back allows.
    run_length = max(
        len(part) for part in "".join("x" if t == "5m" else "|" for t in later).split("|")
    )
    assert run_length <= MAX_CHECKPOINT_INTERVAL
    assert planner.choose(100_000.0, 200_000).stable_ttl == "1h"


def test_a_request_that_adds_much_waits_for_a_cheaper_checkpoint() -> None:
    planner = TTLPlanner()
    run(planner, [30.0, 1_200.0, 30.0, 30.0, 1_200.0] * 3, growth=500)
    # 2,000 unprotected tokens against a 40,000-token tool result: 5m now.
    planner.unprotected, planner.since_checkpoint = 2_000, 1
    now, tokens = planner.last_time or 0.0, planner.last_tokens or 0
    assert planner.choose(now + 30.0, tokens + 40_000).ttl == "5m"
    # A tiny request while much is unprotected: 1h.
    planner.unprotected = 60_000
    assert planner.choose(now + 60.0, tokens + 40_050).ttl == "1h"


def test_after_a_compaction_the_whole_prompt_is_new() -> None:
    planner = TTLPlanner()
    run(planner, [30.0, 1_200.0] * 5)
    planner.choose((planner.last_time or 0.0) + 30.0, 5_000)
    assert planner.since_checkpoint is None or planner.since_checkpoint == 0
    assert planner.last_tokens == 5_000


@pytest.mark.parametrize("strategy", ["system_and_3", "tool_turns"])
def test_the_kernel_hands_each_request_its_ttls(strategy: str) -> None:
    now = [0.0]
    kernel = ctxengine.load(
        {"prompt_caching": {"cache_ttl": "auto", "strategy": strategy}},
        env={},
        clock=lambda: now[0],
    )
    session = kernel.session("s")
    messages: list[dict[str, Any]] = []
    policies, ttls = set(), []
    for turn in range(12):
        now[0] += 1_200.0
        messages += [
            {"role": "user", "content": f"question {turn} " + "x " * 400},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
        request = session.prepare(
            {"model": "m", "system": "You help. " * 50, "messages": messages[:-1]}
        )
        assert marker_problems(request) == []
        ttls.append({marker.get("ttl", "5m") for _, marker in marker_positions(request)})
        policies.add(session.ctx.last_request is not None)
    assert ttls[0] == {"5m"} and ttls[-1] == {"1h"}
    assert policies == {True}
    assert "adaptive TTL" in kernel.status_lines()[1]
