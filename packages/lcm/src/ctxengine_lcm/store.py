"""The immutable SQLite store: messages, summaries, their lineage, the active context, outputs.

One file per configuration (``engines.lcm.db_path``), shared by every session; each session is a
row of ``conversations`` keyed by its session id. The file is created owner-only (0600, its
folder 0700) and opened in WAL mode with foreign keys on.

What may change and what may not:

- ``messages``, ``summaries``, ``summary_links`` and ``outputs`` are append-only: triggers reject
  every UPDATE and DELETE, and foreign keys stop anything referenced from being removed;
- ``context_items`` (the active context, an ordered list of message and summary items) and
  ``rendered_blocks`` (how summaries were last shown to the model) are views that compaction
  replaces, each replacement in one transaction.

Full-text search uses FTS5 external-content tables, never written by triggers (an FTS5 insert
inside a trigger flushes the index once per row, which makes ingest three times slower):

- summaries and stored outputs are few and are indexed in the transaction that stores them;
- messages are many, and indexing them was most of what ingest cost, so ingest commits only the
  rows and :func:`catch_up_index` indexes them later in large batches. ``fts_progress`` records
  the highest message id already in the index (the *watermark*); each batch writes its index
  entries and the new watermark in one transaction, so an interrupted catch-up leaves a
  consistent watermark and running it again indexes nothing twice. Full-text search, the end of
  every compaction and ``doctor`` catch up first; regex and literal search read the table and
  see every committed message at once.

Where the SQLite build has no FTS5 the store still works and search falls back to ``LIKE``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import attrs

SCHEMA_VERSION = 3
"""Layout version. 2 dropped ``messages.dedupe_key`` (a second unique index that only repeated
``(conversation_id, seq)``) and tunes the FTS5 indexes; 3 indexes messages after ingest, behind
the ``fts_progress`` watermark. Older stores are upgraded in place on open: a version 1 store
keeps its ``dedupe_key`` column (still written); a version 1 or 2 store indexed every message
synchronously, so its watermark starts at its highest message id."""

UPGRADABLE = ("1", "2")
"""Schema versions this code upgrades on open."""

CATCH_UP_BATCH = 20_000
"""Messages indexed per catch-up transaction: large enough that FTS5 writes few, big segments,
small enough that one transaction holds the write lock for well under a second."""

ItemKind = Literal["message", "summary"]

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

_IMMUTABLE = ("messages", "summaries", "summary_links", "outputs")

_MESSAGE_COLUMNS = (
    "id",
    "conversation_id",
    "seq",
    "role",
    "content",
    "text",
    "tool_calls",
    "tool_results",
    "tokens",
    "content_hash",
    "pinned",
    "rendered",
    "rendered_hash",
    "rendered_tokens",
    "created_at",
)

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


class StoreError(RuntimeError):
    """The store file cannot be opened or is not an lcm store."""


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


@attrs.frozen
class NewMessage:
    """A message about to be stored (already serialised and hashed by the caller)."""

    role: str
    content: str
    text: str
    tokens: int
    content_hash: str
    tool_calls: str | None = None
    tool_results: str | None = None
    pinned: bool = False
    rendered: str | None = None
    rendered_hash: str | None = None
    rendered_tokens: int | None = None


MessageDigest = tuple[int, str, "str | None"]
"""A stored message's ``(seq, content hash, rendered hash)``."""


@attrs.frozen
class StoredMessage:
    """A stored message row (``content`` is the verbatim message as JSON)."""

    id: int
    seq: int
    role: str
    content: str
    text: str
    tokens: int
    content_hash: str
    rendered: str | None
    rendered_hash: str | None
    rendered_tokens: int | None
    created_at: float

    @property
    def context_tokens(self) -> int:
        """What the message costs in context (its described form when an output is aside)."""
        return self.rendered_tokens if self.rendered_tokens is not None else self.tokens

    def message(self) -> dict[str, Any]:
        """The original message dict."""
        value: dict[str, Any] = json.loads(self.content)
        return value


@attrs.frozen
class Summary:
    """A stored summary node."""

    id: str
    depth: int
    kind: str
    mode: str
    content: str
    tokens: int
    source_tokens: int
    earliest_at: float | None
    latest_at: float | None
    first_message_id: int | None
    last_message_id: int | None
    descendant_messages: int
    descendant_summaries: int
    provider: str | None
    created_at: float


@attrs.frozen
class NewSummary:
    """A summary about to be stored, with what it covers in order."""

    id: str
    depth: int
    kind: Literal["leaf", "condensed"]
    mode: Literal["normal", "aggressive", "deterministic"]
    content: str
    tokens: int
    source_tokens: int
    message_ids: tuple[int, ...] = ()
    child_ids: tuple[str, ...] = ()
    provider: str | None = None


@attrs.frozen
class Output:
    """A large tool output stored aside."""

    id: str
    message_id: int
    call_id: str | None
    tool_name: str | None
    content: str
    tokens: int
    description: str
    created_at: float


@attrs.frozen
class NewOutput:
    id: str
    call_id: str | None
    tool_name: str | None
    content: str
    tokens: int
    description: str


ContextItem = tuple[ItemKind, int | str]
"""``("message", message_id)`` or ``("summary", summary_id)``."""


def utf8_safe(text: str) -> str:
    """``text`` itself, or with each lone UTF-16 surrogate replaced by U+FFFD.

    SQLite stores UTF-8 and a lone surrogate (a cut emoji) has none; the searchable columns
    take this lossy form, while the message JSON keeps the exact text as a ``\\uXXXX`` escape.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def message_ref(message_id: int) -> str:
    """The id the agent sees for a stored message."""
    return f"msg_{message_id}"


def _secure_file(path: Path) -> None:
    """Create ``path`` (and its folder) owner-only before SQLite opens it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    # SQLite gives the -wal and -shm files the main file's permissions.
    path.chmod(0o600)


class Store:
    """One connection to an lcm store file. Thread-safe (calls are serialised by a lock).

    :param fts: force full-text search on or off (``None`` = on when SQLite has FTS5); a store
        created without FTS stays without it.
    """

    def __init__(self, path: str | os.PathLike[str], *, fts: bool | None = None) -> None:
        # Resolved, so two spellings of one file share its session locks (see locking).
        self.path = Path(path).resolve()
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
                elif version is None or version[0] != str(SCHEMA_VERSION):
                    raise sqlite3.DatabaseError(
                        f"schema version {version[0] if version else 'missing'}, "
                        f"this ctxengine-lcm reads {SCHEMA_VERSION} "
                        f"(and upgrades {', '.join(UPGRADABLE)})"
                    )
                self._finish_open()
                return "messages_fts" in existing
            use_fts = fts5_available() if fts is None else fts
            guards = "".join(
                f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'lcm store: {table} are immutable'); END;"
                f"CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'lcm store: {table} are append-only'); END;"
                for table in _IMMUTABLE
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
        """Version 2 -> 3 in one transaction: add the ``fts_progress`` watermark. Version 2
        indexed each message as it stored it, so everything up to the highest id is indexed.
        (Two processes upgrading at once is harmless: the second finds version 3 and the row.)"""
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

    def _finish_open(self) -> None:
        """Prepare the message INSERT for this file's layout (version 1 has ``dedupe_key``)."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(messages)")}
        self._dedupe_key = "dedupe_key" in columns
        names = list(_MESSAGE_COLUMNS) + (["dedupe_key"] if self._dedupe_key else [])
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

    # -- conversations ----------------------------------------------------------------------

    def conversation_id(self, session_id: str, fmt: str | None = None) -> int:
        """The conversation row for ``session_id``, created on first use."""
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id FROM conversations WHERE session_id = ?", (session_id,)
            ).fetchone()
        if row is not None:
            return int(row[0])
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO conversations (session_id, format, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (session_id, fmt, now, now),
            )
            row = conn.execute(
                "SELECT id FROM conversations WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(row[0])

    def find_conversation(self, session_id: str) -> int | None:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id FROM conversations WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else int(row[0])

    # -- messages ----------------------------------------------------------------------------

    def append(
        self,
        conversation_id: int,
        messages: Sequence[NewMessage],
        *,
        outputs: Sequence[tuple[int, NewOutput]] = (),
        context: Sequence[ContextItem | int] | None = None,
    ) -> list[int]:
        """Store ``messages`` after the conversation's last one, in one transaction.

        The messages are durable when this returns but not yet in the full-text index; see
        :func:`catch_up_index`. Outputs stored with them are indexed at once.

        :param outputs: ``(index into messages, output)`` pairs stored aside with them.
        :param context: when given, the new active context, where an ``int`` ``k`` stands for
            the ``k``-th message of ``messages`` (so one commit holds both).
        :returns: the new message ids, in order.
        """
        now = time.time()
        with self.transaction() as conn:
            first_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM messages").fetchone()[0]
            first_seq = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()[0]
            ids = list(range(first_id, first_id + len(messages)))
            rows: list[tuple[Any, ...]] = [
                (
                    ids[k],
                    conversation_id,
                    first_seq + k,
                    m.role,
                    m.content,
                    m.text,
                    m.tool_calls,
                    m.tool_results,
                    m.tokens,
                    m.content_hash,
                    int(m.pinned),
                    m.rendered,
                    m.rendered_hash,
                    m.rendered_tokens,
                    now,
                )
                for k, m in enumerate(messages)
            ]
            if self._dedupe_key:
                rows = [(*row, f"{row[2]}:{row[9]}") for row in rows]
            # Not indexed here: catch_up_index does that later, in far larger batches.
            conn.executemany(self._insert_messages, rows)
            for k, o in outputs:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO outputs (id, conversation_id, message_id, call_id,"
                    " tool_name, content, tokens, description, created_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        o.id,
                        conversation_id,
                        ids[k],
                        o.call_id,
                        o.tool_name,
                        utf8_safe(o.content),
                        o.tokens,
                        utf8_safe(o.description),
                        now,
                    ),
                )
                if cursor.rowcount == 1 and self.fts:
                    conn.execute(
                        "INSERT INTO outputs_fts (rowid, content) VALUES (?, ?)",
                        (cursor.lastrowid, utf8_safe(o.content)),
                    )
            if context is not None:
                resolved: list[ContextItem] = [
                    ("message", ids[c]) if isinstance(c, int) else c for c in context
                ]
                self._write_context(conn, conversation_id, resolved)
            conn.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id)
            )
        return ids

    def messages(
        self, conversation_id: int, ids: Sequence[int] | None = None
    ) -> list[StoredMessage]:
        """Stored messages of a conversation in storage order (all, or those in ``ids``)."""
        cols = (
            "id, seq, role, content, text, tokens, content_hash, rendered, rendered_hash,"
            " rendered_tokens, created_at"
        )
        with self.reading() as conn:
            if ids is None:
                rows = conn.execute(
                    f"SELECT {cols} FROM messages WHERE conversation_id = ? ORDER BY seq",
                    (conversation_id,),
                ).fetchall()
            else:
                rows = []
                wanted = list(ids)
                for start in range(0, len(wanted), 500):
                    part = wanted[start : start + 500]
                    marks = ",".join("?" * len(part))
                    rows.extend(
                        conn.execute(
                            f"SELECT {cols} FROM messages WHERE conversation_id = ? "
                            f"AND id IN ({marks})",
                            (conversation_id, *part),
                        ).fetchall()
                    )
                order = {mid: k for k, mid in enumerate(wanted)}
                rows.sort(key=lambda r: order[r[0]])
        return [StoredMessage(*row) for row in rows]

    def digests(self, conversation_id: int, ids: Sequence[int]) -> dict[int, MessageDigest]:
        """``(seq, content hash, rendered hash)`` of the unpinned messages in ``ids``, by id."""
        out: dict[int, MessageDigest] = {}
        wanted = list(ids)
        with self.reading() as conn:
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                marks = ",".join("?" * len(part))
                for mid, seq, digest, rendered in conn.execute(
                    "SELECT id, seq, content_hash, rendered_hash FROM messages"
                    f" WHERE conversation_id = ? AND pinned = 0 AND id IN ({marks})",
                    (conversation_id, *part),
                ):
                    out[int(mid)] = (int(seq), str(digest), rendered)
        return out

    def next_matching(self, conversation_id: int, after_seq: int, digest: str) -> int | None:
        """Id of the first unpinned message after ``after_seq`` hashed ``digest`` (either form)."""
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND seq > ? AND pinned = 0"
                " AND (content_hash = ? OR rendered_hash = ?) ORDER BY seq LIMIT 1",
                (conversation_id, after_seq, digest, digest),
            ).fetchone()
        return None if row is None else int(row[0])

    def message(self, message_id: int) -> tuple[int, StoredMessage] | None:
        """``(conversation id, message)`` for ``message_id``."""
        with self.reading() as conn:
            row = conn.execute(
                "SELECT conversation_id, id, seq, role, content, text, tokens, content_hash,"
                " rendered, rendered_hash, rendered_tokens, created_at FROM messages WHERE id = ?",
                (message_id,),
            ).fetchone()
        return None if row is None else (int(row[0]), StoredMessage(*row[1:]))

    def pinned_hashes(self, conversation_id: int) -> set[str]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT content_hash FROM messages WHERE conversation_id = ? AND pinned = 1",
                (conversation_id,),
            ).fetchall()
        return {r[0] for r in rows}

    def message_count(self, conversation_id: int | None = None) -> int:
        with self.reading() as conn:
            if conversation_id is None:
                return int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
            return int(
                conn.execute(
                    "SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (conversation_id,)
                ).fetchone()[0]
            )

    # -- summaries ---------------------------------------------------------------------------

    def add_summary(
        self, conversation_id: int, summary: NewSummary, context: Sequence[ContextItem]
    ) -> None:
        """Store ``summary`` with its ordered links and set the new active context, atomically."""
        now = time.time()
        with self.transaction() as conn:
            if summary.kind == "leaf":
                ids = list(summary.message_ids)
                marks = ",".join("?" * len(ids))
                first, last, earliest, latest = conn.execute(
                    f"SELECT MIN(id), MAX(id), MIN(created_at), MAX(created_at) FROM messages "
                    f"WHERE id IN ({marks})",
                    ids,
                ).fetchone()
                desc_messages, desc_summaries = len(ids), 0
            else:
                kids = list(summary.child_ids)
                marks = ",".join("?" * len(kids))
                row = conn.execute(
                    f"SELECT MIN(first_message_id), MAX(last_message_id), MIN(earliest_at),"
                    f" MAX(latest_at), SUM(descendant_messages), SUM(descendant_summaries) + ?"
                    f" FROM summaries WHERE id IN ({marks})",
                    (len(kids), *kids),
                ).fetchone()
                first, last, earliest, latest, desc_messages, desc_summaries = row
            cursor = conn.execute(
                "INSERT INTO summaries (id, conversation_id, depth, kind, mode, content, tokens,"
                " source_tokens, earliest_at, latest_at, first_message_id, last_message_id,"
                " descendant_messages, descendant_summaries, provider, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    summary.id,
                    conversation_id,
                    summary.depth,
                    summary.kind,
                    summary.mode,
                    utf8_safe(summary.content),
                    summary.tokens,
                    summary.source_tokens,
                    earliest,
                    latest,
                    first,
                    last,
                    desc_messages,
                    desc_summaries,
                    summary.provider,
                    now,
                ),
            )
            if self.fts:
                conn.execute(
                    "INSERT INTO summaries_fts (rowid, content) VALUES (?, ?)",
                    (cursor.lastrowid, utf8_safe(summary.content)),
                )
            links: list[tuple[str, int, int | None, str | None]] = [
                (summary.id, k, mid, None) for k, mid in enumerate(summary.message_ids)
            ]
            links += [(summary.id, k, None, cid) for k, cid in enumerate(summary.child_ids)]
            conn.executemany(
                "INSERT INTO summary_links (summary_id, ordinal, message_id, child_id)"
                " VALUES (?,?,?,?)",
                links,
            )
            self._write_context(conn, conversation_id, context)

    def summary(self, summary_id: str, conversation_id: int | None = None) -> Summary | None:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id, depth, kind, mode, content, tokens, source_tokens, earliest_at,"
                " latest_at, first_message_id, last_message_id, descendant_messages,"
                " descendant_summaries, provider, created_at, conversation_id FROM summaries"
                " WHERE id = ?",
                (summary_id,),
            ).fetchone()
        if row is None or (conversation_id is not None and row[-1] != conversation_id):
            return None
        return Summary(*row[:-1])

    def summaries(self, conversation_id: int) -> list[Summary]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT id, depth, kind, mode, content, tokens, source_tokens, earliest_at,"
                " latest_at, first_message_id, last_message_id, descendant_messages,"
                " descendant_summaries, provider, created_at FROM summaries"
                " WHERE conversation_id = ? ORDER BY rowid",
                (conversation_id,),
            ).fetchall()
        return [Summary(*row) for row in rows]

    def children(self, summary_id: str) -> list[ContextItem]:
        """What a summary covers, in order."""
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT message_id, child_id FROM summary_links WHERE summary_id = ?"
                " ORDER BY ordinal",
                (summary_id,),
            ).fetchall()
        return [("message", r[0]) if r[0] is not None else ("summary", r[1]) for r in rows]

    def parents(self, summary_or_message: ContextItem) -> list[str]:
        """Summaries that directly cover a message or a summary."""
        kind, ref = summary_or_message
        column = "message_id" if kind == "message" else "child_id"
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT summary_id FROM summary_links WHERE {column} = ?", (ref,)
            ).fetchall()
        return [r[0] for r in rows]

    def covered_message_ids(self, summary_id: str) -> list[int]:
        """Every original message under a summary, in conversation order."""
        out: list[int] = []
        stack: list[ContextItem] = [("summary", summary_id)]
        while stack:
            kind, ref = stack.pop()
            if kind == "message":
                out.append(int(ref))
            else:
                stack.extend(reversed(self.children(str(ref))))
        return out

    def covering_summaries(self, message_id: int) -> list[str]:
        """Every summary above a message, nearest first."""
        with self.reading() as conn:
            rows = conn.execute(
                "WITH RECURSIVE up(id, level) AS ("
                " SELECT summary_id, 0 FROM summary_links WHERE message_id = ?"
                " UNION SELECT l.summary_id, up.level + 1 FROM summary_links l"
                " JOIN up ON l.child_id = up.id)"
                " SELECT id FROM up ORDER BY level",
                (message_id,),
            ).fetchall()
        return [r[0] for r in rows]

    def ancestors_of_summary(self, summary_id: str) -> list[str]:
        with self.reading() as conn:
            rows = conn.execute(
                "WITH RECURSIVE up(id, level) AS ("
                " SELECT summary_id, 0 FROM summary_links WHERE child_id = ?"
                " UNION SELECT l.summary_id, up.level + 1 FROM summary_links l"
                " JOIN up ON l.child_id = up.id)"
                " SELECT id FROM up ORDER BY level",
                (summary_id,),
            ).fetchall()
        return [r[0] for r in rows]

    # -- active context ----------------------------------------------------------------------

    @staticmethod
    def _write_context(
        conn: sqlite3.Connection, conversation_id: int, items: Sequence[ContextItem]
    ) -> None:
        conn.execute("DELETE FROM context_items WHERE conversation_id = ?", (conversation_id,))
        conn.executemany(
            "INSERT INTO context_items (conversation_id, ordinal, message_id, summary_id)"
            " VALUES (?,?,?,?)",
            [
                (
                    conversation_id,
                    k,
                    ref if kind == "message" else None,
                    ref if kind == "summary" else None,
                )
                for k, (kind, ref) in enumerate(items)
            ],
        )

    def set_context(self, conversation_id: int, items: Sequence[ContextItem]) -> None:
        """Replace the active context in one transaction."""
        with self.transaction() as conn:
            self._write_context(conn, conversation_id, items)

    def context(self, conversation_id: int) -> list[ContextItem]:
        """The stored active context, in order."""
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT message_id, summary_id FROM context_items WHERE conversation_id = ?"
                " ORDER BY ordinal",
                (conversation_id,),
            ).fetchall()
        return [("message", r[0]) if r[0] is not None else ("summary", r[1]) for r in rows]

    # -- rendered blocks ---------------------------------------------------------------------

    def add_block(
        self, conversation_id: int, hashes: Sequence[str], items: Sequence[ContextItem]
    ) -> None:
        """Remember that the messages hashed ``hashes`` stand for the context ``items``."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO rendered_blocks (conversation_id, hash, hashes, items)"
                " VALUES (?,?,?,?)",
                (conversation_id, hashes[0], json.dumps(list(hashes)), json.dumps(list(items))),
            )

    def block(
        self, conversation_id: int, first_hash: str
    ) -> tuple[list[str], list[ContextItem]] | None:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT hashes, items FROM rendered_blocks WHERE conversation_id = ? AND hash = ?",
                (conversation_id, first_hash),
            ).fetchone()
        if row is None:
            return None
        items = [(str(kind), ref) for kind, ref in json.loads(row[1])]
        return json.loads(row[0]), items  # type: ignore[return-value]

    # -- outputs -----------------------------------------------------------------------------

    def output(self, output_id: str, conversation_id: int | None = None) -> Output | None:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id, message_id, call_id, tool_name, content, tokens, description,"
                " created_at, conversation_id FROM outputs WHERE id = ?",
                (output_id,),
            ).fetchone()
        if row is None or (conversation_id is not None and row[-1] != conversation_id):
            return None
        return Output(*row[:-1])

    def outputs_of(self, message_id: int) -> list[str]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT id FROM outputs WHERE message_id = ? ORDER BY rowid", (message_id,)
            ).fetchall()
        return [r[0] for r in rows]

    # -- statistics --------------------------------------------------------------------------

    def stats(self, conversation_id: int | None = None) -> dict[str, Any]:
        """Counts for ``ctxengine lcm status``."""
        where = "" if conversation_id is None else " WHERE conversation_id = ?"
        args: tuple[Any, ...] = () if conversation_id is None else (conversation_id,)
        with self.reading() as conn:
            out: dict[str, Any] = {
                "conversations": conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0],
                "messages": conn.execute(f"SELECT COUNT(*) FROM messages{where}", args).fetchone()[
                    0
                ],
                "message_tokens": conn.execute(
                    f"SELECT COALESCE(SUM(tokens), 0) FROM messages{where}", args
                ).fetchone()[0],
                "outputs": conn.execute(f"SELECT COUNT(*) FROM outputs{where}", args).fetchone()[0],
                "context_items": conn.execute(
                    f"SELECT COUNT(*) FROM context_items{where}", args
                ).fetchone()[0],
            }
            out["summaries_by_depth"] = {
                int(depth): int(count)
                for depth, count in conn.execute(
                    f"SELECT depth, COUNT(*) FROM summaries{where} GROUP BY depth ORDER BY depth",
                    args,
                )
            }
        out["fts"] = self.fts
        out["fts_pending"] = self.unindexed_messages() if self.fts else 0
        return out

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

    def conversations(self) -> list[tuple[int, str, int]]:
        """``(id, session id, message count)`` of every conversation."""
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT c.id, c.session_id, (SELECT COUNT(*) FROM messages m"
                " WHERE m.conversation_id = c.id) FROM conversations c ORDER BY c.id"
            ).fetchall()
        return [(int(a), str(b), int(c)) for a, b, c in rows]


def _watermark(conn: sqlite3.Connection, path: Path) -> int:
    row = conn.execute("SELECT indexed_upto FROM fts_progress WHERE name = 'messages'").fetchone()
    if row is None:
        raise StoreError(
            f"the lcm store {str(path)!r} has no full-text watermark (fts_progress row "
            "'messages'); it was damaged outside ctxengine-lcm"
        )
    return int(row[0])


def catch_up_index(store: Store, *, batch_size: int = CATCH_UP_BATCH) -> int:
    """Add every message above the watermark to the full-text index; returns how many.

    One transaction per batch of ``batch_size`` messages holds both the index entries and the
    new watermark, so a crash between batches loses only the unfinished batch and running this
    again continues from the last committed one without indexing anything twice. Cheap when
    nothing is pending (two indexed lookups, no write transaction). A no-op without FTS.

    :raises ValueError: ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not store.fts:
        return 0
    with store.reading() as conn:
        upto = _watermark(conn, store.path)
        newest = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
    if newest <= upto:
        return 0
    indexed = 0
    while True:
        with store.transaction() as conn:
            # Read again under the write lock: another process may have caught up meanwhile.
            upto = _watermark(conn, store.path)
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
