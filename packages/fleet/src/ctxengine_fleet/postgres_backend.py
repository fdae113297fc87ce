"""``coordination.backend: postgresql``: advisory locks and one small table, for many hosts.

- **Locks**: session-level advisory locks (:func:`ctxengine_fleet.postgres.try_lock`) keyed by
  the schema and the lock's name, each held on a pooled connection for as long as it is held.
  The server releases a lock when its connection ends, so a killed worker never leaves one
  behind (for a host that vanishes without closing its sockets, set the server's
  ``tcp_keepalives_idle``).
- **Documents**: rows of ``ctxengine_coordination (name, version, document, updated_at)`` in the
  connection's current schema, created by the first process that needs the table. A document
  is read and written on the connection of the lock that guards it, so a session call costs a
  handful of round trips: take the lock, read the version (the document only when it moved),
  write when something changed, release.
- **Pool**: this process's pool for the URL, shared with every other user of the same URL (the
  lossless engine's store on that database takes connections from the same pool).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from ctxengine.coordination import CoordinationError, Coordinator, NamedLock, SharedDocument
from ctxengine_fleet import postgres
from ctxengine_fleet.file_backend import damaged

TABLE = "ctxengine_coordination"

_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    name TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    document TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)
"""


class _AdvisoryLock:
    """One named advisory lock; while held, it keeps its pooled connection (:attr:`conn`)."""

    def __init__(self, owner: PostgresCoordinator, name: str) -> None:
        self._owner = owner
        self.name = name
        self.key = postgres.lock_key(owner.namespace, name)
        self.conn: Any = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.conn is not None:
            raise RuntimeError(f"coordination lock {self.name!r} is already held by this object")
        wait = 0.0 if not blocking else (math.inf if timeout < 0 else timeout)
        pool = self._owner.pool
        try:
            conn = postgres.checkout(pool, timeout=max(1.0, min(wait, 30.0)))
        except postgres.PoolExhausted as exc:
            raise CoordinationError(str(exc)) from exc
        try:
            held = postgres.try_lock(conn, self.key, wait)
        except Exception as exc:
            pool.putconn(conn)
            raise self._owner.failure(f"taking lock {self.name!r}", exc) from exc
        if not held:
            pool.putconn(conn)
            return False
        self.conn = conn
        return True

    def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            raise RuntimeError(f"coordination lock {self.name!r} is not held")
        try:
            if not conn.closed:
                postgres.unlock(conn, self.key)
        except Exception:
            # Ending the connection is what releases every lock it holds, for sure.
            conn.close()
        finally:
            self._owner.pool.putconn(conn)


class _RowDocument(SharedDocument):
    """One row of the coordination table, read and written on its guard's connection."""

    def __init__(self, owner: PostgresCoordinator, name: str, guard: NamedLock) -> None:
        self._owner = owner
        self.name = name
        self._guard = guard
        self._version: int | None = None  # None: no row, as far as this object knows

    def _conn(self) -> Any:
        conn = getattr(self._guard, "conn", None)
        if conn is None:
            raise RuntimeError(f"coordination document {self.name!r} used without holding its lock")
        return conn

    def load(self) -> dict[str, Any] | None:
        try:
            row = (
                self._conn()
                .execute(
                    f"SELECT version, CASE WHEN version = %s THEN NULL ELSE document END"
                    f" FROM {TABLE} WHERE name = %s",
                    (self._version if self._version is not None else -1, self.name),
                )
                .fetchone()
            )
        except RuntimeError:
            raise
        except Exception as exc:
            raise self._owner.failure(f"reading {self.name!r}", exc) from exc
        if row is None:
            if self._version is None:
                return None
            self._version = None
            return {}
        version, text = int(row[0]), row[1]
        if version == self._version:
            return None
        try:
            document = json.loads(text)
            if not isinstance(document, dict):
                raise ValueError(f"a {type(document).__name__}, not an object")
        except ValueError as exc:
            raise damaged(f"{self.name!r} in {TABLE}", exc, "the row") from exc
        self._version = version
        return document

    def save(self, document: Mapping[str, Any]) -> None:
        text = json.dumps(document, ensure_ascii=False, allow_nan=False)
        try:
            row = (
                self._conn()
                .execute(
                    f"INSERT INTO {TABLE} AS t (name, version, document, updated_at)"
                    " VALUES (%s, 1, %s, %s) ON CONFLICT (name) DO UPDATE"
                    " SET version = t.version + 1, document = excluded.document,"
                    " updated_at = excluded.updated_at RETURNING version",
                    (self.name, text, time.time()),
                )
                .fetchone()
            )
        except RuntimeError:
            raise
        except Exception as exc:
            raise self._owner.failure(f"writing {self.name!r}", exc) from exc
        self._version = int(row[0])


class PostgresCoordinator(Coordinator):
    """``coordination.backend: postgresql`` on ``url``.

    :param pool_size: most connections this process opens to ``url`` (shared with every other
        user of the URL; the largest request wins). A session call holds one for its duration.
    :raises ImportError: psycopg is not installed (the message holds the pip line).
    :raises CoordinationError: the server cannot be reached or the table cannot be created.
    """

    backend = "postgresql"
    shared = True

    def __init__(self, url: str, *, pool_size: int = 4) -> None:
        self.url = url
        self.location = postgres.redact_url(url)
        psycopg = postgres.require_driver("coordination.backend: postgresql")
        self._errors = psycopg.Error
        try:
            with psycopg.connect(url, **postgres.connect_kwargs(url)) as conn:
                self.schema = self._prepare(conn)
        except psycopg.Error as exc:
            raise self.failure("opening the coordination table", exc) from exc
        self.namespace = f"ctxengine-coordination\0{self.schema}"
        self.pool = postgres.shared_pool(url, pool_size)
        self._closed = False
        self._guard = threading.Lock()

    @staticmethod
    def _prepare(conn: Any) -> str:
        with conn.transaction():
            schema = conn.execute("SELECT current_schema()").fetchone()[0]
            if schema is None:
                raise CoordinationError(
                    "no schema of the URL's search_path exists; create one or fix "
                    "options=-csearch_path in coordination.database_url"
                )
            # Two processes creating the table at once: the second waits, then finds it.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s)",
                (postgres.lock_key("ctxengine-coordination schema", schema),),
            )
            conn.execute(_CREATE)
        return str(schema)

    def failure(self, what: str, exc: BaseException) -> CoordinationError:
        """The error for ``exc`` raised while doing ``what`` (naming the server)."""
        if isinstance(exc, CoordinationError):
            return exc
        return CoordinationError(
            f"coordination backend postgresql ({self.location}): {what} failed: "
            f"{type(exc).__name__}: {exc}"
        )

    def lock(self, name: str) -> NamedLock:
        return _AdvisoryLock(self, name)

    def document(self, name: str, guard: NamedLock) -> SharedDocument:
        return _RowDocument(self, name, guard)

    def close(self) -> None:
        with self._guard:
            if self._closed:
                return
            self._closed = True
        postgres.release_pool(self.url)

    def describe(self) -> str:
        return f"postgresql ({self.location}, schema {self.schema})"


__all__ = ["PostgresCoordinator"]
