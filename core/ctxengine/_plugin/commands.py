"""Sub-commands that plugins add to the ``ctxengine`` CLI through ``register_commands``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any

import attrs

Configure = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


class DuplicateCommandError(ValueError):
    """Two plugins registered a CLI command with the same name."""


@attrs.frozen
class Command:
    """One plugin command: ``configure`` adds its arguments, ``run`` returns the exit code."""

    name: str
    help: str
    configure: Configure = attrs.field(repr=False)
    run: Run = attrs.field(repr=False)
    provider: str


class CommandRegistry:
    """Collects plugin commands, stamping each with its provider and rejecting duplicates."""

    def __init__(self, reserved: frozenset[str] = frozenset()) -> None:
        self._commands: dict[str, Command] = {}
        self._reserved = reserved

    def for_owner(self, owner: str) -> PluginCommands:
        """The registry as one plugin sees it: its ``add`` stamps ``owner`` on each command."""
        return PluginCommands(self, owner)

    def add(self, name: str, help: str, configure: Configure, run: Run, provider: str) -> None:
        """Register command ``name`` offered by ``provider``.

        :raises DuplicateCommandError: when the name is taken by the core or another plugin.
        """
        if name in self._reserved:
            raise DuplicateCommandError(
                f"plugin {provider!r} registers command {name!r}, which is a built-in command"
            )
        existing = self._commands.get(name)
        if existing is not None:
            raise DuplicateCommandError(
                f"command {name!r} is registered by two plugins: {existing.provider!r} and "
                f"{provider!r}"
            )
        self._commands[name] = Command(name, help, configure, run, provider)

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def __len__(self) -> int:
        return len(self._commands)


class PluginCommands:
    """What ``register_commands`` receives: ``commands.add(name, help, configure, run)``."""

    def __init__(self, registry: CommandRegistry, owner: str) -> None:
        self._registry = registry
        self.owner = owner

    def add(self, name: str, help: str, configure: Configure, run: Run) -> None:
        """Add sub-command ``ctxengine <name>``: ``configure`` adds its arguments to the parser,
        ``run`` returns the exit code.

        :raises DuplicateCommandError: when the name is taken by the core or another plugin.
        """
        self._registry.add(name, help, configure, run, self.owner)


def engine_options(parser: argparse.ArgumentParser) -> None:
    """Add the options every command that runs an engine takes: ``--engine``, ``--model``,
    ``--threshold`` and ``--context-length`` (read back with :func:`engine_overrides`; a
    command applies ``--threshold`` itself, as ``load(trigger=...)``)."""
    parser.add_argument(
        "--engine", metavar="NAME", help="context engine to use (overrides context.engine)"
    )
    parser.add_argument("--model", metavar="NAME", help="main model (overrides model.name)")
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="FRACTION",
        help="compact at this fraction of the window: sets the selected engine's own trigger "
        "(engines.compressor.threshold for the compressor, engines.lcm.threshold for lcm)",
    )
    parser.add_argument(
        "--context-length",
        type=int,
        metavar="TOKENS",
        help="model window in tokens (overrides model.context_length)",
    )


def engine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration overrides (key path -> value) that :func:`engine_options` asked for."""
    overrides: dict[str, Any] = {}
    if args.engine:
        overrides["context.engine"] = args.engine
    if args.context_length is not None:
        overrides["model.context_length"] = args.context_length
    if args.model:
        overrides["model.name"] = args.model
    return overrides
