"""Finding plugins: plugin directories, then installed distributions, then the built-ins.

Every place is searched on its own and every plugin is loaded on its own, so one broken plugin
shows up as a :class:`PluginEntry` with an ``error`` while the others load normally. Nothing here
runs at import time; :func:`discover` is called when a kernel or the CLI is built.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ctxengine.hookspecs import PROJECT

Source = Literal["directory", "registry", "builtin"]
Kind = Literal["engine", "cache_strategy", "extension"]
KINDS: tuple[Kind, ...] = ("engine", "cache_strategy", "extension")
_KINDS_BY_NAME: dict[str, Kind] = {kind: kind for kind in KINDS}

ENTRY_POINT_GROUP = PROJECT
BUILTIN_DISTRIBUTION = "ctxengine"
DIRECTORY_MODULE_PREFIX = "ctxengine_dir_plugins"

# Engines with an extra of their own get the exact install line in warnings.
INSTALL_HINTS = {"lcm": "pip install 'ctxengine[lcm]'"}


@attrs.frozen
class PluginEntry:
    """One plugin found somewhere, loaded or not.

    :ivar source: ``directory`` (a plugin folder), ``registry`` (an installed distribution's entry
        point or :func:`register_engine`) or ``builtin`` (shipped inside ``ctxengine``).
    :ivar location: the folder, ``dist==version`` or ``register_engine()``.
    :ivar plugin: the loaded module or object, ``None`` when loading failed.
    :ivar error: why loading failed (``"ImportError: ..."``), else ``None``.
    :ivar shadowed_by: set when a plugin of the same name from an earlier place wins.
    """

    name: str
    kind: Kind
    source: Source
    location: str
    plugin: Any = attrs.field(default=None, repr=False, eq=False)
    distribution: str | None = None
    version: str | None = None
    error: str | None = None
    shadowed_by: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.plugin is not None


@attrs.frozen
class Catalog:
    """Every plugin found, in resolution order (directory, registry, builtin)."""

    entries: tuple[PluginEntry, ...]
    searched: tuple[str, ...]
    """Human-readable list of every place searched, for "not found" messages."""

    def winner(self, name: str) -> PluginEntry | None:
        """The entry that ``name`` resolves to (the first place that has it), or ``None``."""
        for entry in self.entries:
            if entry.name == name and entry.shadowed_by is None:
                return entry
        return None

    def active_of_kind(self, kind: Kind) -> list[PluginEntry]:
        """Loaded, unshadowed entries of ``kind``."""
        return [e for e in self.entries if e.kind == kind and e.ok and e.shadowed_by is None]

    def names(self, kind: Kind | None = None) -> list[str]:
        return sorted(
            {e.name for e in self.entries if kind is None or e.kind == kind},
        )


_runtime_lock = threading.Lock()
_runtime: dict[str, tuple[Any, Kind]] = {}


def register_engine(name: str, plugin: object, *, kind: Kind = "engine") -> None:
    """Make ``plugin`` available under ``name`` without installing a distribution.

    It is resolved like an installed engine (source ``registry``) and, like every engine, only
    used when ``context.engine`` names it. Registering a name twice replaces the earlier object.

    :raises ValueError: for an empty name or an unknown kind.
    """
    if not name or not name.strip():
        raise ValueError("register_engine: the engine name must be a non-empty string")
    if kind not in KINDS:
        raise ValueError(f"register_engine: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    with _runtime_lock:
        _runtime[name] = (plugin, kind)


def unregister_engine(name: str) -> None:
    """Forget an engine added with :func:`register_engine` (no error when it is absent)."""
    with _runtime_lock:
        _runtime.pop(name, None)


def plugin_kind(plugin: object) -> str:
    """The plugin's declared ``CTXENGINE_KIND`` (``"engine"`` when it declares none)."""
    kind = getattr(plugin, "CTXENGINE_KIND", "engine")
    return kind if isinstance(kind, str) else repr(kind)


def _describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def hook_problem(plugin: object) -> str | None:
    """Why ``plugin`` cannot be registered (an unknown hook name, arguments that are not in the
    hookspec, ...), checked against the hookspecs on a throwaway plugin manager; ``None`` if fine.
    """
    import pluggy

    from ctxengine import hookspecs

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(plugin)
        pm.check_pending()
    except Exception as exc:
        return _describe_error(exc)
    return None


def _entry(
    name: str,
    source: Source,
    location: str,
    plugin: object | None,
    error: str | None,
    distribution: str | None = None,
    version: str | None = None,
) -> PluginEntry:
    kind: Kind = "engine"
    if plugin is not None and error is None:
        declared = plugin_kind(plugin)
        known = _KINDS_BY_NAME.get(declared)
        if known is not None:
            kind = known
            error = hook_problem(plugin)
        else:
            error = f"CTXENGINE_KIND must be one of {', '.join(KINDS)}, not {declared!r}"
    return PluginEntry(
        name=name,
        kind=kind,
        source=source,
        location=location,
        plugin=plugin if error is None else None,
        distribution=distribution,
        version=version,
        error=error,
    )


def directory_roots(home: Path, plugin_dirs: Sequence[str]) -> list[Path]:
    """The folders searched for directory plugins, in order."""
    roots = [home / "plugins" / "context_engine"]
    roots.extend(Path(d).expanduser() for d in plugin_dirs)
    return roots


def _load_directory_plugin(name: str, folder: Path) -> tuple[object | None, str | None]:
    init = folder / "__init__.py"
    module_name = f"{DIRECTORY_MODULE_PREFIX}.{name}"
    spec = importlib.util.spec_from_file_location(
        module_name, init, submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        return None, f"cannot import {init}"
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so the plugin's own relative imports resolve.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # a plugin may raise anything, even SystemExit
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None, _describe_error(exc)
    return module, None


def _directory_entries(roots: Iterable[Path]) -> list[PluginEntry]:
    entries: list[PluginEntry] = []
    for root in roots:
        if not root.is_dir():
            continue
        # A listed folder that is itself a plugin counts under its own name.
        candidates = [root] if (root / "__init__.py").is_file() else sorted(root.iterdir())
        for folder in candidates:
            if not (folder / "__init__.py").is_file():
                continue
            plugin, error = _load_directory_plugin(folder.name, folder)
            entries.append(_entry(folder.name, "directory", str(folder), plugin, error))
    return entries


def _entry_point_entries() -> list[PluginEntry]:
    import importlib_metadata

    entries: list[PluginEntry] = []
    for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        dist_name = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
        builtin = dist_name is not None and dist_name.lower() == BUILTIN_DISTRIBUTION
        location = f"{dist_name}=={version}" if dist_name else ep.value
        try:
            plugin = ep.load()
            error = None
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            plugin, error = None, _describe_error(exc)
        entries.append(
            _entry(
                ep.name,
                "builtin" if builtin else "registry",
                location,
                plugin,
                error,
                distribution=dist_name,
                version=version,
            )
        )
    return entries


def _runtime_entries() -> list[PluginEntry]:
    with _runtime_lock:
        items = list(_runtime.items())
    return [
        attrs.evolve(_entry(name, "registry", "register_engine()", plugin, None), kind=kind)
        for name, (plugin, kind) in items
    ]


_ORDER: Mapping[Source, int] = {"directory": 0, "registry": 1, "builtin": 2}


def discover(home: Path, plugin_dirs: Sequence[str] = ()) -> Catalog:
    """Find and load every plugin: directory -> registry -> builtin.

    When one name is found in several places the earliest place wins; the others stay in the
    catalog with ``shadowed_by`` set, so ``ctxengine engines`` can show them.
    """
    roots = directory_roots(home, plugin_dirs)
    found = _directory_entries(roots) + _runtime_entries() + _entry_point_entries()
    found.sort(key=lambda e: _ORDER[e.source])  # stable: keeps discovery order within a place
    winners: dict[str, PluginEntry] = {}
    entries: list[PluginEntry] = []
    for entry in found:
        first = winners.get(entry.name)
        if first is None:
            winners[entry.name] = entry
            entries.append(entry)
        else:
            entries.append(attrs.evolve(entry, shadowed_by=f"{first.source} {first.location}"))
    searched = (
        *(f"directory {root}" for root in roots),
        f"entry points of group {ENTRY_POINT_GROUP!r} (installed distributions)",
        "register_engine()",
        "builtin",
    )
    return Catalog(entries=tuple(entries), searched=searched)


def install_hint(name: str) -> str:
    """The command that would install engine ``name``."""
    return INSTALL_HINTS.get(name, f"pip install ctxengine-{name}")
