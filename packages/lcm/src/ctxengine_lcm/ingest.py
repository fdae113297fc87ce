"""Turning incoming messages into store rows: canonical hashes, searchable text, outputs aside.

A message's identity is the SHA-256 of its canonical JSON (sorted keys, ``cache_control``
markers removed, since caching strategies add and move them between turns). Ingest never
re-stores a message the active context already accounts for: see
:meth:`ctxengine_lcm.engine.LcmSession.ingest` for how a re-sent history is matched.

The searchable text of a message (:func:`searchable_text`) holds tool-call arguments as the
agent wrote them, not JSON-escaped: a command with quotes or backslashes is found by a literal or
regex search for the command itself. The stored content stays the original JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from ctxengine import Format, Message, estimate_tokens
from ctxengine.messages import message_text, tool_calls, tool_results
from ctxengine_lcm.store import NewMessage, NewOutput, utf8_safe

MAIN_ARGUMENT_KEYS = ("path", "file_path", "filename", "command", "cmd", "query", "url", "pattern")
"""Tool-call arguments that best describe a call in one line, in order of preference."""


# One encoder for every message: json.dumps with options builds a new one per call.
_READABLE = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
).encode
# For text SQLite cannot take: a lone UTF-16 surrogate (a cut emoji) has no UTF-8 form, but
# as a \uXXXX escape it round-trips exactly through json.loads.
_ESCAPED = json.JSONEncoder(
    sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str
).encode


def _canonical_json(value: Any) -> str:
    """Readable JSON when it is valid UTF-8, else the ASCII-escaped form (same value)."""
    text = _READABLE(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ESCAPED(value)
    return text


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def canonical(msg: Message) -> tuple[str, str]:
    """``(json text, content hash)`` of a message; the text is what the store keeps verbatim."""
    text = _canonical_json(msg)
    keyed = _canonical_json(_strip_cache_control(msg)) if '"cache_control"' in text else text
    # 128 bits of SHA-256: collisions are out of reach, keys stay short in the indexes.
    return text, hashlib.sha256(keyed.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def message_hash(msg: Message) -> str:
    return canonical(msg)[1]


def searchable_text(msg: Message, fmt: Format) -> str:
    """What search sees of ``msg``: :func:`~ctxengine.messages.message_text`, with each tool
    call's arguments written out as ``key: value`` lines of their decoded values, and the decoded
    strings of a JSON tool result that holds escapes (``{"output": "say \\"hi\\""}``)."""
    text = message_text(msg)
    for call in tool_calls(msg, fmt):
        written = written_arguments(call.arguments)
        if written is not None:
            text = text.replace(f"{call.name} {call.arguments}", f"{call.name}\n{written}", 1)
    for result in tool_results(msg, fmt):
        if "\\" in result.text and result.text[:1] in "{[":
            try:
                value = json.loads(result.text)
            except ValueError:
                continue
            decoded = "\n".join(item for _, item in _flatten("", value) if _escaped(item))
            if decoded:
                text = f"{text}\n{decoded}"
    return text


def _escaped(text: str) -> bool:
    """Whether JSON writes ``text`` with escapes (quotes, backslashes, line breaks)."""
    return _READABLE(text)[1:-1] != text


def written_arguments(arguments: str) -> str | None:
    """A call's JSON arguments as ``key: value`` lines (nested keys joined with ``.``) holding
    the decoded values; ``None`` when the text is not a JSON object."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return "\n".join(f"{key}: {item}" for key, item in _flatten("", value))


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [
            pair
            for key, item in value.items()
            for pair in _flatten(f"{prefix}.{key}" if prefix else str(key), item)
        ]
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        return [pair for n, item in enumerate(value) for pair in _flatten(f"{prefix}[{n}]", item)]
    if isinstance(value, str):
        return [(prefix, value)]
    return [(prefix, _READABLE(value))]


def main_argument(arguments: str) -> str:
    """The most telling argument of a tool call (a path, a command …), or ``""``."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return arguments[:120]
    if isinstance(parsed, dict):
        for key in MAIN_ARGUMENT_KEYS:
            value = parsed.get(key)
            if isinstance(value, str) and value:
                return value if len(value) <= 120 else value[:117] + "..."
    return ""


def call_names(messages: Sequence[Message], index: int, fmt: Format) -> dict[str, tuple[str, str]]:
    """``call id -> (tool name, main argument)`` for the tool calls answered at ``index``."""
    for k in range(index - 1, max(-1, index - 64), -1):
        msg = messages[k]
        if msg.get("role") == "assistant":
            return {c.id: (c.name, main_argument(c.arguments)) for c in tool_calls(msg, fmt)}
    return {}


def output_id(session_key: str, content: str) -> str:
    """A stable id for a stored output: the same output in a conversation gets the same id."""
    digest = hashlib.sha256(f"{session_key}\0{content}".encode("utf-8", "surrogatepass"))
    return "out_" + digest.hexdigest()[:16]


def describe_output(out_id: str, tool: str, argument: str, content: str, tokens: int) -> str:
    """The short text that stands in context for an output stored aside."""
    lines = content.count("\n") + 1
    head = content[:1200]
    tail = content[-600:] if len(content) > 1800 else ""
    what = f"{tool} {argument}".strip() or "tool"
    parts = [
        f"[lcm: large tool output stored aside as {out_id} ({what}; {lines} lines, "
        f"~{tokens} tokens).",
        "First part:",
        head.rstrip(),
    ]
    if tail:
        parts += ["...", "Last part:", tail.rstrip()]
    parts.append(
        f'Read all of it with lcm_describe(id="{out_id}", offset=...) or search it with '
        'lcm_grep(scope="outputs").]'
    )
    return "\n".join(parts)


def _set_result_text(msg: Message, fmt: Format, replacements: dict[int, str]) -> Message:
    """A copy of ``msg`` whose k-th tool result (k in ``replacements``) has new text."""
    if fmt == "openai":
        new = dict(msg)
        new["content"] = replacements[0]
        return new
    blocks = list(msg.get("content") or [])
    k = 0
    for pos, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            if k in replacements:
                blocks[pos] = {**block, "content": replacements[k]}
            k += 1
    new = dict(msg)
    new["content"] = blocks
    return new


def prepare(
    messages: Sequence[Message],
    index: int,
    fmt: Format,
    *,
    count: Callable[[Message], int],
    session_key: str,
    large_output_tokens: int,
    pinned: bool = False,
) -> tuple[NewMessage, list[NewOutput], Message]:
    """Build the store row for ``messages[index]``.

    Tool results above ``large_output_tokens`` (estimated) are stored aside as outputs and the
    message gets a *rendered* form where each such result is replaced by a description.

    :returns: ``(row, outputs, message as it goes into context)``.
    """
    msg = messages[index]
    content, digest = canonical(msg)
    results = tool_results(msg, fmt) if not pinned else []
    outputs: list[NewOutput] = []
    in_context: Message = msg
    rendered = rendered_hash = None
    rendered_tokens = None
    if results:
        replacements: dict[int, str] = {}
        names: dict[str, tuple[str, str]] | None = None
        for k, result in enumerate(results):
            tokens = estimate_tokens(result.text)
            if tokens <= large_output_tokens:
                continue
            if names is None:
                names = call_names(messages, index, fmt)
            tool, argument = names.get(result.call_id, ("tool", ""))
            out_id = output_id(session_key, result.text)
            description = describe_output(out_id, tool, argument, result.text, tokens)
            outputs.append(
                NewOutput(out_id, result.call_id, tool, result.text, tokens, description)
            )
            replacements[k] = description
        if replacements:
            in_context = _set_result_text(msg, fmt, replacements)
            rendered, rendered_hash = canonical(in_context)
            rendered_tokens = count(in_context)
    calls = tool_calls(msg, fmt) if not pinned else []
    row = NewMessage(
        role=str(msg.get("role", "")),
        content=content,
        text=utf8_safe(searchable_text(in_context, fmt)),
        tokens=count(msg),
        content_hash=digest,
        tool_calls=json.dumps([[c.id, c.name] for c in calls]) if calls else None,
        tool_results=json.dumps([r.call_id for r in results]) if results else None,
        pinned=pinned,
        rendered=rendered,
        rendered_hash=rendered_hash,
        rendered_tokens=rendered_tokens,
    )
    return row, outputs, in_context
