"""The configuration reference, generated from the declared settings.

``ctxengine config --reference`` prints it; ``docs/configuration.md`` holds it below a marker
line (``nox -s docs`` rewrites that part, and a test checks it is current). Every key comes from
a :class:`~ctxengine.SettingsSpec`: the kernel's own, then each plugin's, so the reference can
never drift from what ``load()`` validates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pluggy

from ctxengine import hookspecs
from ctxengine._config.core import CORE_SPECS, MODEL_OVERRIDE_FIELDS
from ctxengine._config.fields import Field, format_value
from ctxengine._config.spec import CORE_OWNER, OwnedSpec, SettingsRegistry
from ctxengine._kernel.hooks import Hooks, guarded
from ctxengine._kernel.resolve import PluginEntry, discover

MARKER = "<!-- generated from the declared settings: `nox -s docs` rewrites everything below -->"


def _default(field: Field) -> str:
    value = field.default
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return format_value(value).replace("'", "")


def _allowed(field: Field) -> str:
    return field.allowed().removeprefix("must be ").replace("|", "\\|")


def _table(rows: Iterable[tuple[str, Field]]) -> list[str]:
    lines = [
        "| key | default | allowed values | environment variable | what it does |",
        "|---|---|---|---|---|",
    ]
    for key, field in rows:
        env = f"`{field.env}`" if field.env else "—"
        doc = field.doc.replace("|", "\\|") or "—"
        lines.append(f"| `{key}` | `{_default(field)}` | {_allowed(field)} | {env} | {doc} |")
    return lines


def repository_plugins(home: Path) -> list[PluginEntry]:
    """The plugins this repository ships: the built-ins and the ``ctxengine-*`` packages."""
    entries = discover(home).load_all()
    return [
        e
        for e in entries
        if e.ok
        and e.shadowed_by is None
        and e.distribution is not None
        and (e.distribution == "ctxengine" or e.distribution.startswith("ctxengine-"))
    ]


def declared_specs(entries: Sequence[PluginEntry]) -> list[tuple[PluginEntry, OwnedSpec]]:
    """What each plugin declares, asked through the ``declare_settings`` hook."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for entry in entries:
        pm.register(guarded(pm, entry.plugin, entry.name), name=entry.name)
    registry = SettingsRegistry()
    Hooks(pm).declare_settings(registry)
    by_name = {entry.name: entry for entry in entries}
    return [(by_name[owned.owner], owned) for owned in registry.specs]


def _core_rows() -> list[tuple[str, str, Field]]:
    rows = [(spec.key(f.name), CORE_OWNER, f) for spec in CORE_SPECS for f in spec.fields]
    rows += [(f"models.<name>.{f.name}", CORE_OWNER, f) for f in MODEL_OVERRIDE_FIELDS]
    return rows


def reference_rows(
    plugins: Sequence[tuple[PluginEntry, OwnedSpec]],
) -> list[tuple[str, str, Field]]:
    """``(key path, owner, field)`` for every key of the reference, the kernel's first."""
    rows = _core_rows()
    rows += [(o.spec.key(f.name), e.name, f) for e, o in plugins for f in o.spec.fields]
    return rows


def config_reference(plugins: Sequence[tuple[PluginEntry, OwnedSpec]]) -> str:
    """The reference as Markdown: the kernel's keys, then each plugin's, by section."""
    lines = [MARKER, "", f"## The kernel (`{CORE_OWNER}`)", ""]
    lines.append("Read whatever engine is selected.")
    lines.append("")
    lines += _table((key, field) for key, _, field in _core_rows())
    order: dict[str, list[tuple[PluginEntry, OwnedSpec]]] = {}
    for entry, owned in plugins:
        order.setdefault(entry.name, []).append((entry, owned))
    for name in sorted(order, key=lambda n: (order[n][0][0].kind, n)):
        entry = order[name][0][0]
        where = "built in" if entry.source == "builtin" else f"from `{entry.distribution}`"
        lines += ["", f"## `{name}` ({entry.kind.replace('_', ' ')}, {where})", ""]
        triggers = [o.spec.key(o.spec.trigger) for _, o in order[name] if o.spec.trigger]
        intro = "Validated only while this plugin is selected"
        if entry.always_on:
            intro = "Always loaded, so always validated"
        if triggers:
            intro += f"; its compaction trigger is `{triggers[0]}`"
        lines.append(intro + ".")
        lines.append("")
        rows: list[tuple[str, Any]] = []
        for _, owned in order[name]:
            rows += [(owned.spec.key(f.name), f) for f in owned.spec.fields]
        lines += _table(rows)
    lines += _aliases(reference_rows(plugins))
    return "\n".join(lines) + "\n"


def _aliases(rows: Iterable[tuple[str, str, Field]]) -> list[str]:
    """The table of former key paths, each still read with a deprecation notice."""
    renamed = [(field.alias, key, owner) for key, owner, field in rows if field.alias]
    if not renamed:
        return []
    lines = ["", "## Former key paths", ""]
    lines.append(
        "Still read, with a `DeprecationWarning` and a log line (`ctxengine config` lists them "
        "too); giving both paths with different values in one layer is an error naming both."
    )
    lines += ["", "| former path | now | owner |", "|---|---|---|"]
    lines += [f"| `{alias}` | `{key}` | {owner} |" for alias, key, owner in renamed]
    return lines


def current_reference(home: Path) -> str:
    """The reference for the plugins of this repository (what ``docs/configuration.md`` holds)."""
    return config_reference(declared_specs(repository_plugins(home)))


def merge(document: str, reference: str) -> str:
    """``document`` with everything from :data:`MARKER` on replaced by ``reference``."""
    head = document.split(MARKER, 1)[0].rstrip() + "\n\n"
    return head + reference
