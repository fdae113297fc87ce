"""The immutable store: messages, summaries, their lineage, the active context, outputs.

One repository interface (:class:`Store`) with two backends:

- :class:`~ctxengine_lcm.store_sqlite.SqliteStore`, one SQLite file on local disk (the embedded
  default, ``engines.lcm.db_path``);
- :class:`~ctxengine_lcm.store_postgres.PostgresStore`, one PostgreSQL database shared by any
  number of worker processes on any number of hosts (``engines.lcm.database_url``).

:func:`ctxengine_lcm.backends.open_store` picks the backend from what it is given (a
``postgresql://`` URL or a path).
Every session is a row of ``conversations`` keyed by its session id.

What may change and what may not (both backends):

- ``messages``, ``summaries``, ``summary_links`` and ``outputs`` are append-only: the database
  rejects every UPDATE and DELETE (triggers), and foreign keys stop anything referenced from being
  removed;
- ``context_items`` (the active context, an ordered list of message and summary items) and
  ``rendered_blocks`` (how summaries were last shown to the model) are views that compaction
  replaces, each replacement in one transaction.

The repository logic lives here once, written in the SQL both databases speak (``?``
placeholders; the PostgreSQL connection translates them). A backend supplies the connection
(:meth:`Store.reading`, :meth:`Store.transaction`), the schema, the per-session compaction lock,
how message ids are allocated, how rows reach the full-text index, and what text its columns
accept.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar, Literal, Protocol

import attrs

SCHEMA_VERSION = 4
"""Layout version, the same number on both backends (each has its own physical form of it).
2 dropped ``messages.dedupe_key`` and tuned the SQLite FTS5 indexes; 3 indexes SQLite messages
after ingest, behind the ``fts_progress`` watermark; 4 does the same on PostgreSQL (the
``message_search`` table and its ``index_queue``; nothing changes on SQLite). Older stores are
upgraded in place on open (see :mod:`ctxengine_lcm.store_sqlite`,
:mod:`ctxengine_lcm.store_postgres`); PostgreSQL stores started at 3."""

ItemKind = Literal["message", "summary"]

Dialect = Literal["sqlite", "postgresql"]


def version_problem(found: str | None, upgradable: Sequence[str]) -> str:
    """Why a store of layout version ``found`` (``None``: no version recorded) is refused."""
    upgrades = f" (and upgrades {', '.join(upgradable)})" if upgradable else ""
    return (
        f"schema version {found if found is not None else 'missing'}, "
        f"this ctxengine-lcm reads {SCHEMA_VERSION}{upgrades}"
    )


class StoreError(RuntimeError):
    """The store cannot be opened, is not an lcm store, or its backend is not installed."""


class QueryTimeout(StoreError):
    """A bounded query ran past its time limit and was cancelled by the database."""


class QueryRejected(StoreError):
    """The database refused a query built from caller input (e.g. an invalid regex)."""


class Cursor(Protocol):
    """What the shared code reads from a statement's result (``sqlite3`` and psycopg agree)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection as the shared code uses it: ``?`` placeholders, sqlite3-style calls."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


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

MESSAGE_COLUMNS = (
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
"""The ``messages`` columns every layout has, in the order :meth:`Store.append` writes them."""

IMMUTABLE_TABLES = ("messages", "summaries", "summary_links", "outputs")

SEARCHABLE = {"messages": "text", "summaries": "content", "outputs": "content"}
"""The searchable text column of each table that ``lcm_grep`` reads."""

_SUMMARY_COLUMNS = (
    "id, depth, kind, mode, content, tokens, source_tokens, earliest_at, latest_at,"
    " first_message_id, last_message_id, descendant_messages, descendant_summaries, provider,"
    " created_at"
)
_STORED_MESSAGE_COLUMNS = (
    "id, seq, role, content, text, tokens, content_hash, rendered, rendered_hash,"
    " rendered_tokens, created_at"
)
_MAX_DEPTH = 1_000
"""Deepest summary chain a query follows (real ones are a handful deep)."""
_IN_CHUNK = 500
"""Ids per ``IN (...)`` list (SQLite limits the number of parameters of one statement)."""


def utf8_safe(text: str) -> str:
    """``text`` itself, or with each lone UTF-16 surrogate replaced by U+FFFD.

    Both databases store UTF-8 and a lone surrogate (a cut emoji) has none; the searchable
    columns take this lossy form, while the message JSON keeps the exact text as a ``\\uXXXX``
    escape.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def message_ref(message_id: int) -> str:
    """The id the agent sees for a stored message."""
    return f"msg_{message_id}"


class Store(ABC):
    """The repository: every read and write of the lossless engine goes through its methods.

    Safe to share between threads. Each method is one statement or one transaction; what a
    method returns is committed (or, for reads, was committed when it ran).

    :ivar dialect: which backend this is.
    :ivar location: where the store lives, fit to show (a path, or a URL without its password).
    :ivar fts: whether full-text search has an index (always on PostgreSQL; on SQLite when it
        was built with FTS5).
    """

    dialect: ClassVar[Dialect]
    location: str
    fts: bool

    # -- what a backend supplies -------------------------------------------------------------

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Connection]:
        """One write transaction: all of it commits or none of it."""

    @abstractmethod
    def reading(self) -> AbstractContextManager[Connection]:
        """A connection for reads (each statement sees what was committed when it started)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store's connections; the object is unusable afterwards."""

    @abstractmethod
    def session_lock(self, session_id: str, *, wait: float = 0.0) -> AbstractContextManager[bool]:
        """Yields ``True`` while holding the session's compaction lock, ``False`` if another
        thread, process or host still holds it after ``wait`` seconds (0 = do not wait).

        The lock is released when the block ends, and by the database or the OS when the
        holder dies, so a crash never leaves it held.
        """

    @abstractmethod
    def _new_message_ids(self, conn: Connection, count: int) -> list[int]:
        """``count`` fresh, increasing message ids, inside the caller's transaction."""

    @abstractmethod
    def _write_messages(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """Insert message rows (values in :data:`MESSAGE_COLUMNS` order) inside the caller's
        transaction."""

    @abstractmethod
    def integrity_problems(self) -> list[str]:
        """What the database itself says is damaged (indexes, constraints, guards), one
        sentence each; the doctor adds the checks of lineage and contexts."""

    def one_connection(self) -> AbstractContextManager[None]:
        """Run this thread's calls in the block on one connection (a tool call makes a dozen;
        on PostgreSQL each would otherwise take one from the pool). No-op on SQLite."""
        return nullcontext()

    def health_notes(self) -> list[str]:
        """Facts about the database worth a doctor's note that are not damage."""
        return []

    def _lock_conversation(self, conn: Connection, conversation_id: int) -> None:
        """Serialise writers of one conversation until the transaction ends (SQLite's write
        transactions already exclude each other)."""
        del conn, conversation_id

    def _queue_for_index(self, conn: Connection, conversation_id: int, ids: list[int]) -> None:
        """Note, inside the ingest transaction, that the messages ``ids`` wait for
        :meth:`catch_up_index` (where the backend queues them rather than using a watermark)."""
        del conn, conversation_id, ids

    def _index_row(self, conn: Connection, table: str, cursor: Cursor, text: str) -> None:
        """Add the row ``cursor`` just inserted into ``table`` to its full-text index, where
        the backend does not index at write time by itself."""
        del conn, table, cursor, text

    def safe_text(self, text: str) -> str:
        """``text`` in a form the backend's text columns accept (see :func:`utf8_safe`)."""
        return utf8_safe(text)

    @property
    def deferred_index(self) -> bool:
        """Whether ingest leaves messages for :meth:`catch_up_index` (PostgreSQL, and SQLite
        with FTS5)."""
        return False

    def catch_up_index(
        self, *, batch_size: int = 20_000, conversation_id: int | None = None
    ) -> int:
        """Index messages that ingest left out of the search indexes; returns how many.

        When it returns, every message committed before the call is searchable: those of
        ``conversation_id`` at least (a backend may index more), or all of them (``None``).
        A store without deferred indexing has nothing to catch up.

        :raises ValueError: ``batch_size`` < 1.
        """
        del conversation_id
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return 0

    def unindexed_messages(self) -> int:
        """How many stored messages are not in the full-text index yet."""
        return 0

    # -- conversations -----------------------------------------------------------------------

    def conversation_id(self, session_id: str, fmt: str | None = None) -> int:
        """The conversation row for ``session_id``, created on first use."""
        found = self.find_conversation(session_id)
        if found is not None:
            return found
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO conversations (session_id, format, created_at, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING",
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

    def conversations(self) -> list[tuple[int, str, int]]:
        """``(id, session id, message count)`` of every conversation."""
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT c.id, c.session_id, (SELECT COUNT(*) FROM messages m"
                " WHERE m.conversation_id = c.id) FROM conversations c ORDER BY c.id"
            ).fetchall()
        return [(int(a), str(b), int(c)) for a, b, c in rows]

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

        The messages are durable when this returns. They reach the search indexes later (see
        :meth:`catch_up_index`); outputs stored with them are indexed at once.

        :param outputs: ``(index into messages, output)`` pairs stored aside with them.
        :param context: when given, the new active context, where an ``int`` ``k`` stands for
            the ``k``-th message of ``messages`` (so one commit holds both).
        :returns: the new message ids, in order.
        """
        now = time.time()
        safe = self.safe_text
        with self.transaction() as conn:
            self._lock_conversation(conn, conversation_id)
            ids = self._new_message_ids(conn, len(messages))
            first_seq = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()[0]
            rows: list[tuple[Any, ...]] = [
                (
                    ids[k],
                    conversation_id,
                    first_seq + k,
                    m.role,
                    m.content,
                    safe(m.text),
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
            if rows:
                self._write_messages(conn, rows)
                self._queue_for_index(conn, conversation_id, ids)
            for k, o in outputs:
                content = safe(o.content)
                cursor = conn.execute(
                    "INSERT INTO outputs (id, conversation_id, message_id, call_id,"
                    " tool_name, content, tokens, description, created_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING",
                    (
                        o.id,
                        conversation_id,
                        ids[k],
                        None if o.call_id is None else safe(o.call_id),
                        None if o.tool_name is None else safe(o.tool_name),
                        content,
                        o.tokens,
                        safe(o.description),
                        now,
                    ),
                )
                if cursor.rowcount == 1:
                    self._index_row(conn, "outputs", cursor, content)
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
        cols = _STORED_MESSAGE_COLUMNS
        with self.reading() as conn:
            if ids is None:
                rows = conn.execute(
                    f"SELECT {cols} FROM messages WHERE conversation_id = ? ORDER BY seq",
                    (conversation_id,),
                ).fetchall()
            else:
                rows = []
                wanted = list(ids)
                for part in _chunks(wanted):
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
        with self.reading() as conn:
            for part in _chunks(list(ids)):
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
                f"SELECT conversation_id, {_STORED_MESSAGE_COLUMNS} FROM messages WHERE id = ?",
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
        content = self.safe_text(summary.content)
        with self.transaction() as conn:
            self._lock_conversation(conn, conversation_id)
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
                    content,
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
            self._index_row(conn, "summaries", cursor, content)
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
                f"SELECT {_SUMMARY_COLUMNS}, conversation_id FROM summaries WHERE id = ?",
                (summary_id,),
            ).fetchone()
        if row is None or (conversation_id is not None and row[-1] != conversation_id):
            return None
        return Summary(*row[:-1])

    def summaries(self, conversation_id: int) -> list[Summary]:
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ?"
                " ORDER BY rowid",
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
        """Every original message under a summary, in conversation order (which is id order:
        a conversation's messages get increasing ids, and a summary covers a run of them)."""
        with self.reading() as conn:
            rows = conn.execute(
                "WITH RECURSIVE down(message_id, child_id) AS ("
                " SELECT message_id, child_id FROM summary_links WHERE summary_id = ?"
                " UNION SELECT l.message_id, l.child_id FROM summary_links l"
                " JOIN down d ON l.summary_id = d.child_id)"
                " SELECT message_id FROM down WHERE message_id IS NOT NULL ORDER BY message_id",
                (summary_id,),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def covering_summaries(self, message_id: int) -> list[str]:
        """Every summary above a message, nearest first."""
        return self.summaries_above("message", [message_id]).get(message_id, [])

    def ancestors_of_summary(self, summary_id: str) -> list[str]:
        """Every summary above a summary, nearest first."""
        return self.summaries_above("summary", [summary_id]).get(summary_id, [])

    def summaries_above(self, kind: ItemKind, refs: Sequence[int | str]) -> dict[Any, list[str]]:
        """For each message (or summary) of ``refs`` that something covers, every summary
        above it, nearest first; one query for all of them."""
        column = "message_id" if kind == "message" else "child_id"
        out: dict[Any, list[str]] = {}
        with self.reading() as conn:
            for start in range(0, len(refs), _IN_CHUNK):
                part = list(refs[start : start + _IN_CHUNK])
                marks = ",".join("?" * len(part))
                for origin, summary_id in conn.execute(
                    "WITH RECURSIVE up(origin, id, level) AS ("
                    f" SELECT {column}, summary_id, 0 FROM summary_links"
                    f" WHERE {column} IN ({marks})"
                    " UNION SELECT up.origin, l.summary_id, up.level + 1 FROM summary_links l"
                    # (a bound on the depth, so a damaged store with a cycle still answers)
                    f" JOIN up ON l.child_id = up.id WHERE up.level < {_MAX_DEPTH})"
                    " SELECT origin, id FROM up ORDER BY origin, level, id",
                    part,
                ):
                    chain = out.setdefault(origin, [])
                    if summary_id not in chain:  # two paths to one ancestor: nearest counts
                        chain.append(summary_id)
        return out

    # -- active context ----------------------------------------------------------------------

    @staticmethod
    def _write_context(
        conn: Connection, conversation_id: int, items: Sequence[ContextItem]
    ) -> None:
        conn.execute("DELETE FROM context_items WHERE conversation_id = ?", (conversation_id,))
        rows = [
            (
                conversation_id,
                k,
                ref if kind == "message" else None,
                ref if kind == "summary" else None,
            )
            for k, (kind, ref) in enumerate(items)
        ]
        if rows:
            conn.executemany(
                "INSERT INTO context_items (conversation_id, ordinal, message_id, summary_id)"
                " VALUES (?,?,?,?)",
                rows,
            )

    def set_context(self, conversation_id: int, items: Sequence[ContextItem]) -> None:
        """Replace the active context in one transaction."""
        with self.transaction() as conn:
            self._lock_conversation(conn, conversation_id)
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

    def active_items(self) -> set[ContextItem]:
        """Every item of every conversation's active context."""
        with self.reading() as conn:
            rows = conn.execute("SELECT message_id, summary_id FROM context_items").fetchall()
        return {("message", m) if m is not None else ("summary", s) for m, s in rows}

    # -- rendered blocks ---------------------------------------------------------------------

    def add_block(
        self, conversation_id: int, hashes: Sequence[str], items: Sequence[ContextItem]
    ) -> None:
        """Remember that the messages hashed ``hashes`` stand for the context ``items``."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO rendered_blocks (conversation_id, hash, hashes, items)"
                " VALUES (?,?,?,?) ON CONFLICT (conversation_id, hash)"
                " DO UPDATE SET hashes = excluded.hashes, items = excluded.items",
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

    def output_messages(self, output_ids: Sequence[str]) -> dict[str, int]:
        """The message each of ``output_ids`` was stored aside from (unknown ids left out)."""
        out: dict[str, int] = {}
        with self.reading() as conn:
            for start in range(0, len(output_ids), _IN_CHUNK):
                part = list(output_ids[start : start + _IN_CHUNK])
                marks = ",".join("?" * len(part))
                for oid, mid in conn.execute(
                    f"SELECT id, message_id FROM outputs WHERE id IN ({marks})", part
                ):
                    out[str(oid)] = int(mid)
        return out

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

        def one(sql: str, params: tuple[Any, ...] = args) -> int:
            return int(conn.execute(sql, params).fetchone()[0])

        with self.reading() as conn:
            out: dict[str, Any] = {
                "conversations": one("SELECT COUNT(*) FROM conversations", ()),
                "messages": one(f"SELECT COUNT(*) FROM messages{where}"),
                "message_tokens": one(f"SELECT COALESCE(SUM(tokens), 0) FROM messages{where}"),
                "outputs": one(f"SELECT COUNT(*) FROM outputs{where}"),
                "context_items": one(f"SELECT COUNT(*) FROM context_items{where}"),
            }
            out["summaries_by_depth"] = {
                int(depth): int(count)
                for depth, count in conn.execute(
                    f"SELECT depth, COUNT(*) FROM summaries{where} GROUP BY depth ORDER BY depth",
                    args,
                )
            }
        out["fts"] = self.fts
        out["fts_pending"] = self.unindexed_messages()
        return out


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), _IN_CHUNK):
        yield ids[start : start + _IN_CHUNK]
