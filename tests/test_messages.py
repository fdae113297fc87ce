"""Format detection, readers, tool groups, cut points (ctxengine.messages) and conversion
(conversion in ctxengine.messages)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from ctxengine._messages.conversation import Format
from ctxengine._messages.convert import to_anthropic
from ctxengine._messages.errors import MessageFormatError
from ctxengine._messages.read import (
    ToolCall,
    ToolGroup,
    ToolResult,
    cut_points,
    detect_format,
    is_real_user_message,
    is_tool_message,
    message_text,
    tool_call_ids,
    tool_calls,
    tool_groups,
    tool_result_ids,
    tool_results,
    visible_text,
)
from ctxengine._messages.validate import validate
from ctxengine.testing.transcripts import load_sessions


@cache
def _load(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_sessions(name))


def sessions(name: str) -> list[dict[str, Any]]:
    """Fresh copies, so a test cannot leak changes into another through the cache."""
    return copy.deepcopy(list(_load(name)))


def call(call_id: str, name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(call_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def use(call_id: str, name: str = "f", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": inp}


def result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


OPENAI_PARALLEL: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [call("a", "ls"), call("b", "cat")]},
    tool("b", "B"),
    tool("a", "A"),
    {"role": "assistant", "content": "done"},
]

ANTHROPIC_PARALLEL: list[dict[str, Any]] = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "text", "text": "looking"}, use("a"), use("b")]},
    {"role": "user", "content": [result("b"), result("a")]},
    {"role": "assistant", "content": "done"},
]


# ------------------------------------------------------------------------------------------
# detect_format


def test_detect_openai_by_roles_and_tool_calls() -> None:
    assert detect_format(OPENAI_PARALLEL) == "openai"
    assert detect_format([{"role": "assistant", "content": None, "tool_calls": [call("x")]}]) == (
        "openai"
    )
    assert detect_format([{"role": "developer", "content": "x"}]) == "openai"


def test_detect_anthropic_by_blocks_or_system() -> None:
    assert detect_format(ANTHROPIC_PARALLEL) == "anthropic"
    thinking = [{"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}]
    assert detect_format(thinking) == "anthropic"
    image = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    assert detect_format([{"role": "user", "content": [image]}]) == "anthropic"
    assert detect_format([{"role": "user", "content": "hi"}], system="sys") == "anthropic"


def test_detect_plain_text_is_openai_unless_system_given() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert detect_format(plain) == "openai"
    assert detect_format(plain, system=[{"type": "text", "text": "s"}]) == "anthropic"
    assert detect_format([]) == "openai"


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ("hello", "messages must be a list of message dicts, got str"),
        ({"role": "user"}, "messages must be a list of message dicts, got dict"),
        (
            [{"role": "user", "content": "x"}, "oops"],
            "messages[1]: a message must be a dict, got str",
        ),
        ([{"content": "x"}], "messages[0]: missing 'role'; allowed roles: system, developer, user"),
        ([{"role": "bot", "content": "x"}], "messages[0]: unknown role 'bot'; allowed roles:"),
        (
            [{"role": "user", "content": 5}],
            "messages[0]: content must be a string, a list of parts/blocks or null, got int",
        ),
    ],
)
def test_detect_rejects_malformed_input(messages: Any, expected: str) -> None:
    with pytest.raises(MessageFormatError) as err:
        detect_format(messages)
    assert expected in str(err.value)


def test_detect_rejects_mixed_formats() -> None:
    mixed = [tool("a"), {"role": "assistant", "content": [use("a")]}]
    with pytest.raises(MessageFormatError, match=r"mix OpenAI chat features \(messages\[0\]: role"):
        detect_format(mixed)
    with pytest.raises(MessageFormatError, match="a separate system prompt"):
        detect_format([{"role": "system", "content": "s"}], system="also")


# ------------------------------------------------------------------------------------------
# readers


def test_visible_text_excludes_reasoning_and_tool_payloads() -> None:
    oa = {
        "role": "assistant",
        "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        "reasoning_content": "secret thoughts",
        "tool_calls": [call("a", "ls", '{"path": "/tmp"}')],
    }
    assert visible_text(oa) == "one\ntwo"
    an = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, use("a", p=1)],
    }
    assert visible_text(an) == ""
    assert visible_text({"role": "assistant", "content": None}) == ""
    assert visible_text(tool("a", "payload")) == ""
    user = {"role": "user", "content": [result("a", "payload"), {"type": "text", "text": "more"}]}
    assert visible_text(user) == "more"


def test_message_text_covers_everything_that_costs_tokens() -> None:
    oa = {
        "role": "assistant",
        "content": "visible",
        "reasoning_content": "why",
        "tool_calls": [call("a", "ls", '{"path": "/tmp"}')],
    }
    assert message_text(oa) == 'why\nvisible\nls {"path": "/tmp"}'
    an = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "why", "signature": "s"},
            {"type": "text", "text": "visible"},
            use("a", "ls", path="/tmp"),
            {"type": "image", "source": {"type": "url", "url": "https://x"}},
        ],
    }
    assert message_text(an) == 'why\nvisible\nls {"path": "/tmp"}'
    tool_list = {"role": "user", "content": [result("a", [{"type": "text", "text": "out"}])]}
    assert message_text(tool_list) == "out"
    assert message_text(tool("a", "plain")) == "plain"


def test_real_user_and_visible_assistant_text() -> None:
    assert is_real_user_message({"role": "user", "content": "do it"}, "openai")
    assert not is_real_user_message({"role": "user", "content": "  \n"}, "openai")
    only_results = {"role": "user", "content": [result("a"), result("b")]}
    assert not is_real_user_message(only_results, "anthropic")
    interrupted = {
        "role": "user",
        "content": [result("a"), {"type": "text", "text": "[Request interrupted by user]"}],
    }
    assert is_real_user_message(interrupted, "anthropic")
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    assert is_real_user_message({"role": "user", "content": [image]}, "openai")
    assert not is_real_user_message({"role": "assistant", "content": "x"}, "openai")


def test_is_tool_message() -> None:
    assert is_tool_message(tool("a"))
    assert is_tool_message(tool("a"), only_results=True)
    assert not is_tool_message({"role": "user", "content": "x"})
    mixed = {"role": "user", "content": [result("a"), {"type": "text", "text": "x"}]}
    assert is_tool_message(mixed)
    assert not is_tool_message(mixed, only_results=True)
    assert is_tool_message({"role": "user", "content": [result("a")]}, only_results=True)
    assert not is_tool_message({"role": "user", "content": []})


def test_tool_calls_and_results_both_formats() -> None:
    assert tool_calls(OPENAI_PARALLEL[2], "openai") == [
        ToolCall("a", "ls", "{}"),
        ToolCall("b", "cat", "{}"),
    ]
    msg = {"role": "assistant", "content": [use("t1", "Bash", command="ls ✓")]}
    assert tool_calls(msg, "anthropic") == [ToolCall("t1", "Bash", '{"command": "ls ✓"}')]
    assert tool_calls({"role": "user", "content": "x"}, "openai") == []

    assert tool_results(tool("a", [{"type": "text", "text": "x"}]), "openai") == [
        ToolResult("a", "x", False)
    ]
    user = {"role": "user", "content": [result("a", "bad", is_error=True), result("b")]}
    assert tool_results(user, "anthropic") == [
        ToolResult("a", "bad", True),
        ToolResult("b", "ok", False),
    ]


def test_id_readers_match_full_readers() -> None:
    pairs: list[tuple[str, Format]] = [
        ("claude_code_spotter.openai.jsonl", "openai"),
        ("claude_code_spotter.anthropic.jsonl", "anthropic"),
    ]
    for name, fmt in pairs:
        for session in sessions(name)[:3]:
            for msg in session["messages"]:
                assert tool_call_ids(msg, fmt) == [c.id for c in tool_calls(msg, fmt)]
                assert tool_result_ids(msg, fmt) == [r.call_id for r in tool_results(msg, fmt)]


def test_readers_are_lenient_on_malformed_calls() -> None:
    broken = {"role": "assistant", "tool_calls": ["x", {"function": {"arguments": {"a": 1}}}]}
    assert tool_calls(broken, "openai") == [ToolCall("", "", '{"a": 1}')]


# ------------------------------------------------------------------------------------------
# tool groups and cut points


def test_tool_groups_parallel_results_out_of_order() -> None:
    assert tool_groups(OPENAI_PARALLEL, "openai") == [ToolGroup(2, (3, 4), ("a", "b"), ())]
    assert tool_groups(ANTHROPIC_PARALLEL, "anthropic") == [ToolGroup(1, (2,), ("a", "b"), ())]


def test_tool_groups_pending_and_missing_results() -> None:
    pending: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        tool("a"),
    ]
    assert tool_groups(pending, "openai") == [ToolGroup(1, (2,), ("a", "b"), ("b",))]
    trailing: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("x")]},
    ]
    assert tool_groups(trailing, "anthropic") == [ToolGroup(1, (), ("x",), ("x",))]
    no_results: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("x")]},
        {"role": "user", "content": "never mind"},
    ]
    assert tool_groups(no_results, "anthropic") == [ToolGroup(1, (), ("x",), ("x",))]


def test_tool_groups_orphan_result_stays_in_its_run() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        tool("a"),
        tool("zzz"),
        {"role": "user", "content": "x"},
        tool("lost"),
    ]
    assert tool_groups(msgs, "openai") == [ToolGroup(1, (2, 3), ("a",), ())]
    assert cut_points(msgs, "openai") == [True, True, False, False, True, True, True]


def test_tool_groups_reused_ids_are_matched_per_group() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("same")]},
        tool("same"),
        {"role": "assistant", "content": None, "tool_calls": [call("same")]},
        {"role": "user", "content": "interrupt"},
    ]
    # The second call is unanswered although an earlier result carries its id.
    assert tool_groups(msgs, "openai") == [
        ToolGroup(1, (2,), ("same",), ()),
        ToolGroup(3, (), ("same",), ("same",)),
    ]


def test_tool_groups_on_tau_bench_reused_ids() -> None:
    reused = 0
    for session in sessions("tau_bench_airline_gpt4o.openai.jsonl"):
        msgs = session["messages"]
        groups = tool_groups(msgs, "openai")
        ids = [cid for g in groups for cid in g.call_ids]
        if len(ids) != len(set(ids)):
            reused += 1
        for group in groups:
            pending = group.call_index == len(msgs) - 1
            assert group.unanswered == (() if not pending else group.call_ids), session["id"]
            for r in group.result_indices:
                assert msgs[r]["tool_call_id"] in group.call_ids
    assert reused == 11


def test_tool_groups_counts_on_spotter() -> None:
    for session in sessions("claude_code_spotter.openai.jsonl"):
        msgs = session["messages"]
        groups = tool_groups(msgs, "openai")
        n_calls = sum(len(m.get("tool_calls") or []) for m in msgs)
        assert sum(len(g.call_ids) for g in groups) == n_calls
        assert sum(len(g.result_indices) for g in groups) == sum(m["role"] == "tool" for m in msgs)
        assert all(not g.unanswered for g in groups)


def test_openhands_trailing_pending_call() -> None:
    found = 0
    for session in sessions("openhands_multiswebench_llama4.openai.jsonl"):
        msgs = session["messages"]
        last = tool_groups(msgs, "openai")[-1]
        if last.unanswered:
            found += 1
            assert last.call_index == len(msgs) - 1
            assert last.result_indices == ()
    assert found == 2


def test_cut_points_never_split_groups() -> None:
    assert cut_points(OPENAI_PARALLEL, "openai") == [True, True, True, False, False, True, True]
    assert cut_points(ANTHROPIC_PARALLEL, "anthropic") == [True, True, False, True, True]
    assert cut_points([], "openai") == [True]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("claude_code_spotter.openai.jsonl", "openai"),
        ("claude_code_spotter.anthropic.jsonl", "anthropic"),
        ("tau_bench_airline_gpt4o.openai.jsonl", "openai"),
    ],
)
def test_cut_points_on_real_transcripts(name: str, fmt: Any) -> None:
    for session in sessions(name):
        msgs = session["messages"]
        cuts = cut_points(msgs, fmt)
        assert len(cuts) == len(msgs) + 1
        assert cuts[0] and cuts[-1]
        for i, ok in enumerate(cuts[:-1]):
            starts_with_result = is_tool_message(msgs[i])
            # Every result message in these transcripts belongs to the group before it.
            assert ok is not starts_with_result, (session["id"], i)


# ------------------------------------------------------------------------------------------
# conversion


def test_to_anthropic_basic_shapes() -> None:
    system, msgs = to_anthropic(
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "let me look",
                "reasoning_content": "think",
                "tool_calls": [call("a", "ls", '{"p": 1}'), call("b", "cat", "not json")],
            },
            tool("a", "A"),
            tool("b", "B"),
            {"role": "user", "content": "and?"},
            {"role": "assistant", "content": "done"},
        ]
    )
    assert system == "rules"
    assert msgs == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "think"},
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "a", "name": "ls", "input": {"p": 1}},
                {
                    "type": "tool_use",
                    "id": "b",
                    "name": "cat",
                    "input": {"_raw_arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "b", "content": "B"},
                {"type": "text", "text": "and?"},
            ],
        },
        {"role": "assistant", "content": "done"},
    ]
    assert validate(msgs, "anthropic", system=system) == []


def test_to_anthropic_system_blocks_images_and_markers() -> None:
    marker = {"type": "ephemeral"}
    system, msgs = to_anthropic(
        [
            {"role": "system", "content": "a"},
            {
                "role": "developer",
                "content": [{"type": "text", "text": "b", "cache_control": marker}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": ""},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                    {"type": "image_url", "image_url": {"url": "https://ex.com/i.png"}},
                ],
                "cache_control": marker,
            },
            {"role": "assistant", "content": None},
        ]
    )
    assert system == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b", "cache_control": marker},
    ]
    assert msgs == [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
                },
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://ex.com/i.png"},
                    "cache_control": marker,
                },
            ],
        }
    ]


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (
            {"type": "input_audio", "input_audio": {}},
            "messages[0].content[0]: part type 'input_audio' has no Anthropic equivalent",
        ),
        (
            {"type": "image_url", "image_url": {"url": "ftp://x"}},
            "messages[0].content[0]: image URL must be a data: URL or an http(s) URL",
        ),
        (
            {"type": "image_url", "image_url": {"url": "data:image/png,abc"}},
            "data URL images must look like 'data:<media type>;base64,<data>'",
        ),
    ],
)
def test_to_anthropic_rejects_unconvertible_parts(part: dict[str, Any], expected: str) -> None:
    with pytest.raises(MessageFormatError) as err:
        to_anthropic([{"role": "user", "content": [part]}])
    assert expected in str(err.value)


def test_small_lists_convert_to_their_anthropic_form() -> None:
    assert to_anthropic(OPENAI_PARALLEL) == (
        "be brief",
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [use("a", "ls"), use("b", "cat")]},
            {"role": "user", "content": [result("b", "B"), result("a", "A")]},
            {"role": "assistant", "content": "done"},
        ],
    )


def _calls_and_text(messages: list[dict[str, Any]], fmt: Any) -> tuple[list[Any], list[str]]:
    calls = [(c.id, c.name, json.loads(c.arguments)) for m in messages for c in tool_calls(m, fmt)]
    results = [(r.call_id, r.text) for m in messages for r in tool_results(m, fmt)]
    texts = [visible_text(m) for m in messages if visible_text(m)]
    return [calls, results], texts


def test_spotter_openai_to_anthropic_matches_anthropic_file() -> None:
    pairs = zip(
        sessions("claude_code_spotter.openai.jsonl"),
        sessions("claude_code_spotter.anthropic.jsonl"),
        strict=True,
    )
    for oa, an in pairs:
        assert oa["id"] == an["id"]
        system, converted = to_anthropic(oa["messages"])
        assert system is None
        expected = an["messages"]
        assert [m["role"] for m in converted] == [m["role"] for m in expected]
        assert _calls_and_text(converted, "anthropic") == _calls_and_text(expected, "anthropic")
        thinking = [
            b["thinking"]
            for m in converted
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "thinking"
        ]
        assert thinking == [
            b["thinking"]
            for m in expected
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "thinking"
        ]
        assert validate(converted, "anthropic") == []


def test_tau_bench_conversion_keeps_calls_and_text() -> None:
    for session in sessions("tau_bench_airline_gpt4o.openai.jsonl"):
        msgs = session["messages"]
        system, converted = to_anthropic(msgs)
        assert system == msgs[0]["content"]
        assert _calls_and_text(converted, "anthropic") == _calls_and_text(msgs[1:], "openai")


# ------------------------------------------------------------------------------------------
# no mutation


READERS: list[tuple[str, Callable[[list[dict[str, Any]], Any], object]]] = [
    ("detect_format", lambda m, f: detect_format(m)),
    ("visible_text", lambda m, f: [visible_text(x) for x in m]),
    ("message_text", lambda m, f: [message_text(x) for x in m]),
    ("tool_calls", lambda m, f: [tool_calls(x, f) for x in m]),
    ("tool_results", lambda m, f: [tool_results(x, f) for x in m]),
    ("is_real_user_message", lambda m, f: [is_real_user_message(x, f) for x in m]),
    ("tool_groups", tool_groups),
    ("cut_points", cut_points),
    ("validate", validate),
    ("convert", lambda m, f: to_anthropic(m) if f == "openai" else None),
]


@pytest.mark.parametrize(("label", "fn"), READERS, ids=[r[0] for r in READERS])
@pytest.mark.parametrize(
    "name", ["claude_code_spotter.openai.jsonl", "claude_code_spotter.anthropic.jsonl"]
)
def test_no_function_mutates_its_input(
    label: str, fn: Callable[[list[dict[str, Any]], Any], object], name: str
) -> None:
    fmt = "anthropic" if "anthropic" in name else "openai"
    for session in sessions(name)[:4]:
        msgs = session["messages"]
        before = copy.deepcopy(msgs)
        fn(msgs, fmt)
        assert msgs == before, label


def test_conversion_does_not_mutate_markers_or_system() -> None:
    marker = {"type": "ephemeral"}
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": "s", "cache_control": marker}]},
        {"role": "user", "content": [{"type": "text", "text": "t"}], "cache_control": marker},
        {"role": "assistant", "content": "x", "tool_calls": [call("a", "ls", "{}")]},
        {"role": "tool", "tool_call_id": "a", "content": "A", "cache_control": marker},
    ]
    before = copy.deepcopy(msgs)
    to_anthropic(msgs)
    assert msgs == before
