"""The message memo: facts found by position, identity or content, edits in place always seen."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import ctxengine
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._messages.markers import carries_marker
from ctxengine._messages.memo import MessageMemo, NotAMessageError, describe, snapshot
from ctxengine._messages.read import text_size
from ctxengine.messages import marker_positions
from ctxengine.testing.transcripts import load_sessions, transcript_files


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


# -- the walk that describes a new message ------------------------------------------------------


class Tagged(dict):  # type: ignore[type-arg]
    """A dict subclass: the walk hands messages holding one to the general functions."""


class Items(list):  # type: ignore[type-arg]
    """A list subclass, likewise."""


class Text(str):
    """A str subclass: measured like a string, kept as it is."""


MARK = {"type": "ephemeral"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
NESTED_RESULTS = {
    "role": "user",
    "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "plain result"},
        {"type": "tool_result", "tool_use_id": "b", "content": Text("str subclass")},
        {"type": "tool_result", "tool_use_id": "c", "content": None, "is_error": True},
        {
            "type": "tool_result",
            "tool_use_id": "d",
            "content": [{"type": "text", "text": "seen"}, IMAGE, {"type": "text", "text": ""}],
        },
        {
            "type": "tool_result",
            "tool_use_id": "e",
            "content": [
                {"type": "tool_result", "content": [IMAGE, {"type": "text", "text": "deep"}]},
                {"type": "text", "text": "x", "cache_control": MARK},
            ],
        },
    ],
}
DEEP_MARKER = {
    "role": "user",
    "content": [
        {
            "type": "tool_result",
            "content": [{"type": "box", "content": [{"type": "text", "cache_control": MARK}]}],
        }
    ],
}
TUPLE_MARKER = {
    "role": "user",
    "content": [{"type": "tool_result", "content": ({"cache_control": MARK},)}],
}
COMPACTION_MARKER = {
    "role": "assistant",
    "content": [{"type": "compaction", "content": [{"cache_control": MARK}]}],
}
UNHASHABLE_TYPE = {
    "role": "user",
    "content": [{"type": "tool_result", "content": [{"type": ["unhashable"]}]}],
}
ODD_MESSAGES: list[Any] = [
    {"role": "user"},
    {"role": "user", "content": None},
    {"role": "user", "content": ""},
    {"role": "user", "content": 7},
    {"role": "user", "content": []},
    {"role": "user", "content": ("a", {"type": "text", "text": "in a tuple"})},
    {"role": "user", "content": Text("a str subclass")},
    {"role": "user", "content": Items([{"type": "text", "text": "in a list subclass"}])},
    Tagged(role="user", content=[{"type": "text", "text": "a dict subclass"}]),
    {"role": "user", "content": "text", "cache_control": MARK},
    {3: "a key that is not a string", "role": "user", "content": "x", "meta": {"a": [1, (2,)]}},
    # Blocks that are not dicts, or not plain ones.
    {"role": "user", "content": ["a string", None, 5, ["a", "list"], ("a", "tuple"), ()]},
    {"role": "user", "content": [Tagged(type="text", text="a block subclass")]},
    # Every block type, and block values of odd types.
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "visible", "cache_control": MARK},
            {"type": "text", "text": ""},
            {"type": "text", "text": None},
            {"type": "text", "text": Text("str subclass")},
            {"type": "text"},
            {"type": "thinking", "thinking": "a thought", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "refusal", "refusal": "no"},
            {"type": "compaction", "content": "the summary"},
            {"type": "compaction", "content": None, "encrypted_content": "opaque item"},
            {"type": "unknown", "payload": {"deep": [1, 2]}},
            {"type": None, "text": "no type"},
            {"type": 5, "text": "a number type"},
            {"type": ["unhashable"], "text": "a list type"},
            {"text": "no type key"},
            IMAGE,
            {"type": "image_url", "image_url": {"url": "data:,"}},
            {"type": "input_image", "image_url": "data:,"},
        ],
    },
    # Tool inputs of every shape.
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "plain", "input": {"path": "/tmp", "n": 3}},
            {"type": "tool_use", "id": "b", "name": "nested", "input": {"todos": [{"a": 1.5}]}},
            {"type": "tool_use", "id": "c", "name": "escapes", "input": {"q": 'say "hi"\n'}},
            {"type": "tool_use", "id": "d", "name": "keys", "input": {1: "int key", "b": None}},
            {"type": "tool_use", "id": "e", "name": "values", "input": {"f": float("inf")}},
            {"type": "tool_use", "id": "f", "name": "tuple", "input": {"t": (1, "two")}},
            {"type": "tool_use", "id": "g", "name": "empty", "input": {}},
            {"type": "tool_use", "id": "h", "name": "missing"},
            {"type": "tool_use", "id": "i", "name": "list", "input": [1, "two", {"x": False}]},
            {"type": "tool_use", "id": "j", "name": "string", "input": "raw"},
            {"type": "tool_use", "id": "k", "name": 42, "input": Tagged(x="subclass")},
            {"type": "tool_use", "id": "l", "input": {"booleans": [True, False, None]}},
        ],
    },
    # Tool results: strings, lists with images, results nested in results, markers at depth.
    NESTED_RESULTS,
    DEEP_MARKER,
    TUPLE_MARKER,
    COMPACTION_MARKER,
    UNHASHABLE_TYPE,
    # OpenAI: reasoning and tool calls of every shape.
    {"role": "assistant", "content": "answer", "reasoning_content": "why"},
    {"role": "assistant", "content": None, "reasoning_content": ""},
    {"role": "assistant", "content": None, "reasoning_content": Text("str subclass")},
    {"role": "assistant", "content": None, "reasoning_content": ["not", "a", "string"]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "ls", "arguments": '{"a": 1}'}},
            {"id": "2", "type": "function", "function": {"name": None, "arguments": {"a": [1]}}},
            {"id": "3", "type": "function", "function": {"name": "no_arguments"}},
            {"id": "4", "type": "function", "function": "not a dict"},
            {"id": "5", "type": "function"},
            {"id": "6", "function": Tagged(name="subclass", arguments="{}")},
            "not a call",
            ["a", "list"],
        ],
    },
    {"role": "assistant", "content": None, "tool_calls": []},
    {"role": "assistant", "content": None, "tool_calls": ({"function": {"name": "t"}},)},
    {"role": "assistant", "content": None, "tool_calls": Items([{"function": {"name": "s"}}])},
    {"role": "assistant", "content": None, "tool_calls": [Tagged(function={"name": "d"})]},
    {"role": "tool", "tool_call_id": "1", "content": "out", "cache_control": MARK},
]


def _same_copy(copied: Any, original: Any, reference: Any) -> None:
    """``copied`` is built like ``reference`` (``snapshot(original)``): the same types at every
    level, new containers, and the very objects of ``original`` everywhere else."""
    assert type(copied) is type(reference)
    if isinstance(reference, dict):
        assert copied is not original
        assert list(copied) == list(reference)
        for key in reference:
            _same_copy(copied[key], original[key], reference[key])
    elif isinstance(reference, (list, tuple)):
        assert copied is not original or original == ()
        assert len(copied) == len(reference)
        for mine, theirs, ref in zip(copied, original, reference, strict=True):
            _same_copy(mine, theirs, ref)
    else:
        assert copied is original


def _general(message: Any) -> tuple[Any, ...]:
    """What the three general walks say about ``message`` (or the error they raise)."""
    try:
        return (*text_size(message), carries_marker(message))
    except TypeError as error:
        return ("raises", type(error))


def _fused(message: Any) -> tuple[Any, ...]:
    try:
        entry = describe(message)
    except TypeError as error:
        return ("raises", type(error))
    _same_copy(entry.snapshot, message, snapshot(message))
    assert entry.tokens is None
    return (entry.chars, entry.images, entry.marked)


def test_the_walk_gives_what_the_general_functions_give_on_every_bundled_message() -> None:
    checked = 0
    for path in transcript_files():
        for row in load_sessions(path.name):
            for message in row["messages"]:
                assert _fused(message) == _general(message), message
                checked += 1
    assert checked > 5_000


@pytest.mark.parametrize("message", ODD_MESSAGES, ids=range(len(ODD_MESSAGES)))
def test_the_walk_gives_what_the_general_functions_give_on_odd_shapes(message: Any) -> None:
    assert _fused(message) == _general(message)


def test_the_odd_shapes_reach_every_rule() -> None:
    """The shapes above are not vacuous: markers at depth (not inside tuples, which stripping
    does not enter), images in results nested in results, a shape the general walks reject."""
    assert sum(1 for message in ODD_MESSAGES if _general(message)[-1] is True) == 6
    assert _general(NESTED_RESULTS)[1:] == (2, True)  # one image in a result, one deeper
    assert _general(DEEP_MARKER)[-1] is True
    assert _general(COMPACTION_MARKER)[-1] is True
    assert _general(TUPLE_MARKER)[-1] is False
    assert _general(UNHASHABLE_TYPE) == ("raises", TypeError)
