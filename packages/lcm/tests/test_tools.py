"""The agent tools: normal use, and hostile input that must end in ToolError, never a crash."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ctxengine import ToolError
from ctxengine.testing import samples
from ctxengine_lcm.engine import get_state
from ctxengine_lcm.search import check_regex

Handlers = dict[str, Any]


@pytest.fixture
def compacted(make_kernel: Any) -> tuple[Any, Handlers, Any]:
    kernel = make_kernel(regex_timeout_s=1.0)
    session = kernel.session("tools")
    _, messages = samples.conversation("openai")
    result = session.compress(messages, force=True)
    assert result.status == "compacted", result.reason
    handlers = {entry.tool.name: entry.tool.handler for entry in session.tools()}
    return session, handlers, result


def test_tools_are_offered_with_schemas(compacted: tuple[Any, Handlers, Any]) -> None:
    session, handlers, _ = compacted
    assert set(handlers) == {"lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"}
    for schema in session.tool_schemas("anthropic"):
        assert schema["input_schema"]["type"] == "object"


def test_grep_finds_compacted_text_and_names_the_summary(
    compacted: tuple[Any, Handlers, Any],
) -> None:
    _, handlers, result = compacted
    found = handlers["lcm_grep"]({"pattern": '"test_mod0"'})
    assert found["count"] >= 1
    hit = found["hits"][0]
    assert hit["kind"] == "message"
    assert hit["in_context"] is False
    assert hit["covered_by"].startswith("sum_")
    assert hit["covered_by"] in json.dumps(result.messages)
    page = handlers["lcm_expand"]({"summary_id": hit["covered_by"]})
    assert any(m["id"] == hit["id"] for m in page["messages"])
    regex = handlers["lcm_grep"]({"pattern": r"test_mod0\.py", "mode": "regex"})
    assert any(h["id"] == hit["id"] for h in regex["hits"])
    literal = handlers["lcm_grep"]({"pattern": "test_mod0.py", "mode": "literal"})
    assert any(h["id"] == hit["id"] for h in literal["hits"])


def test_every_summary_ends_with_what_to_expand(compacted: tuple[Any, Handlers, Any]) -> None:
    session, handlers, _ = compacted
    lcm = get_state(session.ctx).session
    assert lcm is not None
    summaries = lcm.store.summaries(lcm.conversation_id)
    assert summaries
    for summary in summaries:
        last = summary.content.rstrip().splitlines()[-1]
        assert last.startswith("Expand for details:")
        assert summary.id in last
        described = handlers["lcm_describe"]({"id": summary.id})
        assert described["content"] == summary.content
        assert described["children"]


def test_expand_pages_and_caps_tokens(compacted: tuple[Any, Handlers, Any]) -> None:
    session, handlers, _ = compacted
    lcm = get_state(session.ctx).session
    assert lcm is not None
    summary = lcm.store.summaries(lcm.conversation_id)[0]
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = handlers["lcm_expand"](
            {"summary_id": summary.id, "offset": offset, "max_tokens": 1000}
        )
        assert page["tokens"] <= 1000
        seen += [m["id"] for m in page["messages"]]
        offset = page["next_offset"]
    assert len(seen) == summary.descendant_messages == len(set(seen))


def test_expand_query_evidence_needs_no_model(compacted: tuple[Any, Handlers, Any]) -> None:
    _, handlers, _ = compacted
    out = handlers["lcm_expand_query"](
        {"question": "what happened with module_3?", "output": "evidence"}
    )
    assert out["evidence"]
    assert all(e["id"].startswith("msg_") for e in out["evidence"])
    answer = handlers["lcm_expand_query"]({"question": "what happened with module_3?"})
    assert answer["answer"] is None
    assert "extractive" in answer["note"]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("lcm_grep", {"pattern": "(a+)+$", "mode": "regex"}, "nested quantifiers"),
        ("lcm_grep", {"pattern": r"(\w*)*x", "mode": "regex"}, "nested quantifiers"),
        ("lcm_grep", {"pattern": r"(a)\1", "mode": "regex"}, "back-reference"),
        ("lcm_grep", {"pattern": "([unclosed", "mode": "regex"}, "invalid regex"),
        ("lcm_grep", {"pattern": '"unbalanced quote'}, "not valid FTS5 syntax"),
        ("lcm_grep", {"pattern": "AND OR NOT"}, "not valid FTS5 syntax"),
        ("lcm_grep", {"pattern": "'; DROP TABLE messages; --"}, "not valid FTS5 syntax"),
        ("lcm_grep", {"pattern": "x", "limit": 10**12}, "limit must be from 1 to 500"),
        ("lcm_grep", {"pattern": "x", "limit": -1}, "limit must be from 1 to 500"),
        ("lcm_grep", {"pattern": "x", "limit": "all"}, "limit must be an integer"),
        ("lcm_grep", {"pattern": "x", "scope": "everything"}, "scope must be one of"),
        ("lcm_grep", {"pattern": "x", "mode": "fuzzy"}, "mode must be one of"),
        ("lcm_grep", {"pattern": ""}, "pattern must be a non-empty string"),
        ("lcm_grep", {"pattern": "x" * 5000}, "at most 1000 allowed"),
        ("lcm_grep", {"pattern": "x", "colour": "red"}, "unknown argument(s) 'colour'"),
        ("lcm_describe", {"id": "sum_000000000000"}, "no summary, stored output or message"),
        ("lcm_describe", {"id": "msg_999999"}, "no summary, stored output or message"),
        ("lcm_describe", {"id": "1 OR 1=1"}, "no summary, stored output or message"),
        ("lcm_describe", {}, "id must be an id string"),
        ("lcm_expand", {"summary_id": "sum_nope"}, "no summary with id 'sum_nope'"),
        ("lcm_expand", {"summary_id": "x", "max_tokens": 10**9}, "max_tokens must be from"),
        ("lcm_expand_query", {"question": ""}, "question must be a non-empty string"),
        ("lcm_expand_query", {"question": "q", "summary_ids": ["sum_x"]}, "no summary with id"),
        ("lcm_expand_query", {"question": "q", "output": "essay"}, "output must be one of"),
    ],
)
def test_hostile_input_is_a_tool_error(
    compacted: tuple[Any, Handlers, Any], tool: str, arguments: dict[str, Any], message: str
) -> None:
    _, handlers, _ = compacted
    with pytest.raises(ToolError) as excinfo:
        handlers[tool](arguments)
    assert message in str(excinfo.value)


def test_sql_looking_text_is_just_text(compacted: tuple[Any, Handlers, Any]) -> None:
    session, handlers, _ = compacted
    for pattern in ("'; DROP TABLE messages; --", "1 OR 1=1", "%' OR '1'='1"):
        assert handlers["lcm_grep"]({"pattern": pattern, "mode": "literal"})["count"] == 0
    assert handlers["lcm_grep"]({"pattern": '"DROP TABLE messages"'})["count"] == 0
    lcm = get_state(session.ctx).session
    assert lcm is not None
    assert lcm.store.message_count(lcm.conversation_id) > 0


def test_slow_regex_is_stopped_by_the_time_cap(make_kernel: Any) -> None:
    kernel = make_kernel(regex_timeout_s=0.5)
    session = kernel.session("slow")
    _, messages = samples.conversation("openai")
    messages = [*messages[:-1], {"role": "assistant", "content": "x" * 50_000 + "!"}]
    session.compress(messages, force=True)
    grep = next(e.tool.handler for e in session.tools() if e.tool.name == "lcm_grep")
    started = time.monotonic()
    with pytest.raises(ToolError) as excinfo:
        # Passes the guard, yet takes quadratic time in Python's re and in PostgreSQL's engine
        # alike (the lookahead is tried at every one of the 50,000 positions).
        grep({"pattern": "x*(?=x*y)", "mode": "regex", "scope": "messages"})
    assert "ran longer than 0.5 s and was stopped" in str(excinfo.value)
    assert time.monotonic() - started < 30  # generous: only proves it did not hang


def test_call_tool_reports_errors_as_text(compacted: tuple[Any, Handlers, Any]) -> None:
    session, _, _ = compacted
    text = session.call_tool("lcm_grep", {"pattern": "(a+)+$", "mode": "regex"})
    assert text.startswith("Error: regex '(a+)+$' repeats a group")


@pytest.mark.parametrize("pattern", ["a+b*", "(ab)+", "(a|b)+", "[(+]+", r"\(a+\)+", "(?:x)?y+"])
def test_safe_regexes_pass_the_guard(pattern: str) -> None:
    assert check_regex(pattern).pattern == pattern
