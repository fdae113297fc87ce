"""Phase 1: one-line descriptions, de-duplication, argument shortening."""

from __future__ import annotations

import json

from ctxengine.messages import ToolCall, to_anthropic, validate
from ctxengine_compressor.prune import PRUNE_MIN_CHARS, describe_output, prune, shorten_arguments

from .helpers import openai_call

PYTEST_LOG = "\n".join(f"test_{i} PASSED" for i in range(211)) + "\nexit code: 1"


def test_description_names_tool_command_exit_code_and_size() -> None:
    call = ToolCall("1", "terminal", json.dumps({"command": "pytest -q"}))
    assert describe_output(call, PYTEST_LOG) == (
        f"[terminal] ran `pytest -q` -> exit 1, 212 lines, {len(PYTEST_LOG):,} chars"
    )


def test_description_uses_the_path_for_file_tools_and_survives_no_call() -> None:
    call = ToolCall("1", "read_file", json.dumps({"path": "lib/app.py"}))
    assert describe_output(call, "a\nb").startswith("[read_file] `lib/app.py` -> 2 lines")
    assert describe_output(None, "x", is_error=True) == "[tool] -> error, 1 line, 1 chars"


def test_shortened_arguments_stay_valid_json() -> None:
    args = json.dumps({"path": "a.py", "content": "x" * 5_000, "nested": {"list": ["y" * 900]}})
    short = shorten_arguments(args)
    assert short is not None
    data = json.loads(short)
    assert data["path"] == "a.py"
    assert len(data["content"]) < 400 and "chars cut by compaction" in data["content"]
    assert len(data["nested"]["list"][0]) < 400
    assert shorten_arguments('{"path": "a.py"}') is None
    assert shorten_arguments("not json" * 100) is None


def _conversation() -> list[dict[str, object]]:
    big = "line\n" * 100
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "do it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                openai_call("a", "terminal", command="make"),
                openai_call("b", "write", path="x.py", content="z" * 2_000),
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": big},
        {"role": "tool", "tool_call_id": "b", "content": "small"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [openai_call("c", "terminal", command="make")],
        },
        {"role": "tool", "tool_call_id": "c", "content": big},
        {"role": "assistant", "content": "done"},
    ]


def test_prune_openai_range_only_and_never_mutates() -> None:
    messages = _conversation()
    snapshot = json.dumps(messages)
    out, stats = prune(messages, "openai", 1, 5)
    assert json.dumps(messages) == snapshot
    assert out[3]["content"].startswith("[terminal] ran `make` -> 101 lines")
    assert "identical to a later result" in out[3]["content"]  # same output at index 6
    assert out[4] is messages[4]  # short output untouched
    assert out[6] is messages[6]  # outside the range
    assert json.loads(out[2]["tool_calls"][1]["function"]["arguments"])["path"] == "x.py"
    assert (stats.outputs_deduplicated, stats.outputs_described, stats.arguments_shortened) == (
        1,
        0,
        1,
    )
    assert validate(out, "openai") == []


def test_prune_anthropic_tool_result_blocks() -> None:
    system, messages = to_anthropic(_conversation())
    out, stats = prune(messages, "anthropic", 0, len(messages) - 1)
    results = [
        b
        for m in out
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result"
    ]
    assert results[0]["content"].startswith("[terminal] ran `make`")
    assert results[1]["content"] == "small"
    assert all(len(str(r["content"])) < PRUNE_MIN_CHARS for r in results)
    assert (stats.outputs_deduplicated, stats.outputs_described, stats.arguments_shortened) == (
        1,
        1,
        1,
    )
    assert validate(out, "anthropic", system=system) == []


def test_a_pointer_never_names_a_copy_that_is_summarized_away() -> None:
    messages = _conversation()
    # The later copy (index 6) is in the summarised middle: no "see there" pointer.
    out, stats = prune(messages, "openai", 1, 5, kept_from=7)
    assert "identical to a later result" not in out[3]["content"]
    assert stats.outputs_deduplicated == 0
    # When it is kept in the tail, the pointer is right.
    out, stats = prune(messages, "openai", 1, 5, kept_from=6)
    assert "identical to a later result" in out[3]["content"]
