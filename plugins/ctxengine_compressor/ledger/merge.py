"""Combining ledgers and checking them against text: :func:`merge_ledgers`,
:func:`missing_from`, :func:`present_in`, :func:`readable_text`."""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from ctxengine import Format, Message
from ctxengine.messages import (
    tool_results,
    visible_text,
)
from ctxengine_compressor.ledger.extract import _check_format
from ctxengine_compressor.ledger.identifiers import _flat_strings
from ctxengine_compressor.ledger.model import _EXIT_HISTORY, _STRENGTH, Ledger
from ctxengine_compressor.ledger.tools import _calls

__all__ = ["merge_ledgers", "missing_from", "present_in", "readable_text"]


def merge_ledgers(older: Ledger, newer: Ledger) -> Ledger:
    """One ledger holding ``older``'s items then ``newer``'s, each once.

    A path keeps the strongest action; a command's exit codes are concatenated (repeats
    collapsed, the last four kept); an error of ``older`` is resolved when ``newer`` says so or
    when its source command ran again in ``newer`` and exited 0 without that error; tool counts
    add up.
    """
    if not older:
        return newer
    if not newer:
        return older
    paths: dict[str, str] = {}
    for ledger in (older, newer):
        for i, path in enumerate(ledger.paths):
            action = ledger.action(i)
            old = paths.get(path)
            if old is None or _STRENGTH[action] > _STRENGTH[old]:
                paths[path] = action
    commands: dict[str, list[int]] = {}
    for ledger in (older, newer):
        for i, command in enumerate(ledger.commands):
            history = commands.setdefault(command, [])
            for code in ledger.history(i):
                if not history or history[-1] != code:
                    history.append(code)
            del history[:-_EXIT_HISTORY]
    passed = {c for i, c in enumerate(newer.commands) if newer.exit_codes[i] == 0}
    errors: dict[str, tuple[str, bool]] = {}
    for i, error in enumerate(older.errors):
        source = older.source(i)
        fixed = older.is_resolved(i) or (source in passed and error not in newer.errors)
        errors[error] = (source, fixed)
    for i, error in enumerate(newer.errors):
        source, fixed = errors.get(error, (newer.source(i), False))
        errors[error] = (source, newer.is_resolved(i) if error in newer.errors else fixed)
    identifiers: dict[str, str] = {}
    for ledger in (older, newer):
        for i, token in enumerate(ledger.identifiers):
            identifiers.setdefault(token, ledger.identifier_key(i))
    tools: dict[str, int] = {}
    for ledger in (older, newer):
        for name, count in ledger.tools:
            tools[name] = tools.get(name, 0) + count
    return Ledger(
        paths=tuple(paths),
        commands=tuple(commands),
        errors=tuple(errors),
        asks=tuple(dict.fromkeys(older.asks + newer.asks)),
        exit_codes=tuple(h[-1] if h else None for h in commands.values()),
        tools=tuple(tools.items()),
        actions=tuple(paths.values()),
        exit_history=tuple(tuple(h) for h in commands.values()),
        error_sources=tuple(s for s, _ in errors.values()),
        resolved=tuple(r for _, r in errors.values()),
        identifiers=tuple(identifiers),
        identifier_keys=tuple(identifiers.values()),
    )


_PATH_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./~@+-")
_PATH_AFTER = _PATH_BEFORE - {"."}
_TOKEN_EDGE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-#")


def _has_token(text: str, token: str, before: frozenset[str], after: frozenset[str]) -> bool:
    """Whether ``token`` occurs in ``text`` not glued to a longer word on either side."""
    start = text.find(token)
    while start >= 0:
        end = start + len(token)
        if (start == 0 or text[start - 1] not in before) and (
            end == len(text) or text[end] not in after
        ):
            return True
        start = text.find(token, start + 1)
    return False


def _states_exit(text: str, command: str, code: int) -> bool:
    """Whether one line of ``text`` holds ``command`` and ``exit … code``."""
    pattern = re.compile(rf"exit[^\n]{{0,40}}?(?<![\d-]){code}(?!\d)")
    start = text.find(command)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        if pattern.search(text, line_start, len(text) if line_end < 0 else line_end):
            return True
        start = text.find(command, start + 1)
    return False


def _present(ledger: Ledger, text: str) -> dict[str, list[bool]]:
    """Per kind, whether each item of ``ledger`` occurs in ``text`` (see :func:`missing_from`)."""
    commands = []
    for i, command in enumerate(ledger.commands):
        failed = [c for c in dict.fromkeys(ledger.history(i)) if c != 0]
        commands.append(command in text and all(_states_exit(text, command, c) for c in failed))
    return {
        "paths": [_has_token(text, p, _PATH_BEFORE, _PATH_AFTER) for p in ledger.paths],
        "commands": commands,
        "errors": [e in text for e in ledger.errors],
        "asks": [a in text for a in ledger.asks],
        "identifiers": [_has_token(text, t, _TOKEN_EDGE, _TOKEN_EDGE) for t in ledger.identifiers],
    }


def _select(ledger: Ledger, found: dict[str, list[bool]], want: bool) -> Ledger:
    def keep(kind: str) -> list[int]:
        return [i for i, hit in enumerate(found[kind]) if hit is want]

    return ledger.subset(
        paths=keep("paths"),
        commands=keep("commands"),
        errors=keep("errors"),
        asks=keep("asks"),
        identifiers=keep("identifiers"),
    )


def readable_text(messages: Sequence[Message], fmt: Format) -> str:
    """What a model reads of ``messages``, as one string: visible text (system prompts and
    observations included), each tool call's name and argument values decoded (not
    JSON-escaped), and tool results. For checking which ledger items the messages show."""
    _check_format(fmt)
    pieces: list[str] = []
    for msg in messages:
        pieces.append(visible_text(msg))
        for call in _calls(msg, fmt):
            pieces.append(call.name)
            pieces.extend(_flat_strings(call.arguments))
        pieces.extend(result.text for result in tool_results(msg, fmt))
    return "\n".join(piece for piece in pieces if piece)


def missing_from(ledger: Ledger, text: str) -> Ledger:
    """The part of ``ledger`` whose items ``text`` does not hold.

    Paths and identifiers must occur as whole tokens (``lib/a.ex`` is not found inside
    ``/repo/lib/a.ex``); commands verbatim, and a command that failed also needs its exit code on
    the same line (``exit 1``); errors and asks verbatim. Tools are kept when their name does not
    occur.
    """
    missing = _select(ledger, _present(ledger, text), False)
    return attrs.evolve(
        missing, tools=tuple((name, n) for name, n in ledger.tools if name not in text)
    )


def present_in(ledger: Ledger, text: str) -> Ledger:
    """The part of ``ledger`` whose items ``text`` holds (the complement of
    :func:`missing_from`, tools included whole)."""
    return _select(ledger, _present(ledger, text), True)
