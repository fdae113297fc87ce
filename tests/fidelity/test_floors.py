"""The fidelity floors on the bundled real sessions (docs/fidelity.md), for the local digest and
for a scripted model summary that drops about half the facts. No timings are asserted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from benchmarks.fidelity.facts import KINDS
from benchmarks.fidelity.harness import compact_at_window
from benchmarks.fidelity.run import FLOORS, Figures, measure
from benchmarks.fidelity.sessions import bundled_sessions

WINDOWS = (32_000, 64_000)


@pytest.fixture(scope="module")
def figures() -> Iterator[Figures]:
    yield measure(list(bundled_sessions()), windows=WINDOWS)


def _floors(window: int) -> dict[str, float]:
    return FLOORS[f"{window // 1000}K"]


@pytest.mark.parametrize("provider", ["digest", "model"])
@pytest.mark.parametrize("window", WINDOWS)
def test_one_compaction_meets_the_floors(figures: Figures, provider: str, window: int) -> None:
    table = figures.single[(provider, window)]
    assert sum(value.total for value in table.values()) > 100  # something was measured
    for kind, floor in _floors(window).items():
        value = table[kind]
        if value.total:
            assert value.ratio is not None and value.ratio >= floor, (kind, value.lost[:5])


def test_the_model_summary_holds_what_the_digest_holds(figures: Figures) -> None:
    for window in WINDOWS:
        digest, model = figures.single[("digest", window)], figures.single[("model", window)]
        for kind in KINDS:
            if digest[kind].total:
                assert model[kind].kept >= digest[kind].kept, (window, kind, model[kind].lost[:5])
        # The model alone really did drop about half.
        alone = figures.model_alone[window]
        kept = sum(v.kept for v in alone.values())
        total = sum(v.total for v in alone.values())
        assert 0.35 < kept / total < 0.65


@pytest.mark.parametrize("provider", ["digest", "model"])
def test_three_successive_compactions_keep_what_the_first_kept(
    figures: Figures, provider: str
) -> None:
    result = figures.successive[provider]
    assert result.sessions >= 10
    for kind, floor in FLOORS["successive"].items():
        value = result.table[kind]
        if value.total:
            assert value.ratio is not None and value.ratio >= floor, (kind, value.lost[:5])


def test_summaries_stay_within_todays_budget() -> None:
    """At 32K the summary budget is 1,600 tokens (5 % of the window), counted as characters / 4
    like the compressor counts it."""
    for session in bundled_sessions():
        compaction = compact_at_window(session, 32_000)
        if compaction.status == "compacted":
            assert len(compaction.summary) <= 4 * 1_600, session.name
