"""The plugin behind ``coordination.backend: file`` and ``coordination.backend: postgresql``.

The kernel loads it (an extension, found under the names ``coordination.file`` and
``coordination.postgresql`` in the ``ctxengine`` entry-point group) only when one of its
backends is selected. It declares its keys in the ``coordination`` section, the ones the kernel
documented before the backends left it, and opens the selected backend when asked.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from ctxengine import Config, PluginSettings, SettingsSpec, SettingsView, hookimpl, setting
from ctxengine.coordination import Coordinator
from ctxengine_fleet.postgres import is_database_url

CTXENGINE_KIND = "extension"

BACKENDS = ("file", "postgresql")
"""The ``coordination.backend`` values this plugin provides."""


@attrs.frozen
class FleetSettings:
    """The backends' keys in ``coordination:`` (each read by one backend only).

    :ivar path: the ``file`` backend's folder (``None``: ``<home>/coordination``).
    :ivar database_url: the ``postgresql`` backend's database.
    :ivar pool_size: most connections one process opens to ``database_url``.
    """

    path: str | None = setting(
        "str",
        nullable=True,
        doc="the file backend's folder, on local disk (null = <home>/coordination)",
    )
    database_url: str | None = setting(
        "str",
        nullable=True,
        secret=True,
        env="CTXENGINE_COORDINATION_URL",
        doc="the postgresql backend's database (postgresql://...); may be lcm's",
    )
    pool_size: int = setting(
        "int",
        4,
        ge=1,
        doc="most connections per process to database_url (a session call holds one)",
    )


def _backend_options(view: SettingsView) -> None:
    """``database_url`` is required by ``postgresql`` and read by nothing else, ``path`` is read
    by ``file`` only (a key the chosen backend ignores is a mistake worth saying)."""
    backend, url, path = "coordination.backend", "coordination.database_url", "coordination.path"
    if view.has_problem(backend, url, path):
        return
    chosen, given_url = view.value(backend), view.value(url)
    if given_url is not None and not is_database_url(given_url):
        view.problem(url, "must be a postgresql:// (or postgres://) URL")
    elif chosen == "postgresql" and given_url is None:
        view.problem(url, "must be set when coordination.backend is postgresql")
    elif chosen != "postgresql" and given_url is not None:
        view.problem(url, f"is read by coordination.backend: postgresql only (it is {chosen})")
    if chosen != "file" and view.value(path) is not None:
        view.problem(path, f"is read by coordination.backend: file only (it is {chosen})")


SETTINGS = SettingsSpec.of(
    "coordination",
    FleetSettings,
    checks=(_backend_options,),
    doc="the file and postgresql coordination backends (ctxengine-fleet)",
)


@hookimpl
def declare_settings(settings: PluginSettings) -> None:
    settings.add(SETTINGS)


@hookimpl
def coordination_backend(backend: str, config: Config, data_dir: Path) -> Coordinator | None:
    """The ``file`` or ``postgresql`` backend as ``coordination:`` configures it."""
    if backend not in BACKENDS:
        return None
    options: FleetSettings = config.settings(SETTINGS)
    if backend == "file":
        from ctxengine_fleet.file_backend import FileCoordinator

        return FileCoordinator(Path(options.path) if options.path else data_dir / "coordination")
    from ctxengine_fleet.postgres_backend import PostgresCoordinator

    if options.database_url is None:  # the settings check refuses this; hand-built ones
        raise ValueError("coordination.database_url must be set for the postgresql backend")
    return PostgresCoordinator(options.database_url, pool_size=options.pool_size)


__all__ = ["BACKENDS", "CTXENGINE_KIND", "SETTINGS", "FleetSettings"]
