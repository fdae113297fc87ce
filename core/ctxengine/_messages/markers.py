"""The rules of Anthropic's ``cache_control`` breakpoints, in one place.

Every cache strategy, the validator, the test API and the reports use these: how many markers a
request may hold (:data:`MAX_BREAKPOINTS`), which TTLs exist and in which order they may appear,
which blocks may carry a marker, and how to place and remove markers without copying more than
the path to each marker.

Placement of the marker ``{"type": "ephemeral"}`` (plus ``"ttl": "1h"`` for the long TTL), as
:func:`mark_message` does it:

- a string content becomes ``[{"type": "text", "text": ..., "cache_control": marker}]``;
- a list of blocks gets the marker on its last block that may carry one: not a text block whose
  text is empty or only whitespace (the API rejects those), not a thinking block;
- when nothing in the content can carry it (``None``, ``""``, ``[]``, only thinking), OpenAI-format
  messages get ``msg["cache_control"]``; Anthropic's Messages API has no message-level field, so
  such an Anthropic-format message cannot be marked (``None``);
- an OpenAI ``role: "tool"`` message gets ``msg["cache_control"]``, an Anthropic tool-result
  message the list rule (its last ``tool_result`` block). Whether a route accepts markers on tool
  messages at all is the strategy's decision (:func:`ctxengine.messages.is_tool_message` tells
  them apart).

Copy-on-write everywhere: a message, block or list is copied only when it (or something inside
it) gains or loses a marker; everything else stays the caller's object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from ctxengine._messages.conversation import Format
from ctxengine._messages.read import ANTHROPIC_BLOCK_TYPES, OPENAI_PART_TYPES

__all__ = [
    "MAX_BREAKPOINTS",
    "TTL",
    "TTLS",
    "MarkedMessages",
    "MarkerFinding",
    "breakpoint_ttls",
    "cache_marker",
    "can_carry_marker",
    "carries_marker",
    "detect_request_format",
    "mark_message",
    "marked_items",
    "marker_findings",
    "marker_positions",
    "strip_cache_markers",
    "unmarked",
]

TTL = Literal["5m", "1h"]

TTLS: tuple[TTL, ...] = ("5m", "1h")
"""The TTLs the API accepts, longest last; in prompt order a longer TTL must never follow a
shorter one."""

MAX_BREAKPOINTS = 4
"""Anthropic's limit on ``cache_control`` markers per request (tools, system and messages
together, including a top-level automatic marker)."""

_SYSTEM_ROLES = frozenset({"system", "developer"})
_UNMARKABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
# detect_format's format-only kinds, plus blocks a request's format is also told by.
_ANTHROPIC_BLOCKS = ANTHROPIC_BLOCK_TYPES | {"document", "server_tool_use"}
_OPENAI_PARTS = OPENAI_PART_TYPES | {"file"}

MarkerFinding = tuple[int | None, str, str, str]
"""``(message index or None, rule id, position, text)``: one thing the API would reject about
the markers of a request."""


def cache_marker(ttl: str) -> dict[str, str]:
    """A fresh marker dict for ``ttl`` ("5m" -> no ``ttl`` key, the API default).

    :raises ValueError: for any other TTL, naming the allowed values.
    """
    if ttl == "5m":
        return {"type": "ephemeral"}
    if ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    raise ValueError(f"cache ttl must be one of '5m', '1h'; got {ttl!r}")


class MarkedMessages(Protocol):
    """What :func:`strip_cache_markers` needs to skip the messages known to carry no marker
    (a session's :class:`ctxengine.messages.MessageMemo` has it)."""

    def marked_indices(self, messages: list[Any]) -> Sequence[int]:
        """Indices of the messages of ``messages`` that :func:`carries_marker`."""
        ...


def carries_marker(item: object) -> bool:
    """Whether :func:`strip_cache_markers` would remove anything from ``item`` (a message or a
    block): a ``cache_control`` key on it, on a block of its ``content`` list, or on a block
    nested in such a block's own ``content`` list (``tool_result`` contents)."""
    if not isinstance(item, dict):
        return False
    if "cache_control" in item:
        return True
    content = item.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and (
                "cache_control" in block
                or (isinstance(block.get("content"), list) and carries_marker(block))
            ):
                return True
    return False


def breakpoint_ttls(ttl: str, stable_ttl: str | None = None) -> tuple[TTL, TTL]:
    """``(ttl, stable_ttl)`` checked: both "5m" or "1h", the stable one (default ``ttl``) never
    shorter, since stable breakpoints come first and a 1h one must never follow a 5m one.

    :raises ValueError: naming the allowed values, or the order problem.
    """
    cache_marker(ttl)
    stable = ttl if stable_ttl is None else stable_ttl
    cache_marker(stable)
    if ttl == "1h" and stable == "5m":
        raise ValueError("stable_ttl '5m' would put a 5m breakpoint before 1h ones")
    return ("1h" if ttl == "1h" else "5m"), ("1h" if stable == "1h" else "5m")


def strip_cache_markers(
    request: Mapping[str, Any], *, memo: MarkedMessages | None = None
) -> dict[str, Any]:
    """``request`` without any ``cache_control``: the top-level automatic one and those in
    ``tools``, ``system`` and ``messages``.

    Markers are removed from messages, their content blocks and the blocks nested in
    ``tool_result`` contents. Copy-on-write: a message, block or list is copied only when it (or
    something inside it) carried a marker; everything else is the caller's object. The returned
    dict is always new; its ``messages`` list is new only when some message changed.

    :param memo: a session's message memo; the messages it knows to carry no marker are not
        scanned again, so a request costs a lookup per message instead of a walk over every
        block (see :class:`ctxengine.messages.MessageMemo` for when its knowledge is checked).
    :raises TypeError: when ``request`` is not a mapping, ``messages`` is not a list or a message
        is not a dict (the error names the index).
    """
    messages = _message_list(request)
    out = dict(request)
    # A top-level automatic marker counts towards the limit like any other.
    out.pop("cache_control", None)
    if memo is None:
        new_messages = _strip_list(messages, what="messages")
    else:
        new_messages = messages
        marked = memo.marked_indices(messages)
        if marked:
            new_messages = list(messages)
            for index in marked:
                new_messages[index] = unmarked(messages[index])
    if new_messages is not messages:
        out["messages"] = new_messages
    for key in ("system", "tools"):
        items = request.get(key)
        if isinstance(items, list) and (stripped := _strip_list(items)) is not items:
            out[key] = stripped
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
                if kind == "compaction":
                    # A Responses compaction item (chat form) has an id; Anthropic's block none.
                    return "openai" if "id" in block else "anthropic"
                if kind in _OPENAI_PARTS:
                    return "openai"
    return "openai"


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
        return isinstance(text, str) and _visible(text)
    return True


def _visible(text: str) -> bool:
    """``bool(text.strip())``: ``isspace`` uses the same definition of whitespace."""
    return bool(text) and not text.isspace()


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


def _mark_blocks(blocks: Sequence[Any], ttl: str) -> list[Any] | None:
    """A copy of ``blocks`` with the last markable block marked, or None when none can be."""
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if can_carry_marker(block):
            new_blocks = list(blocks)
            new_blocks[index] = {**block, "cache_control": cache_marker(ttl)}
            return new_blocks
    return None


def mark_message(
    msg: dict[str, Any], ttl: str, fmt: Format, *, tool: bool
) -> dict[str, Any] | None:
    """A marked copy of ``msg``, or None when it cannot carry a breakpoint in ``fmt``."""
    if tool and msg.get("role") == "tool":
        return {**msg, "cache_control": cache_marker(ttl)}
    content = msg.get("content")
    if isinstance(content, str) and _visible(content):
        return {
            **msg,
            "content": [{"type": "text", "text": content, "cache_control": cache_marker(ttl)}],
        }
    if isinstance(content, list):
        new_blocks = _mark_blocks(content, ttl)
        if new_blocks is not None:
            return {**msg, "content": new_blocks}
    if fmt == "anthropic":
        return None
    return {**msg, "cache_control": cache_marker(ttl)}


def _strip_list(items: list[Any], *, what: str | None = None) -> list[Any]:
    """``items`` with markers removed from each dict in it; the same list when none had one.

    :param what: when given, every item must be a dict; a TypeError names ``what[index]``.
    """
    out: list[Any] | None = None
    for index, item in enumerate(items):
        if what is not None and not isinstance(item, dict):
            raise TypeError(f"{what}[{index}] must be a dict, got {type(item).__name__}")
        new_item = unmarked(item)
        if new_item is not item:
            if out is None:
                out = list(items)
            out[index] = new_item
    return items if out is None else out


def unmarked(item: Any) -> Any:
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


# --- finding markers and judging them ------------------------------------------------------


def marked_items(
    request: Mapping[str, Any], *, messages: Sequence[int] | None = None
) -> list[tuple[str, int | None, Mapping[str, Any]]]:
    """The dicts of ``request`` that carry ``cache_control``, in prompt order (tools, system,
    messages), as ``(position, message index or None, dict)``.

    Positions read ``"tools[2]"``, ``"system[0]"``, ``"messages[7]"`` (on the message itself),
    ``"messages[7].content[1]"`` and, inside a ``tool_result``'s own content,
    ``"messages[7].content[1].content[0]"``.

    :param messages: look only at these message indices (ascending), when the caller knows
        where markers can be; all messages otherwise.
    """
    found: list[tuple[str, int | None, Mapping[str, Any]]] = []
    for key in ("tools", "system", "messages"):
        items = request.get(key)
        if not isinstance(items, list):
            continue
        indices = messages if key == "messages" and messages is not None else range(len(items))
        for index in indices:
            where = f"{key}[{index}]"
            _collect(items[index], where, index if key == "messages" else None, found)
    return found


def _collect(
    item: object,
    where: str,
    index: int | None,
    found: list[tuple[str, int | None, Mapping[str, Any]]],
) -> None:
    if not isinstance(item, dict):
        return
    if item.get("cache_control") is not None:
        found.append((where, index, item))
    content = item.get("content")
    if isinstance(content, list):
        for k, block in enumerate(content):
            _collect(block, f"{where}.content[{k}]", index, found)


def marker_positions(
    request: Mapping[str, Any], *, messages: Sequence[int] | None = None
) -> list[tuple[str, Any]]:
    """Every ``cache_control`` marker of ``request`` in prompt order, as ``(position, marker)``
    pairs (positions and ``messages`` as in :func:`marked_items`)."""
    found = marked_items(request, messages=messages)
    return [(where, item["cache_control"]) for where, _, item in found]


def marker_findings(
    items: Sequence[tuple[str, int | None, Mapping[str, Any]]], top_level: object = None
) -> list[MarkerFinding]:
    """What the API rejects about these markers (the one rule set; :func:`marked_items` finds
    them) and the request's top-level automatic ``cache_control`` (``top_level``, when it has
    one).

    Rules: ``cache-control-shape`` (type ``ephemeral``, optional ``ttl`` of :data:`TTLS`, no
    other keys), ``cache-control-limit`` (more than :data:`MAX_BREAKPOINTS`, the top-level
    marker counted), ``cache-control-ttl-order`` (a 1h marker after a 5m one; the top-level
    marker lands on the last cacheable block and so comes after every other one),
    ``cache-control-empty-text`` (on a text block without visible text),
    ``cache-control-thinking`` (on a thinking block).
    """
    findings = [
        finding for where, index, item in items for finding in _item_findings(where, index, item)
    ]
    total = len(items) + (top_level is not None)
    if total > MAX_BREAKPOINTS:
        places = ", ".join(where for where, _, _ in items)
        if top_level is not None:
            places += " and 1 top-level"
        findings.append(
            (
                None,
                "cache-control-limit",
                "request",
                f"{total} cache_control breakpoints ({places}); at most {MAX_BREAKPOINTS} are "
                "allowed",
            )
        )
    trailing_ttl = top_level.get("ttl", "5m") if isinstance(top_level, Mapping) else None
    return findings + _ttl_order_findings(items, trailing_ttl)


def _item_findings(where: str, index: int | None, item: Mapping[str, Any]) -> list[MarkerFinding]:
    """The shape of one marker and whether the block it is on may carry one."""
    findings: list[MarkerFinding] = []
    value = item["cache_control"]
    if not (
        isinstance(value, dict)
        and value.get("type") == "ephemeral"
        and set(value) <= {"type", "ttl"}
        and value.get("ttl", "5m") in TTLS
    ):
        findings.append(
            (
                index,
                "cache-control-shape",
                where,
                "cache_control must be {'type': 'ephemeral'}, optionally with 'ttl': "
                f"'5m' or '1h'; got {value!r}",
            )
        )
    kind = item.get("type")
    if kind in _UNMARKABLE_BLOCKS:
        findings.append(
            (index, "cache-control-thinking", where, f"cache_control on a {kind} block")
        )
    elif kind == "text" and not str(item.get("text") or "").strip():
        findings.append(
            (
                index,
                "cache-control-empty-text",
                where,
                "cache_control on an empty text block (the API rejects it); mark a "
                "non-empty block or the message instead",
            )
        )
    return findings


def _ttl_order_findings(
    items: Sequence[tuple[str, int | None, Mapping[str, Any]]], trailing_ttl: str | None
) -> list[MarkerFinding]:
    """Every 1h marker after a 5m one, the top-level one (``trailing_ttl``) last."""
    findings: list[MarkerFinding] = []
    first_short: str | None = None
    for where, index, item in items:
        value = item["cache_control"]
        ttl = value.get("ttl", "5m") if isinstance(value, dict) else None
        if ttl == "5m" and first_short is None:
            first_short = where
        elif ttl == "1h" and first_short is not None:
            findings.append(
                (
                    index,
                    "cache-control-ttl-order",
                    where,
                    f"a 1h cache_control after the 5m one at {first_short}; longer TTLs must "
                    "come first (in the order tools, system, messages)",
                )
            )
    if trailing_ttl == "1h" and first_short is not None:
        findings.append(
            (
                None,
                "cache-control-ttl-order",
                "cache_control",
                f"the top-level 1h cache_control marks the last block, after the 5m one at "
                f"{first_short}; longer TTLs must come first",
            )
        )
    return findings
