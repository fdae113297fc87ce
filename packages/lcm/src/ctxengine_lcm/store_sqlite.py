"""The SQLite backend: one store file on local disk, the embedded default.

One file per configuration (``engines.lcm.db_path``), shared by every session. The file is
created owner-only (0600, its folder 0700) and opened in WAL mode with foreign keys on. Every
process on the host may use it; the session locks live in ``<store>.locks`` beside it (see
:mod:`ctxengine_lcm.locking`).

Full-text search uses FTS5 external-content tables, never written by triggers (an FTS5 insert
inside a trigger flushes the index once per row, which makes ingest three times slower):

- summaries and stored outputs are few and are indexed in the transaction that stores them;
- messages are many, and indexing them was most of what ingest cost, so ingest commits only the
  rows and :meth:`SqliteStore.catch_up_index` indexes them later in large batches.
  ``fts_progress`` records the highest message id already in the index (the *watermark*); each
  batch writes its index entries and the new watermark in one transaction, so an interrupted
  catch-up leaves a consistent watermark and running it again indexes nothing twice. Full-text
  search, the end of every compaction and ``doctor`` catch up first; regex and literal search
  read the table and see every committed message at once. (Message ids are allocated under the
  write lock, so they are committed in increasing order and a watermark cannot skip one.)

Where the SQLite build has no FTS5 the store still works and search falls back to ``LIKE``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from ctxengine_lcm.locking import session_lock
from ctxengine_lcm.store import (
    IMMUTABLE_TABLES,
    MESSAGE_COLUMNS,
    SCHEMA_VERSION,
    Connection,
    Cursor,
    Dialect,
    Store,
    StoreError,
    version_problem,
)

UPGRADABLE = ("1", "2", "3")
"""Schema versions this code upgrades on open."""

CATCH_UP_BATCH = 20_000
"""Messages indexed per catch-up transaction: large enough that FTS5 writes few, big segments,
small enough that one transaction holds the write lock for well under a second."""

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fts_progress (name TEXT PRIMARY KEY, indexed_upto INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    format TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    text TEXT NOT NULL,
    tool_calls TEXT,
    tool_results TEXT,
    tokens INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0,
    rendered TEXT,
    rendered_hash TEXT,
    rendered_tokens INTEGER,
    created_at REAL NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE TABLE IF NOT EXISTS summaries (
    id TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    depth INTEGER NOT NULL CHECK (depth >= 0),
    kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
    mode TEXT NOT NULL CHECK (mode IN ('normal', 'aggressive', 'deterministic')),
    content TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    source_tokens INTEGER NOT NULL,
    earliest_at REAL,
    latest_at REAL,
    first_message_id INTEGER REFERENCES messages(id),
    last_message_id INTEGER REFERENCES messages(id),
    descendant_messages INTEGER NOT NULL,
    descendant_summaries INTEGER NOT NULL,
    provider TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS summary_links (
    summary_id TEXT NOT NULL REFERENCES summaries(id),
    ordinal INTEGER NOT NULL,
    message_id INTEGER REFERENCES messages(id),
    child_id TEXT REFERENCES summaries(id),
    CHECK ((message_id IS NULL) <> (child_id IS NULL)),
    PRIMARY KEY (summary_id, ordinal)
);
CREATE INDEX IF NOT EXISTS links_by_message ON summary_links (message_id);
CREATE INDEX IF NOT EXISTS links_by_child ON summary_links (child_id);
CREATE TABLE IF NOT EXISTS context_items (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    ordinal INTEGER NOT NULL,
    message_id INTEGER REFERENCES messages(id),
    summary_id TEXT REFERENCES summaries(id),
    CHECK ((message_id IS NULL) <> (summary_id IS NULL)),
    PRIMARY KEY (conversation_id, ordinal)
);
CREATE TABLE IF NOT EXISTS outputs (
    id TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    message_id INTEGER NOT NULL REFERENCES messages(id),
    call_id TEXT,
    tool_name TEXT,
    content TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    description TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outputs_by_message ON outputs (message_id);
CREATE TABLE IF NOT EXISTS rendered_blocks (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    hash TEXT NOT NULL,
    hashes TEXT NOT NULL,
    items TEXT NOT NULL,
    PRIMARY KEY (conversation_id, hash)
);
"""


_FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    text, content='messages', content_rowid='id');
CREATE VIRTUAL TABLE IF NOT EXISTS summaries_fts USING fts5(
    content, content='summaries', content_rowid='rowid');
CREATE VIRTUAL TABLE IF NOT EXISTS outputs_fts USING fts5(
    content, content='outputs', content_rowid='rowid');
"""

FTS_TABLES = {"messages": "messages_fts", "summaries": "summaries_fts", "outputs": "outputs_fts"}

FTS_PAGE_BYTES = 16000
"""FTS5 ``pgsz``: index leaves that fill a 16 KiB database page (default 4050), so a segment
is a quarter as many rows to write and to merge."""
FTS_AUTOMERGE = 16
"""FTS5 ``automerge``: segments merged at once (default 4). Every commit writes a new segment;
merging 16 at a time rewrites each posting about half as often, for a few more segments to
read per query (still well under a millisecond at 100,000 messages)."""


def _tune_fts_sql() -> str:
    """Statements that set the FTS5 options above (kept in each index's ``_config`` table)."""
    return "".join(
        f"INSERT INTO {fts} ({fts}, rank) VALUES ('pgsz', {FTS_PAGE_BYTES});"
        f"INSERT INTO {fts} ({fts}, rank) VALUES ('automerge', {FTS_AUTOMERGE});"
        for fts in FTS_TABLES.values()
    )


def fts5_available() -> bool:
    """Whether this Python's SQLite was built with FTS5."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return True


def _secure_file(path: Path) -> None:
    """Create ``path`` (and its folder) owner-only before SQLite opens it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    # SQLite gives the -wal and -shm files the main file's permissions.
    path.chmod(0o600)


class SqliteStore(Store):
    """One connection to an lcm store file. Thread-safe (calls are serialised by a lock).

    :param fts: force full-text search on or off (``None`` = on when SQLite has FTS5); a store
        created without FTS stays without it.
    """

    dialect: ClassVar[Dialect] = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, fts: bool | None = None) -> None:
        # Resolved, so two spellings of one file share its session locks (see locking).
        self.path = Path(path).resolve()
        self.location = str(self.path)
        try:
            _secure_file(self.path)
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the lcm store {str(self.path)!r}: {exc}") from exc
        self._lock = threading.RLock()
        conn = self._conn
        # Rows hold a message twice (JSON and searchable text); big pages keep most of them off
        # overflow chains. Only takes effect on a new file, before WAL mode is set.
        conn.execute("PRAGMA page_size=16384")
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives a killed process; only a power
        # loss may roll back the last commits.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        try:
            self.fts = self._create_schema(fts)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{str(self.path)!r} is not a usable lcm store: {exc}") from exc

    # -- schema ------------------------------------------------------------------------------

    def _create_schema(self, fts: bool | None) -> bool:
        conn = self._conn
        with self._lock:
            existing = self._table_names()
            fresh = "messages" not in existing
            if not fresh:
                version = conn.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'"
                ).fetchone()
                if version is not None and version[0] == "1":
                    self._upgrade_from_1()
                    self._upgrade_from_2()
                elif version is not None and version[0] == "2":
                    self._upgrade_from_2()
                elif version is not None and version[0] == "3":
                    self._upgrade_from_3()
                elif version is None or version[0] != str(SCHEMA_VERSION):
                    raise sqlite3.DatabaseError(
                        version_problem(version[0] if version else None, UPGRADABLE)
                    )
                self._finish_open()
                return "messages_fts" in existing
            use_fts = fts5_available() if fts is None else fts
            guards = "".join(
                f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'lcm store: {table} are immutable'); END;"
                f"CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'lcm store: {table} are append-only'); END;"
                for table in IMMUTABLE_TABLES
            )
            # executescript commits whatever is pending, so the schema is its own script,
            # wrapped in one transaction (two processes creating it at once is harmless).
            conn.executescript(
                "BEGIN IMMEDIATE;"
                + _TABLES
                + guards
                + (_FTS + _tune_fts_sql() if use_fts else "")
                + "INSERT OR IGNORE INTO fts_progress (name, indexed_upto) VALUES ('messages', 0);"
                + "INSERT OR REPLACE INTO meta (key, value) VALUES "
                + f"('schema_version', '{SCHEMA_VERSION}');"
                + "COMMIT;"
            )
            self._finish_open()
            return "messages_fts" in self._table_names()

    def _table_names(self) -> set[str]:
        rows = self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {row[0] for row in rows}

    def _upgrade_from_1(self) -> None:
        """Version 1 -> 2 in one transaction: tune the FTS indexes (new segments use the new
        page size; existing ones are merged as usual). ``dedupe_key`` stays in the table."""
        fts = "messages_fts" in self._table_names()
        self._conn.executescript(
            "BEGIN IMMEDIATE;"
            + (_tune_fts_sql() if fts else "")
            + "UPDATE meta SET value = '2' WHERE key = 'schema_version' AND value = '1';"
            + "COMMIT;"
        )

    def _upgrade_from_2(self) -> None:
        """Version 2 -> 3 (and so the current version) in one transaction: add the
        ``fts_progress`` watermark. Version 2 indexed each message as it stored it, so
        everything up to the highest id is indexed. (Two processes upgrading at once is
        harmless: the second finds the current version and the row.)"""
        self._conn.executescript(
            "BEGIN IMMEDIATE;"
            "CREATE TABLE IF NOT EXISTS fts_progress"
            " (name TEXT PRIMARY KEY, indexed_upto INTEGER NOT NULL);"
            "INSERT OR IGNORE INTO fts_progress (name, indexed_upto)"
            " SELECT 'messages', COALESCE(MAX(id), 0) FROM messages;"
            f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'"
            " AND value = '2';"
            "COMMIT;"
        )

    def _upgrade_from_3(self) -> None:
        """Version 3 -> 4: only PostgreSQL's layout changed; the number follows."""
        self._conn.executescript(
            "BEGIN IMMEDIATE;"
            f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'"
            " AND value = '3';"
            "COMMIT;"
        )

    def _finish_open(self) -> None:
        """Prepare the message INSERT for this file's layout (version 1 has ``dedupe_key``)."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(messages)")}
        self._dedupe_key = "dedupe_key" in columns
        names = list(MESSAGE_COLUMNS) + (["dedupe_key"] if self._dedupe_key else [])
        self._insert_messages = (
            f"INSERT INTO messages ({', '.join(names)}) VALUES ({','.join('?' * len(names))})"
        )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): all of it commits or none of it."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads, under the store's lock."""
        with self._lock:
            yield self._conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def session_lock(self, session_id: str, *, wait: float = 0.0) -> Any:
        """The session's lock file record (see :func:`ctxengine_lcm.locking.session_lock`)."""
        return session_lock(self.path, session_id, wait=wait)

    # -- what the shared repository needs ----------------------------------------------------

    def _new_message_ids(self, conn: Connection, count: int) -> list[int]:
        # Under BEGIN IMMEDIATE no other writer runs, so MAX(id) + 1 is free and ids are
        # committed in increasing order (which the full-text watermark relies on).
        first = int(conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM messages").fetchone()[0])
        return list(range(first, first + count))

    def _write_messages(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        if self._dedupe_key:  # version 1 layout: (seq, content hash) as its unique key
            rows = [(*row, f"{row[2]}:{row[9]}") for row in rows]
        conn.executemany(self._insert_messages, rows)

    def _index_row(self, conn: Connection, table: str, cursor: Cursor, text: str) -> None:
        if self.fts and table != "messages":  # messages wait for catch_up_index
            rowid = getattr(cursor, "lastrowid", None)
            if rowid is None:
                raise RuntimeError(f"lcm store: the new {table} row has no rowid to index")
            conn.execute(
                f"INSERT INTO {FTS_TABLES[table]} (rowid, content) VALUES (?, ?)", (rowid, text)
            )

    def integrity_problems(self) -> list[str]:
        """SQLite's ``integrity_check`` and ``foreign_key_check``; each full-text index matches
        its table (FTS5 ``integrity-check`` and one entry per row) and the watermark is the
        highest message id."""
        problems: list[str] = []
        with self.reading() as conn:
            result = conn.execute("PRAGMA integrity_check").fetchall()
            if [r[0] for r in result] != ["ok"]:
                problems += [f"sqlite integrity_check: {r[0]}" for r in result]
            for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check").fetchall():
                problems.append(f"{table} row {rowid} refers to a missing row of {parent}")
            if self.fts:
                problems += _check_fts(conn)
        return problems

    # -- deferred message indexing -----------------------------------------------------------

    def index_watermark(self) -> int:
        """The highest message id already in the full-text index (``fts_progress``).

        :raises StoreError: the store has full-text search but no watermark row.
        """
        with self.reading() as conn:
            return _watermark(conn, self.path)

    def unindexed_messages(self) -> int:
        """How many stored messages are not in the full-text index yet (0 without FTS)."""
        if not self.fts:
            return 0
        with self.reading() as conn:
            upto = _watermark(conn, self.path)
            return int(
                conn.execute("SELECT COUNT(*) FROM messages WHERE id > ?", (upto,)).fetchone()[0]
            )

    def catch_up_index(
        self, *, batch_size: int = CATCH_UP_BATCH, conversation_id: int | None = None
    ) -> int:
        """Add every message above the watermark to the full-text index; returns how many
        (every conversation's: ``conversation_id`` makes no difference on SQLite).

        One transaction per batch of ``batch_size`` messages holds both the index entries and
        the new watermark, so a crash between batches loses only the unfinished batch and
        running this again continues from the last committed one without indexing anything
        twice. Cheap when nothing is pending (two indexed lookups, no write transaction). A
        no-op without FTS.

        :raises ValueError: ``batch_size`` < 1.
        :raises StoreError: the index or the watermark is damaged.
        """
        del conversation_id
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not self.fts:
            return 0
        try:
            return self._catch_up(batch_size)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot index the messages of {self.location!r}: {exc}") from exc

    @property
    def deferred_index(self) -> bool:
        return self.fts

    def _catch_up(self, batch_size: int) -> int:
        with self.reading() as conn:
            upto = _watermark(conn, self.path)
            newest = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
        if newest <= upto:
            return 0
        indexed = 0
        while True:
            with self.transaction() as conn:
                # Read again under the write lock: another process may have caught up meanwhile.
                upto = _watermark(conn, self.path)
                rows = conn.execute(
                    "SELECT id, text FROM messages WHERE id > ? ORDER BY id LIMIT ?",
                    (upto, batch_size),
                ).fetchall()
                if rows:
                    conn.executemany("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", rows)
                    conn.execute(
                        "UPDATE fts_progress SET indexed_upto = ? WHERE name = 'messages'",
                        (rows[-1][0],),
                    )
            indexed += len(rows)
            if len(rows) < batch_size:
                return indexed


def _watermark(conn: sqlite3.Connection, path: Path) -> int:
    row = conn.execute("SELECT indexed_upto FROM fts_progress WHERE name = 'messages'").fetchone()
    if row is None:
        raise StoreError(
            f"the lcm store {str(path)!r} has no full-text watermark (fts_progress row "
            "'messages'); it was damaged outside ctxengine-lcm"
        )
    return int(row[0])


def _check_fts(conn: sqlite3.Connection) -> list[str]:
    problems: list[str] = []
    for table, fts in FTS_TABLES.items():
        try:
            conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as exc:
            problems.append(f"full-text index {fts} does not match table {table}: {exc}")
        rows = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        indexed = conn.execute(f"SELECT COUNT(*) FROM {fts}_docsize").fetchone()[0]
        if rows != indexed:
            problems.append(f"full-text index {fts} holds {indexed} rows, table {table} {rows}")
    row = conn.execute("SELECT indexed_upto FROM fts_progress WHERE name = 'messages'").fetchone()
    newest = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
    if row is None:
        problems.append("the full-text watermark of messages (fts_progress) is missing")
    elif row[0] != newest:
        problems.append(
            f"the full-text watermark of messages is {row[0]}, the highest message id {newest}"
        )
    return problems
