"""PostgreSQL plumbing: the driver import, per-process connection pools, advisory locks.

Nothing here knows any table: the ``postgresql`` coordination backend
(:mod:`ctxengine_fleet.postgres_backend`) and the lossless engine's store both build on it, so a
process whose coordination and store use one URL opens one pool for both.

- **Driver**: psycopg 3 and psycopg_pool are an optional dependency (``ctxengine-fleet[postgres]``),
  imported on first use; :func:`require_driver` raises an :class:`ImportError` that says what
  needs it and names the exact ``pip install`` line.
- **Pools**: one :class:`psycopg_pool.ConnectionPool` per URL per process, shared by every user
  of that URL (a gateway opens a store per session; they must not each hold connections) and
  closed when the last of them lets go. Connections are in autocommit mode: a
  statement outside an explicit transaction sees what was committed when it started. Each is
  checked on the way out of the pool, so a server restart costs no failed request. A pool made
  before a ``fork`` is never used by the child (it gets its own).
- **Advisory locks**: session-level locks on a dedicated pooled connection, keyed by 64 bits of
  SHA-256 of a namespace and a name. Waiting uses the server's ``lock_timeout`` (no polling).
  The server releases a lock when its connection ends, so a worker killed by SIGKILL frees
  every lock it held as soon as its socket closes (for a host that vanishes without closing
  the socket, set ``tcp_keepalives_idle`` on the server).
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ctxengine.coordination import redact_url

__all__ = [
    "CONNECT_TIMEOUT_S",
    "INSTALL_HINT",
    "POSTGRES_SCHEMES",
    "PoolExhausted",
    "advisory_lock",
    "checkout",
    "connect_kwargs",
    "is_database_url",
    "lock_key",
    "pooled",
    "redact_url",
    "release_pool",
    "require_driver",
    "shared_pool",
    "try_lock",
    "unlock",
]

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

INSTALL_HINT = "pip install 'ctxengine-fleet[postgres]'"
"""The pip line that installs the PostgreSQL driver (psycopg 3 with its binary build and
psycopg_pool)."""

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes that name a PostgreSQL database (libpq accepts both spellings)."""


def is_database_url(target: object) -> bool:
    """Whether ``target`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


CONNECT_TIMEOUT_S = 10
"""libpq ``connect_timeout`` used when the URL sets none (libpq's own default is to wait for
the operating system's TCP timeout, minutes)."""


class PoolExhausted(RuntimeError):
    """Every connection of this process's pool stayed in use for the whole wait."""


def require_driver(purpose: str = "PostgreSQL support", install: str = INSTALL_HINT) -> Any:
    """The ``psycopg`` module, with ``psycopg_pool`` importable too.

    :param purpose: what needs the driver, for the message (``"the lcm store on PostgreSQL"``).
    :param install: the pip line that installs it for that purpose.
    :raises ImportError: either is missing; the message names ``purpose`` and ``install``.
    """
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (imported here so a missing pool fails early)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs psycopg 3 and psycopg_pool ({exc}); install them with: {install}"
        ) from exc
    return psycopg


def connect_kwargs(url: str) -> dict[str, Any]:
    """Keyword arguments for :func:`psycopg.connect` beside ``url``: autocommit, and a
    connection timeout unless the URL sets one."""
    from psycopg.conninfo import conninfo_to_dict

    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in conninfo_to_dict(url):
        kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
    return kwargs


# -- pools ----------------------------------------------------------------------------------------

_pools_guard = threading.Lock()
# (process id, url) -> [pool, number of holders]
_pools: dict[tuple[int, str], list[Any]] = {}


def shared_pool(url: str, max_size: int) -> psycopg_pool.ConnectionPool:
    """This process's pool for ``url``, opened on first use; pair with :func:`release_pool`.

    Every caller shares one pool per URL; it holds at most the largest ``max_size`` any caller
    asked for (a later caller asking for more grows it).

    :raises ImportError: the driver is missing (see :func:`require_driver`).
    """
    require_driver()
    from psycopg_pool import ConnectionPool

    key = (os.getpid(), url)
    with _pools_guard:
        entry = _pools.get(key)
        if entry is None:
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=max_size,
                kwargs=connect_kwargs(url),
                check=ConnectionPool.check_connection,
                name="ctxengine",
                open=True,
            )
            entry = _pools[key] = [pool, 0]
        elif max_size > entry[0].max_size:
            entry[0].resize(min_size=entry[0].min_size, max_size=max_size)
        entry[1] += 1
        return entry[0]  # type: ignore[no-any-return]


def release_pool(url: str) -> None:
    """Drop one hold on this process's pool for ``url``; the last one closes it."""
    key = (os.getpid(), url)
    with _pools_guard:
        entry = _pools.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _pools[key]
    entry[0].close()


def checkout(pool: psycopg_pool.ConnectionPool, timeout: float | None = None) -> Any:
    """A connection from ``pool``; give it back with ``pool.putconn``.

    :raises PoolExhausted: none became free within ``timeout`` (default: the pool's own, 30 s).
    """
    from psycopg_pool import PoolTimeout

    try:
        return pool.getconn(timeout=timeout)
    except PoolTimeout as exc:
        raise PoolExhausted(
            f"all {pool.max_size} connections of this process's PostgreSQL pool stayed in use "
            f"({exc}); raise the pool size (coordination.pool_size, "
            "engines.lcm.database_pool_size: the largest asked for a URL applies) above the "
            "number of sessions this process serves at once"
        ) from exc


@contextmanager
def pooled(pool: psycopg_pool.ConnectionPool, timeout: float | None = None) -> Iterator[Any]:
    """A connection from ``pool`` for the block, given back afterwards (rolled back if the
    block left a transaction open, discarded if it broke).

    :raises PoolExhausted: none became free within ``timeout`` (default: the pool's own, 30 s).
    """
    conn = checkout(pool, timeout)
    try:
        yield conn
    finally:
        pool.putconn(conn)


# -- advisory locks -------------------------------------------------------------------------------


def lock_key(namespace: str, name: str) -> int:
    """The signed 64-bit advisory lock key for ``name`` within ``namespace``.

    Different namespaces (different stores, a coordination backend) never share keys except
    by a 64-bit hash collision, whose only effect would be one holder waiting for the other.
    """
    digest = hashlib.sha256(f"{namespace}\0{name}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def try_lock(conn: psycopg.Connection[Any], key: int, wait: float) -> bool:
    """Take the session-level advisory lock ``key`` on ``conn``, waiting up to ``wait`` s
    (``math.inf``: as long as it takes). A free lock costs one round trip."""
    from psycopg.errors import LockNotAvailable

    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    if row and row[0]:
        return True
    if wait <= 0:
        return False
    # lock_timeout 0 means "wait for ever": never round a short wait down to it.
    timeout = "0" if math.isinf(wait) else f"{max(1, round(wait * 1000))}ms"
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (timeout,))
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        return True
    except LockNotAvailable:
        return False
    finally:
        conn.execute("RESET lock_timeout")


def unlock(conn: psycopg.Connection[Any], key: int) -> None:
    """Release the advisory lock ``key`` held on ``conn``.

    :raises RuntimeError: ``conn`` did not hold it (a bug: the lock was taken elsewhere).
    """
    row = conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()
    if not (row and row[0]):
        raise RuntimeError(f"advisory lock {key} was not held by this connection")


@contextmanager
def advisory_lock(
    pool: psycopg_pool.ConnectionPool, key: int, *, wait: float = 0.0
) -> Iterator[psycopg.Connection[Any] | None]:
    """Yields the connection holding advisory lock ``key``, or ``None`` when another
    connection (any process, any host) still holds it after ``wait`` seconds.

    The connection stays checked out of ``pool`` while the lock is held; use it for the work
    the lock protects rather than taking a second one. If the connection breaks meanwhile the
    server has released the lock already, and the pool discards the connection.

    :raises PoolExhausted: no pooled connection became free within ``wait`` seconds.
    """
    psycopg = require_driver()
    with pooled(pool, timeout=max(wait, 1.0)) as conn:
        if not try_lock(conn, key, wait):
            yield None
            return
        try:
            yield conn
        finally:
            if not conn.closed:
                try:
                    unlock(conn, key)
                except psycopg.Error:
                    # Ending the connection is what releases every lock it holds, for sure.
                    conn.close()
