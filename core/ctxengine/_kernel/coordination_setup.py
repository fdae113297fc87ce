"""The coordination backend a configuration selects (``coordination.backend``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ctxengine._config.core import CoordinationSettings
from ctxengine._config.files import ctxengine_home
from ctxengine._kernel.coordination import Coordinator, FileCoordinator, ProcessCoordinator


def open_coordinator(
    settings: CoordinationSettings, env: Mapping[str, str] | None = None
) -> Coordinator:
    """The backend ``settings`` select; ``env`` gives ``$CTXENGINE_HOME`` for the file
    backend's default folder (``<home>/coordination``).

    :raises CoordinationError: the backend cannot be opened (the message says why).
    :raises ImportError: the ``postgresql`` backend without psycopg (the message holds the
        pip line).
    """
    if settings.backend == "file":
        folder = Path(settings.path) if settings.path else ctxengine_home(env) / "coordination"
        return FileCoordinator(folder)
    if settings.backend == "postgresql":
        from ctxengine._kernel.coordination_postgres import PostgresCoordinator

        if settings.database_url is None:  # the settings check refuses this; hand-built ones
            raise ValueError("coordination.database_url must be set for the postgresql backend")
        return PostgresCoordinator(settings.database_url, pool_size=settings.pool_size)
    return ProcessCoordinator()


__all__ = ["open_coordinator"]
