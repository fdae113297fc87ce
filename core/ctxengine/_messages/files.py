"""Reading conversation files: what ``ctxengine compress`` and ``ctxengine replay`` take as input.

Accepted shapes, detected from the content:

- a JSON list of messages;
- a JSON object with ``messages`` (and optionally ``system``, ``id``);
- JSONL: one such object (or list) per line, one conversation each.

Messages may be in OpenAI chat or Anthropic Messages format; the format is detected per
conversation with :func:`ctxengine.messages.detect_format`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ctxengine._messages.conversation import Format, Message, SystemPrompt
from ctxengine._messages.errors import MessageFormatError
from ctxengine._messages.read import detect_format

Shape = Literal["list", "object", "jsonl"]

SHAPES_ALLOWED = (
    "a JSON list of messages, a JSON object with a 'messages' list, "
    "or JSONL with one conversation per line"
)


class ConversationFileError(ValueError):
    """A conversation file could not be read; the message names the file (and line)."""


@attrs.frozen
class ConversationRecord:
    """One conversation read from a file, with what is needed to write it back."""

    id: str
    messages: list[Message]
    system: SystemPrompt | None
    format: Format
    shape: Shape
    extra: dict[str, Any] = attrs.field(factory=dict)
    """The other keys of an object-shaped record (metadata), written back unchanged."""

    @staticmethod
    def session_ids(records: Sequence[ConversationRecord]) -> list[str]:
        """The session id each record runs under: its own id, a repeated one (two files, or one
        file's records sharing an id) with ``#2``, ``#3``, ... so two records never share
        engine state."""
        seen: Counter[str] = Counter()
        ids = []
        for record in records:
            seen[record.id] += 1
            ids.append(record.id if seen[record.id] == 1 else f"{record.id}#{seen[record.id]}")
        return ids


def _record(data: object, where: str, shape: Shape, index: int) -> ConversationRecord:
    if isinstance(data, list):
        messages, system, extra = data, None, {}
    elif isinstance(data, dict) and isinstance(data.get("messages"), list):
        messages = data["messages"]
        system = data.get("system")
        extra = {k: v for k, v in data.items() if k not in ("messages", "system")}
    else:
        found = type(data).__name__
        if isinstance(data, dict):
            keys = ", ".join(sorted(map(str, data))) or "no keys"
            found = f"an object with {keys}"
        raise ConversationFileError(
            f"{where}: not a conversation ({found}); expected {SHAPES_ALLOWED}"
        )
    if system is not None and not isinstance(system, str | list):
        raise ConversationFileError(f"{where}: 'system' must be a string or a list of blocks")
    try:
        fmt = detect_format(messages, system)
    except MessageFormatError as exc:
        raise ConversationFileError(f"{where}: {exc}") from None
    ident = str(extra.get("id") or f"conversation-{index}")
    return ConversationRecord(
        id=ident, messages=messages, system=system, format=fmt, shape=shape, extra=extra
    )


def _looks_like_jsonl(lines: list[tuple[int, str]], error: json.JSONDecodeError) -> bool:
    """JSONL when the whole text has extra data after one value, or its first line is a value."""
    if len(lines) < 2:
        return False
    if error.msg == "Extra data":
        return True
    try:
        json.loads(lines[0][1])
    except json.JSONDecodeError:
        return False
    return True


def read_conversations(path: str | Path, session: int | None = None) -> list[ConversationRecord]:
    """Every conversation in ``path``, or with ``session`` only the one at that index (from 0;
    what a command's ``--session`` option selects).

    :raises ConversationFileError: unreadable file, invalid JSON (with the line number), content
        that is not a conversation, or a ``session`` the file does not hold.
    """
    records = _read_all(Path(path))
    if session is None:
        return records
    if not 0 <= session < len(records):
        raise ConversationFileError(
            f"{path} holds {len(records)} conversation(s); --session must be 0..{len(records) - 1}"
        )
    return [records[session]]


def _read_all(path: Path) -> list[ConversationRecord]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversationFileError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        raise ConversationFileError(f"{path}: the file is empty; expected {SHAPES_ALLOWED}")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as first_error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if not _looks_like_jsonl(lines, first_error):
            raise ConversationFileError(
                f"{path}:{first_error.lineno}:{first_error.colno}: invalid JSON: {first_error.msg}"
            ) from None
        records: list[ConversationRecord] = []
        for n, line in lines:
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConversationFileError(
                    f"{path}:{n}:{exc.colno}: invalid JSON: {exc.msg}"
                ) from None
            records.append(_record(data, f"{path}:{n}", "jsonl", len(records)))
        return records
    shape: Shape = "list" if isinstance(whole, list) else "object"
    return [_record(whole, str(path), shape, 0)]
