"""ctxengine-fleet: the coordination backends for many worker processes and many hosts.

Installed with ``pip install 'ctxengine[fleet]'`` (the PostgreSQL driver with
``pip install 'ctxengine-fleet[postgres]'``) and selected with ``coordination.backend``:

- ``file``: POSIX record locks and JSON files in one folder, for many processes on one host
  (:mod:`ctxengine_fleet.file_backend`);
- ``postgresql``: advisory locks and one table, for workers on many hosts
  (:mod:`ctxengine_fleet.postgres_backend`, on the PostgreSQL plumbing of
  :mod:`ctxengine_fleet.postgres`, which the lossless engine's PostgreSQL store shares).

The kernel finds the plugin (:mod:`ctxengine_fleet.plugin`) through the ``ctxengine``
entry-point group and imports it only when one of these backends is selected. Importing this
package imports neither psycopg nor anything else outside the standard library and ctxengine.
"""

from __future__ import annotations

from ctxengine_fleet.file_backend import FileCoordinator, FileLock, file_lock, lock_offset

__version__ = "0.1.0"

__all__ = ["FileCoordinator", "FileLock", "__version__", "file_lock", "lock_offset"]
