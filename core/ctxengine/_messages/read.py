"""Reading OpenAI chat and Anthropic Messages lists without converting or mutating them.

Every function here takes the caller's plain dicts as they are and only reads them. The readers
are lenient (a malformed tool call reads as empty strings rather than raising); :func:`validate`
is the place that judges shape.

Tool-call pairing is positional: the results of an assistant tool-call message are the messages
right after it (OpenAI: the run of ``tool`` messages; Anthropic: the ``tool_result`` blocks of the
next ``user`` message) and ids are only matched inside that group, so an id reused in a later
turn pairs correctly.

Judging shape is :mod:`.validate`'s job and conversion between the formats :mod:`.convert`'s;
both build on this module, which imports neither.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxengine._messages.conversation import Format, Message
from ctxengine._messages.errors import MessageFormatError

__all__ = [
    "ANTHROPIC_BLOCK_TYPES",
    "OPENAI_PART_TYPES",
    "OPENAI_ROLES",
    "ToolCall",
    "ToolGroup",
    "ToolResult",
    "cut_points",
    "detect_format",
    "dumps_arguments",
    "is_real_user_message",
    "is_tool_message",
    "match_results",
    "message_text",
    "openai_tool_calls",
    "text_size",
    "tool_call_ids",
    "tool_calls",
    "tool_group",
    "tool_groups",
    "tool_result_ids",
    "tool_results",
    "visible_text",
]

OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
# Block types only the Anthropic Messages format has (an image counts only with a ``source``).
ANTHROPIC_BLOCK_TYPES = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
# Part types only the OpenAI chat format has.
OPENAI_PART_TYPES = frozenset({"image_url", "input_audio", "refusal"})
# Message keys only the OpenAI chat format has.
_OPENAI_KEYS = ("tool_calls", "tool_call_id", "reasoning_content")
# Content blocks that are images, in either format (OpenAI chat, OpenAI Responses, Anthropic).
IMAGE_BLOCK_TYPES = frozenset({"image", "image_url", "input_image"})
BLOCK_TEXT_KEYS: Mapping[str, str] = {
    "text": "text",
    "thinking": "thinking",
    "redacted_thinking": "data",
    "refusal": "refusal",
}
"""For the content blocks whose token-bearing text is one string value, the key holding it (what
:func:`message_text` reads of them). Every walk that measures blocks reads it from here, so the
walks cannot disagree about a block type."""


@attrs.frozen
class ToolCall:
    """A tool call in either format; ``arguments`` is JSON text.

    For Anthropic ``tool_use`` blocks, ``arguments`` is ``json.dumps(input, ensure_ascii=False)``
    (the form OpenAI-format transcripts of the same calls carry).
    """

    id: str
    name: str
    arguments: str


@attrs.frozen
class ToolResult:
    """A tool result in either format; ``text`` is the result's text (images read as "")."""

    call_id: str
    text: str
    is_error: bool


@attrs.frozen
class ToolGroup:
    """An assistant tool-call message and the results that answer it.

    :ivar call_index: index of the assistant message holding the calls.
    :ivar result_indices: indices of the messages right after it that carry its results (OpenAI:
        every ``tool`` message of the run that follows; Anthropic: the next user message when it
        holds ``tool_result`` blocks). Empty when nothing answers the calls.
    :ivar call_ids: ids of the calls in order (duplicates kept).
    :ivar unanswered: ids of calls no result in the group answers, in call order.
    """

    call_index: int
    result_indices: tuple[int, ...]
    call_ids: tuple[str, ...]
    unanswered: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Format detection


def detect_format(messages: Sequence[Message], system: object = None) -> Format:
    """Say whether ``messages`` is an OpenAI chat or an Anthropic Messages list.

    Anthropic when a ``tool_use`` / ``tool_result`` / ``thinking`` / ``redacted_thinking`` block
    or an ``image`` block with a ``source`` appears, or when ``system`` is given separately;
    OpenAI when a ``system`` / ``developer`` / ``tool`` role, ``tool_calls``, ``tool_call_id``,
    ``reasoning_content`` or an OpenAI-only part (``image_url``, ...) appears. A plain text-only
    list fits both and reads as ``"openai"`` unless ``system`` is given.

    :raises MessageFormatError: when ``messages`` is not a list of message dicts, a role is
        missing or unknown, a content has the wrong type, or the list mixes both formats.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise MessageFormatError(
            f"messages must be a list of message dicts, got {type(messages).__name__}"
        )
    # The first sign of each format seen, as "where: what" for the error message.
    signs: dict[Format, str] = {}
    if system is not None:
        signs["anthropic"] = "a separate system prompt"
    for i, msg in enumerate(messages):
        content = _readable_content(msg, i)
        sign = _openai_message_sign(msg)
        if sign is not None:
            signs.setdefault("openai", f"messages[{i}]: {sign}")
        for j, part in enumerate(content if isinstance(content, list) else ()):
            found = _part_sign(part)
            if found is not None:
                signs.setdefault(found[0], f"messages[{i}].content[{j}]: {found[1]}")
    if len(signs) == 2:
        raise MessageFormatError(
            f"messages mix OpenAI chat features ({signs['openai']}) and Anthropic Messages "
            f"features ({signs['anthropic']}); use one format (to_anthropic converts OpenAI lists)"
        )
    return "anthropic" if "anthropic" in signs else "openai"


def _readable_content(msg: object, i: int) -> object:
    """The content of ``messages[i]``, once it is a dict with a known role and a content of a
    type either format takes.

    :raises MessageFormatError: when it is not.
    """
    if not isinstance(msg, dict):
        raise MessageFormatError(
            f"messages[{i}]: a message must be a dict, got {type(msg).__name__}"
        )
    role = msg.get("role")
    if role is None:
        raise MessageFormatError(
            f"messages[{i}]: missing 'role'; allowed roles: {', '.join(OPENAI_ROLES)}"
        )
    if role not in OPENAI_ROLES:
        raise MessageFormatError(
            f"messages[{i}]: unknown role {role!r}; allowed roles: {', '.join(OPENAI_ROLES)}"
        )
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise MessageFormatError(
            f"messages[{i}]: content must be a string, a list of parts/blocks or null, "
            f"got {type(content).__name__}"
        )
    return content


def _openai_message_sign(msg: Message) -> str | None:
    """What in ``msg`` only the OpenAI chat format has (a role or a message key), if anything."""
    role = msg.get("role")
    if role in ("system", "developer", "tool"):
        return f"role {role!r}"
    if msg.get("tool_calls") or "tool_call_id" in msg or "reasoning_content" in msg:
        return repr(next(k for k in _OPENAI_KEYS if k in msg))
    return None


def _part_sign(part: object) -> tuple[Format, str] | None:
    """The format a content part/block belongs to alone, and what it is; None when both have it."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in ANTHROPIC_BLOCK_TYPES or (kind == "image" and "source" in part):
        return "anthropic", f"a {kind!r} block"
    if kind in OPENAI_PART_TYPES:
        return "openai", f"a {kind!r} part"
    if kind == "compaction":
        # A Responses compaction item carries its id; Anthropic's block has none.
        return (
            ("openai", "a compaction item") if "id" in part else ("anthropic", "a compaction block")
        )
    return None


# --------------------------------------------------------------------------------------------
# Text


def _block_text(block: Any) -> str:
    """The text of a text part/block, "" for anything else."""
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        if isinstance(text, str):
            return text
    return ""


def _content_text(content: Any) -> str:
    """Text parts of a content value joined by newlines (images and other blocks read as "")."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_block_text(b) for b in content) if t)
    return ""


def visible_text(msg: Message) -> str:
    """The text a reader of the conversation sees in ``msg``.

    Text parts/blocks only: no reasoning (``reasoning_content``, ``thinking``), no tool-call
    payloads, no tool results (a ``tool`` message reads as ""). Several text blocks are joined
    with newlines.
    """
    if msg.get("role") == "tool":
        return ""
    return _content_text(msg.get("content"))


def dumps_arguments(value: Any) -> str:
    """Tool-call arguments as JSON text, non-ASCII kept as is (the form OpenAI lists carry)."""
    return json.dumps(value, ensure_ascii=False)


def compaction_text(block: Mapping[str, Any]) -> str:
    """The token-bearing text of a compaction block: what the model reads, the summary; a
    Responses item has only its opaque ``encrypted_content``, the closest local measure of what
    it costs. "" when neither is a non-empty string."""
    text = block.get("content") or block.get("encrypted_content")
    return text if isinstance(text, str) else ""


def message_text(msg: Message) -> str:
    """Everything in ``msg`` that costs input tokens, as one string (for counting and search).

    Reasoning (``reasoning_content``, ``thinking``, redacted thinking data), text, tool-call names
    with their JSON arguments, tool results and compaction summaries (a Responses compaction
    item's opaque ``encrypted_content``), joined by newlines; images read as "".
    """
    pieces = [_str_or_empty(msg.get("reasoning_content"))]
    content = msg.get("content")
    if isinstance(content, list):
        pieces += [_token_text(block) for block in content]
    else:
        pieces.append(_str_or_empty(content))
    pieces += [f"{call.name} {call.arguments}" for call in openai_tool_calls(msg)]
    return "\n".join(piece for piece in pieces if piece)


def _token_text(block: object) -> str:
    """The token-bearing text of one content block of a message ("" for images and blocks
    without text)."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    key = BLOCK_TEXT_KEYS.get(kind) if isinstance(kind, str) else None
    if key is not None:
        return _str_or_empty(block.get(key))
    if kind == "tool_use":
        return f"{block.get('name', '')} {dumps_arguments(block.get('input', {}))}"
    if kind == "tool_result":
        return _content_text(block.get("content"))
    if kind == "compaction":
        return compaction_text(block)
    return ""


def image_count(content: Any) -> int:
    """Images in a content value, including those inside Anthropic ``tool_result`` contents."""
    if not isinstance(content, list):
        return 0
    images = 0
    for block in content:
        if isinstance(block, dict):
            kind = block.get("type")
            if kind in IMAGE_BLOCK_TYPES:
                images += 1
            elif kind == "tool_result":
                images += image_count(block.get("content"))
    return images


def _json_length(value: Any) -> int:
    """``len(dumps_arguments(value))`` without building the text, except that characters JSON
    escapes (quotes, backslashes, newlines) count once: scanning for them would cost more than
    the whole estimate."""
    kind = type(value)
    if kind is str:
        return len(value) + 2
    if kind is dict:
        if any(type(key) is not str for key in value):
            return len(dumps_arguments(value))  # json.dumps spells such keys its own way
        # "{" key ": " value (", " key ": " value)* "}": each pair costs its key's quotes and 4
        return sum(len(key) + 6 + _json_length(item) for key, item in value.items()) or 2
    if kind is list or kind is tuple:
        return sum(_json_length(item) + 2 for item in value) or 2
    if kind is int:
        return len(str(value))
    if kind is float and math.isfinite(value):
        return len(repr(value))
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    return len(dumps_arguments(value))


def text_size(msg: Message) -> tuple[int, int]:
    """``(len(message_text(msg)), images)``: the length of everything in ``msg`` that costs
    input tokens, and how many images it holds, without building the text.

    A walk over the message's structure that reads string lengths only (no joining, no JSON
    encoding of tool inputs). The length equals ``len(message_text(msg))`` except inside
    Anthropic ``tool_use`` inputs, where a character JSON escapes (a quote, a backslash, a
    newline) counts once instead of twice.
    """
    lengths = [len(_str_or_empty(msg.get("reasoning_content")))]
    images = 0
    content = msg.get("content")
    if isinstance(content, list):
        for block in content:
            length, found = _block_size(block)
            lengths.append(length)
            images += found
    else:
        lengths.append(len(_str_or_empty(content)))
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        lengths += [_call_length(call) for call in calls if isinstance(call, dict)]
    pieces = len(lengths) - lengths.count(0)  # the non-empty ones, joined by newlines
    return sum(lengths) + pieces - 1 if pieces else 0, images


def _block_size(block: object) -> tuple[int, int]:
    """``(len(_token_text(block)), images)`` of one content block, with the JSON escapes of a
    ``tool_use`` input counted once (see :func:`text_size`)."""
    if not isinstance(block, dict):
        return 0, 0
    kind = block.get("type")
    if not isinstance(kind, str):
        return 0, 0
    key = BLOCK_TEXT_KEYS.get(kind)
    if key is not None:
        return len(_str_or_empty(block.get(key))), 0
    if kind == "tool_use":
        name = block.get("name", "")
        name_length = len(name if isinstance(name, str) else f"{name}")
        return name_length + 1 + _json_length(block.get("input", {})), 0
    if kind == "tool_result":
        inner = block.get("content")
        return len(_content_text(inner)), image_count(inner)
    if kind == "compaction":
        return len(compaction_text(block)), 0
    return 0, 1 if kind in IMAGE_BLOCK_TYPES else 0


def _call_length(call: Mapping[str, Any]) -> int:
    """The length of an OpenAI tool call's piece of :func:`message_text`: name, space, arguments
    (measured as :func:`_json_length` when they are not yet JSON text)."""
    fn = call.get("function")
    fn = fn if isinstance(fn, dict) else {}
    args = fn.get("arguments", "")
    return (
        len(_str_or_empty(fn.get("name")))
        + 1
        + (len(args) if isinstance(args, str) else _json_length(args))
    )


def is_tool_message(msg: Message, *, only_results: bool = False) -> bool:
    """True when ``msg`` carries tool results: an OpenAI ``tool`` message, or an Anthropic
    ``user`` message with a ``tool_result`` block (even beside text: such a message must stay
    right after its calls).

    :param only_results: count an Anthropic message only when it is made of ``tool_result``
        blocks alone (the shape OpenAI-envelope routes refuse cache markers on).
    """
    role = msg.get("role")
    if role == "tool":
        return True
    content = msg.get("content")
    if role != "user" or not isinstance(content, list) or not content:
        return False
    found = (isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return all(found) if only_results else any(found)


def is_real_user_message(msg: Message, fmt: Format) -> bool:
    """True for a user turn a person wrote: non-blank text or an image/document/file/audio part,
    not only tool results. ``fmt`` is accepted for symmetry; both formats read the same way."""
    content = msg.get("content")
    if msg.get("role") != "user":
        return False
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list):
        return False
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            if _block_text(block).strip():
                return True
        elif kind in _USER_MEDIA_KINDS:
            return True
    return False


_USER_MEDIA_KINDS = frozenset({"image", "image_url", "document", "file", "input_audio"})


# --------------------------------------------------------------------------------------------
# Tool calls and results


def openai_tool_calls(msg: Message) -> list[ToolCall]:
    """The ``tool_calls`` of an OpenAI-format message, read leniently (malformed calls read as
    empty strings, never raise)."""
    raw = msg.get("tool_calls")
    if not isinstance(raw, list):
        return []
    calls: list[ToolCall] = []
    for tc in raw:
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function")
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments", "")
        arguments = args if isinstance(args, str) else dumps_arguments(args)
        calls.append(
            ToolCall(_str_or_empty(tc.get("id")), _str_or_empty(fn.get("name")), arguments)
        )
    return calls


def _anthropic_calls(msg: Message) -> list[ToolCall]:
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [
        ToolCall(
            _str_or_empty(block.get("id")),
            _str_or_empty(block.get("name")),
            dumps_arguments(block.get("input", {})),
        )
        for block in content
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]


def tool_calls(msg: Message, fmt: Format) -> list[ToolCall]:
    """The tool calls ``msg`` makes, in order (``[]`` for messages without calls).

    Lenient: a missing id or name reads as ""; use :func:`validate` to find malformed calls.
    """
    if msg.get("role") != "assistant":
        return []
    return openai_tool_calls(msg) if fmt == "openai" else _anthropic_calls(msg)


def tool_results(msg: Message, fmt: Format) -> list[ToolResult]:
    """The tool results ``msg`` carries, in order (``[]`` for other messages).

    OpenAI: a ``tool`` message gives one result (``is_error`` is always False: the format has no
    flag). Anthropic: each ``tool_result`` block of a ``user`` message.
    """
    if fmt == "openai":
        if msg.get("role") != "tool":
            return []
        text = _content_text(msg.get("content"))
        return [ToolResult(_str_or_empty(msg.get("tool_call_id")), text, is_error=False)]
    content = msg.get("content")
    if msg.get("role") != "user" or not isinstance(content, list):
        return []
    return [
        ToolResult(
            _str_or_empty(block.get("tool_use_id")),
            _content_text(block.get("content")),
            is_error=block.get("is_error") is True,
        )
        for block in content
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def _str_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def tool_call_ids(msg: Message, fmt: Format) -> list[str]:
    """The ids of the calls ``msg`` makes, in order; like :func:`tool_calls` without building
    argument text (cheap enough for every request)."""
    if msg.get("role") != "assistant":
        return []
    if fmt == "openai":
        raw = msg.get("tool_calls")
        if not isinstance(raw, list):
            return []
        return [_str_or_empty(tc.get("id")) for tc in raw if isinstance(tc, dict)]
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [
        _str_or_empty(b.get("id"))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


def tool_result_ids(msg: Message, fmt: Format) -> list[str]:
    """The call ids the results in ``msg`` answer, in order; like :func:`tool_results` without
    extracting result text."""
    if fmt == "openai":
        return [_str_or_empty(msg.get("tool_call_id"))] if msg.get("role") == "tool" else []
    content = msg.get("content")
    if msg.get("role") != "user" or not isinstance(content, list):
        return []
    return [
        _str_or_empty(b.get("tool_use_id"))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def match_results(
    call_ids: Sequence[str], result_ids: Sequence[str]
) -> tuple[list[str], list[int]]:
    """Pair results with calls inside one group.

    Each result answers the first not-yet-answered call with its id, so a group that repeats an
    id pairs in order. Returns the ids of unanswered calls (call order) and the positions in
    ``result_ids`` of results that answer nothing.
    """
    if len(call_ids) == len(result_ids) and list(call_ids) == list(result_ids):
        return [], []  # the usual case: every call answered, in order
    open_calls = Counter(call_ids)
    unmatched: list[int] = []
    for pos, rid in enumerate(result_ids):
        if open_calls[rid] > 0:
            open_calls[rid] -= 1
        else:
            unmatched.append(pos)
    unanswered: list[str] = []
    for cid in reversed(call_ids):
        # The last occurrences of an id are the ones left open when results ran out.
        if open_calls[cid] > 0:
            open_calls[cid] -= 1
            unanswered.append(cid)
    unanswered.reverse()
    return unanswered, unmatched


def tool_group(
    messages: Sequence[Message], index: int, fmt: Format, *, stop: int | None = None
) -> ToolGroup | None:
    """The :class:`ToolGroup` of the assistant message ``messages[index]`` (None when it makes
    no tool calls), its results looked for only before ``stop`` (default: the end).

    Matching is positional (see the module docstring): results are looked for only in the
    messages right after the calls, and ids are matched only within that group. A call without
    a result (e.g. a trailing call still being run) is listed in ``unanswered``.
    """
    call_ids = tuple(tool_call_ids(messages[index], fmt))
    if not call_ids:
        return None
    end = len(messages) if stop is None else min(stop, len(messages))
    if fmt == "openai":
        after = index + 1
        while after < end and messages[after].get("role") == "tool":
            after += 1
        result_indices = tuple(range(index + 1, after))
        result_ids = [rid for k in result_indices for rid in tool_result_ids(messages[k], fmt)]
    else:
        result_ids = tool_result_ids(messages[index + 1], fmt) if index + 1 < end else []
        result_indices = (index + 1,) if result_ids else ()
    unanswered, _ = match_results(call_ids, result_ids)
    return ToolGroup(index, result_indices, call_ids, tuple(unanswered))


def tool_groups(messages: Sequence[Message], fmt: Format) -> list[ToolGroup]:
    """The :func:`tool_group` of every assistant tool-call message, in order."""
    found = (tool_group(messages, i, fmt) for i in range(len(messages)))
    return [group for group in found if group is not None]


def cut_points(messages: Sequence[Message], fmt: Format) -> list[bool]:
    """Where a list may be split without separating tool calls from their results.

    Returns ``len(messages) + 1`` flags: ``cuts[i]`` is True when a boundary right before
    ``messages[i]`` splits no :class:`ToolGroup` (``cuts[0]`` and ``cuts[-1]`` are always True).
    Result messages with no call before them belong to no group and do not block a cut.
    """
    cuts = [True] * (len(messages) + 1)
    for group in tool_groups(messages, fmt):
        for k in group.result_indices:
            cuts[k] = False
    return cuts
