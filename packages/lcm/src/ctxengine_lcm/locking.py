"""One compaction per session at a time, across threads and processes, for the SQLite store.

The file lock of the ``file`` coordination backend (:func:`ctxengine_fleet.file_lock`): a POSIX
record lock on one byte of ``<store>.locks`` chosen by the session id (released by the OS if the
process dies, so a crash never leaves a stale lock), plus a thread lock within the process.
Acquisition waits at
most ``wait`` seconds (default: not at all); a session still busy then is reported so the caller
can answer without blocking on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxengine_fleet import file_lock


@contextmanager
def session_lock(db_path: Path, session_id: str, *, wait: float = 0.0) -> Iterator[bool]:
    """Yields ``True`` while holding the session's lock, ``False`` if someone else holds it.

    :param wait: seconds to wait for a busy lock before giving up (0 = do not wait).
    """
    with file_lock(f"{db_path}.locks", session_id, wait=wait) as held:
        yield held
