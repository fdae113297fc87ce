"""The ``ctxengine`` command line.

Built-in commands: ``engines`` (every plugin found and where from) and ``config`` (the effective
configuration and where each value came from). Plugins add their own commands through the
``register_commands`` hook; a plugin that fails to load or to register never breaks the others or
``--help``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ctxengine.commands import CommandRegistry, DuplicateCommandError
from ctxengine.config import ConfigError, LoadedConfig, ctxengine_home, load_config
from ctxengine.resolve import Catalog, discover

BUILTIN_COMMANDS = frozenset({"engines", "config", "compress", "replay"})

Handler = Callable[[argparse.Namespace, TextIO], int]


def _load(args: argparse.Namespace) -> LoadedConfig:
    return load_config(args.config)


def _catalog(loaded: LoadedConfig) -> Catalog:
    return discover(ctxengine_home(), loaded.config.context.plugin_dirs)


def cmd_engines(args: argparse.Namespace, out: TextIO) -> int:
    """List every plugin found: name, kind, source, distribution and version, load errors."""
    loaded = _load(args)
    catalog = _catalog(loaded)
    selected = loaded.config.context.engine
    rows = [("NAME", "KIND", "SOURCE", "FROM", "STATUS")]
    for entry in catalog.entries:
        if entry.error is not None:
            status = f"error: {entry.error}"
        elif entry.shadowed_by is not None:
            status = f"shadowed by {entry.shadowed_by}"
        elif entry.name == selected:
            status = "selected"
        else:
            status = "available"
        rows.append((entry.name, entry.kind, entry.source, entry.location, status))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        out.write("  ".join([*cells, row[4]]).rstrip() + "\n")
    winner = catalog.winner(selected)
    if winner is None or not winner.ok or winner.kind != "engine":
        out.write(
            f"\nwarning: context.engine = {selected!r} does not resolve to a loadable engine; "
            "the built-in 'compressor' would be used (see `ctxengine engines` errors above)\n"
        )
    return 0


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def cmd_config(args: argparse.Namespace, out: TextIO) -> int:
    """Print every effective configuration value and where it came from."""
    loaded = _load(args)
    out.write(f"# config file: {loaded.path if loaded.path else 'none (defaults)'}\n")
    rows = [(key, _format_value(value), source) for key, value, source in loaded.items()]
    width = max(len(key) for key, _, _ in rows)
    value_width = min(40, max(len(value) for _, value, _ in rows))
    for key, value, source in rows:
        out.write(f"{key.ljust(width)}  {value.ljust(value_width)}  # {source}\n")
    return 0


def _plugin_commands(parser_loaded: LoadedConfig | None) -> tuple[CommandRegistry, list[str]]:
    """Ask every loaded plugin for its commands; failures become notes, never crashes."""
    registry = CommandRegistry(reserved=BUILTIN_COMMANDS)
    notes: list[str] = []
    if parser_loaded is None:
        return registry, notes
    catalog = _catalog(parser_loaded)
    for entry in catalog.entries:
        if not entry.ok or entry.shadowed_by is not None:
            continue
        hook = getattr(entry.plugin, "register_commands", None)
        if hook is None:
            continue
        registry.current_provider = entry.name
        try:
            hook(commands=registry)
        except DuplicateCommandError as exc:
            notes.append(str(exc))
        except Exception as exc:
            notes.append(f"plugin {entry.name!r} failed to register commands: {exc!r}")
    return registry, notes


def build_parser(
    plugin_commands: CommandRegistry | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """The argument parser and the handler for each sub-command."""
    parser = argparse.ArgumentParser(
        prog="ctxengine",
        description="Keep long LLM-agent conversations inside the context window and cheap.",
    )
    parser.add_argument("--config", metavar="PATH", help="config.yaml to use")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    handlers: dict[str, Handler] = {}

    sub.add_parser("engines", help="list engines and plugins, where they come from, load errors")
    handlers["engines"] = cmd_engines
    sub.add_parser("config", help="show the effective configuration and each value's source")
    handlers["config"] = cmd_config

    for command in plugin_commands or ():
        command_parser = sub.add_parser(
            command.name, help=f"{command.help} (from plugin {command.provider})"
        )
        command.configure(command_parser)
        run = command.run
        handlers[command.name] = lambda args, out, run=run: run(args)
    return parser, handlers


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (2 for usage and configuration errors)."""
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    # Plugin commands need the config (plugin_dirs); a broken config must still allow --help.
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    try:
        loaded: LoadedConfig | None = load_config(known.config)
    except ConfigError:
        loaded = None
    registry, notes = _plugin_commands(loaded)
    parser, handlers = build_parser(registry)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if args.command is None:
        parser.print_help(out)
        return 2
    try:
        return handlers[args.command](args, out)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
