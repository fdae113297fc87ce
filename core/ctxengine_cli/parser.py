"""The ``ctxengine`` argument parser.

- The global options (``--config``, ``-v``, ``--plain``) are accepted before or after any
  sub-command, plugin sub-commands and their nested sub-commands included: every parser is a
  :class:`Parser`, and each adds them (only the root sets their defaults, so a value given
  anywhere survives).
- Usage errors raise :class:`UsageError` with one line naming the command and the fix, instead of
  argparse's usage dump and ``SystemExit``.
- Every sub-command and option has help text (a test walks the whole tree).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from ctxengine import UsageError

GLOBAL_DEFAULTS: dict[str, Any] = {"config": None, "verbose": False, "plain": False}
"""The global options' values when not given (``--version`` exists only before a command)."""


def add_global_options(parser: argparse.ArgumentParser, *, root: bool) -> None:
    """The options every command accepts; only the root parser sets their defaults and has
    ``--version``."""
    default: dict[str, Any] = {} if root else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="config.yaml to read (default: $CTXENGINE_CONFIG, then $CTXENGINE_HOME/config.yaml)",
        **default,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log ctxengine's debug output and show the traceback of an error",
        **default,
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="plain text without emoji (also when NO_COLOR is set or the terminal cannot show "
        "them)",
        **default,
    )
    if root:
        parser.add_argument("--version", action="store_true", help="print the version and exit")
        parser.set_defaults(**GLOBAL_DEFAULTS)


class Parser(argparse.ArgumentParser):
    """An argument parser that accepts the global options and raises :class:`UsageError`.

    Sub-parsers created with ``add_subparsers()`` are of the same class, so a plugin's nested
    sub-commands accept the global options too. A plugin option with the same spelling as a
    global one wins inside that plugin's parser (``conflict_handler="resolve"``).
    """

    def __init__(self, *args: Any, root: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("conflict_handler", "resolve")
        super().__init__(*args, **kwargs)
        add_global_options(self, root=root)

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]  # "compress" in "ctxengine compress"
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} (see '{self.prog} --help')")


def first_command(argv: Sequence[str]) -> tuple[argparse.Namespace, str | None]:
    """The global options and the sub-command name in ``argv``, before the full parser exists
    (plugin commands depend on the configuration, which ``--config`` names).

    Tolerant: anything it does not know is left for the full parser to judge.

    :raises UsageError: for a global option without its value (``--config`` at the end).
    """
    pre = Parser(prog="ctxengine", add_help=False, allow_abbrev=False, root=True)
    known, rest = pre.parse_known_args(list(argv))
    command = next((token for token in rest if not token.startswith("-")), None)
    return known, command
