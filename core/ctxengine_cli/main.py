"""The ``ctxengine`` command line.

Built-in commands: ``engines`` (every plugin found and where from), ``config`` (the effective
configuration, each value's source and owner) and ``compress``. Plugins add their own commands
through the ``register_commands`` hook (``ctxengine replay`` comes from the ctxengine-replay
package that way); a plugin that fails to load or to register never breaks the others or
``--help``.

How it behaves, for every command:

- ``--config``, ``-v`` and ``--plain`` may come before or after the sub-command; ``--version``
  prints the version;
- errors are one line each on stderr, ``ctxengine: ...``, with exit code 2 for usage and
  configuration problems and 1 for failures at run time (a conversation file that cannot be
  read, :class:`ctxengine.ConversationFileError`, is one); a traceback only with ``-v``;
- ``-v`` logs ctxengine's own debug output (not that of the HTTP libraries, which would dump
  whole conversations); ``CTXENGINE_TRACE=1`` shows the hook trace without ``-v``;
- the output is plain text (no emoji) with ``--plain``, with ``NO_COLOR`` set, or when stdout
  cannot encode the emoji; it never fails with ``UnicodeEncodeError``. A plugin's command prints
  to ``sys.stdout``, which is the console while it runs, so the same holds for it.

Import cost: ``--version`` and ``--help`` import neither the kernel nor any plugin's code beyond
what plugin discovery needs for the commands they add.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO, cast

import attrs

from ctxengine import CommandError, UsageError, __version__
from ctxengine_cli.console import Console, can_encode, wants_plain
from ctxengine_cli.parser import Parser, first_command

if TYPE_CHECKING:
    from ctxengine import CommandRegistry, LoadedConfig

Handler = Callable[[argparse.Namespace, Console], int]


@attrs.frozen
class BuiltinCommand:
    """One built-in sub-command: ``configure`` adds its arguments, ``run`` returns the exit
    code (the same shape as a plugin's command, plus the console)."""

    name: str
    help: str
    description: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Handler


def builtin_commands() -> tuple[BuiltinCommand, ...]:
    """The built-in sub-commands, in help order (imported here, so ``--version`` stays cheap)."""
    from ctxengine_cli import compress, show

    return (
        BuiltinCommand(
            "engines",
            "list engines and plugins, where they come from, and load errors",
            "Every plugin found (directory, registry, builtin) with its kind, distribution and "
            "version, and which are selected; broken plugins show their error. Says what "
            "happens when context.engine does not resolve (a fallback, or an error with "
            "context.strict).",
            show.configure_engines,
            show.run_engines,
        ),
        BuiltinCommand(
            "config",
            "show the effective configuration, each value's source and owner",
            "Every effective value with where it came from (default, file, environment, "
            "override) and which plugin reads it; keys that no selected plugin reads are "
            "listed as unused.",
            show.configure_config,
            show.run_config,
        ),
        BuiltinCommand(
            "compress",
            "compact a conversation file (JSON or JSONL, OpenAI or Anthropic)",
            "Compact each conversation of FILE with the configured engine (forced, whatever "
            "its size) and report messages and tokens before and after, the summariser used "
            "and the session id it ran under; --out writes the result in the same shape.",
            compress.configure_compress,
            compress.run_compress,
        ),
    )


def _plugin_commands(loaded: LoadedConfig | None) -> tuple[CommandRegistry, list[str]]:
    """Ask every loadable plugin for its commands; failures become notes, never crashes.

    ``loaded`` is ``None`` when the configuration is broken: plugins are then looked for with
    the defaults (home and installed distributions, no ``context.plugin_dirs``).
    """
    import pluggy

    from ctxengine import CommandRegistry, ctxengine_home, hookspecs
    from ctxengine._kernel.hooks import Hooks, guarded
    from ctxengine._kernel.resolve import discover
    from ctxengine._plugin.commands import DuplicateCommandError

    registry = CommandRegistry(reserved=frozenset(c.name for c in builtin_commands()))
    notes: list[str] = []
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    plugin_dirs = loaded.config.context.plugin_dirs if loaded is not None else ()
    for entry in discover(ctxengine_home(), plugin_dirs).load_all():
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


def _plugin_handler(run: Callable[[argparse.Namespace], int]) -> Handler:
    def handler(args: argparse.Namespace, console: Console) -> int:
        # What the plugin prints goes through the console: --plain, NO_COLOR and main(out=...)
        # apply to its output as to a built-in command's.
        with contextlib.redirect_stdout(cast("TextIO", console)):
            return run(args)

    return handler


def build_parser(
    plugin_commands: CommandRegistry | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """The argument parser and the handler for each sub-command."""
    parser = Parser(
        prog="ctxengine",
        description="Keep long LLM-agent conversations inside the context window and cheap to "
        "send. Options shown here may also follow the command.",
        root=True,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    handlers: dict[str, Handler] = {}
    for builtin in builtin_commands():
        command_parser = sub.add_parser(
            builtin.name, help=builtin.help, description=builtin.description
        )
        builtin.configure(command_parser)
        handlers[builtin.name] = builtin.run
    for command in plugin_commands or ():
        command_parser = sub.add_parser(
            command.name,
            help=f"{command.help} (from plugin {command.provider})",
            description=f"{command.help} (from plugin {command.provider}).",
        )
        command.configure(command_parser)
        handlers[command.name] = _plugin_handler(command.run)
    return parser, handlers


def _error(message: object) -> None:
    for line in str(message).splitlines() or [""]:
        print(f"ctxengine: {line}", file=sys.stderr)


@contextmanager
def _logging(verbose: bool, env: Mapping[str, str]) -> Iterator[None]:
    """Log ctxengine (debug with ``-v``) and the hook trace (``CTXENGINE_TRACE``) to stderr for
    one command, leaving other libraries at WARNING; restored afterwards."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    package, trace = logging.getLogger("ctxengine"), logging.getLogger("ctxengine.trace")
    saved = package.level, trace.level
    package.setLevel(logging.DEBUG if verbose else logging.WARNING)
    if env.get("CTXENGINE_TRACE", "") not in ("", "0"):
        trace.setLevel(logging.INFO)
    try:
        yield
    finally:
        package.setLevel(saved[0])
        trace.setLevel(saved[1])


def _safe_stdout() -> None:
    """Make the process's stdout replace what its encoding cannot show, so a plugin command that
    prints to it directly never fails with ``UnicodeEncodeError`` either."""
    if not can_encode(sys.stdout):
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (2 for usage and configuration errors, 1 for errors at
    run time, 130 when interrupted)."""
    if out is None:
        _safe_stdout()
    stream = sys.stdout if out is None else out
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        early, command = first_command(argv)
    except UsageError as exc:
        _error(exc)
        return 2
    if early.version and command is None:  # before any plugin or configuration: instant
        print(f"ctxengine {__version__}", file=stream)
        return 0
    return _main(argv, stream, early.config, command, verbose=early.verbose)


def _main(
    argv: list[str], stream: TextIO, config: str | None, command: str | None, *, verbose: bool
) -> int:
    from ctxengine import ConfigError, load_config

    try:
        config_error: ConfigError | None = None
        try:
            loaded: LoadedConfig | None = load_config(config)
        except ConfigError as exc:
            loaded, config_error = None, exc
        registry, notes = _plugin_commands(loaded)
        parser, handlers = build_parser(registry)
        if config_error is not None and command is not None and command not in handlers:
            # The command may come from a plugin in context.plugin_dirs, which a broken
            # configuration hides: the configuration is the problem to report.
            raise config_error
        args = parser.parse_args(argv)
        verbose = args.verbose
        console = Console(stream, plain=wants_plain(stream, os.environ, flag=args.plain))
        for note in notes:
            print(f"warning: {note}", file=sys.stderr)
        if args.version:
            console.line(f"ctxengine {__version__}")
            return 0
        if args.command is None:
            parser.print_help(console)
            return 2
        return _run(handlers[args.command], args, console)
    except UsageError as exc:
        _error(exc)
        return 2
    except ConfigError as exc:
        _report(exc, verbose)
        return 2
    except SystemExit as exc:  # --help, or a plugin's own parser
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def _run(handler: Handler, args: argparse.Namespace, console: Console) -> int:
    import warnings

    from ctxengine import ConfigError, ConversationFileError, EngineNotFoundError
    from ctxengine._kernel.kernel import EngineNotFoundWarning

    try:
        with _logging(args.verbose, os.environ), warnings.catch_warnings():
            # The status lines (or, with --json, the log) already say it.
            warnings.simplefilter("ignore", EngineNotFoundWarning)
            return handler(args, console)
    except (ConfigError, EngineNotFoundError, UsageError) as exc:
        _report(exc, args.verbose)
        return 2
    except (CommandError, ConversationFileError) as exc:
        _report(exc, args.verbose)
        return 1
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`ctxengine replay ... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
        _error(f"{type(exc).__name__}: {exc}" + ("" if args.verbose else " (-v shows where)"))
        return 1


def _report(exc: BaseException, verbose: bool) -> None:
    if verbose:
        traceback.print_exception(exc)
    _error(exc)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
