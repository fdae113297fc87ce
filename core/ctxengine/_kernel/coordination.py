"""Coordination between the processes that serve the same sessions: named locks and documents.

One backend per kernel, chosen by ``coordination.backend``:

- ``process`` (the default, here): locks are this process's ``threading`` locks and there are
  no shared documents; per-session state lives in the :class:`~ctxengine.Session` object. Right
  for one process (a CLI, one agent, a threaded server).
- any other name comes from the plugin named ``coordination.<backend>``, which answers the
  ``coordination_backend`` hook with its :class:`Coordinator`
  (:mod:`ctxengine._kernel.coordination_setup`). The ``ctxengine-fleet`` package provides
  ``file`` (many processes on one host) and ``postgresql`` (workers on many hosts).

A :class:`Coordinator` hands out two things, both named by plain strings (the kernel uses
``"gateway:<session>"`` and ``"session:<session>"``; other kernel services pick names of their
own kind, such as ``"provider:<name>"``):

- :meth:`Coordinator.lock`: a :class:`NamedLock` (``acquire(blocking, timeout)`` /
  ``release()``, like :class:`threading.Lock`) excluding every holder of the same name in every
  process that uses the same backend;
- :meth:`Coordinator.document`: a :class:`SharedDocument`, one JSON object per name that its
  users read and write while holding the lock that guards it.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol


class CoordinationError(RuntimeError):
    """The coordination backend cannot be reached or used (the message says which and why)."""


class SessionBusyError(CoordinationError):
    """Another worker held this session's lock for the whole ``coordination.lock_timeout_s``."""


class NamedLock(Protocol):
    """What :meth:`Coordinator.lock` returns (:class:`threading.Lock` has the same shape)."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; ``False`` when it stayed busy (``blocking=False``: at once; else
        after ``timeout`` seconds, ``-1`` = no limit)."""
        ...

    def release(self) -> None:
        """Give it back (only its holder may)."""
        ...


class SharedDocument(ABC):
    """One named JSON object, read and written by whoever holds the lock that guards it.

    The object remembers the version it last read or wrote, so :meth:`load` costs a version
    check (a ``stat``, one indexed row) when nothing changed.
    """

    @abstractmethod
    def load(self) -> dict[str, Any] | None:
        """The document when it changed since this object last loaded or saved it (a missing
        document reads as ``{}``), else ``None``.

        :raises CoordinationError: it cannot be read.
        """

    @abstractmethod
    def save(self, document: Mapping[str, Any]) -> None:
        """Replace the document (atomically: readers see the old one or the new one).

        :raises CoordinationError: it cannot be written.
        """


class Coordinator(ABC):
    """A coordination backend: named locks, and named documents when it is shared.

    :cvar backend: the ``coordination.backend`` value it implements.
    :cvar shared: whether other processes see its locks and documents (``False`` for
        ``process``: :meth:`document` then returns ``None`` and state stays in memory).
    """

    backend: ClassVar[str]
    shared: ClassVar[bool]

    @abstractmethod
    def lock(self, name: str) -> NamedLock:
        """The lock ``name``: every object returned for one name excludes every other one,
        in this process and (shared backends) in every process using this backend."""

    def document(self, name: str, guard: NamedLock) -> SharedDocument | None:
        """The document ``name``, read and written only while ``guard`` (the lock returned for
        the same name, or one that covers it) is held; ``None`` on a backend that shares
        nothing."""
        del name, guard
        return None

    def close(self) -> None:  # noqa: B027  (a backend without connections has nothing to do)
        """Let go of files and connections (idempotent); the locks of this object must not be
        held any more."""

    def describe(self) -> str:
        """One line for logs and status output."""
        return self.backend


# -- process --------------------------------------------------------------------------------


class _ProcessLock:
    """A :class:`threading.Lock` that can be shared by name through a weak mapping."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout if blocking else -1)

    def release(self) -> None:
        self._lock.release()


class ProcessCoordinator(Coordinator):
    """``coordination.backend: process``: locks within this process, no shared documents."""

    backend = "process"
    shared = False

    def __init__(self) -> None:
        self._guard = threading.Lock()
        # A lock lives while someone holds a reference to it (a Session keeps its own).
        self._locks: weakref.WeakValueDictionary[str, _ProcessLock] = weakref.WeakValueDictionary()

    def lock(self, name: str) -> NamedLock:
        with self._guard:
            found = self._locks.get(name)
            if found is None:
                found = self._locks[name] = _ProcessLock()
            return found


__all__ = [
    "CoordinationError",
    "Coordinator",
    "NamedLock",
    "ProcessCoordinator",
    "SessionBusyError",
    "SharedDocument",
]
