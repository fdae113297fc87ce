"""SQLite: messages are full-text indexed after ingest, behind a watermark, and every reader
that needs the index catches it up first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxengine.testing import samples
from ctxengine_lcm.doctor import check_store, examine
from ctxengine_lcm.ingest import prepare
from ctxengine_lcm.search import Searcher
from ctxengine_lcm.store_sqlite import SqliteStore

pytestmark = pytest.mark.sqlite_only


def _append(store: SqliteStore, conv: int, texts: list[str]) -> list[int]:
    msgs = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": text}
        for k, text in enumerate(texts)
    ]
    rows = [
        prepare(msgs, k, "openai", count=lambda m: 5, session_key="s", large_output_tokens=99)[0]
        for k in range(len(msgs))
    ]
    return store.append(conv, rows)


def _fts_rows(store: SqliteStore) -> int:
    with store.reading() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM messages_fts_docsize").fetchone()[0])


def _matches(store: SqliteStore, word: str) -> list[int]:
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid", (word,)
        ).fetchall()
    return [r[0] for r in rows]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "lcm.db")
    try:
        yield opened
    finally:
        opened.close()


def test_ingest_leaves_messages_for_catch_up(store: SqliteStore) -> None:
    conv = store.conversation_id("s")
    ids = _append(store, conv, ["the quick narwhal", "a slow tortoise", "zebra crossing"])
    assert ids == [1, 2, 3]
    assert store.index_watermark() == 0
    assert store.unindexed_messages() == 3
    assert _fts_rows(store) == 0
    assert store.catch_up_index() == 3
    assert store.index_watermark() == 3
    assert store.unindexed_messages() == 0
    assert _matches(store, "narwhal") == [1]
    # Nothing pending: nothing indexed twice.
    assert store.catch_up_index() == 0
    assert _fts_rows(store) == 3


def test_search_right_after_ingest_finds_the_new_message(store: SqliteStore) -> None:
    conv = store.conversation_id("s")
    _append(store, conv, ["an early walrus", "ok"])
    assert [h.id for h in Searcher(store, conv).search("walrus")] == ["msg_1"]
    # No compaction in between: the message stored now is found by the very next search.
    _append(store, conv, ["a brand new walrus sighting"])
    assert store.unindexed_messages() == 1
    hits = Searcher(store, conv).search("walrus", mode="full_text", scope="messages")
    assert [h.id for h in hits] == ["msg_3", "msg_1"]
    assert hits[0].snippet == "a brand new [walrus] sighting"
    assert store.unindexed_messages() == 0


def test_literal_and_regex_search_see_unindexed_messages(store: SqliteStore) -> None:
    conv = store.conversation_id("s")
    _append(store, conv, ["config at /etc/narwhal.conf", "fine"])
    searcher = Searcher(store, conv)
    assert [h.id for h in searcher.search("narwhal.conf", mode="literal")] == ["msg_1"]
    assert [h.id for h in searcher.search(r"/etc/\w+\.conf", mode="regex")] == ["msg_1"]
    # They read the table, not the index, and leave the index alone.
    assert store.unindexed_messages() == 2
    # A full-text search of summaries only does not need the message index either.
    assert searcher.search("narwhal", scope="summaries") == []
    assert store.unindexed_messages() == 2


class SimulatedCrash(Exception):
    pass


def test_catch_up_interrupted_between_batches_resumes_without_duplicates(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = store.conversation_id("s")
    _append(store, conv, [f"message number{k} of seven" for k in range(7)])
    real = store.transaction
    calls = 0

    @contextmanager
    def failing_second_batch() -> Iterator[Any]:
        nonlocal calls
        calls += 1
        with real() as conn:
            yield conn
            if calls == 2:
                # The batch's inserts are written but not committed: rolled back, as by a crash.
                raise SimulatedCrash

    monkeypatch.setattr(store, "transaction", failing_second_batch)
    with pytest.raises(SimulatedCrash):
        store.catch_up_index(batch_size=3)
    assert calls == 2
    assert store.index_watermark() == 3
    assert _fts_rows(store) == 3
    problems = check_store(store, catch_up=False)
    # (the first sentence ends with SQLite's own wording, which varies between versions)
    assert problems[0].startswith("full-text index messages_fts does not match table messages:")
    assert problems[1:] == [
        "full-text index messages_fts holds 3 rows, table messages 7",
        "the full-text watermark of messages is 3, the highest message id 7",
    ]

    monkeypatch.setattr(store, "transaction", real)
    assert store.catch_up_index(batch_size=3) == 4
    assert store.catch_up_index(batch_size=3) == 0
    assert store.index_watermark() == 7
    assert _fts_rows(store) == store.message_count() == 7
    for k in range(7):
        assert _matches(store, f"number{k}") == [k + 1]
    assert check_store(store, catch_up=False) == []


def test_catch_up_rejects_a_bad_batch_size(store: SqliteStore) -> None:
    with pytest.raises(ValueError, match=r"batch_size must be >= 1, got 0"):
        store.catch_up_index(batch_size=0)


def test_doctor_catches_up_and_reports_what_was_pending(store: SqliteStore) -> None:
    conv = store.conversation_id("s")
    _append(store, conv, ["one", "two", "three"])
    checkup = examine(store)
    assert checkup.problems == []
    assert checkup.notes == [
        "3 message(s) were waiting for the full-text index and are now indexed"
    ]
    assert store.unindexed_messages() == 0
    assert examine(store).notes == [
        "0 message(s) were waiting for the full-text index and are now indexed"
    ]


def test_store_without_fts_has_nothing_to_catch_up(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "plain.db", fts=False)
    try:
        conv = store.conversation_id("s")
        _append(store, conv, ["plain text"])
        assert store.unindexed_messages() == 0
        assert store.catch_up_index() == 0
        assert examine(store).problems == [] and examine(store).notes == []
    finally:
        store.close()


def test_store_is_indexed_when_compress_returns(make_kernel: Any, tmp_path: Path) -> None:
    session = make_kernel().session("indexed")
    _, messages = samples.conversation("openai")
    assert session.compress(messages, force=True).status == "compacted"
    store = SqliteStore(tmp_path / "lcm.db")
    try:
        assert store.message_count() == len(messages)
        assert store.unindexed_messages() == 0
        assert store.index_watermark() == len(messages)
        assert check_store(store, catch_up=False) == []
    finally:
        store.close()
