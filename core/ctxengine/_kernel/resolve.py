"""Finding plugins without importing them, then importing only the ones a kernel selects.

Where plugins come from, in resolution order (the first place that has a name wins):

1. **directory**: ``<home>/plugins/context_engine/<name>/__init__.py`` and every folder in
   ``context.plugin_dirs``;
2. **registry**: installed distributions' entry points — ``ctxengine.engines``,
   ``ctxengine.cache_strategies``, ``ctxengine.extensions`` (opt-in, loaded when
   ``context.extensions`` names them) and ``ctxengine.always_on`` (extensions loaded by every
   kernel) — plus the legacy group ``ctxengine`` (kind read from the plugin when it is imported)
   and plugins added at run time with :func:`register_engine`;
3. **builtin**: the plugins shipped inside ``ctxengine``, imported by module name
   (:data:`BUILTINS`), so the fallback engine never depends on installed metadata.

:func:`discover` lists candidates from folder names and entry-point metadata only; nothing is
imported until :meth:`Catalog.resolve` (one name, for a kernel) or :meth:`Catalog.load_all`
(``ctxengine engines``). Every plugin is loaded on its own, so a broken one becomes a
:class:`PluginEntry` with an ``error`` while the others load normally.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ctxengine.hookspecs import PROJECT

Source = Literal["directory", "registry", "builtin"]
Kind = Literal["engine", "cache_strategy", "extension"]
KINDS: tuple[Kind, ...] = ("engine", "cache_strategy", "extension")
_KIND_OF: dict[str, Kind] = {kind: kind for kind in KINDS}

ENTRY_POINT_GROUPS: dict[str, Kind] = {
    "ctxengine.engines": "engine",
    "ctxengine.cache_strategies": "cache_strategy",
    "ctxengine.extensions": "extension",
    "ctxengine.always_on": "extension",
}
"""Entry-point group -> the kind of every plugin in it."""

ALWAYS_ON_GROUP = "ctxengine.always_on"
LEGACY_GROUP = PROJECT
"""The seed's single group; its plugins declare their kind with ``CTXENGINE_KIND``."""

DIRECTORY_MODULE_PREFIX = "ctxengine_dir_plugins"


@attrs.frozen
class Builtin:
    """A plugin shipped inside the ``ctxengine`` distribution."""

    kind: Kind
    module: str
    always_on: bool = False


BUILTINS: dict[str, Builtin] = {
    "compressor": Builtin("engine", "ctxengine_compressor"),
    "system_and_3": Builtin("cache_strategy", "ctxengine_caching"),
    "tool_turns": Builtin("cache_strategy", "ctxengine_tool_turns"),
    "hygiene": Builtin("extension", "ctxengine_hygiene", always_on=True),
    "native": Builtin("engine", "ctxengine_native"),
}
"""The built-in tier, imported by module name."""

DEFAULT_ENGINE = "compressor"

# Engines with an extra of their own get the exact install line in warnings.
INSTALL_HINTS = {
    "lcm": "pip install 'ctxengine[lcm]' (from a clone of the repository: "
    "pip install -e packages/lcm)"
}


@attrs.frozen
class Candidate:
    """A plugin found somewhere, not imported yet.

    :ivar kind: known from where it was found; ``None`` for directory plugins and the legacy
        entry-point group, whose kind is read from the plugin once imported.
    :ivar always_on: an extension loaded by every kernel.
    """

    name: str
    kind: Kind | None
    source: Source
    location: str
    load: Callable[[], object] = attrs.field(repr=False, eq=False)
    distribution: str | None = None
    version: str | None = None
    always_on: bool = False


@attrs.frozen
class PluginEntry:
    """One plugin, imported (or failed to import).

    :ivar source: ``directory``, ``registry`` or ``builtin``.
    :ivar location: the folder, ``dist==version`` (``ctxengine==...`` for the built-ins) or
        ``register_engine()``.
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
    always_on: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.plugin is not None


_ORDER: dict[Source, int] = {"directory": 0, "registry": 1, "builtin": 2}


@attrs.frozen
class Catalog:
    """Every plugin candidate, in resolution order (directory, registry, builtin)."""

    candidates: tuple[Candidate, ...]
    searched: tuple[str, ...]
    """Human-readable list of every place searched, for "not found" messages."""

    def named(self, name: str) -> list[Candidate]:
        return [c for c in self.candidates if c.name == name]

    def resolve(self, name: str, kind: Kind) -> tuple[PluginEntry | None, list[PluginEntry]]:
        """Import the plugin ``name`` resolves to for ``kind``.

        Candidates of another declared kind are skipped; a candidate whose kind is unknown is
        imported to find out. :returns: the winning entry (``None`` when nothing loads as that
        kind) and every entry tried on the way (failures included, for messages).
        """
        tried: list[PluginEntry] = []
        for candidate in self.named(name):
            if candidate.kind is not None and candidate.kind != kind:
                continue
            entry = load_candidate(candidate)
            tried.append(entry)
            if entry.ok and entry.kind == kind:
                return entry, tried
            if entry.error is not None:
                # The first place that has the name wins: a broken plugin there is not replaced
                # silently by one further down.
                return None, tried
        return None, tried

    def always_on(self) -> list[Candidate]:
        """Extensions every kernel loads (first place wins per name)."""
        seen: set[str] = set()
        found: list[Candidate] = []
        for candidate in self.candidates:
            if candidate.name in seen:
                continue
            seen.add(candidate.name)
            if candidate.always_on:
                found.append(candidate)
        return found

    def load_all(self) -> list[PluginEntry]:
        """Import every candidate (for ``ctxengine engines``); later places that have a name
        already found are marked ``shadowed_by`` the winner."""
        entries: list[PluginEntry] = []
        winners: dict[str, Candidate] = {}
        for candidate in self.candidates:
            entry = load_candidate(candidate)
            first = winners.setdefault(candidate.name, candidate)
            if first is not candidate:
                entry = attrs.evolve(entry, shadowed_by=f"{first.source} {first.location}")
            entries.append(entry)
        return entries

    def winner(self, name: str) -> PluginEntry | None:
        """The plugin ``name`` resolves to whatever its kind (imported), or ``None``."""
        found = self.named(name)
        return load_candidate(found[0]) if found else None


_runtime_lock = threading.Lock()
_runtime: dict[str, tuple[Any, Kind]] = {}


class Registration:
    """What :func:`register_engine` returns: :meth:`close` (or leaving a ``with`` block on it)
    forgets the plugin again. A registration that a later one replaced forgets nothing."""

    def __init__(self, name: str, entry: tuple[Any, Kind]) -> None:
        self.name = name
        self._entry = entry

    def close(self) -> None:
        """Forget the plugin, unless another one was registered under its name since."""
        with _runtime_lock:
            if _runtime.get(self.name) is self._entry:
                del _runtime[self.name]

    def __enter__(self) -> Registration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def register_engine(name: str, plugin: object, *, kind: Kind = "engine") -> Registration:
    """Make ``plugin`` available under ``name`` without installing a distribution, until the
    returned registration is closed (``with register_engine(...):`` scopes it to a block).

    It is resolved like an installed plugin (source ``registry``) and, like every engine, only
    used when ``context.engine`` names it (a cache strategy: ``prompt_caching.strategy``; an
    extension: ``context.extensions``). Registering a name twice replaces the earlier object.

    :raises ValueError: for an empty name or an unknown kind.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError("register_engine: the engine name must be a non-empty string")
    if kind not in KINDS:
        raise ValueError(f"register_engine: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    entry = (plugin, kind)
    with _runtime_lock:
        _runtime[name] = entry
    return Registration(name, entry)


def plugin_kind(plugin: object) -> str:
    """The plugin's declared ``CTXENGINE_KIND`` (``"engine"`` when it declares none)."""
    kind = getattr(plugin, "CTXENGINE_KIND", "engine")
    return kind if isinstance(kind, str) else repr(kind)


def describe_error(exc: BaseException) -> str:
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
        return describe_error(exc)
    return None


def load_candidate(candidate: Candidate) -> PluginEntry:
    """Import ``candidate`` and check it: its declared kind matches where it was found and its
    hooks match the hookspecs. Never raises (except ``KeyboardInterrupt``)."""
    try:
        plugin = candidate.load()
        error = None
    except BaseException as exc:  # a plugin may raise anything while importing, even SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        plugin, error = None, describe_error(exc)
    kind: Kind = candidate.kind or "engine"
    if plugin is not None:
        declared = plugin_kind(plugin)
        if declared not in KINDS:
            error = f"CTXENGINE_KIND must be one of {', '.join(KINDS)}, not {declared!r}"
        elif candidate.kind is None:
            kind = _KIND_OF[declared]
        elif hasattr(plugin, "CTXENGINE_KIND") and declared != candidate.kind:
            error = (
                f"declares CTXENGINE_KIND {declared!r} but was found as a {candidate.kind} "
                f"({candidate.location})"
            )
        if error is None:
            error = hook_problem(plugin)
    return PluginEntry(
        name=candidate.name,
        kind=kind,
        source=candidate.source,
        location=candidate.location,
        plugin=plugin if error is None else None,
        distribution=candidate.distribution,
        version=candidate.version,
        error=error,
        always_on=candidate.always_on,
    )


def directory_roots(home: Path, plugin_dirs: Sequence[str]) -> list[Path]:
    """The folders searched for directory plugins, in order."""
    roots = [home / "plugins" / "context_engine"]
    roots.extend(Path(d).expanduser() for d in plugin_dirs)
    return roots


def _load_directory_plugin(name: str, folder: Path) -> object:
    init = folder / "__init__.py"
    module_name = f"{DIRECTORY_MODULE_PREFIX}.{name}"
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(init):
        return loaded
    spec = importlib.util.spec_from_file_location(
        module_name, init, submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {init}")
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so the plugin's own relative imports resolve.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _directory_candidates(roots: Iterable[Path]) -> list[Candidate]:
    found: list[Candidate] = []
    for root in roots:
        if not root.is_dir():
            continue
        # A listed folder that is itself a plugin counts under its own name.
        folders = [root] if (root / "__init__.py").is_file() else sorted(root.iterdir())
        for folder in folders:
            if not (folder / "__init__.py").is_file():
                continue
            name = folder.name

            def load(name: str = name, folder: Path = folder) -> object:
                return _load_directory_plugin(name, folder)

            found.append(Candidate(name, None, "directory", str(folder), load))
    return found


def _entry_point_candidates() -> list[Candidate]:
    import importlib_metadata

    found: list[Candidate] = []
    groups: list[tuple[str, Kind | None]] = [*ENTRY_POINT_GROUPS.items(), (LEGACY_GROUP, None)]
    for group, kind in groups:
        for ep in importlib_metadata.entry_points(group=group):
            dist = ep.dist
            dist_name = dist.metadata["Name"] if dist is not None else None
            version = dist.version if dist is not None else None
            location = f"{dist_name}=={version}" if dist_name else ep.value
            found.append(
                Candidate(
                    ep.name,
                    kind,
                    "registry",
                    location,
                    ep.load,
                    distribution=dist_name,
                    version=version,
                    always_on=group == ALWAYS_ON_GROUP,
                )
            )
    return found


def _runtime_candidates() -> list[Candidate]:
    with _runtime_lock:
        items = list(_runtime.items())
    return [
        Candidate(name, kind, "registry", "register_engine()", functools.partial(_same, plugin))
        for name, (plugin, kind) in items
    ]


def _same(plugin: object) -> object:
    return plugin


def _builtin_candidates() -> list[Candidate]:
    from ctxengine._version import __version__

    return [
        Candidate(
            name,
            builtin.kind,
            "builtin",
            f"ctxengine=={__version__}",
            functools.partial(importlib.import_module, builtin.module),
            distribution="ctxengine",
            version=__version__,
            always_on=builtin.always_on,
        )
        for name, builtin in BUILTINS.items()
    ]


def discover(home: Path, plugin_dirs: Sequence[str] = ()) -> Catalog:
    """List every plugin candidate: directory -> registry -> builtin; nothing is imported."""
    roots = directory_roots(home, plugin_dirs)
    found = (
        _directory_candidates(roots)
        + _runtime_candidates()
        + _entry_point_candidates()
        + _builtin_candidates()
    )
    found.sort(key=lambda c: _ORDER[c.source])  # stable: keeps discovery order within a place
    groups = ", ".join(repr(g) for g in (*ENTRY_POINT_GROUPS, LEGACY_GROUP))
    searched = (
        *(f"directory {root}" for root in roots),
        f"entry points of groups {groups} (installed distributions)",
        "register_engine()",
        "builtin",
    )
    return Catalog(candidates=tuple(found), searched=searched)


def builtin_entry(name: str) -> PluginEntry:
    """The built-in plugin ``name``, imported by module name (never through metadata)."""
    (candidate,) = [c for c in _builtin_candidates() if c.name == name]
    return load_candidate(candidate)


def install_hint(name: str) -> str:
    """The command that would install engine ``name``."""
    return INSTALL_HINTS.get(name, f"pip install ctxengine-{name}")
