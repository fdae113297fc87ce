"""The coordination backend a configuration selects (``coordination.backend``).

``process`` is the kernel's own (:class:`~ctxengine._kernel.coordination.ProcessCoordinator`);
any other name comes from the extension plugin named ``coordination.<name>``, found like any
plugin (a directory, an entry point in the ``ctxengine`` group declaring
``CTXENGINE_KIND = "extension"``, ``register_engine``) and imported only when its backend is
selected. That plugin declares its own keys in the ``coordination`` section and opens the
backend in the ``coordination_backend`` hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine._config.fields import ConfigError, ConfigProblem
from ctxengine._kernel.coordination import CoordinationError, Coordinator, ProcessCoordinator

if TYPE_CHECKING:
    from pathlib import Path

    from ctxengine._config.core import Config
    from ctxengine._kernel.hooks import Hooks
    from ctxengine._kernel.resolve import Catalog, PluginEntry

BACKEND_KEY = "coordination.backend"

PROVIDER_PREFIX = "coordination."
"""The plugin of backend ``<name>`` is named ``coordination.<name>``."""

INSTALL_HINT = (
    "pip install 'ctxengine[fleet]' (from a clone of the repository: pip install -e packages/fleet)"
)
"""How to get the ``file`` and ``postgresql`` backends (the ``ctxengine-fleet`` package)."""


def select_provider(backend: str, catalog: Catalog) -> PluginEntry | None:
    """The plugin (imported) that provides ``coordination.backend: backend``; ``None`` for
    ``process``, which the kernel has itself.

    :raises ConfigError: no plugin provides it; the message names the key, the value, the
        backends that are available and how to install the package that has the others.
    """
    if backend == ProcessCoordinator.backend:
        return None
    entry, tried = catalog.resolve(PROVIDER_PREFIX + backend, "extension")
    if entry is not None:
        return entry
    prefix = len(PROVIDER_PREFIX)
    names = sorted({c.name for c in catalog.candidates})
    installed = [n[prefix:] for n in names if n.startswith(PROVIDER_PREFIX)]
    broken = next((t for t in tried if t.error is not None), None)
    why = f" (plugin {broken.name!r} failed to load: {broken.error})" if broken else ""
    rule = (
        f"no plugin provides this backend{why}; available: "
        f"{', '.join([ProcessCoordinator.backend, *installed])}. The file and postgresql "
        f"backends come with ctxengine-fleet: {INSTALL_HINT}"
    )
    raise ConfigError([ConfigProblem(BACKEND_KEY, backend, rule, None)])


def open_coordinator(hooks: Hooks, config: Config, data_dir: Path) -> Coordinator:
    """The backend ``config.coordination.backend`` names: the kernel's own ``process`` one, else
    what its plugin answers to ``coordination_backend`` (``data_dir``: where a backend keeps
    files by default).

    :raises CoordinationError: the backend cannot be opened (the message says why).
    :raises ImportError: the backend's driver is missing (the message holds the pip line).
    """
    backend = config.coordination.backend
    if backend == ProcessCoordinator.backend:
        return ProcessCoordinator()
    found = hooks.coordinator(backend, config, data_dir)
    if found is None:
        raise CoordinationError(
            f"{BACKEND_KEY}: {backend}: plugin {PROVIDER_PREFIX}{backend!s} answered no coordinator"
        )
    return found


__all__ = ["open_coordinator", "select_provider"]
