"""A session served by many processes: its lock and its saved state on a shared backend.

On a shared coordination backend (``file``, ``postgresql``) a :class:`~ctxengine.Session`'s
lock is a :class:`SharedSessionLock`. Around the outermost session call (nested calls such as
``maybe_compress`` -> ``should_compress`` count once) it

1. takes the cross-process lock ``session:<id>`` (waiting up to ``coordination.lock_timeout_s``,
   then :class:`~ctxengine.SessionBusyError`), so calls on one session never overlap anywhere;
2. reads the session's document (a version check when nothing changed) and, when another
   process wrote it since, replaces this process's view: the kernel's own session state
   (token calibration, last usage, cache statistics) and every plugin's declared
   :class:`~ctxengine.SessionState`, which is decoded on the plugin's first access;
3. runs the call;
4. writes the document again when anything in it changed, and releases the lock.

So a session handled by worker A on one turn and worker B on the next behaves as if one process
had served both. The document::

    {"format": 1,
     "kernel": {"ratio": ..., "observations": ..., "last_usage": {...}, ...},
     "plugins": {"<key>": {"v": <spec version>, "at": <wall-clock save time>, "data": ...}}}

Entries of plugins this process does not load are kept and written back as they were. A
failed write is logged and retried by the next call (this process keeps its state meanwhile);
a failed read or lock is a :class:`~ctxengine.CoordinationError` for the caller.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ctxengine._kernel.coordination import CoordinationError, Coordinator, SessionBusyError
from ctxengine._plugin.context import EngineContext
from ctxengine._plugin.state import Undecoded

log = logging.getLogger("ctxengine")

DOCUMENT_FORMAT = 1
"""The layout of a saved session document."""

KernelState = dict[str, Any]


def local_time(saved_wall: float, now: float, wall_now: float) -> float:
    """The moment of wall-clock time ``saved_wall`` (another process's save) on this process's
    clock, whose ``now`` is ``wall_now`` on the wall clock; never later than ``now``."""
    return now - max(0.0, wall_now - saved_wall)


class SharedSessionLock:
    """A session's lock on a shared backend (see the module docstring); used as
    ``with lock:`` exactly like the :class:`threading.RLock` it replaces.

    :param export_kernel: the kernel's own session state as JSON data.
    :param import_kernel: sets it from such data (from another process).
    :param wall_clock: seconds on a clock every process agrees on, to carry deadlines over.
    """

    def __init__(
        self,
        ctx: EngineContext,
        coordinator: Coordinator,
        *,
        timeout: float,
        export_kernel: Callable[[], KernelState],
        import_kernel: Callable[[KernelState], None],
        wall_clock: Callable[[], float],
    ) -> None:
        self.name = f"session:{ctx.session_id}"
        self._ctx = ctx
        self._timeout = timeout
        self._export_kernel = export_kernel
        self._import_kernel = import_kernel
        self._wall = wall_clock
        self._local = threading.RLock()
        self._depth = 0
        self._lock = coordinator.lock(self.name)
        document = coordinator.document(self.name, self._lock)
        if document is None:
            raise ValueError(f"the {coordinator.backend} coordination backend shares nothing")
        self._document = document
        self._last: dict[str, Any] = {}  # as last read or written (what a save compares with)

    def __enter__(self) -> None:
        self._local.acquire()
        if self._depth == 0:
            try:
                self._begin()
            except BaseException:
                self._local.release()
                raise
        self._depth += 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._end()
        finally:
            self._local.release()

    def _begin(self) -> None:
        if not self._lock.acquire(True, self._timeout):
            raise SessionBusyError(
                f"session {self._ctx.session_id!r}: another worker's call held its lock for "
                f"over {self._timeout:g} s (coordination.lock_timeout_s)"
            )
        try:
            document = self._document.load()
            if document is not None:
                self._import(document)
                self._last = document
        except BaseException:
            self._lock.release()
            raise

    def _end(self) -> None:
        try:
            document = self._export()
            if document != self._last:
                try:
                    self._document.save(document)
                    self._last = document
                except CoordinationError as exc:
                    log.error(
                        "session %r: its state could not be saved (%s); this process keeps it "
                        "and the next call saves it again",
                        self._ctx.session_id,
                        exc,
                    )
        finally:
            self._lock.release()

    # -- the document ----------------------------------------------------------------------

    def _import(self, document: dict[str, Any]) -> None:
        ctx = self._ctx
        kernel = document.get("kernel")
        if isinstance(kernel, dict):
            try:
                self._import_kernel(kernel)
            except (TypeError, ValueError, KeyError) as exc:
                log.warning(
                    "session %r: the kernel's saved session state could not be read (%s); "
                    "keeping this process's",
                    ctx.session_id,
                    exc,
                )
        for key in [
            k for k, v in ctx.state.items() if k in ctx.state_specs or isinstance(v, Undecoded)
        ]:
            del ctx.state[key]
        ctx.state_specs.clear()
        plugins = document.get("plugins")
        if not isinstance(plugins, dict):
            return
        now, wall = ctx.clock(), self._wall()
        for key, entry in plugins.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("at"), int | float):
                log.warning("session %r: saved state %r is damaged; dropped", ctx.session_id, key)
                continue
            ctx.state[key] = Undecoded(entry, local_time(float(entry["at"]), now, wall))

    def _export(self) -> dict[str, Any]:
        ctx = self._ctx
        previous = self._last.get("plugins")
        previous = previous if isinstance(previous, dict) else {}
        plugins: dict[str, Any] = {}
        now: float | None = None
        for key, value in ctx.state.items():
            if isinstance(value, Undecoded):
                plugins[key] = value.entry
                continue
            spec = ctx.state_specs.get(key)
            if spec is None:
                continue  # in-process state (plugin_state): never saved
            if now is None:
                now = ctx.clock()
            try:
                data = spec.dump(value, now)
            except Exception as exc:
                log.error("session %r: state %r could not be saved: %s", ctx.session_id, key, exc)
                continue
            old = previous.get(key)
            if isinstance(old, dict) and old.get("v") == spec.version and old.get("data") == data:
                plugins[key] = old  # unchanged: keep its save time (its durations start there)
                continue
            try:
                json.dumps(data, allow_nan=False)
            except (TypeError, ValueError) as exc:
                log.error(
                    "session %r: state %r is not JSON data (%s); it is not saved",
                    ctx.session_id,
                    key,
                    exc,
                )
                continue
            plugins[key] = {"v": spec.version, "at": self._wall(), "data": data}
        return {"format": DOCUMENT_FORMAT, "kernel": self._export_kernel(), "plugins": plugins}


__all__ = ["DOCUMENT_FORMAT", "SharedSessionLock"]
