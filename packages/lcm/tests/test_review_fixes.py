"""Regression tests for defects found in review of the lossless engine."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ctxengine
import ctxengine_lcm.engine as lcm_engine
from ctxengine import ToolError
from ctxengine.testing import samples
from ctxengine_lcm.doctor import examine
from ctxengine_lcm.engine import get_state
from ctxengine_lcm.locking import session_lock
from ctxengine_lcm.search import Searcher
from ctxengine_lcm.store import Store
from ctxengine_lcm.store_sqlite import SqliteStore
from ctxengine_lcm.testing import lcm_config


def _lcm(session: Any) -> Any:
    lcm = get_state(session.ctx).session
    assert lcm is not None
    return lcm


def test_lone_surrogate_is_stored_exactly_and_later_ingests_still_work(
    make_kernel: Any,
) -> None:
    session = make_kernel(fresh_tail_count=2, leaf_min_messages=1).session("surrogate")
    cut = json.loads('"emoji cut \\ud83d here"')
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": cut},
        {"role": "assistant", "content": "ok"},
    ]
    session.compress(messages, force=True)
    lcm = _lcm(session)
    assert lcm.store.message_count(lcm.conversation_id) == 4
    stored = lcm.store.messages(lcm.conversation_id)
    assert json.loads(stored[2].content) == messages[2]  # the exact text, surrogate and all
    assert "\ufffd" in stored[2].text  # the searchable column holds a safe stand-in
    session.compress([*messages, {"role": "user", "content": "more"}], force=True)
    assert lcm.store.message_count(lcm.conversation_id) == 5


def _tool_turn(i: int, *, big: bool = False) -> list[dict[str, Any]]:
    output = f"line {i}\n" * (800 if big else 5)
    function = {"name": "cat", "arguments": '{"path":"f"}'}
    call = {"id": f"c{i}", "type": "function", "function": function}
    return [
        {"role": "user", "content": f"user {i} " + "x " * 300},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        {"role": "assistant", "content": f"done {i}"},
    ]


def test_summarised_run_with_a_described_output_is_not_stored_twice(make_kernel: Any) -> None:
    kernel = make_kernel(fresh_tail_count=4, leaf_min_messages=1, large_output_tokens=200)
    session = kernel.session("described-run")
    sent = [{"role": "system", "content": "sys"}, *_tool_turn(0), *_tool_turn(1)]
    sent += _tool_turn(2, big=True)
    distinct = len(sent)
    first = session.compress(sent, force=True)
    held = list(first.messages)  # the host adopts the described form of turn 2's output
    assert any("stored aside" in str(m.get("content")) for m in held)
    held += _tool_turn(3) + _tool_turn(4)
    distinct += 8
    session.compress(held, force=True)  # the host drops this result (a retried request)
    held += _tool_turn(5)
    distinct += 4
    third = session.compress(held, force=True)
    assert third.status == "compacted", third.reason
    lcm = _lcm(session)
    assert lcm.store.message_count(lcm.conversation_id) == distinct


@pytest.mark.sqlite_only
def test_regex_grep_works_when_the_store_path_has_uri_characters(
    make_kernel: Any, tmp_path: Path
) -> None:
    make_kernel()  # registers the engine for this test
    folder = tmp_path / "a#b?c%20d "
    folder.mkdir()
    env = {**os.environ, "CTXENGINE_HOME": str(tmp_path / "home")}
    env.pop("CTXENGINE_CONFIG", None)
    kernel = ctxengine.load(lcm_config(folder / "lcm.db", fresh_tail_count=4), env=env)
    try:
        session = kernel.session("uri")
        system, messages = samples.conversation("openai")
        session.compress(messages, system, force=True)
        text = session.call_tool("lcm_grep", {"pattern": "turn", "mode": "regex"})
        assert not text.startswith("Error"), text
        assert json.loads(text)["count"] > 0
    finally:
        kernel.close()


def test_two_spellings_of_one_store_share_the_session_lock(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    plain = tmp_path / "lcm.db"
    roundabout = tmp_path / "sub" / ".." / "lcm.db"
    with session_lock(plain, "s") as first:
        assert first
        with session_lock(roundabout, "s") as second:
            assert not second
    store = SqliteStore(roundabout)
    try:
        assert store.path == plain.resolve()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("lcm_grep", {"pattern": "\ud800", "mode": "literal"}, "lone UTF-16 surrogate"),
        ("lcm_grep", {"pattern": "\ud800", "mode": "full_text"}, "lone UTF-16 surrogate"),
        ("lcm_expand", {"summary_id": "\ud800"}, "lone UTF-16 surrogate"),
        ("lcm_expand_query", {"question": "\ud800 what"}, "lone UTF-16 surrogate"),
        ("lcm_describe", {"id": "msg_99999999999999999999999"}, "no summary, stored output"),
        ("lcm_describe", {"id": "msg_\u00b2"}, "no summary, stored output"),
    ],
)
def test_hostile_tool_input_is_a_tool_error(
    make_kernel: Any, tool: str, arguments: dict[str, Any], message: str
) -> None:
    session = make_kernel(fresh_tail_count=4).session("hostile")
    system, messages = samples.conversation("openai")
    session.compress(messages, system, force=True)
    handler = {entry.tool.name: entry.tool.handler for entry in session.tools()}[tool]
    with pytest.raises(ToolError, match=message):
        handler(arguments)


def test_grep_without_full_text_index_rejects_a_surrogate_pattern(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "nofts.db", fts=False)
    try:
        searcher = Searcher(store, store.conversation_id("s"), timeout=1.0)
        with pytest.raises(ToolError, match="lone UTF-16 surrogate"):
            searcher.search("\ud800", mode="full_text")
    finally:
        store.close()


def test_expand_and_evidence_cut_cjk_text_by_tokens(make_kernel: Any) -> None:
    session = make_kernel(fresh_tail_count=2, leaf_min_messages=1).session("cjk")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(12):
        messages.append({"role": "user", "content": f"q{i} " + "漢字テスト" * 120})
        messages.append({"role": "assistant", "content": f"a{i} " + "reply " * 50})
    result = session.compress(messages, force=True)
    assert result.status == "compacted", result.reason
    lcm = _lcm(session)
    count = session.ctx.tokens.count_text
    summary_id = next(
        ref for kind, ref in lcm.store.context(lcm.conversation_id) if kind == "summary"
    )
    page = json.loads(
        session.call_tool("lcm_expand", {"summary_id": summary_id, "offset": 0, "max_tokens": 100})
    )
    cut = page["messages"][0]
    assert cut["truncated"] is True
    assert 50 <= count(cut["text"]) <= 100
    answer = json.loads(
        session.call_tool(
            "lcm_expand_query",
            {
                "question": "漢字テスト q1",
                "output": "evidence",
                "evidence_tokens": 100,
                "summary_ids": [summary_id],
            },
        )
    )
    assert answer["evidence"], answer
    assert sum(count(e["text"]) for e in answer["evidence"]) <= 100


def test_a_message_too_big_for_any_window_is_reported_as_still_over_it(
    make_kernel: Any,
) -> None:
    session = make_kernel(fresh_tail_count=4).session("huge")
    messages: list[dict[str, Any]] = []
    for i in range(20):
        messages.append({"role": "user", "content": f"question {i} " + "word " * 100})
        messages.append({"role": "assistant", "content": f"answer {i} " + "blah " * 100})
    messages.append({"role": "user", "content": "HUGE " + " ".join(f"t{i}" for i in range(30000))})
    result = session.compress(messages, force=True)
    assert result.status == "compacted"
    assert result.tokens_after > 16_000
    assert "STILL OVER the 16000-token context window" in result.reason


def test_a_compress_that_cannot_get_the_lock_says_nothing_was_stored(
    make_kernel: Any, open_target: Callable[[], Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lcm_engine, "LOCK_WAIT_SECONDS", 0.0)
    session = make_kernel().session("busy")
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    session.compress(messages, force=True)
    lcm = _lcm(session)
    with open_target().session_lock("busy") as held:  # another worker's store
        assert held
        result = session.compress([*messages, {"role": "user", "content": "new"}], force=True)
    assert result.status == "noop"
    assert "nothing was stored" in result.reason
    assert lcm.store.message_count(lcm.conversation_id) == 2


def test_a_compress_waits_for_a_running_compaction_then_stores(
    make_kernel: Any, open_target: Callable[[], Store]
) -> None:
    session = make_kernel().session("wait")
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    session.compress(messages, force=True)
    lcm = _lcm(session)
    held, release = threading.Event(), threading.Event()
    other = open_target()  # another worker's store

    def hold() -> None:
        with other.session_lock("wait"):
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    threading.Timer(0.2, release.set).start()  # the other compaction ends while we wait
    result = session.compress([*messages, {"role": "user", "content": "new"}], force=True)
    holder.join()
    assert "another compaction" not in result.reason
    assert lcm.store.message_count(lcm.conversation_id) == 3


def _corrupted_store_problems(
    make_kernel: Any, open_target: Callable[[], Store], raw_sql: Callable[[str], None], sql: str
) -> list[str]:
    kernel = make_kernel(fresh_tail_count=4, context_length=8000)
    system, messages = samples.conversation("openai")
    result = kernel.session("doc").compress(messages, system, force=True)
    assert result.status == "compacted", result.reason
    kernel.close()
    healthy = open_target()
    assert examine(healthy).problems == []  # no false alarm before the corruption
    leaf = [s.id for s in healthy.summaries(healthy.conversation_id("doc")) if s.kind == "leaf"]
    raw_sql(sql.format(leaf=leaf[0]))
    return examine(open_target()).problems


def _past_guards(store_target: Path | str, sql: str, *guards: str) -> str:
    """``sql`` run past the immutability triggers ``guards`` (dropped on SQLite; disabled and
    enabled again on PostgreSQL, whose doctor would report a disabled one)."""
    if isinstance(store_target, Path):
        return "".join(f"DROP TRIGGER {guard};" for guard in guards) + sql
    toggle = [(guard.rsplit("_no_", 1)[0], guard) for guard in guards]
    return (
        "".join(f"ALTER TABLE {table} DISABLE TRIGGER {guard};" for table, guard in toggle)
        + sql
        + "".join(f"ALTER TABLE {table} ENABLE TRIGGER {guard};" for table, guard in toggle)
    )


def test_doctor_finds_leaf_links_out_of_order(
    make_kernel: Any,
    open_target: Callable[[], Store],
    raw_sql: Callable[[str], None],
    store_target: Path | str,
) -> None:
    # One statement, so the swap is never half done (PostgreSQL checks references after it).
    swap = _past_guards(
        store_target,
        "UPDATE summary_links SET message_id = other.message_id"
        " FROM summary_links other WHERE summary_links.summary_id = '{leaf}'"
        " AND other.summary_id = '{leaf}' AND summary_links.ordinal IN (0, 1)"
        " AND other.ordinal = 1 - summary_links.ordinal;",
        "summary_links_no_update",
    )
    problems = _corrupted_store_problems(make_kernel, open_target, raw_sql, swap)
    assert any("links its messages out of order" in p for p in problems), problems


def test_doctor_finds_a_leaf_whose_bounds_disagree_with_its_links(
    make_kernel: Any,
    open_target: Callable[[], Store],
    raw_sql: Callable[[str], None],
    store_target: Path | str,
) -> None:
    drop_last = _past_guards(
        store_target,
        "DELETE FROM summary_links WHERE summary_id = '{leaf}' AND ordinal ="
        "  (SELECT MAX(ordinal) FROM summary_links WHERE summary_id = '{leaf}');"
        " UPDATE summaries SET descendant_messages = descendant_messages - 1"
        " WHERE id = '{leaf}';",
        "summary_links_no_delete",
        "summaries_no_update",
    )
    problems = _corrupted_store_problems(make_kernel, open_target, raw_sql, drop_last)
    assert len(problems) == 1 and "records messages" in problems[0], problems


def test_doctor_finds_a_message_twice_in_the_active_context(
    make_kernel: Any, open_target: Callable[[], Store], raw_sql: Callable[[str], None]
) -> None:
    duplicate = (
        "INSERT INTO context_items SELECT MIN(conversation_id), MAX(ordinal) + 1,"
        " (SELECT MIN(message_id) FROM summary_links WHERE summary_id = '{leaf}'), NULL"
        " FROM context_items;"
    )
    problems = _corrupted_store_problems(make_kernel, open_target, raw_sql, duplicate)
    assert any("the active context expands to msg_" in p for p in problems), problems
