"""Phase 2: head/tail boundaries."""

from __future__ import annotations

from typing import Any

from ctxengine.messages import cut_points
from ctxengine.testing import samples
from ctxengine_compressor.boundaries import find_boundaries, has_visible_assistant_text

from .helpers import CountedSizes, openai_call


def _bounds(messages: list[dict[str, Any]], fmt: str = "openai", **kw: Any):  # type: ignore[no-untyped-def]
    args: dict[str, Any] = {
        "protect_first_n": 3,
        "protect_last_n": 4,
        "tail_token_budget": 0,
    }
    args.update(kw)
    count = args.pop("count", lambda m: 10)
    return find_boundaries(messages, fmt, sizes=CountedSizes(messages, count), **args)  # type: ignore[arg-type]


def test_first_compaction_keeps_system_plus_first_n_and_never_splits_groups() -> None:
    messages = samples.openai_conversation(turns=20)
    b = _bounds(messages)
    cuts = cut_points(messages, "openai")
    assert b.reason is None
    assert b.system_end == 1
    assert b.head_end >= 4 and cuts[b.head_end]
    assert cuts[b.tail_start]
    assert messages[b.tail_start]["role"] != "tool"
    assert len(messages) - b.tail_start >= 4


def test_a_later_compaction_keeps_the_head_before_the_previous_summary() -> None:
    messages = samples.openai_conversation(turns=20)
    # The first compaction's head is followed by its summary: the next one keeps that head.
    first = _bounds(messages).head_end
    assert first > 1
    assert _bounds(messages, summary_at=first).head_end == first
    # A summary inside the would-be head cuts it before the summary (at a legal cut).
    assert _bounds(messages, summary_at=first - 1).head_end < first
    # A summary right after the system prompt: only the system prompt is kept.
    b = _bounds(messages, summary_at=1, count=lambda m: 10 if m["role"] != "tool" else 500)
    assert b.head_end in (1, 2)


def test_a_head_that_does_not_open_with_the_user_is_left_empty() -> None:
    messages = samples.openai_conversation(turns=20)
    messages[1] = {"role": "assistant", "content": "I start"}
    b = _bounds(messages)
    assert b.head_end == 1
    assert messages[b.tail_start]["role"] == "assistant"


def test_openai_with_empty_head_starts_the_tail_with_an_assistant_turn() -> None:
    messages = samples.openai_conversation(turns=20)
    for last_n in range(1, 9):
        b = _bounds(messages, protect_first_n=0, protect_last_n=last_n)
        assert b.reason is None
        assert messages[b.tail_start]["role"] == "assistant", last_n


def test_a_message_budget_caps_head_summary_and_tail() -> None:
    messages = samples.openai_conversation(turns=40)
    huge = 10**9  # a tail budget that would keep everything
    free = _bounds(messages, tail_token_budget=huge)
    assert free.reason is not None  # nothing to compact by tokens
    for limit in (10, 25, 60):
        b = _bounds(messages, tail_token_budget=huge, max_messages=limit)
        assert b.reason is None
        assert b.head_end + 1 + len(messages) - b.tail_start <= limit
        assert messages[b.tail_start]["role"] != "tool"


def test_token_budget_extends_the_tail_beyond_the_floor() -> None:
    messages = samples.openai_conversation(turns=20)
    small = _bounds(messages, tail_token_budget=0)
    big = _bounds(messages, tail_token_budget=200)
    assert big.tail_start < small.tail_start


def test_floor_is_capped_so_something_remains() -> None:
    messages = samples.openai_conversation(turns=6)
    b = _bounds(messages, protect_last_n=1_000)
    assert b.reason is None
    assert b.tail_start > b.head_end


def test_parallel_calls_are_never_split() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(10):
        calls = [openai_call(f"c{i}_{k}", "t") for k in range(3)]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "x"} for c in calls]
    messages.append({"role": "assistant", "content": "done"})
    for last_n in range(1, 12):
        b = _bounds(messages, protect_first_n=2, protect_last_n=last_n)
        assert messages[b.tail_start]["role"] != "tool"
        assert messages[b.head_end]["role"] != "tool"


def test_head_and_tail_meeting_is_reported() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    b = _bounds(messages)
    assert b.reason is not None and b.reason.startswith("nothing to compact: all 2 messages")


def test_anthropic_with_empty_head_starts_the_tail_with_an_assistant_turn() -> None:
    _, messages = samples.anthropic_conversation(turns=20)
    b = _bounds(messages, "anthropic", summary_at=0, count=lambda m: 10)
    assert b.head_end == 0 or messages[b.head_end - 1]["role"] in ("user", "assistant")
    if b.head_end == 0:
        assert messages[b.tail_start]["role"] == "assistant"


def test_latest_ask_and_reply_are_kept() -> None:
    messages = samples.openai_conversation(turns=20)
    b = _bounds(messages, protect_last_n=1)
    kept = messages[: b.head_end] + messages[b.tail_start :]
    assert any(m is messages[-2] for m in kept)  # the last user question
    assert any(m is messages[-1] for m in kept)  # the last visible reply


def test_has_visible_assistant_text() -> None:
    assert has_visible_assistant_text({"role": "assistant", "content": "answer"})
    call = {"type": "tool_use", "id": "a", "name": "run", "input": {}}
    whitespace = {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}, call]}
    assert not has_visible_assistant_text(whitespace)
    assert not has_visible_assistant_text({"role": "user", "content": "answer"})
