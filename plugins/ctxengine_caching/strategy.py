"""The ``system_and_3`` marking rules as pure functions over request dicts.

A request is the keyword arguments of one API call: ``messages`` plus, for Anthropic-format
requests, ``system`` (a string or a list of text blocks) and ``tools``. Nothing here mutates its
input. The result is a new request dict whose ``messages`` list is new, but whose messages are the
caller's own objects except for the few that were marked (or had markers removed): those, and
only those, are shallow-copied along the path to the marker. This runs on every request, so it
must cost a pass over the message list, not a copy of the conversation.

Placement of the marker ``{"type": "ephemeral"}`` (plus ``"ttl": "1h"`` for the long TTL):

- a string content becomes ``[{"type": "text", "text": ..., "cache_control": marker}]``;
- a list of blocks gets the marker on its last block that may carry one: not a text block whose
  text is empty or only whitespace (the API rejects those), not a thinking block;
- when nothing in the content can carry it (``None``, ``""``, ``[]``, only thinking), OpenAI-format
  messages get ``msg["cache_control"]``; Anthropic's Messages API has no message-level field, so
  such an Anthropic-format message passes its slot to the next earlier message;
- tool messages (OpenAI ``role: "tool"``, Anthropic user messages holding only ``tool_result``
  blocks) are marked only when ``native`` is true; an OpenAI ``role: "tool"`` message gets
  ``msg["cache_control"]``, an Anthropic one the list rule (its last ``tool_result`` block). On
  OpenAI-envelope routes (OpenRouter and the like) their slot goes to the next earlier message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ctxengine.conversation import Format
from ctxengine.identity import ListProgress

TTL = Literal["5m", "1h"]

ALLOWED_TTLS: tuple[str, ...] = ("5m", "1h")
MAX_BREAKPOINTS = 4
"""Anthropic's limit on ``cache_control`` markers per request."""
ROLLING_BREAKPOINTS = 3
"""How many of the last non-system messages are marked."""

_SYSTEM_ROLES = frozenset({"system", "developer"})
_UNMARKABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "document", "server_tool_use"}
)
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})


def cache_marker(ttl: str) -> dict[str, str]:
    """A fresh marker dict for ``ttl`` ("5m" -> no ``ttl`` key, the API default).

    :raises ValueError: for any other TTL, naming the allowed values.
    """
    if ttl == "5m":
        return {"type": "ephemeral"}
    if ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    raise ValueError(f"cache ttl must be one of '5m', '1h'; got {ttl!r}")


def strip_cache_markers(
    request: Mapping[str, Any], *, clean: ListProgress | None = None
) -> dict[str, Any]:
    """``request`` without any ``cache_control``: in ``tools``, ``system`` and ``messages``.

    Markers are removed from messages, their content blocks and the blocks nested in
    ``tool_result`` contents. Copy-on-write: a message, block or list is copied only when it (or
    something inside it) carried a marker; everything else is the caller's object. The returned
    dict is always new; its ``messages`` list is new only when some message changed.

    :param clean: how many leading messages of the caller's list are known to carry no marker
        (see :class:`ctxengine.identity.ListProgress`); they are skipped and the record is
        advanced, so a conversation that grows by appending is scanned once per message rather
        than once per request.
    :raises TypeError: when ``request`` is not a mapping, ``messages`` is not a list or a message
        is not a dict (the error names the index).
    """
    messages = _message_list(request)
    out = dict(request)
    skip = clean.resume(messages) if clean is not None else 0
    new_messages = _strip_list(messages, what="messages", skip=skip)
    if clean is not None and new_messages is messages:
        clean.record(messages, len(messages))
    if new_messages is not messages:
        out["messages"] = new_messages
    system = request.get("system")
    if isinstance(system, list):
        new_system = _strip_list(system)
        if new_system is not system:
            out["system"] = new_system
    tools = request.get("tools")
    if isinstance(tools, list):
        new_tools = _strip_list(tools)
        if new_tools is not tools:
            out["tools"] = new_tools
    return out


def detect_request_format(request: Mapping[str, Any]) -> Format:
    """Which wire format ``request`` uses, judged from the cheapest decisive evidence.

    A ``system`` key means Anthropic (OpenAI puts the system prompt in the message list). Then the
    first message that shows a format-specific role, field or block type decides. A request with
    nothing decisive (plain user/assistant strings) counts as OpenAI; the two formats mark such
    messages identically except for empty contents.
    """
    if "system" in request:
        return "anthropic"
    for msg in _message_list(request):
        if not isinstance(msg, dict):
            continue
        if msg.get("role") in _SYSTEM_ROLES or msg.get("role") == "tool":
            return "openai"
        if "tool_calls" in msg or "tool_call_id" in msg or "reasoning_content" in msg:
            return "openai"
        content = msg.get("content")
        if content is None:
            return "openai"
        if isinstance(content, list):
            for block in content:
                kind = block.get("type") if isinstance(block, dict) else None
                if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                    return "anthropic"
                if kind in _OPENAI_PARTS:
                    return "openai"
    return "openai"


def apply_system_and_3(
    request: Mapping[str, Any],
    *,
    ttl: str,
    native: bool,
    fmt: Format | None = None,
    clean: ListProgress | None = None,
) -> dict[str, Any]:
    """``request`` marked with up to four ``cache_control`` breakpoints (SPEC §3).

    Breakpoint 1 is the system prompt (Anthropic ``system``, or an OpenAI first message with role
    ``system``/``developer``); breakpoints 2-4 are the last three non-system messages that may
    carry a marker (see the module docstring for what may). Existing markers anywhere in the
    request are removed first, so the result never holds more than four breakpoints, all with the
    same TTL (so Anthropic's "longer TTLs first" rule holds), and applying the function to its own
    result returns an equal request.

    :param ttl: ``"5m"`` or ``"1h"``.
    :param native: true on routes that accept markers on tool messages (native Anthropic API,
        Anthropic-compatible gateways); false on OpenAI-envelope routes such as OpenRouter.
    :param fmt: the request's format; detected with :func:`detect_request_format` when omitted.
    :param clean: a per-session record of the caller's messages known to carry no marker; see
        :func:`strip_cache_markers`.
    :returns: a new request dict; the caller's objects are untouched and only the marked messages
        (and the system prompt when marked) are copies.
    :raises ValueError: for a TTL other than "5m"/"1h".
    :raises TypeError: for a request that is not a mapping with a list of dict messages.
    """
    cache_marker(ttl)  # validates before any work
    if fmt not in (None, "openai", "anthropic"):
        raise ValueError(f"fmt must be 'openai', 'anthropic' or None; got {fmt!r}")
    out = strip_cache_markers(request, clean=clean)
    if fmt is None:
        fmt = detect_request_format(out)
    messages: list[dict[str, Any]] = out["messages"]
    marked = list(messages)

    if fmt == "anthropic":
        system = out.get("system")
        new_system = _mark_system(system, ttl)
        if new_system is not None:
            out["system"] = new_system
    elif messages and messages[0].get("role") in _SYSTEM_ROLES:
        first = _mark_message(messages[0], ttl, fmt, tool=False)
        if first is not None:
            marked[0] = first

    placed = 0
    for index in range(len(messages) - 1, -1, -1):
        if placed == ROLLING_BREAKPOINTS:
            break
        msg = messages[index]
        if msg.get("role") in _SYSTEM_ROLES:
            continue
        tool = is_tool_message(msg)
        if tool and not native:
            continue
        new_msg = _mark_message(msg, ttl, fmt, tool=tool)
        if new_msg is None:
            continue
        marked[index] = new_msg
        placed += 1
    out["messages"] = marked
    return out


def is_tool_message(msg: Mapping[str, Any]) -> bool:
    """True for an OpenAI ``role: "tool"`` message or an Anthropic user message made only of
    ``tool_result`` blocks (the two shapes OpenAI-envelope routes refuse markers on)."""
    role = msg.get("role")
    if role == "tool":
        return True
    if role != "user":
        return False
    content = msg.get("content")
    if not isinstance(content, list) or not content:
        return False
    return all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def can_carry_marker(block: object) -> bool:
    """Whether a content block may hold ``cache_control``.

    Not a thinking block, and not a text block without visible text (the API rejects
    ``cache_control`` on empty text blocks; whitespace-only text is empty to it).
    """
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if kind is None or kind in _UNMARKABLE_BLOCKS:
        return False
    if kind == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


# --- helpers -------------------------------------------------------------------------------


def _message_list(request: Mapping[str, Any]) -> list[Any]:
    """``request["messages"]`` after checking it is a list (its items are checked by the loops
    that visit them anyway, see :func:`_strip_list`)."""
    if not isinstance(request, Mapping):
        raise TypeError(
            f"request must be a mapping of API call arguments, got {type(request).__name__}"
        )
    messages = request.get("messages")
    if not isinstance(messages, list):
        raise TypeError(
            f"request['messages'] must be a list of message dicts, got {type(messages).__name__}"
        )
    return messages


def _text_block(text: str, ttl: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": cache_marker(ttl)}


def _mark_blocks(blocks: Sequence[Any], ttl: str) -> list[Any] | None:
    """A copy of ``blocks`` with the last markable block marked, or None when none can be."""
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if can_carry_marker(block):
            new_blocks = list(blocks)
            new_blocks[index] = {**block, "cache_control": cache_marker(ttl)}
            return new_blocks
    return None


def _mark_system(system: object, ttl: str) -> list[Any] | None:
    """The Anthropic ``system`` value marked, or None when there is nothing to mark."""
    if isinstance(system, str):
        return [_text_block(system, ttl)] if system.strip() else None
    if isinstance(system, list):
        return _mark_blocks(system, ttl)
    return None


def _mark_message(
    msg: dict[str, Any], ttl: str, fmt: Format, *, tool: bool
) -> dict[str, Any] | None:
    """A marked copy of ``msg``, or None when it cannot carry a breakpoint in ``fmt``."""
    if tool and msg.get("role") == "tool":
        return {**msg, "cache_control": cache_marker(ttl)}
    content = msg.get("content")
    if isinstance(content, str) and content.strip():
        return {**msg, "content": [_text_block(content, ttl)]}
    if isinstance(content, list):
        new_blocks = _mark_blocks(content, ttl)
        if new_blocks is not None:
            return {**msg, "content": new_blocks}
    if fmt == "anthropic":
        return None
    return {**msg, "cache_control": cache_marker(ttl)}


def _strip_list(items: list[Any], *, what: str | None = None, skip: int = 0) -> list[Any]:
    """``items`` with markers removed from each dict in it; the same list when none had one.

    :param what: when given, every item must be a dict; a TypeError names ``what[index]``.
    :param skip: how many leading items are known to carry no marker.
    """
    out: list[Any] | None = None
    for index in range(skip, len(items)):
        item = items[index]
        # Fast path, inlined because it runs for every message and block of every request: a
        # dict without a marker whose content is not a list of blocks needing work is kept.
        if not isinstance(item, dict):
            if what is not None:
                raise TypeError(f"{what}[{index}] must be a dict, got {type(item).__name__}")
            continue
        if "cache_control" not in item:
            content = item.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and (
                    "cache_control" in block or isinstance(block.get("content"), list)
                ):
                    break
            else:
                continue
        new_item = _strip_item(item)
        if new_item is not item:
            if out is None:
                out = list(items)
            out[index] = new_item
    return items if out is None else out


def _strip_item(item: Any) -> Any:
    """A message, block or tool definition without ``cache_control`` (also in a nested
    ``content`` list, which covers message contents and ``tool_result`` contents)."""
    if not isinstance(item, dict):
        return item
    content = item.get("content")
    new_content = _strip_list(content) if isinstance(content, list) else content
    if "cache_control" not in item and new_content is content:
        return item
    new_item = dict(item)
    new_item.pop("cache_control", None)
    if new_content is not content:
        new_item["content"] = new_content
    return new_item
