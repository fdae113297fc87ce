"""The ``ctxengine`` command line.

Built-in commands: ``engines`` (every plugin found and where from) and ``config`` (the effective
configuration and where each value came from). Plugins add their own commands through the
``register_commands`` hook; a plugin that fails to load or to register never breaks the others or
``--help``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ctxengine._cli.files import (
    ConversationFileError,
    ConversationRecord,
    read_conversations,
    write_conversations,
)
from ctxengine._cli.replay import replay
from ctxengine._cli.report import (
    plot_replay,
    replay_json,
    write_compress_report,
    write_replay_report,
)
from ctxengine._config.core import LoadedConfig, ctxengine_home, load_config
from ctxengine._config.fields import ConfigError
from ctxengine._kernel.resolve import Catalog, discover
from ctxengine._plugin.commands import CommandRegistry, DuplicateCommandError

BUILTIN_COMMANDS = frozenset({"engines", "config", "compress", "replay"})

Handler = Callable[[argparse.Namespace, TextIO], int]


def _load(args: argparse.Namespace) -> LoadedConfig:
    return load_config(args.config)


def _catalog(loaded: LoadedConfig) -> Catalog:
    return discover(ctxengine_home(), loaded.config.context.plugin_dirs)


def cmd_engines(args: argparse.Namespace, out: TextIO) -> int:
    """List every plugin found: name, kind, source, distribution and version, load errors.

    Unlike :func:`ctxengine.load`, this imports every plugin, so broken ones show their error.
    """
    loaded = _load(args)
    catalog = _catalog(loaded)
    config = loaded.config
    selected = {config.context.engine}
    if config.prompt_caching.enabled is not False:
        selected.add(config.prompt_caching.strategy)
    selected.update(config.context.extensions)
    rows = [("NAME", "KIND", "SOURCE", "FROM", "STATUS")]
    for entry in catalog.load_all():
        if entry.error is not None:
            status = f"error: {entry.error}"
        elif entry.shadowed_by is not None:
            status = f"shadowed by {entry.shadowed_by}"
        elif entry.name in selected or entry.always_on:
            status = "selected" if entry.name in selected else "always on"
        elif entry.kind == "extension":
            status = "available (opt in with context.extensions)"
        else:
            status = "available"
        rows.append((entry.name, entry.kind, entry.source, entry.location, status))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        out.write("  ".join([*cells, row[4]]).rstrip() + "\n")
    wanted = config.context.engine
    winner, tried = catalog.resolve(wanted, "engine")
    if winner is None:
        from ctxengine._kernel.kernel import not_found_message

        consequence = (
            "ctxengine.load() fails (context.strict is true)"
            if config.context.strict
            else "the built-in 'compressor' is used instead"
        )
        out.write(
            f"\nwarning: context.engine = {wanted!r} does not resolve to a loadable engine, so "
            f"{consequence}: {not_found_message(wanted, 'engine', catalog, tried)}\n"
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
    """Print every effective value with its source and owner, then the keys nothing reads.

    The selected plugins are loaded so their keys are validated and listed like the kernel's.
    """
    if getattr(args, "reference", False):
        from ctxengine._cli.reference import current_reference

        out.write(current_reference(ctxengine_home()))
        return 0
    from ctxengine._kernel.kernel import load

    with load(_load(args)) as kernel:
        loaded = kernel.loaded
    out.write(f"# config file: {loaded.path if loaded.path else 'none (defaults)'}\n")
    rows = loaded.rows()
    used = [r for r in rows if r.status != "unused"]
    width = max(len(r.key) for r in rows)
    value_width = min(40, max(len(_format_value(r.value)) for r in rows))
    for row in used:
        owner = row.owner if row.owner is not None else "not declared by its plugin"
        out.write(
            f"{row.key.ljust(width)}  {_format_value(row.value).ljust(value_width)}  "
            f"# {row.source}; {owner}\n"
        )
    unused = [r for r in rows if r.status == "unused"]
    if unused:
        out.write("# unused (no selected plugin reads these keys):\n")
        for row in unused:
            out.write(
                f"{row.key.ljust(width)}  {_format_value(row.value).ljust(value_width)}  "
                f"# {row.source}; {row.note}\n"
            )
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if getattr(args, "engine", None):
        overrides["context.engine"] = args.engine
    if getattr(args, "threshold", None) is not None:
        overrides["compression.threshold"] = args.threshold
    if getattr(args, "context_length", None) is not None:
        overrides["model.context_length"] = args.context_length
    if getattr(args, "model", None):
        overrides["model.name"] = args.model
    return overrides


def _read(path: str) -> list[ConversationRecord]:
    try:
        return read_conversations(path)
    except ConversationFileError as exc:
        raise CommandError(str(exc)) from None


class CommandError(Exception):
    """A user error in a command's input; printed as ``ctxengine: <message>``, exit code 1."""


def _pick(
    records: list[ConversationRecord], session: int | None, path: str
) -> list[ConversationRecord]:
    if session is None:
        return records
    if not 0 <= session < len(records):
        raise CommandError(
            f"{path} holds {len(records)} conversation(s); --session must be 0..{len(records) - 1}"
        )
    return [records[session]]


def cmd_compress(args: argparse.Namespace, out: TextIO) -> int:
    """Compact each conversation of a file with the configured engine and report."""
    from ctxengine._kernel.kernel import load

    loaded = load_config(args.config, overrides=_overrides(args))
    records = _pick(_read(args.file), args.session, args.file)
    written = []
    with load(loaded) as kernel:
        for line in kernel.status_lines():
            out.write(line + "\n")
        for index, record in enumerate(records):
            # One session per record: two records with the same id must not share engine state.
            result = kernel.session(f"{record.id}#{index}").compress(
                record.messages, record.system, force=True, focus=args.focus, format=record.format
            )
            write_compress_report(f"{record.id} ({record.format})", result, out)
            written.append((record, result.messages, result.system))
    if args.out:
        try:
            write_conversations(args.out, written)
        except OSError as exc:
            raise CommandError(f"cannot write {args.out}: {exc}") from None
        out.write(f"wrote {len(written)} conversation(s) to {args.out}\n")
    return 0


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    """Replay sessions turn by turn under four scenarios and compare tokens and cost."""
    loaded = load_config(args.config, overrides=_overrides(args))
    records = [record for path in args.files for record in _pick(_read(path), args.session, path)]
    if not args.json:
        from ctxengine._kernel.kernel import load

        with load(loaded) as kernel:
            for line in kernel.status_lines():
                out.write(line + "\n")
    show_progress = args.progress or (not args.json and sys.stderr.isatty())
    reports = []
    for number, record in enumerate(records, 1):

        def progress(
            label: str,
            done: int,
            total: int,
            number: int = number,
            record: ConversationRecord = record,
        ) -> None:
            if show_progress and (done == total or done % 10 == 0):
                end = "\n" if done == total and label == "both" else ""
                sys.stderr.write(
                    f"\rreplaying {number}/{len(records)} {record.id}: {label:<10} "
                    f"turn {done}/{total}{end}"
                )
                sys.stderr.flush()

        reports.append(replay(record, loaded.config, gap_seconds=args.gap, progress=progress))
    if args.json:
        json.dump(replay_json(reports), out, indent=1)
        out.write("\n")
    else:
        for report in reports:
            write_replay_report(report, out, turns=args.turns)
    if args.plot:
        try:
            plot_replay(reports, Path(args.plot))
        except ImportError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write {args.plot}: {exc}") from None
        if not args.json:
            out.write(f"\nchart written to {args.plot}\n")
    return 0


def _plugin_commands(parser_loaded: LoadedConfig | None) -> tuple[CommandRegistry, list[str]]:
    """Ask every loadable plugin for its commands; failures become notes, never crashes."""
    registry = CommandRegistry(reserved=BUILTIN_COMMANDS)
    notes: list[str] = []
    if parser_loaded is None:
        return registry, notes
    import pluggy

    from ctxengine import hookspecs
    from ctxengine._kernel.hooks import Hooks, guarded

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for entry in _catalog(parser_loaded).load_all():
        if entry.ok and entry.shadowed_by is None and not pm.has_plugin(entry.name):
            pm.register(guarded(pm, entry.plugin, entry.name), name=entry.name)
    for failure in Hooks(pm).register_commands(registry):
        if isinstance(failure.error, DuplicateCommandError):
            notes.append(str(failure.error))
        else:
            notes.append(
                f"plugin {failure.plugin!r} failed to register commands: {failure.describe()}"
            )
    return registry, notes


def _engine_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", help="context engine to use (overrides context.engine)")
    parser.add_argument("--model", help="main model (overrides model.name)")
    parser.add_argument("--threshold", type=float, help="overrides compression.threshold")
    parser.add_argument(
        "--context-length", type=int, help="model window in tokens (overrides model.context_length)"
    )


def _plugin_handler(run: Callable[[argparse.Namespace], int]) -> Handler:
    def handler(args: argparse.Namespace, out: TextIO) -> int:
        return run(args)

    return handler


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
    config_parser = sub.add_parser(
        "config", help="show the effective configuration, each value's source and owner"
    )
    config_parser.add_argument(
        "--reference",
        action="store_true",
        help="print the reference of every key this repository's plugins declare (Markdown)",
    )
    handlers["config"] = cmd_config

    compress = sub.add_parser(
        "compress", help="compact a conversation file (JSON or JSONL, OpenAI or Anthropic)"
    )
    compress.add_argument("file", help="conversation file")
    compress.add_argument("--out", help="write the compacted conversation(s) here")
    compress.add_argument("--session", type=int, help="only the N-th conversation (from 0)")
    _engine_flags(compress)
    compress.add_argument("--focus", help="topic the summary should keep in most detail")
    handlers["compress"] = cmd_compress

    replay_parser = sub.add_parser(
        "replay", help="replay sessions turn by turn: compaction and caching vs neither"
    )
    replay_parser.add_argument("files", nargs="+", metavar="FILE", help="conversation files")
    replay_parser.add_argument("--session", type=int, help="only the N-th conversation of each")
    _engine_flags(replay_parser)
    replay_parser.add_argument(
        "--gap", type=float, default=30.0, help="seconds between turns (default 30)"
    )
    replay_parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    replay_parser.add_argument("--turns", action="store_true", help="also print every turn")
    replay_parser.add_argument("--plot", metavar="OUT", help="write a chart (.png or .html)")
    replay_parser.add_argument("--progress", action="store_true", help="show progress on stderr")
    handlers["replay"] = cmd_replay

    for command in plugin_commands or ():
        command_parser = sub.add_parser(
            command.name, help=f"{command.help} (from plugin {command.provider})"
        )
        command.configure(command_parser)
        handlers[command.name] = _plugin_handler(command.run)
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
    except CommandError as exc:
        print(f"ctxengine: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`ctxengine replay ... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
