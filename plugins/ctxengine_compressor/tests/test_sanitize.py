"""ctxengine.messages.sanitize_tool_pairs: repairs broken tool pairs, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from ctxengine.messages import validate
from ctxengine_compressor.sanitize import sanitize_tool_pairs

from .helpers import openai_call


def _tool(call_id: str, text: str = "out") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def test_valid_openai_list_comes_back_as_the_same_objects() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [openai_call("a", "t"), openai_call("b", "t")],
        },
        _tool("a"),
        _tool("b"),
        {"role": "assistant", "content": "done"},
    ]
    out = sanitize_tool_pairs(messages, "openai")
    assert out == messages
    assert all(x is y for x, y in zip(out, messages, strict=True))


def test_orphan_result_is_dropped_and_unanswered_call_removed() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        _tool("gone"),  # its call was summarised away
        {
            "role": "assistant",
            "content": "look",
            "tool_calls": [openai_call("a", "t"), openai_call("b", "t")],
        },
        _tool("a"),
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "ok"},
    ]
    before = [dict(m) for m in messages]
    out = sanitize_tool_pairs(messages, "openai")
    assert [m.get("tool_call_id") for m in out if m["role"] == "tool"] == ["a"]
    assert [c["id"] for c in out[1]["tool_calls"]] == ["a"]
    assert messages == before  # the caller's dicts are untouched
    assert validate(out, "openai") == []


def test_call_message_without_text_is_dropped_when_no_call_remains() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [openai_call("a", "t")]},
        {"role": "user", "content": "never mind"},
    ]
    out = sanitize_tool_pairs(messages, "openai")
    assert out == [messages[0], messages[2]]


def test_reused_ids_pair_positionally() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [openai_call("x", "t")]},
        _tool("x", "first"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [openai_call("x", "t"), openai_call("x", "t")],
        },
        _tool("x", "second"),
        {"role": "user", "content": "stop"},
    ]
    out = sanitize_tool_pairs(messages, "openai")
    # The second group answered only one of its two "x" calls: one call is removed, no result.
    assert len(out[3]["tool_calls"]) == 1
    assert [m["content"] for m in out if m["role"] == "tool"] == ["first", "second"]


@pytest.mark.parametrize("keep", [True, False])
def test_trailing_call_waiting_for_its_result_is_kept(keep: bool) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": "running",
            "tool_calls": [openai_call("a", "t"), openai_call("b", "t")],
        },
        _tool("a"),
    ]
    out = sanitize_tool_pairs(messages, "openai", keep_pending=keep)
    ids = [c["id"] for c in out[1]["tool_calls"]]
    assert ids == (["a", "b"] if keep else ["a"])


def test_anthropic_orphans_and_unanswered_uses() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "gone", "content": "x"},
                {"type": "text", "text": "and then?"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "two calls"},
                {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                {"type": "tool_use", "id": "b", "name": "t", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
        {"role": "assistant", "content": "fine"},
    ]
    out = sanitize_tool_pairs(messages, "anthropic")
    assert out[0]["content"] == [{"type": "text", "text": "and then?"}]
    assert [b.get("id") for b in out[1]["content"] if b["type"] == "tool_use"] == ["a"]
    assert out[2] is messages[2]
    assert validate(out, "anthropic") == []


def test_anthropic_dropped_turn_merges_same_role_neighbours() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "start"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}],
        },
        {"role": "user", "content": "no result came"},
        {"role": "assistant", "content": "ok"},
    ]
    out = sanitize_tool_pairs(messages, "anthropic")
    assert [m["role"] for m in out] == ["user", "assistant"]
    assert out[0]["content"] == [
        {"type": "text", "text": "start"},
        {"type": "text", "text": "no result came"},
    ]


def test_anthropic_trailing_tool_use_is_kept() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}],
        },
    ]
    assert sanitize_tool_pairs(messages, "anthropic") == messages


def test_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match="unknown message format 'gemini'; allowed: 'openai', 'anthropic'"
    ):
        sanitize_tool_pairs([], "gemini")  # type: ignore[arg-type]
