"""The coordination SDK: what a coordination backend (or a host) needs from the kernel.

This module is part of the declared SDK (see ``docs/sdk.md``); the modules it re-exports from
are private and may move.

- the contract behind ``coordination.backend``: :class:`Coordinator` with its
  :class:`NamedLock` and :class:`SharedDocument`, the errors, and the kernel's own ``process``
  backend (:class:`ProcessCoordinator`). A plugin named ``coordination.<backend>`` provides
  any other backend through the ``coordination_backend`` hook (``ctxengine-fleet`` has ``file``
  and ``postgresql``);
- :func:`redact_url`: a database URL with its password as ``***``, as ``ctxengine config``
  prints it.

Importing it imports nothing outside the standard library and the kernel.
"""

from __future__ import annotations

from ctxengine._config.urls import redact_url
from ctxengine._kernel.coordination import (
    CoordinationError,
    Coordinator,
    NamedLock,
    ProcessCoordinator,
    SessionBusyError,
    SharedDocument,
)

__all__ = [
    "CoordinationError",
    "Coordinator",
    "NamedLock",
    "ProcessCoordinator",
    "SessionBusyError",
    "SharedDocument",
    "redact_url",
]
