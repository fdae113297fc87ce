"""The ``system_and_3`` marking rules on OpenAI- and Anthropic-format requests."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.messages import (
    cache_marker,
    can_carry_marker,
    detect_request_format,
    is_tool_message,
    marker_positions,
    strip_cache_markers,
)
from ctxengine.testing.markers import marker_problems
from ctxengine_caching.strategy import apply_system_and_3, mark_system_and_3

M5 = {"type": "ephemeral"}
M1H = {"type": "ephemeral", "ttl": "1h"}


def positions(request: dict[str, Any]) -> list[str]:
    return [where for where, _ in marker_positions(request)]


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def openai_request() -> dict[str, Any]:
    return {
        "model": "anthropic/claude-sonnet-4.5",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "List the files."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
            {"role": "assistant", "content": [text("Two files.")]},
            {"role": "user", "content": "Open a.py"},
        ],
    }


def anthropic_request() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "List the files."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "ls it", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
            {"role": "assistant", "content": [text("One file.")]},
            {"role": "user", "content": "Open it"},
        ],
    }


# --- OpenAI format -------------------------------------------------------------------------


def test_openai_system_and_last_three_on_envelope_route() -> None:
    request = openai_request()
    out = apply_system_and_3(request, ttl="5m", native=False)
    msgs = out["messages"]
    # system string -> one text part carrying the marker
    assert msgs[0]["content"] == [text("You are terse.", cache_control=M5)]
    # last three non-system, non-tool messages: user string, assistant list, assistant None
    assert msgs[5]["content"] == [text("Open a.py", cache_control=M5)]
    assert msgs[4]["content"] == [text("Two files.", cache_control=M5)]
    assert msgs[3] is request["messages"][3]  # tool message skipped on OpenRouter
    assert msgs[2]["cache_control"] == M5  # content None -> on the message
    assert msgs[2]["content"] is None
    assert msgs[1] is request["messages"][1]
    assert positions(out) == [
        "messages[0].content[0]",
        "messages[2]",
        "messages[4].content[0]",
        "messages[5].content[0]",
    ]


def test_openai_tool_message_marked_on_native_route() -> None:
    request = openai_request()
    out = apply_system_and_3(request, ttl="5m", native=True)
    msgs = out["messages"]
    assert msgs[3] == {**request["messages"][3], "cache_control": M5}
    assert msgs[3]["content"] == "a.py\nb.py"  # tool content stays a string
    assert positions(out) == [
        "messages[0].content[0]",
        "messages[3]",
        "messages[4].content[0]",
        "messages[5].content[0]",
    ]
    assert msgs[2] is request["messages"][2]


def test_envelope_route_gives_tool_slots_to_earlier_messages() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in range(3)
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "r0"},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
    ]
    out = apply_system_and_3({"messages": messages}, ttl="5m", native=False)
    assert positions(out) == [
        "messages[0].content[0]",
        "messages[2].content[0]",
        "messages[3].content[0]",
        "messages[4]",
    ]
    native = apply_system_and_3({"messages": messages}, ttl="5m", native=True)
    assert positions(native) == [
        "messages[0].content[0]",
        "messages[5]",
        "messages[6]",
        "messages[7]",
    ]


def test_openai_list_content_marks_last_block_and_skips_empty_text() -> None:
    parts = [
        text("look at this"),
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        text("   "),
        text(""),
    ]
    request: dict[str, Any] = {"messages": [{"role": "user", "content": parts}]}
    out = apply_system_and_3(request, ttl="5m", native=False)
    content = out["messages"][0]["content"]
    assert content[1]["cache_control"] == M5  # nearest markable part before the empty ones
    assert "cache_control" not in content[2]
    assert "cache_control" not in content[3]
    assert content is not parts
    assert parts[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


@pytest.mark.parametrize("content", [None, "", "  \n", [], [text("")], [text(" ")]])
def test_openai_empty_content_gets_message_level_marker(content: Any) -> None:
    request: dict[str, Any] = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]
    }
    out = apply_system_and_3(request, ttl="1h", native=False)
    last = out["messages"][1]
    assert last["cache_control"] == M1H
    assert last["content"] == content  # never converted into an empty text block
    assert marker_problems(out) == []


def test_system_message_only_counts_when_first() -> None:
    messages = [
        {"role": "user", "content": "u1"},
        {"role": "system", "content": "mid-conversation note"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
    ]
    out = apply_system_and_3({"messages": messages}, ttl="5m", native=False)
    # no system breakpoint; the mid-conversation system message is neither marked nor counted
    assert positions(out) == [
        "messages[0].content[0]",
        "messages[2].content[0]",
        "messages[3].content[0]",
    ]
    assert out["messages"][1] is messages[1]


def test_short_conversation_marks_everything_it_has() -> None:
    out = apply_system_and_3(
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]},
        ttl="5m",
        native=False,
    )
    assert positions(out) == ["messages[0].content[0]", "messages[1].content[0]"]
    assert apply_system_and_3({"messages": []}, ttl="5m", native=True) == {"messages": []}


def test_one_hour_marker_everywhere() -> None:
    for request, native in ((openai_request(), False), (anthropic_request(), True)):
        out = apply_system_and_3(request, ttl="1h", native=native)
        markers = [marker for _, marker in marker_positions(out)]
        assert len(markers) == 4
        assert all(marker == M1H for marker in markers)
        assert marker_problems(out) == []


def test_markers_are_distinct_objects() -> None:
    out = apply_system_and_3(openai_request(), ttl="5m", native=False)
    markers = [marker for _, marker in marker_positions(out)]
    assert len({id(marker) for marker in markers}) == len(markers)


# --- Anthropic format ----------------------------------------------------------------------


def test_anthropic_system_string_and_native_tool_result() -> None:
    request = anthropic_request()
    out = apply_system_and_3(request, ttl="5m", native=True)
    assert out["system"] == [text("You are terse.", cache_control=M5)]
    msgs = out["messages"]
    assert msgs[4]["content"] == [text("Open it", cache_control=M5)]
    assert msgs[3]["content"] == [text("One file.", cache_control=M5)]
    # tool_result-only user message: the marker goes on its last tool_result block
    assert msgs[2]["content"][0]["cache_control"] == M5
    assert msgs[2]["content"][0]["content"] == "a.py"
    assert msgs[1] is request["messages"][1]
    assert positions(out) == [
        "system[0]",
        "messages[2].content[0]",
        "messages[3].content[0]",
        "messages[4].content[0]",
    ]
    assert request["system"] == "You are terse."


def test_anthropic_tool_results_skipped_off_native_routes() -> None:
    out = apply_system_and_3(anthropic_request(), ttl="5m", native=False)
    # the tool_result message passes its slot to the assistant turn before it; the thinking
    # block there is skipped in favour of the tool_use block
    assert positions(out) == [
        "system[0]",
        "messages[1].content[1]",
        "messages[3].content[0]",
        "messages[4].content[0]",
    ]


def test_anthropic_system_list_marks_last_non_empty_block() -> None:
    request = anthropic_request()
    request["system"] = [text("Rules."), text("Context."), text("  ")]
    out = apply_system_and_3(request, ttl="5m", native=True)
    assert out["system"] == [text("Rules."), text("Context.", cache_control=M5), text("  ")]
    assert request["system"][1] == text("Context.")


@pytest.mark.parametrize("system", [None, "", "   ", []])
def test_anthropic_without_system_prompt_has_no_system_breakpoint(system: Any) -> None:
    request = anthropic_request()
    request["system"] = system
    out = apply_system_and_3(request, ttl="5m", native=True)
    assert out["system"] is system
    assert positions(out) == [
        "messages[2].content[0]",
        "messages[3].content[0]",
        "messages[4].content[0]",
    ]


def test_anthropic_thinking_blocks_never_marked() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    redacted = {"type": "redacted_thinking", "data": "xyz"}
    request: dict[str, Any] = {
        "system": "sys",
        "messages": [
            {"role": "user", "content": "u0"},
            {"role": "assistant", "content": [text("answer"), thinking]},
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": [thinking, redacted]},
        ],
    }
    out = apply_system_and_3(request, ttl="5m", native=True)
    msgs = out["messages"]
    assert msgs[1]["content"] == [text("answer", cache_control=M5), thinking]
    # nothing markable and no message-level field in the Messages API: the slot moves on
    assert msgs[3] is request["messages"][3]
    assert "cache_control" not in msgs[3]
    assert positions(out) == [
        "system[0]",
        "messages[0].content[0]",
        "messages[1].content[0]",
        "messages[2].content[0]",
    ]
    assert marker_problems(out) == []


def test_anthropic_mixed_user_message_is_not_a_tool_message() -> None:
    mixed = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}, text("and now?")],
    }
    assert not is_tool_message(mixed, only_results=True)
    out = apply_system_and_3({"system": "s", "messages": [mixed]}, ttl="5m", native=False)
    assert out["messages"][0]["content"][1]["cache_control"] == M5


def test_anthropic_empty_final_assistant_prefill_is_skipped() -> None:
    request: dict[str, Any] = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "u0"},
            {"role": "assistant", "content": "a0"},
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": ""},
        ],
    }
    out = apply_system_and_3(request, ttl="5m", native=True)
    assert out["messages"][3] is request["messages"][3]
    assert positions(out) == [
        "system[0]",
        "messages[0].content[0]",
        "messages[1].content[0]",
        "messages[2].content[0]",
    ]


# --- the request is never mutated, and only marked messages are copied -------------------


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("make", [openai_request, anthropic_request])
def test_input_is_not_mutated_and_only_marked_messages_are_copied(make: Any, native: bool) -> None:
    request = make()
    request["tools"] = [{"name": "ls", "input_schema": {"type": "object"}}]
    snapshot = copy.deepcopy(request)
    out = apply_system_and_3(request, ttl="1h", native=native)
    assert request == snapshot
    assert out is not request
    assert out["messages"] is not request["messages"]
    assert out["tools"] is request["tools"]
    marked = {
        int(where.split("[")[1].split("]")[0])
        for where in positions(out)
        if where.startswith("messages")
    }
    for index, (before, after) in enumerate(zip(request["messages"], out["messages"], strict=True)):
        assert (after is before) == (index not in marked), index
    # marking the result again does not touch the first result either
    again_snapshot = copy.deepcopy(out)
    apply_system_and_3(out, ttl="1h", native=native)
    assert out == again_snapshot


def test_strip_copies_only_what_carried_markers() -> None:
    nested: dict[str, Any] = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [text("x", cache_control=M5), text("y")],
            }
        ],
    }
    plain = {"role": "assistant", "content": [text("z")]}
    flagged = {"role": "assistant", "content": None, "cache_control": M5}
    request: dict[str, Any] = {
        "system": [text("s", cache_control=M1H)],
        "tools": [{"name": "t", "input_schema": {}, "cache_control": M1H}],
        "messages": [nested, plain, flagged],
    }
    snapshot = copy.deepcopy(request)
    out = strip_cache_markers(request)
    assert request == snapshot
    assert marker_positions(out) == []
    assert out["messages"][1] is plain
    assert out["messages"][0]["content"][0]["content"] == [text("x"), text("y")]
    assert out["messages"][0]["content"][0]["content"][1] is nested["content"][0]["content"][1]
    assert out["messages"][2] == {"role": "assistant", "content": None}
    assert out["system"] == [text("s")]
    assert out["tools"] == [{"name": "t", "input_schema": {}}]


def test_strip_without_markers_shares_everything() -> None:
    request = anthropic_request()
    out = strip_cache_markers(request)
    assert out == request
    assert out is not request
    assert out["messages"] is request["messages"]


# --- idempotence and the 4-breakpoint cap -------------------------------------------------


@pytest.mark.parametrize("ttl", ["5m", "1h"])
@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("make", [openai_request, anthropic_request])
def test_idempotent(make: Any, native: bool, ttl: str) -> None:
    once = apply_system_and_3(make(), ttl=ttl, native=native)
    twice = apply_system_and_3(once, ttl=ttl, native=native)
    assert twice == once
    assert json.dumps(twice, sort_keys=True) == json.dumps(once, sort_keys=True)


def test_existing_markers_are_replaced_never_added_to() -> None:
    request = anthropic_request()
    request["tools"] = [
        {"name": f"t{i}", "input_schema": {}, "cache_control": M5} for i in range(3)
    ]
    request["system"] = [text("a", cache_control=M5), text("b", cache_control=M5)]
    for msg in request["messages"]:
        msg["cache_control"] = M5
    request["messages"][2]["content"][0]["content"] = [text("r", cache_control=M5)]
    assert len(marker_positions(request)) > 4
    out = apply_system_and_3(request, ttl="1h", native=True)
    assert positions(out) == [
        "system[1]",
        "messages[2].content[0]",
        "messages[3].content[0]",
        "messages[4].content[0]",
    ]
    assert marker_problems(out) == []


def test_switching_ttl_replaces_markers() -> None:
    five = apply_system_and_3(openai_request(), ttl="5m", native=False)
    hour = apply_system_and_3(five, ttl="1h", native=False)
    assert [m for _, m in marker_positions(hour)] == [M1H] * 4
    assert hour == apply_system_and_3(openai_request(), ttl="1h", native=False)


_roles = st.sampled_from(["user", "assistant", "tool", "system"])
_blocks = st.lists(
    st.one_of(
        st.builds(text, st.sampled_from(["", " ", "hi", "x y"])),
        st.just({"type": "thinking", "thinking": "t", "signature": "s"}),
        st.just({"type": "tool_use", "id": "i", "name": "n", "input": {}}),
        st.just({"type": "tool_result", "tool_use_id": "i", "content": [text("r")]}),
        st.just({"type": "image_url", "image_url": {"url": "u"}}),
    ),
    max_size=4,
)
_content = st.one_of(st.none(), st.sampled_from(["", " ", "text"]), _blocks)
_message = st.fixed_dictionaries(
    {"role": _roles, "content": _content},
    optional={"cache_control": st.sampled_from([M5, M1H])},
)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(_message, max_size=12),
    system=st.one_of(st.none(), st.just("sys"), st.just([text("a"), text("")])),
    anthropic=st.booleans(),
    native=st.booleans(),
    ttl=st.sampled_from(["5m", "1h"]),
)
def test_properties_on_arbitrary_requests(
    messages: list[dict[str, Any]], system: Any, anthropic: bool, native: bool, ttl: str
) -> None:
    request: dict[str, Any] = {"messages": messages}
    if anthropic:
        request["system"] = system
    snapshot = copy.deepcopy(request)
    out = apply_system_and_3(request, ttl=ttl, native=native)
    assert request == snapshot
    assert apply_system_and_3(out, ttl=ttl, native=native) == out
    assert len(marker_positions(out)) <= 4
    assert mark_system_and_3(request, ttl=ttl, native=native).breakpoints == len(
        marker_positions(out)
    )
    assert marker_problems(out) == []
    for before, after in zip(messages, out["messages"], strict=True):
        if after is not before:
            carried = marker_positions({"messages": [before]})
            assert carried or marker_positions({"messages": [after]}), "copied for no reason"
            assert _same_but_markers(before, after)
        else:
            assert not marker_positions({"messages": [before]})
        if not native and is_tool_message(before, only_results=True):
            assert not marker_positions({"messages": [after]})


def _same_but_markers(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """``after`` is ``before`` plus markers (a marked string may have become one text block)."""
    clean_before = strip_cache_markers({"messages": [before]})["messages"][0]
    clean_after = strip_cache_markers({"messages": [after]})["messages"][0]
    content = before.get("content")
    if isinstance(content, str) and clean_after.get("content") == [text(content)]:
        clean_after = {**clean_after, "content": content}
    return bool(clean_after == clean_before)


# --- helpers and errors ---------------------------------------------------------------------


def test_marker_shapes_and_bad_ttl() -> None:
    assert cache_marker("5m") == {"type": "ephemeral"}
    assert cache_marker("1h") == {"type": "ephemeral", "ttl": "1h"}
    with pytest.raises(ValueError, match=r"cache ttl must be one of '5m', '1h'; got '24h'"):
        apply_system_and_3(openai_request(), ttl="24h", native=False)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ([], "request must be a mapping of API call arguments, got list"),
        ({"messages": "hi"}, r"request\['messages'\] must be a list of message dicts, got str"),
        ({}, r"request\['messages'\] must be a list of message dicts, got NoneType"),
        (
            {"messages": [{"role": "user", "content": "a"}, "b"]},
            r"messages\[1\] must be a dict, got str",
        ),
    ],
)
def test_bad_requests_get_clear_errors(request_: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        apply_system_and_3(request_, ttl="5m", native=True)


def test_bad_format_argument() -> None:
    with pytest.raises(ValueError, match="fmt must be 'openai', 'anthropic' or None; got 'gemini'"):
        apply_system_and_3(openai_request(), ttl="5m", native=True, fmt="gemini")  # type: ignore[arg-type]


def test_explicit_format_overrides_detection() -> None:
    request: dict[str, Any] = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}]
    }
    assert "cache_control" in apply_system_and_3(request, ttl="5m", native=True)["messages"][1]
    marked = apply_system_and_3(request, ttl="5m", native=True, fmt="anthropic")
    assert marked["messages"][1] is request["messages"][1]


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"system": None, "messages": []}, "anthropic"),
        ({"messages": [{"role": "system", "content": "s"}]}, "openai"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}
                ]
            },
            "anthropic",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "openai",
        ),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": []}]}, "openai"),
        ({"messages": [{"role": "user", "content": "plain"}]}, "openai"),
    ],
)
def test_detect_request_format(request_: dict[str, Any], expected: str) -> None:
    assert detect_request_format(request_) == expected


def test_can_carry_marker() -> None:
    assert can_carry_marker(text("x"))
    assert not can_carry_marker(text(" \n"))
    assert not can_carry_marker({"type": "thinking", "thinking": "t"})
    assert not can_carry_marker({"type": "redacted_thinking", "data": "d"})
    assert not can_carry_marker("text")
    assert can_carry_marker({"type": "tool_use", "id": "i", "name": "n", "input": {}})


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x85\xa0\u2003\u2028\u3000\u200bx", max_size=5))
def test_a_text_is_visible_when_strip_leaves_something(value: str) -> None:
    # Visibility is tested without copying the text (isspace); it must be what strip() says,
    # Unicode whitespace included (and the zero-width space, which is not whitespace).
    visible = bool(value.strip())
    assert can_carry_marker(text(value)) is visible
    request = {"system": value, "messages": [{"role": "user", "content": value}]}
    marked = apply_system_and_3(request, ttl="5m", native=True)
    assert isinstance(marked["system"], list) is visible
    assert isinstance(marked["messages"][0]["content"], list) is visible


def test_a_top_level_automatic_marker_is_replaced_not_added() -> None:
    request = {
        "system": "s" * 40,
        "cache_control": {"type": "ephemeral"},
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
    }
    out = apply_system_and_3(request, ttl="5m", native=True)
    assert "cache_control" not in out
    assert marker_problems(out) == []
    assert request["cache_control"] == {"type": "ephemeral"}  # the caller's dict is untouched
