"""The PostgreSQL backend: one database shared by every worker process on every host.

Selected by ``engines.lcm.database_url`` (``postgresql://...``). The layout is the SQLite one in
PostgreSQL types, in the connection's current schema (the first schema of ``search_path``, so
``?options=-csearch_path%3Dlcm`` in the URL keeps it apart from other tables). What differs:

- **ids**: message ids come from the ``message_ids`` sequence. Every write transaction of a
  conversation first locks that conversation's row, so one conversation's messages get
  increasing ids and ``seq`` numbers even when several processes write at once;
- **full-text search**: a ``tsvector`` (the ``simple`` configuration: lower-cased words, no
  stemming, like SQLite's ``unicode61``) with a GIN index. ASCII punctuation is turned into
  spaces first, so ``src/app.py`` is the words ``src app py`` (as FTS5 reads it) rather than
  one file-name token. The first :data:`FTS_CHARS` characters of a text are indexed (a
  ``tsvector`` is limited to 1 MB); literal and regex search read all of it. Summaries and
  stored outputs (few) carry theirs as a stored generated column, indexed by the transaction
  that writes the row;
- **messages are indexed after ingest** (as on SQLite): the tsvector and the two GIN indexes
  cost the server several times what storing the row does (the trigram index most). Ingest
  commits the rows (written with ``COPY``) plus one ``index_queue`` row per transaction (the
  conversation and the id range it wrote); :meth:`PostgresStore.catch_up_index` later moves
  queued ranges into ``message_search`` (id, conversation, role, pinned, tsvector, text) in
  batches, each batch one statement that deletes its queue rows and inserts the search rows,
  so a worker killed in the middle leaves both or neither, and no message is indexed twice.
  Workers catch up side by side (``FOR UPDATE SKIP LOCKED``). The end of every compaction
  catches up its conversation, and every search first catches up what it reads (its
  conversation, or the whole queue for a store-wide search), waiting for any range of it that
  another process is indexing, so a search sees every message committed before it;
- **literal and regex search** use ``pg_trgm`` GIN indexes (``ILIKE`` and ``~``); the message
  indexes lead with the conversation (``btree_gin``), so the agent's search of its own
  conversation reads that conversation's entries only;
- **immutability**: triggers reject UPDATE, DELETE and TRUNCATE of the append-only tables;
- **compaction lock**: a session-level advisory lock per session (see
  :mod:`ctxengine_fleet.postgres`), so two workers on different hosts never compact one session
  at once; while it is held, this thread's store calls run on the lock's connection;
- **connections**: one pool per URL per process (``engines.lcm.database_pool_size``).

A worker killed in the middle of a transaction leaves nothing of it: the server rolls back
what the dead connection had not committed and releases its locks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, ClassVar

from ctxengine_fleet import postgres
from ctxengine_lcm.store import (
    IMMUTABLE_TABLES,
    MESSAGE_COLUMNS,
    SCHEMA_VERSION,
    SEARCHABLE,
    Connection,
    Cursor,
    Dialect,
    QueryRejected,
    QueryTimeout,
    Store,
    StoreError,
    utf8_safe,
    version_problem,
)
from ctxengine_lcm.urls import redact_url

UPGRADABLE: tuple[str, ...] = ("3",)
"""Schema versions this code upgrades on open (PostgreSQL stores started at 3)."""

CATCH_UP_RANGES = 200
"""Queued id ranges (each one ingest transaction's messages) indexed per catch-up statement."""

FTS_CHARS = 200_000
"""Characters of each text that go into its ``tsvector`` (at most 1 MB per value)."""

FTS_CONFIG = "simple"

EXTENSIONS = ("pg_trgm", "btree_gin")
"""Extensions the layout needs (both trusted: a database owner may create them)."""

PUNCTUATION = r"[!-/:-@\[-`{-~]+"
"""ASCII punctuation (the same class in Python and PostgreSQL regex syntax), read as spaces by
full-text search on both sides of the match."""

# A column expression usable in a generated column: every function in it is immutable.
_TSVECTOR = (
    f"to_tsvector('{FTS_CONFIG}'::regconfig,"
    f" regexp_replace(left({{column}}, {FTS_CHARS}), '{PUNCTUATION}', ' ', 'g'))"
)
"""The ``tsvector`` of ``{column}`` (filled in by plain replacement: the regex has braces)."""

_COPY_MESSAGES = f"COPY messages ({', '.join(MESSAGE_COLUMNS)}) FROM STDIN"
"""How ingest writes message rows (values in :data:`MESSAGE_COLUMNS` order)."""

_MESSAGE_TSV = _TSVECTOR.replace("{column}", "m.text")

_MESSAGE_SEARCH = """
CREATE TABLE message_search (
    id BIGINT PRIMARY KEY REFERENCES messages(id),
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    role TEXT NOT NULL,
    pinned INTEGER NOT NULL,
    tsv TSVECTOR NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE index_queue (
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    first_id BIGINT NOT NULL,
    last_id BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, first_id)
);
"""
"""The searchable copy of each message, and the id ranges waiting to get one (layout 4)."""

_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE conversations (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    format TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE SEQUENCE message_ids AS BIGINT;
CREATE TABLE messages (
    id BIGINT PRIMARY KEY DEFAULT nextval('message_ids'),
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
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
    created_at DOUBLE PRECISION NOT NULL,
    UNIQUE (conversation_id, seq)
);
ALTER SEQUENCE message_ids OWNED BY messages.id;
{message_search}
CREATE TABLE summaries (
    id TEXT PRIMARY KEY,
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    depth INTEGER NOT NULL CHECK (depth >= 0),
    kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
    mode TEXT NOT NULL CHECK (mode IN ('normal', 'aggressive', 'deterministic')),
    content TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    source_tokens INTEGER NOT NULL,
    earliest_at DOUBLE PRECISION,
    latest_at DOUBLE PRECISION,
    first_message_id BIGINT REFERENCES messages(id),
    last_message_id BIGINT REFERENCES messages(id),
    descendant_messages INTEGER NOT NULL,
    descendant_summaries INTEGER NOT NULL,
    provider TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    tsv TSVECTOR GENERATED ALWAYS AS ({summaries_tsv}) STORED
);
CREATE TABLE summary_links (
    summary_id TEXT NOT NULL REFERENCES summaries(id),
    ordinal INTEGER NOT NULL,
    message_id BIGINT REFERENCES messages(id),
    child_id TEXT REFERENCES summaries(id),
    CHECK ((message_id IS NULL) <> (child_id IS NULL)),
    PRIMARY KEY (summary_id, ordinal)
);
CREATE TABLE context_items (
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    ordinal INTEGER NOT NULL,
    message_id BIGINT REFERENCES messages(id),
    summary_id TEXT REFERENCES summaries(id),
    CHECK ((message_id IS NULL) <> (summary_id IS NULL)),
    PRIMARY KEY (conversation_id, ordinal)
);
CREATE TABLE outputs (
    id TEXT PRIMARY KEY,
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    message_id BIGINT NOT NULL REFERENCES messages(id),
    call_id TEXT,
    tool_name TEXT,
    content TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    description TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    tsv TSVECTOR GENERATED ALWAYS AS ({outputs_tsv}) STORED
);
CREATE TABLE rendered_blocks (
    conversation_id BIGINT NOT NULL REFERENCES conversations(id),
    hash TEXT NOT NULL,
    hashes TEXT NOT NULL,
    items TEXT NOT NULL,
    PRIMARY KEY (conversation_id, hash)
);
"""
# ("rowid" is a plain column here: the shared SQL orders summaries and outputs by it, as it
# orders SQLite's implicit rowid.)

GENERATED_TSV = ("summaries", "outputs")
"""The searchable tables whose rows carry their tsvector (indexed as they are written)."""

MESSAGE_INDEXES = {
    "message_search_fts": "message_search USING gin (conversation_id, tsv)",
    "message_search_trgm": "message_search USING gin (conversation_id, text {trgm}.gin_trgm_ops)",
}
"""The message search indexes; they lead with the conversation (``btree_gin``)."""

INDEXES = {
    "links_by_message": "summary_links (message_id)",
    "links_by_child": "summary_links (child_id)",
    "summaries_by_conversation": "summaries (conversation_id, rowid)",
    "outputs_by_message": "outputs (message_id)",
    "outputs_by_conversation": "outputs (conversation_id)",
    "context_by_message": "context_items (message_id)",
    "context_by_summary": "context_items (summary_id)",
    **{f"{table}_fts": f"{table} USING gin (tsv)" for table in GENERATED_TSV},
    **{
        f"{table}_trgm": f"{table} USING gin ({column} {{trgm}}.gin_trgm_ops)"
        for table, column in SEARCHABLE.items()
        if table in GENERATED_TSV
    },
    **MESSAGE_INDEXES,
}
"""Every index the layout needs beyond its keys, by name (``doctor`` checks each is valid)."""

_GUARD_FUNCTION = """
CREATE FUNCTION lcm_reject_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'lcm store: % are %', TG_TABLE_NAME,
        CASE TG_OP WHEN 'UPDATE' THEN 'immutable' ELSE 'append-only' END
        USING ERRCODE = 'integrity_constraint_violation';
END $$;
"""

_GUARDED = (*IMMUTABLE_TABLES, "message_search")

GUARDS = {f"{table}_no_{op}": (table, op) for table in _GUARDED for op in ("update", "delete")} | {
    f"{table}_no_truncate": (table, "truncate") for table in _GUARDED
}
"""Every immutability trigger, by name: ``(table, operation)``."""

FOREIGN_KEYS = (
    ("messages", "conversation_id", "conversations"),
    ("summaries", "conversation_id", "conversations"),
    ("summaries", "first_message_id", "messages"),
    ("summaries", "last_message_id", "messages"),
    ("summary_links", "summary_id", "summaries"),
    ("summary_links", "message_id", "messages"),
    ("summary_links", "child_id", "summaries"),
    ("context_items", "conversation_id", "conversations"),
    ("context_items", "message_id", "messages"),
    ("context_items", "summary_id", "summaries"),
    ("outputs", "conversation_id", "conversations"),
    ("outputs", "message_id", "messages"),
    ("rendered_blocks", "conversation_id", "conversations"),
    ("message_search", "id", "messages"),
    ("message_search", "conversation_id", "conversations"),
    ("index_queue", "conversation_id", "conversations"),
)
"""``(table, column, referenced table)`` of every reference; each points at ``id``."""


def _index_sql(names: Iterable[str], trgm_schema: str) -> str:
    trgm = quote_ident(trgm_schema)
    return "".join(f"CREATE INDEX {name} ON {INDEXES[name].format(trgm=trgm)};\n" for name in names)


def _guard_sql(names: Iterable[str]) -> str:
    return "".join(
        f"CREATE TRIGGER {name} BEFORE {GUARDS[name][1].upper()} ON {GUARDS[name][0]} FOR EACH "
        f"{'STATEMENT' if GUARDS[name][1] == 'truncate' else 'ROW'} "
        "EXECUTE FUNCTION lcm_reject_change();\n"
        for name in names
    )


def _schema_sql(trgm_schema: str) -> str:
    tables = _TABLES.format(
        message_search=_MESSAGE_SEARCH,
        **{
            f"{table}_tsv": _TSVECTOR.replace("{column}", SEARCHABLE[table])
            for table in GENERATED_TSV
        },
    )
    return tables + _index_sql(INDEXES, trgm_schema) + _GUARD_FUNCTION + _guard_sql(GUARDS)


def _upgrade_from_3_sql(trgm_schema: str) -> str:
    """Layout 3 -> 4: messages move their tsvector and trigram index to ``message_search``
    (filled from the stored messages); nothing is queued afterwards."""
    guards = [name for name, (table, _) in GUARDS.items() if table == "message_search"]
    return (
        _MESSAGE_SEARCH
        + f"INSERT INTO message_search (id, conversation_id, role, pinned, tsv, text)"
        f" SELECT id, conversation_id, role, pinned, {_TSVECTOR.replace('{column}', 'text')},"
        " text FROM messages;\n"
        + "DROP INDEX messages_trgm;\nALTER TABLE messages DROP COLUMN tsv;\n"
        + _index_sql(MESSAGE_INDEXES, trgm_schema)
        + _guard_sql(guards)
        + f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version';\n"
    )


def extension_schema(conn: Any, name: str) -> str | None:
    """The schema the extension ``name`` is installed in (``None``: not installed)."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = %s",
        (name,),
    ).fetchone()
    return None if row is None else str(row[0])


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def pg_safe(text: str) -> str:
    """``text`` as a PostgreSQL ``text`` value can hold it: lone surrogates and NUL characters
    (which PostgreSQL text cannot contain) replaced by U+FFFD. Only searchable columns take
    this form; the message JSON escapes both exactly (``\\u0000``)."""
    text = utf8_safe(text)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


@lru_cache(maxsize=512)
def _to_pyformat(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """A psycopg connection as the shared repository code uses it (``?`` placeholders,
    ``execute``/``executemany`` like :mod:`sqlite3`). :attr:`raw` is the psycopg connection."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        cursor: Cursor = self.raw.execute(_to_pyformat(sql), tuple(parameters))
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any:
        with self.raw.cursor() as cursor:
            cursor.executemany(_to_pyformat(sql), [tuple(p) for p in parameters])
            return cursor.rowcount


class PostgresStore(Store):
    """An lcm store in a PostgreSQL database, reached through this process's shared pool.

    :param url: a ``postgresql://`` URL (libpq syntax; a password is better kept in
        ``PGPASSWORD`` or ``~/.pgpass`` than in the configuration file).
    :param pool_size: most connections this process opens to ``url``.
    :param create: create the layout in an empty schema (``False``: raise instead).
    :raises StoreError: psycopg is not installed, the server cannot be reached, the schema
        holds another layout version, or ``pg_trgm`` is missing and cannot be created.
    """

    dialect: ClassVar[Dialect] = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 8, create: bool = True) -> None:
        self.url = url
        self.location = redact_url(url)
        self.fts = True
        try:
            psycopg = postgres.require_driver(
                "the lcm store on PostgreSQL", "pip install 'ctxengine-lcm[postgres]'"
            )
        except ImportError as exc:
            raise StoreError(str(exc)) from exc
        self._errors = psycopg.errors
        try:
            with psycopg.connect(url, **postgres.connect_kwargs(url)) as conn:
                self.schema = self._prepare(conn, create=create)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the lcm store {self.location}: {exc}") from exc
        self._lock_namespace = f"ctxengine-lcm\0{self.schema}"
        self._pinned = threading.local()
        self._pool = postgres.shared_pool(url, pool_size)
        self._closed = False

    # -- schema ------------------------------------------------------------------------------

    def _prepare(self, conn: Any, *, create: bool) -> str:
        """Check (or create) the layout in the connection's current schema; returns its name."""
        with conn.transaction():
            schema = conn.execute("SELECT current_schema()").fetchone()[0]
            if schema is None:
                raise StoreError(
                    f"the lcm store {self.location} has no schema to use: no schema of its "
                    "search_path exists; create one or fix options=-csearch_path in the URL"
                )
            # Two processes opening a new database at once: the second waits, then finds it.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s)",
                (postgres.lock_key("ctxengine-lcm schema", schema),),
            )
            tables = {
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
                )
            }
            if "messages" in tables:
                row = (
                    conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                    if "meta" in tables
                    else None
                )
                found = None if row is None else str(row[0])
                if found == "3":
                    conn.execute(_upgrade_from_3_sql(self._extensions(conn)))
                elif found != str(SCHEMA_VERSION):
                    raise StoreError(
                        f"{self.location} (schema {schema}) is not a usable lcm store: "
                        + version_problem(found, UPGRADABLE)
                    )
                return str(schema)
            if not create:
                raise StoreError(
                    f"no lcm store in {self.location} (schema {schema}); it is created by the "
                    "first compaction"
                )
            conn.execute(_schema_sql(self._extensions(conn)))
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)",
                (str(SCHEMA_VERSION),),
            )
        return str(schema)

    def _extensions(self, conn: Any) -> str:
        """Install ``pg_trgm`` and ``btree_gin`` where missing; returns ``pg_trgm``'s schema."""
        schemas = {}
        for name in EXTENSIONS:
            found = extension_schema(conn, name)
            if found is None:
                try:
                    with conn.transaction():
                        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
                except self._errors.Error as exc:
                    raise StoreError(
                        f"the lcm store {self.location} needs the {name} extension and could "
                        f"not create it ({exc}); ask the database owner to run CREATE EXTENSION "
                        f"{name} in this database (it ships with PostgreSQL's contrib modules)"
                    ) from exc
                found = extension_schema(conn, name)
            assert found is not None  # just created
            schemas[name] = found
        return schemas["pg_trgm"]

    # -- connections -------------------------------------------------------------------------

    def _pinned_connection(self) -> Any:
        stack: list[Any] | None = getattr(self._pinned, "stack", None)
        return stack[-1] if stack else None

    @contextmanager
    def pinned(self, conn: Any) -> Iterator[None]:
        """Run this thread's store calls on ``conn`` for the block."""
        stack: list[Any] = self._pinned.__dict__.setdefault("stack", [])
        stack.append(conn)
        try:
            yield
        finally:
            stack.pop()

    @contextmanager
    def one_connection(self) -> Iterator[None]:
        if self._pinned_connection() is not None:
            yield
            return
        with postgres.pooled(self._pool) as conn, self.pinned(conn):
            yield

    @contextmanager
    def reading(self) -> Iterator[PgConnection]:
        """A pooled connection in autocommit mode (or the one this thread holds a lock on)."""
        if self._closed:
            raise StoreError(f"the lcm store {self.location} is closed")
        conn = self._pinned_connection()
        if conn is not None:
            yield PgConnection(conn)
            return
        with postgres.pooled(self._pool) as conn:
            yield PgConnection(conn)

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """One transaction (READ COMMITTED): all of it commits or none of it."""
        with self.reading() as conn, conn.raw.transaction():
            yield conn

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            postgres.release_pool(self.url)

    @contextmanager
    def session_lock(self, session_id: str, *, wait: float = 0.0) -> Iterator[bool]:
        """The session's advisory lock; while held, this thread's calls use its connection."""
        key = postgres.lock_key(self._lock_namespace, session_id)
        try:
            with postgres.advisory_lock(self._pool, key, wait=wait) as conn:
                if conn is None:
                    yield False
                    return
                with self.pinned(conn):
                    yield True
        except postgres.PoolExhausted as exc:
            raise StoreError(str(exc)) from exc

    # -- what the shared repository needs ----------------------------------------------------

    def safe_text(self, text: str) -> str:
        return pg_safe(text)

    def _write_messages(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        # COPY: about 15 % less CPU per message than a pipelined INSERT, client and server
        # together, and what a batch of a hundred messages costs is mostly per message.
        assert isinstance(conn, PgConnection)
        with conn.raw.cursor() as cursor, cursor.copy(_COPY_MESSAGES) as copy:
            for row in rows:
                copy.write_row(row)

    def _new_message_ids(self, conn: Connection, count: int) -> list[int]:
        if count == 0:
            return []
        rows = conn.execute(
            "SELECT nextval('message_ids') FROM generate_series(1, ?) ORDER BY 1", (count,)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def _lock_conversation(self, conn: Connection, conversation_id: int) -> None:
        conn.execute(
            "SELECT id FROM conversations WHERE id = ? FOR NO KEY UPDATE", (conversation_id,)
        )

    def bounded_rows(self, sql: str, parameters: Sequence[Any], timeout_s: float) -> list[Any]:
        """Run one query that caller input shapes (a search), cancelled after ``timeout_s``.

        :raises QueryTimeout: the server cancelled it at the time limit.
        :raises QueryRejected: the server refused the input (an invalid regex, say).
        """
        errors = self._errors
        try:
            with self.transaction() as conn:
                conn.execute(
                    "SELECT set_config('statement_timeout', ?, true)",
                    (f"{max(1, round(timeout_s * 1000))}ms",),
                )
                return conn.execute(sql, parameters).fetchall()
        except errors.QueryCanceled as exc:
            raise QueryTimeout(f"ran longer than {timeout_s:g} s and was stopped") from exc
        except (errors.DataError, errors.SyntaxErrorOrAccessRuleViolation) as exc:
            message = exc.diag.message_primary or str(exc)
            raise QueryRejected(message) from exc

    # -- deferred message indexing -----------------------------------------------------------

    def _queue_for_index(self, conn: Connection, conversation_id: int, ids: list[int]) -> None:
        # One row per ingest transaction: its messages are exactly the conversation's ids in
        # [first, last] (writers of one conversation are serialised by its row lock).
        conn.execute(
            "INSERT INTO index_queue (conversation_id, first_id, last_id) VALUES (?, ?, ?)",
            (conversation_id, min(ids), max(ids)),
        )

    @property
    def deferred_index(self) -> bool:
        return True

    def catch_up_index(
        self, *, batch_size: int = CATCH_UP_RANGES, conversation_id: int | None = None
    ) -> int:
        """Index queued messages (see the module docstring); returns how many were indexed.

        With ``conversation_id``, that conversation's queue is drained, waiting for any batch
        of it that another process is indexing; without, every conversation's, first the
        batches nobody holds (``SKIP LOCKED``, so workers share the work), then a pass that
        waits for the rest. Either way every message committed before the call is searchable
        when it returns. Each batch (``batch_size`` queued ranges) is one statement: a crash
        leaves the batch queued and nothing indexed twice. Cheap when nothing is queued (one
        indexed lookup).

        :raises ValueError: ``batch_size`` < 1.
        :raises StoreError: the server refused the work.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        try:
            if conversation_id is not None:
                return self._drain(batch_size, conversation_id, skip_locked=False)
            return self._drain(batch_size, None, skip_locked=True) + self._drain(
                batch_size, None, skip_locked=False
            )
        except self._errors.Error as exc:
            raise StoreError(f"cannot index the messages of {self.location}: {exc}") from exc

    def _drain(self, batch_size: int, conversation_id: int | None, *, skip_locked: bool) -> int:
        where = "" if conversation_id is None else " WHERE conversation_id = ?"
        args: tuple[int, ...] = () if conversation_id is None else (conversation_id,)
        skip = " SKIP LOCKED" if skip_locked else ""
        sql = (
            "WITH batch AS (DELETE FROM index_queue WHERE ctid IN (SELECT ctid FROM index_queue"
            f"{where} ORDER BY conversation_id, first_id LIMIT ? FOR UPDATE{skip})"
            " RETURNING conversation_id, first_id, last_id),"
            " added AS (INSERT INTO message_search (id, conversation_id, role, pinned, tsv, text)"
            f" SELECT m.id, m.conversation_id, m.role, m.pinned, {_MESSAGE_TSV}, m.text"
            " FROM batch q JOIN messages m ON m.conversation_id = q.conversation_id"
            " AND m.id BETWEEN q.first_id AND q.last_id"
            " ON CONFLICT (id) DO NOTHING RETURNING 1)"
            " SELECT (SELECT COUNT(*) FROM batch), (SELECT COUNT(*) FROM added)"
        )
        indexed = 0
        while True:
            with self.reading() as conn:
                ranges, added = conn.execute(sql, (*args, batch_size)).fetchone()
            indexed += int(added)
            # Not "fewer than asked": rows another process held and then indexed drop out of
            # the batch after the wait, and more may follow them.
            if ranges == 0:
                return indexed

    def unindexed_messages(self) -> int:
        """How many stored messages wait in ``index_queue``."""
        with self.reading() as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM index_queue q JOIN messages m ON m.conversation_id ="
                " q.conversation_id AND m.id BETWEEN q.first_id AND q.last_id"
            ).fetchone()
        return int(row[0])

    # -- checks ------------------------------------------------------------------------------

    def integrity_problems(self) -> list[str]:
        """The extension, indexes, immutability triggers and foreign keys the layout needs,
        the message id sequence ahead of every id, and no reference to a missing row (which
        the foreign keys alone would not show if they had been bypassed)."""
        problems: list[str] = []
        with self.reading() as conn:
            installed = {
                row[0] for row in conn.execute("SELECT extname FROM pg_extension").fetchall()
            }
            for name in EXTENSIONS:
                if name not in installed:
                    problems.append(f"the {name} extension is missing (search needs it)")
            indexes = {
                name: (valid, ready)
                for name, valid, ready in conn.execute(
                    "SELECT c.relname, i.indisvalid, i.indisready FROM pg_index i"
                    " JOIN pg_class c ON c.oid = i.indexrelid"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ?",
                    (self.schema,),
                )
            }
            for name, target in INDEXES.items():
                state = indexes.get(name)
                if state is None:
                    problems.append(f"index {name} on {target.split(' ')[0]} is missing")
                elif not all(state):
                    problems.append(f"index {name} is not valid (REINDEX INDEX {name})")
            triggers = dict(
                conn.execute(
                    "SELECT t.tgname, t.tgenabled FROM pg_trigger t"
                    " JOIN pg_class c ON c.oid = t.tgrelid"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = ? AND NOT t.tgisinternal",
                    (self.schema,),
                ).fetchall()
            )
            for name, (table, op) in GUARDS.items():
                if name not in triggers:
                    problems.append(f"{table} can be changed: trigger {name} ({op}) is missing")
                elif triggers[name] == "D":
                    problems.append(f"{table} can be changed: trigger {name} ({op}) is disabled")
            problems += self._reference_problems(conn)
            problems += self._search_problems(conn)
            row = conn.execute(
                "SELECT (SELECT last_value FROM message_ids), (SELECT MAX(id) FROM messages)"
            ).fetchone()
            if row[1] is not None and row[0] < row[1]:
                problems.append(
                    f"the message id sequence is at {row[0]}, below the highest message id "
                    f"{row[1]}: the next messages would collide"
                )
        return problems

    def _search_problems(self, conn: Connection) -> list[str]:
        """``message_search`` in step with ``messages``: every message searchable or queued,
        and every search row a faithful copy of its message."""
        problems: list[str] = []
        missing = conn.execute(
            "SELECT COUNT(*), MIN(m.id) FROM messages m WHERE NOT EXISTS"
            " (SELECT 1 FROM message_search s WHERE s.id = m.id) AND NOT EXISTS"
            " (SELECT 1 FROM index_queue q WHERE q.conversation_id = m.conversation_id"
            " AND m.id BETWEEN q.first_id AND q.last_id)"
        ).fetchone()
        if missing[0]:
            problems.append(
                f"{missing[0]} message(s) are neither searchable nor queued for the index "
                f"(message id {missing[1]}, ...): lcm_grep cannot find them"
            )
        different = conn.execute(
            "SELECT COUNT(*), MIN(m.id) FROM message_search s JOIN messages m ON m.id = s.id"
            " WHERE s.text <> m.text OR s.conversation_id <> m.conversation_id"
            " OR s.role <> m.role OR s.pinned <> m.pinned"
        ).fetchone()
        if different[0]:
            problems.append(
                f"{different[0]} message_search row(s) differ from their message "
                f"(message id {different[1]}, ...)"
            )
        return problems

    def _reference_problems(self, conn: Connection) -> list[str]:
        problems: list[str] = []
        constraints = {
            (table, column): (validated, enabled)
            for table, column, validated, enabled in conn.execute(
                "SELECT c.conrelid::regclass::text, a.attname, c.convalidated,"
                " NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgconstraint = c.oid"
                "  AND t.tgenabled = 'D')"
                " FROM pg_constraint c JOIN pg_attribute a"
                "  ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
                " JOIN pg_namespace n ON n.oid = c.connamespace"
                " WHERE c.contype = 'f' AND n.nspname = ?",
                (self.schema,),
            )
        }
        for table, column, parent in FOREIGN_KEYS:
            state = constraints.get((table, column)) or constraints.get(
                (f"{quote_ident(self.schema)}.{table}", column)
            )
            if state is None:
                problems.append(f"the foreign key {table}.{column} -> {parent} is missing")
            elif not all(state):
                problems.append(f"the foreign key {table}.{column} -> {parent} is not enforced")
            missing = conn.execute(
                f"SELECT COUNT(*), MIN(t.{column}::text) FROM {table} t"
                f" WHERE t.{column} IS NOT NULL"
                f" AND NOT EXISTS (SELECT 1 FROM {parent} p WHERE p.id = t.{column})"
            ).fetchone()
            if missing[0]:
                problems.append(
                    f"{missing[0]} {table} row(s) refer to a missing row of {parent} "
                    f"({column} = {missing[1]}, ...)"
                )
        return problems

    def health_notes(self) -> list[str]:
        with self.reading() as conn:
            ctype = conn.execute(
                "SELECT datctype FROM pg_database WHERE datname = current_database()"
            ).fetchone()[0]
        if ctype in ("C", "POSIX"):
            return [
                f"the database's LC_CTYPE is {ctype}: full-text search lower-cases and splits "
                "words by ASCII rules only (a database created with a UTF-8 locale such as "
                "C.UTF-8 treats every script alike)"
            ]
        return []
