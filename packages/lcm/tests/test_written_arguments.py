"""lcm_grep finds tool-call arguments as the agent wrote them, not as JSON escapes them.

A command holding ``"`` or ``\\`` used to be indexed JSON-escaped (``grep -rn \\"x\\"``), so a
literal or regex search for the command itself missed it. Now the searchable text holds the
decoded argument values; a literal search also matches the escaped form, so stores written
before the change are still searched right; lcm_expand still returns the original message.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from ctxengine_lcm.engine import get_state
from ctxengine_lcm.ingest import searchable_text, written_arguments
from ctxengine_lcm.store_sqlite import SqliteStore

COMMAND = 'grep -rn "parse_config(\\"x\\")" src/ && echo C:\\temp\\out'
PATCH_RESULT = {"output": 'E   AssertionError: "a" != "b"\n', "metadata": {"exit_code": 1}}


def _conversation(fmt: str) -> list[dict[str, Any]]:
    if fmt == "openai":
        return [
            {"role": "user", "content": "find the config parser"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "shell", "arguments": json.dumps({"cmd": COMMAND})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(PATCH_RESULT)},
            {"role": "assistant", "content": "Found it."},
            {"role": "user", "content": "good, now fix it " + "and explain. " * 400},
            {"role": "assistant", "content": "Fixed. " + "Details. " * 400},
            {"role": "user", "content": "thanks"},
        ]
    return [
        {"role": "user", "content": "find the config parser"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": COMMAND}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": json.dumps(PATCH_RESULT)}
            ],
        },
        {"role": "assistant", "content": "Found it."},
        {"role": "user", "content": "good, now fix it " + "and explain. " * 400},
        {"role": "assistant", "content": "Fixed. " + "Details. " * 400},
        {"role": "user", "content": "thanks"},
    ]


def test_searchable_text_holds_arguments_as_written() -> None:
    messages = _conversation("openai")
    text = searchable_text(messages[1], "openai")
    assert COMMAND in text
    assert json.dumps(COMMAND)[1:-1] not in text  # no escaped copy
    # A JSON tool result with escapes is searchable as its decoded lines too.
    assert 'E   AssertionError: "a" != "b"' in searchable_text(messages[2], "openai")
    assert written_arguments('{"a": {"b": [1, "x\\"y"]}}') == 'a.b: [1,"x\\"y"]'
    assert written_arguments('{"a": [{"b": "x"}]}') == "a[0].b: x"
    assert written_arguments("not json") is None


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_grep_literal_and_regex_find_the_command_and_expand_returns_it(
    make_kernel: Any, fmt: str
) -> None:
    kernel = make_kernel(context_length=2_000, fresh_tail_count=2)
    session = kernel.session(f"written-{fmt}")
    messages = _conversation(fmt)
    result = session.compress(messages, force=True)
    assert result.status == "compacted", result.reason
    tools = {entry.tool.name: entry.tool.handler for entry in session.tools()}
    for query in (
        {"pattern": COMMAND, "mode": "literal"},
        {"pattern": r'parse_config\(\\"x\\"\)', "mode": "regex"},
        {"pattern": 'E   AssertionError: "a" != "b"', "mode": "literal"},
    ):
        found = tools["lcm_grep"](query)
        assert found["count"] >= 1, query
        hit = found["hits"][0]
        assert hit["covered_by"], hit
        page = tools["lcm_expand"]({"summary_id": hit["covered_by"], "max_tokens": 50_000})
        originals = {json.dumps(m, sort_keys=True) for m in messages}
        mine = [e for e in page["messages"] if e["id"] == hit["id"]]
        assert mine and json.dumps(mine[0]["message"], sort_keys=True) in originals


@pytest.mark.sqlite_only  # only SQLite stores were written by the earlier ingest
def test_literal_search_finds_rows_indexed_escaped_before(make_kernel: Any) -> None:
    """A store written before holds the command JSON-escaped: literal search still finds it."""
    kernel = make_kernel(context_length=2_000, fresh_tail_count=2)
    session = kernel.session("old-store")
    messages = _conversation("openai")
    assert session.compress(messages, force=True).status == "compacted"
    lcm = get_state(session.ctx).session
    assert lcm is not None and isinstance(lcm.store, SqliteStore)
    escaped = "shell " + json.dumps({"cmd": COMMAND})
    # Rewrite the row the way the earlier ingest indexed it (messages are immutable through the
    # store's API; this is a stand-in for a file written by the previous version).
    with sqlite3.connect(lcm.store.path) as conn:
        conn.execute("DROP TRIGGER IF EXISTS messages_no_update")
        changed = conn.execute(
            "UPDATE messages SET text = ? WHERE text LIKE ?", (escaped, f"%{COMMAND[:20]}%")
        ).rowcount
    assert changed == 1
    found = session.tools()
    grep = {entry.tool.name: entry.tool.handler for entry in found}["lcm_grep"]
    hits = grep({"pattern": COMMAND, "mode": "literal", "scope": "messages"})["hits"]
    assert hits and "parse_config" in hits[0]["snippet"]
