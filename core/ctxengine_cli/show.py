"""``ctxengine engines`` and ``ctxengine config``: what is installed, what is configured.

Each command builds its report as data first; the text table and the ``--json`` document are two
renderings of the same data, so they never disagree.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import attrs
import pluggy

from ctxengine import LoadedConfig, ctxengine_home, load_config
from ctxengine._kernel.coordination_setup import PROVIDER_PREFIX
from ctxengine._kernel.resolve import DEFAULT_ENGINE, Catalog, PluginEntry, discover
from ctxengine.hookspecs import PROJECT
from ctxengine_cli.console import Console


def catalog_for(loaded: LoadedConfig) -> Catalog:
    """Every plugin candidate for this configuration (home and ``context.plugin_dirs``)."""
    return discover(ctxengine_home(), loaded.config.context.plugin_dirs)


def write_json(document: object, console: Console) -> None:
    """One JSON document and a newline (non-ASCII kept: the console replaces what it must)."""
    console.line(json.dumps(document, indent=1, ensure_ascii=False))


# -- engines -----------------------------------------------------------------------------------


@attrs.frozen
class EngineChoice:
    """What ``context.engine`` leads to.

    :ivar used: the engine a kernel would run, or ``None`` when loading fails (strict).
    :ivar problem: why ``wanted`` does not resolve, or ``None`` when it does.
    """

    wanted: str
    used: str | None
    strict: bool
    problem: str | None

    @property
    def consequence(self) -> str:
        if self.strict:
            return (
                "context.strict is true, so ctxengine.load(), `ctxengine compress` and "
                "`ctxengine replay` fail with EngineNotFoundError"
            )
        return f"the built-in {DEFAULT_ENGINE!r} engine is used instead (context.strict is false)"


def engine_choice(loaded: LoadedConfig, catalog: Catalog) -> EngineChoice:
    from ctxengine._kernel.kernel import not_found_message

    context = loaded.config.context
    winner, tried = catalog.resolve(context.engine, "engine")
    if winner is not None:
        return EngineChoice(context.engine, winner.name, context.strict, None)
    problem = not_found_message(context.engine, "engine", catalog, tried)
    used = None if context.strict else DEFAULT_ENGINE
    return EngineChoice(context.engine, used, context.strict, problem)


def _status(entry: PluginEntry, selected: set[str], choice: EngineChoice) -> str:
    if entry.error is not None:
        return f"error: {entry.error}"
    if entry.shadowed_by is not None:
        return f"shadowed by {entry.shadowed_by}"
    if entry.kind == "engine" and entry.name == choice.used:
        return (
            "selected" if choice.problem is None else f"selected (fallback for {choice.wanted!r})"
        )
    if entry.name in selected:
        return "selected"
    if entry.always_on:
        return "always on"
    if entry.kind != "extension":
        return "available"
    if entry.name.startswith(PROVIDER_PREFIX):
        return "available (coordination.backend selects it)"
    if _hook_names(entry.plugin) <= _COMMAND_HOOKS:
        return "available (its commands need no opt-in)"
    return "available (opt in with context.extensions)"


_COMMAND_HOOKS = frozenset({"register_commands", "declare_settings"})
"""The hooks of an extension that only adds CLI commands: the CLI calls them on every
installed plugin, so such an extension works without being named in ``context.extensions``."""


def _hook_names(plugin: object) -> set[str]:
    """The hooks ``plugin`` implements, read the way pluggy reads them when it registers one."""
    reader = pluggy.PluginManager(PROJECT)
    return {name for name in dir(plugin) if reader.parse_hookimpl_opts(plugin, name) is not None}


def configure_engines(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_engines(args: argparse.Namespace, console: Console) -> int:
    """List every plugin found: name, kind, source, distribution and version, status.

    Unlike :func:`ctxengine.load`, this imports every plugin, so broken ones show their error.
    """
    loaded = load_config(args.config)
    catalog = catalog_for(loaded)
    config = loaded.config
    choice = engine_choice(loaded, catalog)
    selected = set(config.context.extensions)
    selected.add(PROVIDER_PREFIX + config.coordination.backend)
    if config.prompt_caching.enabled is not False:
        selected.add(config.prompt_caching.strategy)
    entries = catalog.load_all()
    statuses = [_status(entry, selected, choice) for entry in entries]
    if args.json:
        plugins = [
            {
                "name": e.name,
                "kind": e.kind,
                "source": e.source,
                "location": e.location,
                "distribution": e.distribution,
                "version": e.version,
                "status": status,
                "error": e.error,
                "shadowed_by": e.shadowed_by,
                "always_on": e.always_on,
            }
            for e, status in zip(entries, statuses, strict=True)
        ]
        engine = attrs.asdict(choice)
        engine["consequence"] = choice.consequence if choice.problem else None
        write_json({"plugins": plugins, "engine": engine}, console)
        return 0
    rows = [("NAME", "KIND", "SOURCE", "FROM", "STATUS")]
    rows += [
        (e.name, e.kind, e.source, e.location, status)
        for e, status in zip(entries, statuses, strict=True)
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        console.line("  ".join([*cells, row[4]]).rstrip())
    if choice.problem is not None:
        console.line(
            f"\nwarning: context.engine = {choice.wanted!r} does not resolve to a loadable "
            f"engine; {choice.consequence}.\n  {choice.problem}"
        )
    return 0


# -- config ------------------------------------------------------------------------------------


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def configure_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference",
        action="store_true",
        help="print the reference of every key the plugins of this installation declare "
        "(Markdown; with --json, one object per key)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_config(args: argparse.Namespace, console: Console) -> int:
    """Print every effective value with its source and owner, then the keys nothing reads.

    The selected plugins are loaded so their keys are validated and listed like the kernel's.
    """
    if args.reference:
        return _reference(args, console)
    from ctxengine import load

    with load(load_config(args.config)) as kernel:
        loaded = kernel.loaded
        trigger = kernel.trigger_key
    rows = loaded.rows()
    if args.json:
        keys = [
            {
                "key": r.key,
                "value": _json_value(r.value),
                "source": r.source,
                "owner": r.owner,
                "status": r.status,
                "note": r.note or None,
            }
            for r in rows
        ]
        path = str(loaded.path) if loaded.path else None
        write_json({"config_file": path, "engine_trigger": trigger, "keys": keys}, console)
        return 0
    console.line(f"# config file: {loaded.path if loaded.path else 'none (defaults)'}")
    if trigger is not None:
        console.line(f"# the selected engine's compaction trigger: {trigger} (--threshold sets it)")
    used = [r for r in rows if r.status != "unused"]
    width = max(len(r.key) for r in rows)
    value_width = min(40, max(len(_format_value(r.value)) for r in rows))
    for deprecation in loaded.deprecations:
        console.line(f"# deprecated: {deprecation.alias} is now {deprecation.key}")
    for row in used:
        owner = row.owner if row.owner is not None else "not declared by its plugin"
        renamed = f"; {row.note}" if row.status == "ok" and row.note else ""
        console.line(
            f"{row.key.ljust(width)}  {_format_value(row.value).ljust(value_width)}  "
            f"# {row.source}; {owner}{renamed}"
        )
    unused = [r for r in rows if r.status == "unused"]
    if unused:
        console.line("# unused (no selected plugin reads these keys):")
        for row in unused:
            console.line(
                f"{row.key.ljust(width)}  {_format_value(row.value).ljust(value_width)}  "
                f"# {row.source}; {row.note}"
            )
    return 0


def _reference(args: argparse.Namespace, console: Console) -> int:
    from ctxengine_cli.reference import config_reference, declared_specs, repository_plugins

    plugins = declared_specs(repository_plugins(ctxengine_home()))
    if not args.json:
        console.write(config_reference(plugins))
        return 0
    from ctxengine_cli.reference import reference_rows

    write_json(
        [
            {
                "key": key,
                "owner": owner,
                "kind": field.kind,
                "default": _json_value(field.default),
                "allowed": field.allowed(),
                "env": field.env,
                "doc": field.doc,
            }
            for key, owner, field in reference_rows(plugins)
        ],
        console,
    )
    return 0
