"""The ledger's fact types: :class:`Ledger` and the actions a path can undergo."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs

__all__ = ["ACTIONS", "ASK_CHARS", "COMMAND_CHARS", "ERROR_CHARS", "Ledger"]

COMMAND_CHARS = 200
"""Commands are kept as their first line, cut to this many characters."""
ASK_CHARS = 400
"""User asks are cut to this many characters."""
ERROR_CHARS = 240
"""Error lines are cut to this many characters."""

Action = Literal["read", "edited", "created", "deleted", "listed", "mentioned"]
ACTIONS: tuple[Action, ...] = ("deleted", "created", "edited", "read", "listed", "mentioned")
"""What can be done to a path, strongest first (a path keeps the strongest action seen)."""
_STRENGTH: dict[str, int] = {action: len(ACTIONS) - i for i, action in enumerate(ACTIONS)}
_CHANGED: frozenset[str] = frozenset({"deleted", "created", "edited"})

_EXIT_HISTORY = 4
"""A command keeps the codes of at most this many runs (repeats collapsed)."""


@attrs.frozen
class Ledger:
    """Items a summary must carry, each tuple in order of first appearance, de-duplicated.

    ``exit_codes[i]`` is the last exit code seen for ``commands[i]`` (``None`` when no result
    showed one); ``exit_history[i]`` every code its runs reported, repeats collapsed (at most the
    last four). ``actions[i]`` is what was done to ``paths[i]``. ``error_sources[i]`` is the
    command (or tool) whose output held ``errors[i]``; ``resolved[i]`` says a later run of it
    succeeded. ``identifier_keys[i]`` is the argument ``identifiers[i]`` was passed as (``""``
    when only the assistant's text used it). ``tools`` holds ``(tool name, number of calls)`` in
    order of first use. The parallel tuples other than ``exit_codes`` may be left empty, meaning
    "mentioned", ``(code,)``, ``""``, ``False`` and ``""`` for every item.
    """

    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()
    exit_codes: tuple[int | None, ...] = attrs.field(default=())
    tools: tuple[tuple[str, int], ...] = ()
    actions: tuple[str, ...] = ()
    exit_history: tuple[tuple[int, ...], ...] = ()
    error_sources: tuple[str, ...] = ()
    resolved: tuple[bool, ...] = ()
    identifiers: tuple[str, ...] = ()
    identifier_keys: tuple[str, ...] = ()

    @exit_codes.validator
    def _check_exit_codes(self, _: attrs.Attribute[Any], value: tuple[int | None, ...]) -> None:
        if len(value) != len(self.commands):
            raise ValueError(
                f"Ledger.exit_codes has {len(value)} entries but there are "
                f"{len(self.commands)} commands; give one exit code (or None) per command"
            )

    def __attrs_post_init__(self) -> None:
        for name, of in (
            ("actions", "paths"),
            ("exit_history", "commands"),
            ("error_sources", "errors"),
            ("resolved", "errors"),
            ("identifier_keys", "identifiers"),
        ):
            size, expected = len(getattr(self, name)), len(getattr(self, of))
            if size not in (0, expected):
                raise ValueError(
                    f"Ledger.{name} has {size} entries but there are {expected} {of}; give one "
                    f"per item or none"
                )
        for action in self.actions:
            if action not in _STRENGTH:
                raise ValueError(f"Ledger.actions holds {action!r}; allowed: {', '.join(ACTIONS)}")

    def __bool__(self) -> bool:
        return bool(
            self.paths
            or self.commands
            or self.errors
            or self.asks
            or self.tools
            or self.identifiers
        )

    def exit_code(self, command: str) -> int | None:
        """The exit code recorded for ``command`` (``None`` if unknown or not in the ledger)."""
        try:
            return self.exit_codes[self.commands.index(command)]
        except ValueError:
            return None

    def action(self, i: int) -> str:
        """What was done to ``paths[i]``."""
        return self.actions[i] if self.actions else "mentioned"

    def history(self, i: int) -> tuple[int, ...]:
        """The exit codes ``commands[i]`` reported, oldest first (empty when none showed)."""
        if self.exit_history:
            return self.exit_history[i]
        code = self.exit_codes[i]
        return () if code is None else (code,)

    def source(self, i: int) -> str:
        """The command or tool whose output held ``errors[i]`` (``""`` when unknown)."""
        return self.error_sources[i] if self.error_sources else ""

    def is_resolved(self, i: int) -> bool:
        """Whether a later run of the source of ``errors[i]`` succeeded."""
        return self.resolved[i] if self.resolved else False

    def identifier_key(self, i: int) -> str:
        """The argument ``identifiers[i]`` was passed as (``""``: used in text)."""
        return self.identifier_keys[i] if self.identifier_keys else ""

    def subset(
        self,
        *,
        paths: Iterable[int] | None = None,
        commands: Iterable[int] | None = None,
        errors: Iterable[int] | None = None,
        asks: Iterable[int] | None = None,
        identifiers: Iterable[int] | None = None,
        tools: bool = True,
    ) -> Ledger:
        """The ledger restricted to the given item indices (``None`` keeps a kind whole)."""

        def pick(values: tuple[Any, ...], keep: list[int] | None) -> tuple[Any, ...]:
            if keep is None or not values:
                return values
            return tuple(values[i] for i in keep)

        p = None if paths is None else sorted(set(paths))
        c = None if commands is None else sorted(set(commands))
        e = None if errors is None else sorted(set(errors))
        a = None if asks is None else sorted(set(asks))
        d = None if identifiers is None else sorted(set(identifiers))
        return Ledger(
            paths=pick(self.paths, p),
            commands=pick(self.commands, c),
            errors=pick(self.errors, e),
            asks=pick(self.asks, a),
            exit_codes=pick(self.exit_codes, c),
            tools=self.tools if tools else (),
            actions=pick(self.actions, p),
            exit_history=pick(self.exit_history, c),
            error_sources=pick(self.error_sources, e),
            resolved=pick(self.resolved, e),
            identifiers=pick(self.identifiers, d),
            identifier_keys=pick(self.identifier_keys, d),
        )
