"""SQLite stores written by an earlier layout are upgraded in place on open and keep working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ctxengine_lcm import store_sqlite as store_module
from ctxengine_lcm.doctor import check_store
from ctxengine_lcm.ingest import prepare
from ctxengine_lcm.search import Searcher
from ctxengine_lcm.store import SCHEMA_VERSION, StoreError
from ctxengine_lcm.store_sqlite import FTS_AUTOMERGE, FTS_PAGE_BYTES, SqliteStore


def _version_1_store(path: Path) -> None:
    """A store as ctxengine-lcm schema version 1 wrote it: ``messages.dedupe_key`` with its
    own unique index, FTS5 indexes with default options, one message already stored."""
    tables = store_module._TABLES.replace(
        "    content_hash TEXT NOT NULL,\n",
        "    content_hash TEXT NOT NULL,\n    dedupe_key TEXT NOT NULL,\n",
    ).replace(
        "    UNIQUE (conversation_id, seq)\n",
        "    UNIQUE (conversation_id, seq),\n    UNIQUE (conversation_id, dedupe_key)\n",
    )
    assert "dedupe_key TEXT NOT NULL" in tables and "UNIQUE (conversation_id, dedupe_key)" in tables
    conn = sqlite3.connect(path)
    conn.executescript(
        tables + store_module._FTS + "INSERT INTO meta VALUES ('schema_version', '1');"
        "INSERT INTO conversations VALUES (1, 'old', 'openai', 0, 0);"
        "INSERT INTO messages (id, conversation_id, seq, role, content, text, tokens,"
        " content_hash, dedupe_key, created_at) VALUES (1, 1, 0, 'user',"
        ' \'{"content":"an archived walrus","role":"user"}\', \'an archived walrus\', 7,'
        " 'h0', '0:h0', 0);"
        "INSERT INTO messages_fts (rowid, text) VALUES (1, 'an archived walrus');"
    )
    conn.commit()
    conn.close()


def test_version_1_store_is_upgraded_and_still_takes_messages(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    _version_1_store(path)
    store = SqliteStore(path)
    try:
        with store.reading() as conn:
            assert conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone() == (str(SCHEMA_VERSION),)
            config = dict(conn.execute("SELECT k, v FROM messages_fts_config").fetchall())
        assert config["pgsz"] == FTS_PAGE_BYTES
        assert config["automerge"] == FTS_AUTOMERGE
        # Version 1 indexed its one message as it stored it.
        assert store.index_watermark() == 1
        assert store.unindexed_messages() == 0
        msgs = [
            {"role": "user", "content": "a fresh walrus"},
            {"role": "assistant", "content": "noted"},
        ]
        rows = [
            prepare(
                msgs, k, "openai", count=lambda m: 5, session_key="old", large_output_tokens=99
            )[0]
            for k in range(2)
        ]
        ids = store.append(1, rows)
        assert ids == [2, 3]
        with store.reading() as conn:
            keys = conn.execute("SELECT seq, dedupe_key FROM messages ORDER BY id").fetchall()
        # The version 1 column is still written, so its unique index keeps holding.
        assert keys == [
            (0, "0:h0"),
            (1, f"1:{rows[0].content_hash}"),
            (2, f"2:{rows[1].content_hash}"),
        ]
        assert [h.id for h in Searcher(store, 1).search("walrus")] == ["msg_2", "msg_1"]
        assert check_store(store) == []
    finally:
        store.close()
    # Opening the upgraded store again is a plain open of the current version.
    SqliteStore(path).close()


def _version_2_store(path: Path, texts: list[str]) -> None:
    """A store as schema version 2 wrote it: no ``fts_progress``, every message indexed in the
    transaction that stored it."""
    tables = store_module._TABLES.replace(
        "CREATE TABLE IF NOT EXISTS fts_progress"
        " (name TEXT PRIMARY KEY, indexed_upto INTEGER NOT NULL);\n",
        "",
    )
    assert "fts_progress" not in tables
    conn = sqlite3.connect(path)
    conn.executescript(
        tables
        + store_module._FTS
        + store_module._tune_fts_sql()
        + "INSERT INTO meta VALUES ('schema_version', '2');"
        "INSERT INTO conversations VALUES (1, 'old', 'openai', 0, 0);"
    )
    for k, text in enumerate(texts):
        conn.execute(
            "INSERT INTO messages (id, conversation_id, seq, role, content, text, tokens,"
            " content_hash, created_at) VALUES (?, 1, ?, 'user', ?, ?, 5, ?, 0)",
            (k + 1, k, f'{{"content":"{text}","role":"user"}}', text, f"h{k}"),
        )
        conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (k + 1, text))
    conn.commit()
    conn.close()


def test_version_2_store_gets_a_watermark_at_its_last_message(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    _version_2_store(path, ["an old otter", "another old otter", "a heron"])
    store = SqliteStore(path)
    try:
        with store.reading() as conn:
            assert conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone() == (str(SCHEMA_VERSION),)
            assert conn.execute("SELECT name, indexed_upto FROM fts_progress").fetchall() == [
                ("messages", 3)
            ]
        assert store.unindexed_messages() == 0
        # Already indexed: catching up adds nothing, so no message is in the index twice.
        assert store.catch_up_index() == 0
        msgs = [{"role": "user", "content": "a new otter"}]
        row = prepare(
            msgs, 0, "openai", count=lambda m: 5, session_key="old", large_output_tokens=99
        )[0]
        assert store.append(1, [row]) == [4]
        assert store.unindexed_messages() == 1
        hits = Searcher(store, 1).search("otter")
        assert [h.id for h in hits] == ["msg_4", "msg_2", "msg_1"]
        with store.reading() as conn:
            assert conn.execute("SELECT COUNT(*) FROM messages_fts_docsize").fetchone() == (4,)
        assert check_store(store) == []
    finally:
        store.close()
    reopened = SqliteStore(path)
    try:
        assert reopened.index_watermark() == 4
    finally:
        reopened.close()


def test_empty_version_2_store_starts_its_watermark_at_zero(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    _version_2_store(path, [])
    store = SqliteStore(path)
    try:
        assert store.index_watermark() == 0
        assert check_store(store) == []
    finally:
        store.close()


def test_version_3_store_only_changes_its_version_number(tmp_path: Path) -> None:
    # Layout 4 changed the PostgreSQL store only; a SQLite store of layout 3 is the same file.
    path = tmp_path / "lcm.db"
    store = SqliteStore(path)
    conv = store.conversation_id("s")
    msgs = [{"role": "user", "content": "a version three otter"}]
    row, _, _ = prepare(
        msgs, 0, "openai", count=lambda m: 5, session_key="s", large_output_tokens=99
    )
    store.append(conv, [row])
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    try:
        with store.reading() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert version.fetchone() == (str(SCHEMA_VERSION),)
        assert [h.id for h in Searcher(store, conv).search("otter")] == ["msg_1"]
        assert check_store(store) == []
    finally:
        store.close()


def test_new_store_has_no_dedupe_key_and_tuned_fts(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "lcm.db")
    try:
        with store.reading() as conn:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
            config = dict(conn.execute("SELECT k, v FROM outputs_fts_config").fetchall())
        assert "dedupe_key" not in columns
        assert config["pgsz"] == FTS_PAGE_BYTES
    finally:
        store.close()


def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(
        StoreError, match=r"schema version 9, this ctxengine-lcm reads 4 \(and upgrades 1, 2, 3\)"
    ):
        SqliteStore(path)
