"""The rough estimate's error bound, checked against tiktoken on the bundled sessions, and the
estimates that count exactly only when a decision needs it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine
from ctxengine._accounting import estimate
from ctxengine._accounting.estimate import (
    HIGH_RATIO,
    HIGH_SLACK,
    LOW_RATIO,
    LOW_SLACK,
    MAX_TOKENS_PER_CHAR,
    TextSize,
    TokenEstimate,
    estimate_of,
)
from ctxengine._accounting.tokens import CALIBRATION_WINDOW, TokenCounter
from ctxengine._messages.read import message_text, text_size
from ctxengine.testing.transcripts import load_sessions, transcript_files

COUNTER = TokenCounter()


def sessions() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for path in transcript_files():
        for row in load_sessions(path.name):
            yield f"{path.name}:{row['id']}", row["messages"]


def test_text_size_is_the_length_of_message_text() -> None:
    """Exactly, except JSON escapes inside Anthropic tool inputs, which count once."""
    checked = 0
    for _, messages in sessions():
        for msg in messages:
            chars, _ = text_size(msg)
            text = message_text(msg)
            content = msg.get("content")
            blocks = content if isinstance(content, list) else []
            if any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks):
                assert chars <= len(text)
            else:
                assert chars == len(text)
            checked += 1
    assert checked > 5_000


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": "some text"},
        {"type": "thinking", "thinking": "a thought", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque data"},
        {"type": "refusal", "refusal": "I cannot"},
        {"type": "compaction", "content": "the summary of what came before"},
        {"type": "compaction", "content": None, "encrypted_content": "opaque item"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque item"},
        {"type": "tool_result", "tool_use_id": "t", "content": "result text"},
        {"type": "tool_result", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
        {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
        {"type": "text", "text": None},
        {"type": ["not", "a", "kind"], "text": "ignored"},
    ],
)
def test_text_size_reads_every_block_kind_as_message_text_does(block: dict[str, Any]) -> None:
    """Every block type that costs tokens is measured (a compaction block's summary too: an
    estimate that missed it would bound a large prompt by almost nothing)."""
    msg = {"role": "assistant", "content": [{"type": "text", "text": "before"}, block]}
    chars, _ = text_size(msg)
    assert chars == len(message_text(msg))


def _worst_excess(values: list[int]) -> int:
    """``max(values[j] - values[i] for i < j)``: the worst run of a prefix-sum sequence."""
    worst = -(10**18)
    lowest = values[0]
    for value in values[1:]:
        worst = max(worst, value - lowest)
        lowest = min(lowest, value)
    return worst


def test_the_error_bound_holds_on_every_run_of_every_bundled_session() -> None:
    """For every run of consecutive messages (a whole request, a tail, a middle): exact text
    tokens within ``[LOW_RATIO x rough - LOW_SLACK, min(HIGH_RATIO x rough + HIGH_SLACK,
    4 x chars)]``. Checked with the worst run of each session, in exact integer arithmetic."""
    high_need = low_need = 0.0
    runs = 0
    for name, messages in sessions():
        # Scaled by 100 so the ratios are exact integers (1.35 -> 135, 0.70 -> 70).
        above = [0]  # prefix sums of 100 x exact - 135 x rough
        below = [0]  # prefix sums of 70 x rough - 100 x exact
        for msg in messages:
            exact = COUNTER.count_text(message_text(msg))
            chars, _ = text_size(msg)
            rough = -(-chars // 4)
            assert exact <= MAX_TOKENS_PER_CHAR * len(message_text(msg)), name
            above.append(above[-1] + 100 * exact - round(HIGH_RATIO * 100) * rough)
            below.append(below[-1] + round(LOW_RATIO * 100) * rough - 100 * exact)
        runs += len(messages) * (len(messages) + 1) // 2
        high_need = max(high_need, _worst_excess(above) / 100)
        low_need = max(low_need, _worst_excess(below) / 100)
        assert _worst_excess(above) <= 100 * HIGH_SLACK, f"{name}: above the bound"
        assert _worst_excess(below) <= 100 * LOW_SLACK, f"{name}: below the bound"
    # What the docs state: the worst runs need 3,703 and 5 (the constants leave headroom).
    assert (round(high_need), round(low_need)) == (3_703, 5)
    assert runs == 636_049  # every run of every bundled session


def test_estimates_of_whole_sessions_are_within_the_bounds() -> None:
    for _, messages in sessions():
        view = COUNTER.memo.resolve(messages)
        tally = COUNTER.tally(view.entries)
        exact = COUNTER.count(messages)
        assert tally.low <= exact <= tally.high
        assert tally.value == ctxengine.rough_conversation_tokens(messages)


# -- TokenEstimate -----------------------------------------------------------------------------


def counting(value: int, low: int, high: int, exact: int) -> tuple[TokenEstimate, list[int]]:
    calls: list[int] = []

    def refine() -> TokenEstimate:
        calls.append(exact)
        return TokenEstimate.known(exact)

    return TokenEstimate(value, low, high, refine=refine), calls


def test_reaches_counts_only_when_the_threshold_is_within_the_bounds() -> None:
    far, calls = counting(100, 80, 130, exact=120)
    assert far.reaches(79) and not far.reaches(131)
    assert far.reaches(far.low) and not far.reaches(far.high + 1)
    assert calls == []
    assert far.reaches(120) and not far.reaches(121)
    assert calls == [120]  # counted once, then remembered
    assert far.exact() == 120 and calls == [120]


def test_two_estimates_are_compared_by_their_bounds_first() -> None:
    small, small_calls = counting(10, 5, 20, exact=12)
    large, large_calls = counting(100, 50, 200, exact=120)
    assert large.reaches(small) and not small.reaches(large)
    assert small_calls == large_calls == []
    close, close_calls = counting(15, 10, 30, exact=13)
    assert not close.reaches(small) or close.exact() >= small.exact()
    assert close_calls == [13] and small_calls == [12]


def test_sums_of_estimates() -> None:
    a, _ = counting(10, 8, 14, exact=11)
    total = a + TokenEstimate.known(5)
    assert (total.value, total.low, total.high) == (15, 13, 19)
    assert total.exact() == 16
    assert (TokenEstimate.known(2) + TokenEstimate.known(3)).is_exact


def test_estimates_refuse_impossible_bounds() -> None:
    with pytest.raises(ValueError, match=r"low \(5\) must not exceed high \(4\)"):
        TokenEstimate(4, 5, 4, refine=lambda: TokenEstimate.known(4))
    with pytest.raises(ValueError, match="an estimate whose bounds differ needs a way to refine"):
        TokenEstimate(4, 3, 5)


def test_a_size_without_text_is_exact() -> None:
    size = TextSize()
    size.add(0, 4)
    assert estimate_of(size, lambda: 99).is_exact  # no text: only the fixed costs
    size.add(400, 0)
    bounded = estimate_of(size, lambda: 104)
    assert (bounded.low, bounded.high) == (4 + 70 - 64, 4 + 1_600)  # 4 x chars caps the slack


# -- calibration -------------------------------------------------------------------------------


@pytest.mark.parametrize("observations", [1, 5, CALIBRATION_WINDOW + 20])
def test_ratio_bounds_contain_the_exact_ratio_of_estimated_requests(observations: int) -> None:
    counter = TokenCounter()
    history: list[dict[str, Any]] = []
    rows = load_sessions("tau_bench_airline_gpt4o.openai.jsonl")
    for step in range(observations):
        history.append({"role": "user", "content": f"{rows[step % len(rows)]['messages'][0]}"})
        local = counter.tally(counter.memo.resolve(history).entries)
        provider = round(counter.count(history) * (1.1 + 0.02 * (step % 7)))
        counter.observe_estimate(local, provider)
        low, high = counter._calibration.bounds()
        exact = counter._calibration.ratio()
        assert low <= exact <= high
        # Learn more without knowing the exact ratio, then check the bounds again.
        counter._calibration._exact = None
    assert counter.observations == observations


def test_a_far_prompt_on_a_fresh_session_tokenizes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision on a long conversation far below the threshold comes from the estimate."""
    rows = load_sessions("claude_code_spotter.anthropic.jsonl")
    messages = max(rows, key=lambda r: len(r["messages"]))["messages"]
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 1_000_000},
            "auxiliary": {"compression": {"provider": "extractive"}},
        }
    )
    session = kernel.session("far")
    tokenized: list[str] = []
    monkeypatch.setattr(session.ctx.tokens, "count_text", tokenized.append)
    assert session.should_compress(messages) is False
    session.prepare({"model": "claude-sonnet-4-6", "messages": messages})
    assert tokenized == []
    assert estimate.HIGH_RATIO == HIGH_RATIO  # the module's documented constants are the ones used
