"""Extraction: :func:`build_ledger`'s one pass over a message list, collecting every kind of
fact (asks included) in order of first appearance, redacted, without duplicates."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from ctxengine import Format, Message
from ctxengine.messages import (
    is_real_user_message,
    redact,
    tool_results,
    visible_text,
)
from ctxengine_compressor.ledger.commands import (
    _command_of,
    _is_observation,
    _text_actions,
    exit_code_of,
    shorten_command,
    truncate,
)
from ctxengine_compressor.ledger.errors import (
    _ERRORS_PER_RESULT,
    _error_lines,
    _result_errors,
    _unwrap_output,
)
from ctxengine_compressor.ledger.identifiers import _identifier_uses
from ctxengine_compressor.ledger.model import _EXIT_HISTORY, _STRENGTH, ASK_CHARS, Action, Ledger
from ctxengine_compressor.ledger.paths import (
    _argument_paths,
    _command_paths,
    _patch_argument,
    _patch_paths,
    _text_paths,
)
from ctxengine_compressor.ledger.tools import _calls, _is_shell_tool, _tool_action

__all__ = ["build_ledger"]

# An id counts when a user message before its first use, or one of this many tool results
# before it, gave it: tools' ids are passed on soon, a user's may be used much later.
_ID_LOOKBACK = 12


class _Collector:
    """Ordered, de-duplicated, redacted item lists built in one pass."""

    def __init__(self) -> None:
        self.paths: dict[str, Action] = {}
        self.commands: dict[str, list[int]] = {}
        self.errors: dict[str, str] = {}  # error line -> source
        self.resolved: set[str] = set()
        self.asks: dict[str, None] = {}
        self.tools: dict[str, int] = {}
        self.identifiers: dict[str, str] = {}
        self._raw_seen: dict[str, str] = {}

    def _clean(self, raw: str) -> str:
        # Redacting is the costly step: do it once per distinct raw item.
        clean = self._raw_seen.get(raw)
        if clean is None:
            clean = redact(raw)
            self._raw_seen[raw] = clean
        return clean

    def path(self, raw: str, action: Action = "mentioned") -> None:
        clean = self._clean(raw)
        old = self.paths.get(clean)
        if old is None or _STRENGTH[action] > _STRENGTH[old]:
            self.paths[clean] = action

    def command(self, raw: str) -> str | None:
        short = shorten_command(raw)
        if not short:
            return None
        clean = self._clean(short)
        self.commands.setdefault(clean, [])
        return clean

    def exit(self, command: str, code: int) -> None:
        history = self.commands[command]
        if not history or history[-1] != code:
            history.append(code)
            del history[:-_EXIT_HISTORY]

    def error(self, line: str, source: str) -> str:
        clean = self._clean(line)
        self.errors.setdefault(clean, source)
        return clean

    def ask(self, text: str) -> None:
        # One line, so it renders as one bullet.
        ask = truncate(" ".join(text.split()), ASK_CHARS)
        if ask:
            self.asks.setdefault(self._clean(ask), None)

    def identifier(self, token: str, key: str) -> None:
        clean = self._clean(token)
        if clean == token:  # a token that held a secret is not an identifier to repeat
            self.identifiers.setdefault(clean, key)

    def ledger(self) -> Ledger:
        errors = tuple(self.errors)
        return Ledger(
            paths=tuple(self.paths),
            commands=tuple(self.commands),
            errors=errors,
            asks=tuple(self.asks),
            exit_codes=tuple(h[-1] if h else None for h in self.commands.values()),
            tools=tuple(self.tools.items()),
            actions=tuple(self.paths.values()),
            exit_history=tuple(tuple(h) for h in self.commands.values()),
            error_sources=tuple(self.errors.values()),
            resolved=tuple(e in self.resolved for e in errors),
            identifiers=tuple(self.identifiers),
            identifier_keys=tuple(self.identifiers.values()),
        )


# The call id an observation answers (a text action has no id of its own).
_TEXT_ACTION = "\0text-action"


def _check_format(fmt: object) -> None:
    if fmt not in ("openai", "anthropic"):
        raise ValueError(f"unknown message format {fmt!r}; allowed: 'openai' or 'anthropic'")


# A call waiting for its result: its tool, its command (shell calls) and the key its errors
# are filed under (to mark them resolved when the same call later succeeds).
_Pending = tuple[str, "str | None", str]


class _Scan:
    """The state of :func:`build_ledger`'s one pass over a message list."""

    def __init__(self, messages: Sequence[Message], fmt: Format) -> None:
        self.messages = messages
        self.fmt = fmt
        self.out = _Collector()
        self.pending: dict[str, list[_Pending]] = {}  # call id -> calls waiting for a result
        # error lines per source, until a later success of that source resolves them
        self.open_errors: dict[str, list[str]] = {}
        self.text_actions: list[_Pending] = []
        self.given: list[tuple[int, str]] = []  # (message index, text) of tool results
        self.said: list[tuple[int, str]] = []  # (message index, text) of user messages
        self.uses: dict[str, tuple[int, str]] = {}  # id-shaped token -> (first use, key)

    def assistant(self, index: int, msg: Message) -> None:
        """An assistant turn: paths in its text, its text actions, its calls, the ids it uses."""
        out = self.out
        text = visible_text(msg)
        calls = _calls(msg, self.fmt)
        self.text_actions = []
        for path in _text_paths(text):
            out.path(path)
        if not calls and text and _next_is_observation(self.messages, index):
            for command in _text_actions(text):
                clean = out.command(command)
                for path, action in _command_paths(command):
                    out.path(path, action)
                if clean is not None:
                    self.text_actions.append(("bash", clean, clean))
        for call in calls:
            out.tools[call.name] = out.tools.get(call.name, 0) + 1
            clean, source = _call_facts(out, call.name, call.arguments)
            self.pending.setdefault(call.id, []).append((call.name, clean, source))
        for token, key in _identifier_uses(text, calls):
            self.uses.setdefault(token, (index, key))

    def other(self, index: int, msg: Message) -> None:
        """A user or tool turn: its tool results, then what a person wrote in it."""
        results = [(r.call_id, r.text, r.is_error) for r in tool_results(msg, self.fmt)]
        real_user = is_real_user_message(msg, self.fmt)
        text = visible_text(msg) if real_user else ""
        if real_user and self.text_actions and _is_observation(text):
            # The output of the text action before it, not something a person wrote.
            results = [(_TEXT_ACTION, text, False)]
            real_user = False
        for call_id, raw, is_error in results:
            self.result(index, self._answered(call_id), raw, is_error)
        if real_user:
            self.said.append((index, text))
            self.out.ask(text)
            for path in _text_paths(text):
                self.out.path(path)
            for line in _error_lines(text, _ERRORS_PER_RESULT):
                self.out.error(line, "user")

    def _answered(self, call_id: str) -> _Pending | None:
        """The call a result with ``call_id`` answers: the oldest one waiting with that id."""
        if call_id == _TEXT_ACTION and self.text_actions:
            call = self.text_actions.pop()
            self.text_actions = []
            return call
        queue = self.pending.get(call_id)
        return queue.pop(0) if queue else None

    def result(self, index: int, call: _Pending | None, raw: str, is_error: bool) -> None:
        """One tool result: its errors, the exit code of its command, errors it resolves."""
        text = _unwrap_output(raw) if raw.startswith("{") else raw
        self.given.append((index, text))
        name, ran, source = call if call is not None else ("", None, "")
        lines = _result_errors(text, name, is_error)
        code = None
        if ran is not None:
            code = exit_code_of(text)
            if code is not None:
                self.out.exit(ran, code)
        for line in lines:
            clean = self.out.error(line, source)
            self.open_errors.setdefault(source, []).append(clean)
        if not lines and code in (None, 0) and not is_error and source in self.open_errors:
            self.out.resolved.update(self.open_errors.pop(source))

    def identifiers(self) -> None:
        """The id-shaped tokens the assistant used that a user message before the use, or one
        of the last few tool results before it, gave."""
        if not self.uses or not (self.given or self.said):
            return
        tool_at = [i for i, _ in self.given]
        for token, (at, key) in self.uses.items():
            before = bisect.bisect_left(tool_at, at)
            recent = self.given[max(0, before - _ID_LOOKBACK) : before]
            if any(token in text for _, text in recent) or any(
                i < at and token in text for i, text in self.said
            ):
                self.out.identifier(token, key)


def build_ledger(messages: Sequence[Message], fmt: Format) -> Ledger:
    """Collect the critical context of ``messages`` (see the module docstring).

    Deterministic, one pass over the list (plus a check of the few id-shaped tokens the
    assistant used against the text before them); never mutates the list. Tool results are
    matched to their calls in order per call id, so a reused id still maps each result to the
    right command.

    :raises ValueError: when ``fmt`` is not ``"openai"`` or ``"anthropic"``.
    """
    _check_format(fmt)
    scan = _Scan(messages, fmt)
    for index, msg in enumerate(messages):
        if msg.get("role") == "assistant":
            scan.assistant(index, msg)
        else:
            scan.other(index, msg)
    scan.identifiers()
    return scan.out.ledger()


def _next_is_observation(messages: Sequence[Message], index: int) -> bool:
    if index + 1 >= len(messages):
        return False
    nxt = messages[index + 1]
    return nxt.get("role") == "user" and _is_observation(visible_text(nxt))


def _call_facts(out: _Collector, name: str, arguments: dict[str, Any]) -> tuple[str | None, str]:
    """Record the paths (with actions) and the command of one call; returns its command (or
    ``None``) and the key its errors are filed under: the command, else the tool and its
    first path, else the tool."""
    if not arguments:
        return None, name
    if _is_shell_tool(name):
        found = _command_of(arguments)
        if found is None:
            return None, name
        command, is_patch = found
        if is_patch:
            for path, action in _patch_paths(command):
                out.path(path, action)
            return None, name
        if str(arguments.get("is_input", "")).lower() == "true":
            return None, name  # keystrokes for a running process, not a command
        for path, action in _command_paths(command):
            out.path(path, action)
        if "*** Begin Patch" in command:
            for path, action in _patch_paths(command):
                out.path(path, action)
        clean = out.command(command)
        return clean, clean or name
    action = _tool_action(name, arguments)
    paths = _argument_paths(arguments)
    for path in paths:
        out.path(path, action)
    patch = _patch_argument(arguments)
    if patch:
        for path, patch_action in _patch_paths(patch):
            out.path(path, patch_action)
    return None, f"{name} {paths[0]}" if paths else name
