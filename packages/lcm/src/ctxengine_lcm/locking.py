"""One compaction per session at a time, across threads and processes.

Inside a process a lock per ``(store, session)`` pair; across processes a POSIX record lock on
one byte of ``<store>.locks`` chosen by the session id (released by the OS if the process dies,
so a crash never leaves a stale lock). Acquisition waits at most ``wait`` seconds (default: not
at all); a session still busy then is reported so the caller can answer without blocking on.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HAVE_FCNTL = sys.platform != "win32"
if HAVE_FCNTL:
    import fcntl

_guard = threading.Lock()
_thread_locks: dict[tuple[str, str], threading.Lock] = {}
_lock_files: dict[str, int] = {}


def _lock_file(db_path: Path) -> int:
    key = str(db_path.resolve())
    with _guard:
        fd = _lock_files.get(key)
        if fd is None:
            # Kept open for the life of the process: closing any descriptor of a file drops
            # every POSIX lock the process holds on it.
            fd = os.open(f"{db_path}.locks", os.O_RDWR | os.O_CREAT, 0o600)
            _lock_files[key] = fd
        return fd


def _offset(session_id: str) -> int:
    return int(hashlib.sha256(session_id.encode()).hexdigest()[:8], 16) % (2**31 - 1)


# How often a waiting caller retries the cross-process lock (fcntl has no timed wait).
_POLL_SECONDS = 0.05


@contextmanager
def session_lock(db_path: Path, session_id: str, *, wait: float = 0.0) -> Iterator[bool]:
    """Yields ``True`` while holding the session's lock, ``False`` if someone else holds it.

    :param wait: seconds to wait for a busy lock before giving up (0 = do not wait).
    """
    deadline = time.monotonic() + max(0.0, wait)
    # Resolved: two spellings of one store file must share one lock.
    key = (str(Path(db_path).resolve()), session_id)
    with _guard:
        local = _thread_locks.setdefault(key, threading.Lock())
    acquired = local.acquire(timeout=wait) if wait > 0 else local.acquire(blocking=False)
    if not acquired:
        yield False
        return
    try:
        if not HAVE_FCNTL:  # Windows: in-process locking only
            yield True
            return
        fd = _lock_file(db_path)
        offset = _offset(session_id)
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
                break
            except OSError:
                left = deadline - time.monotonic()
                if left <= 0:
                    yield False
                    return
                time.sleep(min(_POLL_SECONDS, left))
        try:
            yield True
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
    finally:
        local.release()
