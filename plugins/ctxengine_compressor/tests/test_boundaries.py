"""Phase 2: head/tail boundaries."""

from __future__ import annotations

from typing import Any

from ctxengine._messages.read import cut_points
from ctxengine.testing import samples
from ctxengine_compressor.boundaries import find_boundaries

from .helpers import CountedSizes, openai_call


def _bounds(messages: list[dict[str, Any]], fmt: str = "openai", **kw: Any):  # type: ignore[no-untyped-def]
    args: dict[str, Any] = {
        "first": True,
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


def test_later_compaction_keeps_only_the_system_prompt() -> None:
    messages = samples.openai_conversation(turns=20)
    messages[1] = {"role": "user", "content": "short ask"}
    b = _bounds(messages, first=False, count=lambda m: 10 if m["role"] != "tool" else 500)
    # The first user message is the latest real ask before a huge middle: pinned in the head.
    assert b.head_end in (1, 2)


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
    b = _bounds(messages, "anthropic", first=False, count=lambda m: 10)
    assert b.head_end == 0 or messages[b.head_end - 1]["role"] in ("user", "assistant")
    if b.head_end == 0:
        assert messages[b.tail_start]["role"] == "assistant"


def test_latest_ask_and_reply_are_kept() -> None:
    messages = samples.openai_conversation(turns=20)
    b = _bounds(messages, protect_last_n=1)
    kept = messages[: b.head_end] + messages[b.tail_start :]
    assert any(m is messages[-2] for m in kept)  # the last user question
    assert any(m is messages[-1] for m in kept)  # the last visible reply
