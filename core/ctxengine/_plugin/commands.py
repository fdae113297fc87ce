"""Sub-commands that plugins add to the ``ctxengine`` CLI through ``register_commands``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

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
