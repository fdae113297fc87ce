"""``coordination.backend: file``: one folder on one host's local disk, and the file lock.

- **Locks**: a POSIX record lock on one byte of ``<folder>/locks`` per lock name (chosen by
  :func:`lock_offset`), plus a thread lock, since record locks exclude processes but not the
  threads of one process. The operating system releases a dead process's locks at once.
  :class:`FileLock` and :func:`file_lock` are also what the lossless engine's SQLite store locks
  its sessions with.
- **Documents**: one JSON file per name in ``<folder>/state/``, replaced by rename, so a reader
  sees the old one or the new one; a ``stat`` tells whether it changed.

Never on NFS: record locks do not cross hosts.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctxengine.coordination import CoordinationError, Coordinator, NamedLock, SharedDocument

HAVE_FCNTL = sys.platform != "win32"
if HAVE_FCNTL:
    import fcntl


def damaged(where: str, exc: Exception, delete: str) -> CoordinationError:
    """The error for a saved document at ``where`` that cannot be decoded (``exc``); ``delete``
    names what to delete to start that state afresh (both backends' wording)."""
    return CoordinationError(
        f"coordination state {where} is damaged ({exc}); delete {delete} to start that state afresh"
    )


_files_guard = threading.Lock()
_thread_locks: dict[tuple[str, int], threading.Lock] = {}
_lock_files: dict[str, int] = {}

POLL_SECONDS = 0.05
"""How often a waiting caller retries a busy file lock (``fcntl`` has no timed wait)."""


def lock_offset(name: str) -> int:
    """The byte of a lock file that stands for ``name`` (SHA-256, 31 bits)."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return int(digest[:8], 16) % (2**31 - 1)


def _lock_file(path: str) -> int:
    with _files_guard:
        fd = _lock_files.get(path)
        if fd is None:
            # Kept open for the life of the process: closing any descriptor of a file drops
            # every POSIX lock the process holds on it.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            _lock_files[path] = fd
        return fd


class FileLock:
    """The lock ``name`` in the lock file ``path``: a POSIX record lock on one byte of it
    (chosen by :func:`lock_offset`), plus a thread lock, since record locks exclude processes
    but not the threads of one process. Released by the OS when the process dies.

    Two names that share a byte (a 1 in 2**31 chance) share the lock; the only effect is that
    one holder waits for the other. Without ``fcntl`` (Windows) it excludes threads only.
    """

    def __init__(self, path: str | os.PathLike[str], name: str) -> None:
        # Resolved: two spellings of one file must share one lock.
        self.path = str(Path(path).resolve())
        self.offset = lock_offset(name)
        with _files_guard:
            self._local = _thread_locks.setdefault((self.path, self.offset), threading.Lock())

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        deadline = None if (not blocking or timeout < 0) else time.monotonic() + timeout
        if not self._local.acquire(blocking, timeout if blocking else -1):
            return False
        if not HAVE_FCNTL:
            return True
        try:
            fd = _lock_file(self.path)
            while True:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.offset)
                    return True
                except OSError:
                    if not blocking:
                        break
                    left = POLL_SECONDS if deadline is None else deadline - time.monotonic()
                    if left <= 0:
                        break
                    time.sleep(min(POLL_SECONDS, left))
        except BaseException:
            self._local.release()
            raise
        self._local.release()
        return False

    def release(self) -> None:
        try:
            if HAVE_FCNTL:
                fcntl.lockf(_lock_file(self.path), fcntl.LOCK_UN, 1, self.offset)
        finally:
            self._local.release()


@contextmanager
def file_lock(path: str | os.PathLike[str], name: str, *, wait: float = 0.0) -> Iterator[bool]:
    """Yields ``True`` while holding :class:`FileLock` ``(path, name)``, ``False`` when it
    stayed busy for ``wait`` seconds (0 = do not wait)."""
    lock = FileLock(path, name)
    held = lock.acquire(True, wait) if wait > 0 else lock.acquire(False)
    try:
        yield held
    finally:
        if held:
            lock.release()


_FileIdentity = tuple[int, int, int]


class _FileDocument(SharedDocument):
    """A document stored as ``<folder>/state/<sha256 of the name>.json``, replaced by rename."""

    def __init__(self, folder: Path, name: str) -> None:
        self.name = name
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        self.path = folder / f"{digest[:40]}.json"
        self._seen: _FileIdentity | None = None  # None: missing (as far as this object knows)

    def load(self) -> dict[str, Any] | None:
        try:
            with self.path.open("rb") as handle:
                info = os.fstat(handle.fileno())
                identity = (info.st_ino, info.st_mtime_ns, info.st_size)
                if identity == self._seen:
                    return None
                raw = handle.read()
        except FileNotFoundError:
            if self._seen is None:
                return None
            self._seen = None
            return {}
        except OSError as exc:
            raise CoordinationError(f"cannot read coordination state {self.path}: {exc}") from exc
        try:
            stored = json.loads(raw)
            document = stored["document"]
            if stored.get("name") != self.name or not isinstance(document, dict):
                raise ValueError("not the document of this name")
        except (ValueError, KeyError, TypeError) as exc:
            raise damaged(str(self.path), exc, "the file") from exc
        self._seen = identity
        return document

    def save(self, document: Mapping[str, Any]) -> None:
        data = json.dumps(
            {"name": self.name, "document": document}, ensure_ascii=False, allow_nan=False
        ).encode("utf-8", "surrogatepass")
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    info = os.fstat(handle.fileno())
                Path(tmp).replace(self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise CoordinationError(f"cannot write coordination state {self.path}: {exc}") from exc
        self._seen = (info.st_ino, info.st_mtime_ns, info.st_size)


class FileCoordinator(Coordinator):
    """``coordination.backend: file``: one folder on one host's local disk.

    :raises CoordinationError: the folder cannot be created, or this platform has no POSIX
        record locks.
    """

    backend = "file"
    shared = True

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        if not HAVE_FCNTL:
            raise CoordinationError(
                "coordination.backend: file needs POSIX record locks (fcntl), which this "
                "platform lacks; use process or postgresql"
            )
        self.folder = Path(folder).expanduser()
        try:
            (self.folder / "state").mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise CoordinationError(
                f"cannot create the coordination folder {self.folder} ({exc}); set "
                "coordination.path to a writable folder on this host's local disk"
            ) from exc
        self._locks = self.folder / "locks"

    def lock(self, name: str) -> NamedLock:
        return FileLock(self._locks, name)

    def document(self, name: str, guard: NamedLock) -> SharedDocument:
        del guard  # the file system needs no connection
        return _FileDocument(self.folder / "state", name)

    def describe(self) -> str:
        return f"file ({self.folder})"


__all__ = ["FileCoordinator", "FileLock", "damaged", "file_lock", "lock_offset"]
