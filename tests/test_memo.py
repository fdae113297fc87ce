"""The message memo: facts found by position, identity or content, edits in place always seen."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import ctxengine
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._messages.memo import MessageMemo, NotAMessageError, snapshot
from ctxengine.messages import marker_positions
from ctxengine.testing.transcripts import load_sessions


def messages(n: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"message number {i} " * (i + 1)}],
        }
        for i in range(n)
    ]


def largest(fmt: str) -> list[dict[str, Any]]:
    rows = load_sessions(f"claude_code_spotter.{fmt}.jsonl")
    found: list[dict[str, Any]] = max(rows, key=lambda r: len(r["messages"]))["messages"]
    return found


class Spy:
    """Records what a counter tokenizes."""

    def __init__(self, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        real = counter.count_text

        def count_text(text: str) -> int:
            self.texts.append(text)
            return real(text)

        monkeypatch.setattr(counter, "count_text", count_text)


# -- finding entries again ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_history_handed_over_any_way_is_counted_once(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = largest(fmt)
    counter = TokenCounter()
    total = counter.count(history)
    spy = Spy(counter, monkeypatch)
    first = counter.memo.resolve(history).entries
    assert counter.count(list(history)) == total  # a new list of the same dicts
    assert counter.count(json.loads(json.dumps(history))) == total  # new dicts, new strings
    assert counter.memo.resolve(copy.deepcopy(history)).entries == first  # the same entries
    assert counter.count(history[5:]) == total - counter.count(history[:5])  # shifted
    assert spy.texts == []


def test_new_messages_are_the_only_ones_walked_and_tokenized(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = TokenCounter()
    history = messages(6)
    counter.count(history)
    spy = Spy(counter, monkeypatch)
    history.append({"role": "user", "content": "one more"})
    counter.count(json.loads(json.dumps(history)))
    assert spy.texts == ["one more"]


def test_equal_contents_share_one_entry_and_different_ones_do_not() -> None:
    memo = MessageMemo()
    same = [{"role": "user", "content": "abc"}, {"role": "user", "content": "abc"}]
    # Same role, same length, no images, no markers: the same content key, different contents.
    twins = [{"role": "user", "content": "abc"}, {"role": "user", "content": "xyz"}]
    a, b = memo.resolve(same).entries
    c, d = memo.resolve(twins).entries
    assert a is b is c
    assert d is not c and d.snapshot == {"role": "user", "content": "xyz"}


def test_a_snapshot_copies_containers_and_shares_everything_else() -> None:
    text = "some text " * 50
    msg = {"role": "user", "content": [{"type": "text", "text": text}], "meta": (1, [2])}
    copied = snapshot(msg)
    assert copied == msg
    assert copied["content"] is not msg["content"]
    assert copied["content"][0] is not msg["content"][0]
    assert copied["content"][0]["text"] is text
    assert copied["meta"][1] is not msg["meta"][1]


# -- edits in place ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit",
    [
        "block text",
        "key added",
        "block appended",
        "content replaced",
        "tool argument",
    ],
)
def test_every_edit_in_place_is_seen(edit: str) -> None:
    counter = TokenCounter()
    history: list[dict[str, Any]] = [
        *messages(4),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ]
    before = counter.count(history)
    if edit == "block text":
        history[1]["content"][0]["text"] = "a much longer text than before " * 20
    elif edit == "key added":
        history[1]["reasoning_content"] = "thinking about it at length " * 10
    elif edit == "block appended":
        history[1]["content"].append({"type": "text", "text": "another block " * 10})
    elif edit == "content replaced":
        history[1]["content"] = "short"
    else:
        history[4]["tool_calls"][0]["function"]["arguments"] = json.dumps({"path": "x" * 200})
    after = counter.count(history)  # the same list, the same message objects
    assert after == TokenCounter().count(copy.deepcopy(history))
    assert after != before


def test_an_edit_in_place_changes_the_count_and_the_markers() -> None:
    """The same list, edited in place between two requests of one session."""
    kernel = ctxengine.load({"model": {"name": "claude-sonnet-4-6"}})
    session = kernel.session("edits")
    history = messages(8)
    request = {"model": "claude-sonnet-4-6", "system": "Be brief.", "messages": history}
    first = session.prepare(request)
    count = session.ctx.tokens.count(history, "Be brief.")
    session.update_usage({"input_tokens": 900, "output_tokens": 5})

    # The text of the last message's block (it carries a marker) and of an old one change.
    history[-1]["content"][0]["text"] = "the last message, rewritten in place"
    history[2]["content"][0]["text"] = "an old message, much longer after the edit " * 40
    # An old message gains a marker in place: it must not survive (four breakpoints at most).
    history[0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    second = session.prepare(request)

    last_block = second["messages"][-1]["content"][0]
    assert last_block["text"] == "the last message, rewritten in place"
    assert "cache_control" in last_block
    assert second != first
    positions = [where for where, _ in marker_positions(second)]
    assert "messages[0].content[0]" not in positions and len(positions) == 4
    assert history[0]["content"][0]["cache_control"] == {"type": "ephemeral"}  # not mutated
    # The prompt no longer matches the measured request: estimated anew, from the new text.
    assert session.ctx.tokens.count(history, "Be brief.") > count
    estimate = session.prompt(history, "Be brief.")
    assert not estimate.measured
    assert estimate.exact() == session.ctx.tokens.estimate(history, "Be brief.")


def test_a_view_is_reused_only_within_the_turn_that_checked_it() -> None:
    memo = MessageMemo()
    history = messages(3)
    view = memo.resolve(history)
    assert memo.view_of(history) is view  # the same turn, the same unchanged list
    history.append({"role": "user", "content": "new"})
    grown = memo.view_of(history)  # grown: checked again
    assert grown is not view and len(grown.entries) == 4
    history[0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    memo.release()  # the turn is over
    assert memo.view_of(history).marked == (0,)


# -- memory -----------------------------------------------------------------------------------


def test_memory_is_bounded_besides_the_last_list() -> None:
    memo = MessageMemo(max_entries=8)
    for batch in range(10):
        memo.resolve([{"role": "user", "content": f"batch {batch} message {i}"} for i in range(5)])
        assert len(memo) <= 8 + 5 + 8 // 4
    last = memo.resolve(messages(20))
    assert len(memo) >= len(last.entries) == 20  # the list resolved last is always kept


def test_retain_keeps_only_one_list() -> None:
    memo = MessageMemo()
    old = messages(6)
    memo.resolve(old)
    kept = [{"role": "user", "content": "summary"}, old[-1]]
    memo.retain(kept)
    assert len(memo) == 2
    assert memo.resolve(kept).entries[1] is memo.entry(old[-1])


# -- errors and limits ------------------------------------------------------------------------


def test_items_that_are_not_messages_are_named() -> None:
    memo = MessageMemo()
    with pytest.raises(NotAMessageError, match=r"messages\[1\]: expected a dict, got str"):
        memo.resolve([{"role": "user", "content": "a"}, "b"])
    assert issubclass(NotAMessageError, TypeError) and issubclass(NotAMessageError, ValueError)
    with pytest.raises(ValueError, match="max_entries must be an integer of at least 1, got 0"):
        MessageMemo(max_entries=0)


def test_equality_is_pythons() -> None:
    """The documented limit: 1, 1.0 and True are the same content to the memo."""
    memo = MessageMemo()
    call: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "tool_use", "input": {"n": 1}}],
    }
    entry = memo.entry(call)
    call["content"][0]["input"]["n"] = True
    assert memo.entry(call) is entry
