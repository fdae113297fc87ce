"""Opening a store: which backend a target or the ``engines.lcm`` settings select.

Apart from :mod:`ctxengine_lcm.store` so that the repository interface never imports its own
backends (each backend builds on it); a backend's driver is imported only when it is chosen.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ctxengine_lcm.store import Store, StoreError
from ctxengine_lcm.store_sqlite import SqliteStore
from ctxengine_lcm.urls import is_database_url

if TYPE_CHECKING:
    from ctxengine_lcm.settings import LcmSettings

__all__ = ["open_store", "store_for"]


def open_store(target: str | os.PathLike[str], *, pool_size: int = 8, create: bool = True) -> Store:
    """The store at ``target``: a ``postgresql://`` URL or the path of a SQLite file.

    :param pool_size: most connections this process opens to a PostgreSQL database (shared by
        every store of the process on the same URL); ignored for SQLite.
    :param create: create the layout when the database has none (``False``: raise instead).
    :raises StoreError: the store cannot be opened, or PostgreSQL support is not installed.
    """
    if is_database_url(target):
        from ctxengine_lcm.store_postgres import PostgresStore

        return PostgresStore(str(target), pool_size=pool_size, create=create)
    path = Path(target)
    if not create and not path.exists():
        raise StoreError(f"no lcm store at {path} (it is created by the first compaction)")
    return SqliteStore(path)


def store_for(settings: LcmSettings) -> Store:
    """The store the ``engines.lcm`` settings select (``database_url`` wins over ``db_path``)."""
    if settings.database_url is not None:
        return open_store(settings.database_url, pool_size=settings.database_pool_size)
    return open_store(settings.path)
