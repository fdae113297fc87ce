"""Phase 1: shrink old tool output without a model call.

Outside the protected tail:

- a tool result longer than :data:`PRUNE_MIN_CHARS` becomes a one-line description of its call,
  e.g. ``[terminal] ran `pytest -q` -> exit 1, 212 lines``;
- a large result identical to a later one becomes a pointer to that later copy;
- long string values inside tool-call arguments are shortened, and the arguments stay valid JSON.

The pruned messages are what the model sees afterwards; the summarizer reads the originals.
Only the messages that change are copied (shallowly); the rest are the caller's objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import attrs

from ctxengine import Format, Message
from ctxengine.messages import ToolCall, tool_calls, tool_results

__all__ = ["PRUNE_MIN_CHARS", "PruneStats", "describe_output", "prune", "shorten_arguments"]

PRUNE_MIN_CHARS = 200
"""Tool results longer than this (characters) are replaced by a one-line description."""

ARG_MAX_CHARS = 300
"""A string inside tool-call arguments longer than this is shortened to head + marker + tail."""

ARG_KEEP_HEAD = 160
ARG_KEEP_TAIL = 60

# Argument keys that best say what a call did, most telling first.
_MAIN_ARG_KEYS = (
    "command",
    "cmd",
    "file_path",
    "path",
    "filename",
    "file",
    "url",
    "pattern",
    "query",
    "q",
    "name",
    "id",
)
_COMMAND_KEYS = frozenset({"command", "cmd"})
_MAIN_ARG_MAX = 80

# Exit codes as shells, agent harnesses and test runners print them.
_EXIT_RE = re.compile(
    r"(?:exit(?:ed)?(?: with)?(?: code| status)?|return ?code|returncode)\s*[:=]?\s*(-?\d+)",
    re.IGNORECASE,
)


@attrs.frozen
class PruneStats:
    """What :func:`prune` changed."""

    outputs_described: int = 0
    outputs_deduplicated: int = 0
    arguments_shortened: int = 0

    @property
    def changed(self) -> int:
        return self.outputs_described + self.outputs_deduplicated + self.arguments_shortened


def _main_argument(call: ToolCall | None) -> tuple[str | None, bool]:
    """The most telling argument of ``call`` (e.g. its command or path) and whether it is a
    command. ``(None, False)`` when the arguments are not a JSON object."""
    if call is None:
        return None, False
    try:
        args = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        return None, False
    if not isinstance(args, dict):
        return None, False
    for key in _MAIN_ARG_KEYS:
        value = args.get(key)
        if isinstance(value, (str, int, float)) and str(value).strip():
            text = " ".join(str(value).split())
            if len(text) > _MAIN_ARG_MAX:
                text = text[: _MAIN_ARG_MAX - 1] + "…"
            return text.replace("`", "'"), key in _COMMAND_KEYS
    return None, False


def describe_output(call: ToolCall | None, text: str, *, is_error: bool = False) -> str:
    """One line saying which call produced ``text`` and how big it was.

    >>> describe_output(ToolCall("1", "terminal", '{"command": "pytest -q"}'), "x\\nexit code 1")
    '[terminal] ran `pytest -q` -> exit 1, 2 lines, 13 chars'
    """
    name = call.name if call is not None and call.name else "tool"
    arg, is_command = _main_argument(call)
    head = f"[{name}]"
    if arg is not None:
        head += f" ran `{arg}`" if is_command else f" `{arg}`"
    facts: list[str] = []
    match = _last_exit_code(text)
    if match is not None:
        facts.append(f"exit {match}")
    elif is_error:
        facts.append("error")
    lines = text.count("\n") + 1 if text else 0
    facts.append(f"{lines:,} line{'s' if lines != 1 else ''}")
    facts.append(f"{len(text):,} chars")
    return f"{head} -> {', '.join(facts)}"


def _last_exit_code(text: str) -> str | None:
    # Exit codes are printed at the end; look only there so a long log stays cheap.
    tail = text[-2_000:]
    found = None
    for found in _EXIT_RE.finditer(tail):  # noqa: B007 - the last match is the one we want
        pass
    return found.group(1) if found is not None else None


def shorten_arguments(arguments: str) -> str | None:
    """``arguments`` (JSON text) with long strings shortened, or ``None`` when nothing changed
    (or the text is not JSON: invalid arguments are left for the provider to judge)."""
    if len(arguments) <= ARG_MAX_CHARS:
        return None
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    short, changed = _shorten_value(value)
    if not changed:
        return None
    return json.dumps(short, ensure_ascii=False)


def _shorten_value(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) <= ARG_MAX_CHARS:
            return value, False
        cut = len(value) - ARG_KEEP_HEAD - ARG_KEEP_TAIL
        return (
            f"{value[:ARG_KEEP_HEAD]}…[{cut:,} chars cut by compaction]…{value[-ARG_KEEP_TAIL:]}",
            True,
        )
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        changed = False
        for key, item in value.items():
            out[key], item_changed = _shorten_value(item)
            changed = changed or item_changed
        return out, changed
    if isinstance(value, list):
        items = [_shorten_value(item) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    return value, False


def prune(
    messages: Sequence[Message],
    fmt: Format,
    start: int,
    end: int,
    *,
    kept_from: int | None = None,
) -> tuple[list[Message], PruneStats]:
    """Prune ``messages[start:end]``; later messages are only read (to find duplicates).

    :param kept_from: the index from which messages stay in the prompt verbatim (the tail); an
        older copy of a large output only points at a later one that is kept. Default: ``end``.
    :returns: the full list with pruned copies in place of changed messages, and the counts.
    """
    kept = end if kept_from is None else kept_from
    out = list(messages)
    if start >= end:
        return out, PruneStats()
    # Where each large output of the range occurs last, so an older copy can point at the newest
    # (the later messages are scanned only when the range has large outputs at all).
    last_seen: dict[str, int] = {}
    repeated: set[str] = set()
    for index in range(start, end):
        for result in tool_results(messages[index], fmt):
            if len(result.text) > PRUNE_MIN_CHARS:
                if result.text in last_seen:
                    repeated.add(result.text)
                last_seen[result.text] = index
    if last_seen:
        _newest_later_copies(messages, fmt, last_seen, repeated, end, kept)
    described = deduplicated = shortened = 0
    calls: dict[str, list[ToolCall]] = {}
    for index in range(start, end):
        msg = messages[index]
        found = tool_calls(msg, fmt)
        if found:
            calls = {}
            for call in found:
                calls.setdefault(call.id, []).append(call)
            new_msg, count = _shorten_calls(msg, fmt)
            if count:
                out[index] = new_msg
                shortened += count
            continue
        results = tool_results(msg, fmt)
        if not results:
            continue
        replacements: list[str | None] = []
        for result in results:
            matching = calls.get(result.call_id)
            answered = matching.pop(0) if matching else None
            if len(result.text) <= PRUNE_MIN_CHARS:
                replacements.append(None)
                continue
            line = describe_output(answered, result.text, is_error=result.is_error)
            newest = last_seen.get(result.text, index)
            # Point at a later copy only when it stays in the prompt; a copy that is about to
            # be summarized away would be a pointer to nothing.
            if newest > index and (newest < end or newest >= kept):
                line += " (identical to a later result of the same output; see there)"
                deduplicated += 1
            else:
                described += 1
            replacements.append(line)
        if any(r is not None for r in replacements):
            out[index] = _replace_results(msg, fmt, replacements)
    return out, PruneStats(described, deduplicated, shortened)


def _newest_later_copies(
    messages: Sequence[Message],
    fmt: Format,
    last_seen: dict[str, int],
    repeated: set[str],
    end: int,
    kept: int,
) -> None:
    """Move ``last_seen`` (each large output of the pruned range, at its newest index there) to
    the newest copy after the range wherever that changes where a copy points (see
    :func:`prune`): to the newest copy in the kept tail; else, for an output the range holds
    more than once (``repeated``), to its newest copy in the summarized middle. An output the
    range holds once and the tail does not points nowhere whether or not the middle has a copy,
    so the middle, most of a long conversation, is read only for the rare repeated ones."""
    tail_from = max(kept, end)
    for index in range(tail_from, len(messages)):
        for text in _result_texts(messages[index], fmt):
            if text in last_seen:
                last_seen[text] = index
    wanted = {text for text in repeated if last_seen[text] < tail_from}
    if not wanted:
        return
    for index in range(end, tail_from):
        for text in _result_texts(messages[index], fmt):
            if text in wanted:
                last_seen[text] = index


def _result_texts(msg: Message, fmt: Format) -> list[str]:
    """The texts of ``tool_results(msg, fmt)``, read directly in the common case (string
    contents) so that scanning a whole conversation builds no records."""
    content = msg.get("content")
    if fmt == "openai":
        if msg.get("role") != "tool":
            return []
        if isinstance(content, str):
            return [content]
    else:
        if msg.get("role") != "user" or not isinstance(content, list):
            return []
        texts: list[str] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = block.get("content")
                if not isinstance(text, str):
                    break  # a list of blocks: let tool_results join them
                texts.append(text)
        else:
            return texts
    return [result.text for result in tool_results(msg, fmt)]


def _shorten_calls(msg: Message, fmt: Format) -> tuple[Message, int]:
    count = 0
    if fmt == "openai":
        new_calls: list[Any] = []
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            args = fn.get("arguments") if isinstance(fn, dict) else None
            short = shorten_arguments(args) if isinstance(args, str) else None
            if short is None:
                new_calls.append(call)
            else:
                new_calls.append({**call, "function": {**fn, "arguments": short}})  # type: ignore[dict-item]
                count += 1
        return ({**msg, "tool_calls": new_calls} if count else msg), count
    blocks: list[Any] = []
    for block in msg.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            text = json.dumps(block.get("input", {}), ensure_ascii=False)
            short = shorten_arguments(text)
            if short is not None:
                blocks.append({**block, "input": json.loads(short)})
                count += 1
                continue
        blocks.append(block)
    return ({**msg, "content": blocks} if count else msg), count


def _replace_results(msg: Message, fmt: Format, replacements: list[str | None]) -> Message:
    if fmt == "openai":
        line = replacements[0]
        return msg if line is None else {**msg, "content": line}
    blocks: list[Any] = []
    slot = 0
    for block in msg.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            line = replacements[slot] if slot < len(replacements) else None
            slot += 1
            if line is not None:
                blocks.append({**block, "content": line})
                continue
        blocks.append(block)
    return {**msg, "content": blocks}
