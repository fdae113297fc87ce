"""The coordination SDK: what a plugin or a host needs to work across processes and hosts.

This module is part of the declared SDK (see ``docs/sdk.md``); the modules it re-exports from
are private and may move.

- the backends behind ``coordination.backend`` (``process``, ``file``, ``postgresql``):
  :class:`Coordinator` with its :class:`NamedLock` and :class:`SharedDocument`, and
  :func:`open_coordinator`;
- file locks for one host: :class:`FileLock`, :func:`file_lock`;
- PostgreSQL plumbing, shared by every user of a URL in one process: the lazy driver import
  (:func:`require_driver`), one pool per URL (:func:`shared_pool`, :func:`release_pool`,
  :func:`pooled`), advisory locks (:func:`lock_key`, :func:`advisory_lock`), URL helpers.

Importing it imports neither psycopg nor anything else outside the standard library.
"""

from __future__ import annotations

from ctxengine._kernel.coordination import (
    CoordinationError,
    Coordinator,
    FileCoordinator,
    FileLock,
    NamedLock,
    ProcessCoordinator,
    SessionBusyError,
    SharedDocument,
    file_lock,
    lock_offset,
)
from ctxengine._kernel.coordination_setup import open_coordinator
from ctxengine._kernel.postgres import (
    POSTGRES_SCHEMES,
    PoolExhausted,
    advisory_lock,
    checkout,
    connect_kwargs,
    is_database_url,
    lock_key,
    pooled,
    redact_url,
    release_pool,
    require_driver,
    shared_pool,
    try_lock,
    unlock,
)

__all__ = [
    "POSTGRES_SCHEMES",
    "CoordinationError",
    "Coordinator",
    "FileCoordinator",
    "FileLock",
    "NamedLock",
    "PoolExhausted",
    "ProcessCoordinator",
    "SessionBusyError",
    "SharedDocument",
    "advisory_lock",
    "checkout",
    "connect_kwargs",
    "file_lock",
    "is_database_url",
    "lock_key",
    "lock_offset",
    "open_coordinator",
    "pooled",
    "redact_url",
    "release_pool",
    "require_driver",
    "shared_pool",
    "try_lock",
    "unlock",
]
