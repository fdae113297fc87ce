"""The ``tool_turns`` layout: the stable system prompt, the last completed tool transactions and the
tail, with Anthropic's top-level automatic marker where the route accepts it.

Breakpoints, in prompt order (at most four, counting the host's own markers on ``tools`` and the
top-level marker):

1. **the end of the stable part of the system prompt**: when the system prompt is a list of two
   or more text blocks, its next-to-last markable block. Hosts put what changes between requests
   (date, working directory, git status) in the last block; the instructions before it stay
   cached when only that block changes. Dropped first when breakpoints run short.
2. **the end of the system prompt**: Anthropic ``system``, or an OpenAI leading ``system`` /
   ``developer`` message. Both system breakpoints take ``stable_ttl``.
3. **the ends of the last completed tool transactions**, newest first, with what is left: an
   assistant message whose tool calls all have results, followed by those results. On routes that
   accept markers on tool messages (``native``) the marker goes on the last result; on
   OpenAI-envelope routes on the first message after the results (usually the assistant's next
   turn), since those routes refuse markers on tool messages.
4. **the tail**: the top-level ``cache_control`` on routes that accept it (``automatic``; the API
   then marks the last cacheable block itself, moving forward with the conversation), otherwise
   an explicit marker on the last message that can carry one.

Transaction ends (3) and the tail (4) take ``ttl``; ``stable_ttl`` is never shorter, and the host's
tool markers come first, so when one of them is 5m every breakpoint after it is 5m too: longer
TTLs always come first. Other markers of the request (from earlier turns, or the host's on
``system`` and ``messages``) are removed first, so applying the layout to its own result returns
an equal request. Copy-on-write as everywhere (:mod:`ctxengine.messages`): only the messages
that gain or lose a marker are copied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxengine import Format, MarkedRequest
from ctxengine.messages import (
    MAX_BREAKPOINTS,
    MarkedMessages,
    breakpoint_ttls,
    cache_marker,
    can_carry_marker,
    detect_request_format,
    is_tool_message,
    mark_message,
    strip_cache_markers,
    tool_group,
)

_SYSTEM_ROLES = frozenset({"system", "developer"})


def apply_tool_turns(
    request: Mapping[str, Any],
    *,
    ttl: str,
    native: bool,
    automatic: bool = False,
    stable_ttl: str | None = None,
    fmt: Format | None = None,
    memo: MarkedMessages | None = None,
) -> dict[str, Any]:
    """The request of :func:`mark_tool_turns` (same arguments and errors)."""
    marked = mark_tool_turns(
        request,
        ttl=ttl,
        native=native,
        automatic=automatic,
        stable_ttl=stable_ttl,
        fmt=fmt,
        memo=memo,
    )
    return marked.request


def mark_tool_turns(
    request: Mapping[str, Any],
    *,
    ttl: str,
    native: bool,
    automatic: bool = False,
    stable_ttl: str | None = None,
    fmt: Format | None = None,
    memo: MarkedMessages | None = None,
) -> MarkedRequest:
    """``request`` marked with the ``tool_turns`` layout (see the module docstring), and how
    many markers it carries on tools, system and messages (the host's tool markers it kept
    included, the top-level automatic marker not).

    :param ttl: ``"5m"`` or ``"1h"``: transaction ends and the tail.
    :param native: the route accepts markers on tool messages.
    :param automatic: the route accepts the top-level automatic ``cache_control`` (used for
        Anthropic-format requests only).
    :param stable_ttl: the system prompt's TTL (default ``ttl``); never shorter than ``ttl``.
    :param fmt: the request's format; detected when omitted.
    :param memo: the session's message memo, which knows which of the caller's messages carry
        markers (see :func:`ctxengine.messages.strip_cache_markers`); without it every message
        is scanned.
    :returns: a new request dict (the caller's objects are untouched) and its marker count.
    :raises ValueError: for a TTL other than "5m"/"1h" or a stable TTL shorter than ``ttl``.
    :raises TypeError: for a request that is not a mapping with a list of dict messages.
    """
    ttl, stable = breakpoint_ttls(ttl, stable_ttl)
    if fmt not in (None, "openai", "anthropic"):
        raise ValueError(f"fmt must be 'openai', 'anthropic' or None; got {fmt!r}")
    tools = request.get("tools")
    # The host's tool markers stay (the layout never marks tools itself); the rest goes.
    out = strip_cache_markers({k: v for k, v in request.items() if k != "tools"}, memo=memo)
    if fmt is None:
        fmt = detect_request_format(out)
    if tools is not None:
        out["tools"], host_ttls = _host_tool_markers(tools)
    else:
        host_ttls = []
    if "5m" in host_ttls:
        ttl = stable = "5m"
    budget = MAX_BREAKPOINTS - len(host_ttls)
    messages: list[dict[str, Any]] = out["messages"]
    marked = list(messages)

    # The tail first: it is worth the most (the whole prompt), then the system prompt, then the
    # transaction ends with whatever is left.
    tail: int | None = None
    top_level = automatic and fmt == "anthropic"
    if top_level:
        out["cache_control"] = cache_marker(ttl)
        budget -= 1
        tail = _last_markable(messages, fmt, native)
    else:
        tail = _last_markable(messages, fmt, native)
        if tail is not None:
            new_tail = mark_message(messages[tail], ttl, fmt, tool=True)
            if new_tail is not None:
                marked[tail] = new_tail
                budget -= 1

    system_blocks = _system_positions(out, messages, fmt)
    system_marks = system_blocks[-1:] if budget > 0 else []
    # The stable part's own marker only while one transaction end still fits after it.
    if len(system_blocks) >= 2 and budget - len(system_marks) >= 2:
        system_marks = system_blocks[-2:]
    budget -= len(system_marks)
    _mark_system_blocks(out, marked, fmt, system_marks, stable)

    for index in _transaction_ends(messages, fmt, native, stop=tail):
        if budget <= 0:
            break
        new_msg = mark_message(messages[index], ttl, fmt, tool=True)
        if new_msg is None:
            continue
        marked[index] = new_msg
        budget -= 1
    out["messages"] = marked
    # What the budget was spent on, less the top-level marker.
    return MarkedRequest(out, MAX_BREAKPOINTS - budget - (1 if top_level else 0))


def _host_tool_markers(tools: object) -> tuple[object, list[str]]:
    """The tools with the host's markers kept (at most ``MAX_BREAKPOINTS - 1``, the last ones,
    so the tail can still be cached), a 1h marker after a 5m one lowered to 5m; and the kept
    markers' TTLs in order."""
    if not isinstance(tools, list):
        return tools, []
    marked = [
        i for i, tool in enumerate(tools) if isinstance(tool, dict) and "cache_control" in tool
    ]
    keep = set(marked[-(MAX_BREAKPOINTS - 1) :])
    out: list[Any] | None = None
    ttls: list[str] = []
    for index in marked:
        tool = tools[index]
        marker = tool.get("cache_control")
        if index not in keep or not isinstance(marker, Mapping):
            new_tool = {k: v for k, v in tool.items() if k != "cache_control"}
        else:
            ttl = str(marker.get("ttl", "5m"))
            if ttl not in ("5m", "1h") or (ttl == "1h" and "5m" in ttls):
                ttl = "5m"
            ttls.append(ttl)
            if marker == cache_marker(ttl):
                continue
            new_tool = {**tool, "cache_control": cache_marker(ttl)}
        if out is None:
            out = list(tools)
        out[index] = new_tool
    return (tools if out is None else out), ttls


def _last_markable(messages: Sequence[dict[str, Any]], fmt: Format, native: bool) -> int | None:
    """The last non-system message that can carry a marker on this route."""
    for index in range(len(messages) - 1, -1, -1):
        msg = messages[index]
        if msg.get("role") in _SYSTEM_ROLES:
            continue
        tool = is_tool_message(msg, only_results=True)
        if tool and not native:
            continue
        if mark_message(msg, "5m", fmt, tool=tool) is not None:
            return index
    return None


def _system_positions(
    out: Mapping[str, Any], messages: Sequence[dict[str, Any]], fmt: Format
) -> list[int]:
    """Indices of the system prompt's markable blocks (``-1`` for a plain string), in order."""
    if fmt == "anthropic":
        system = out.get("system")
    elif messages and messages[0].get("role") in _SYSTEM_ROLES:
        system = messages[0].get("content")
    else:
        return []
    if isinstance(system, str):
        return [-1] if system.strip() else []
    if isinstance(system, list):
        return [i for i, block in enumerate(system) if can_carry_marker(block)]
    return []


def _mark_system_blocks(
    out: dict[str, Any],
    marked: list[dict[str, Any]],
    fmt: Format,
    positions: Sequence[int],
    ttl: str,
) -> None:
    if not positions:
        return
    if fmt == "anthropic":
        out["system"] = _marked_blocks(out["system"], positions, ttl)
        return
    first = marked[0]
    marked[0] = {**first, "content": _marked_blocks(first.get("content"), positions, ttl)}


def _marked_blocks(system: object, positions: Sequence[int], ttl: str) -> list[Any]:
    if isinstance(system, str):
        return [{"type": "text", "text": system, "cache_control": cache_marker(ttl)}]
    assert isinstance(system, list)
    blocks = list(system)
    for index in positions:
        blocks[index] = {**blocks[index], "cache_control": cache_marker(ttl)}
    return blocks


def _transaction_ends(
    messages: Sequence[dict[str, Any]], fmt: Format, native: bool, *, stop: int | None
) -> list[int]:
    """Where each completed tool transaction may be marked, newest first, never at or after the
    tail's index ``stop`` (the tail covers those)."""
    ends: list[int] = []
    limit = len(messages) if stop is None else stop
    index = limit - 1
    while index > 0:
        msg = messages[index]
        if not is_tool_message(msg, only_results=True):
            index -= 1
            continue
        last_result = index
        while (
            index > 0
            and is_tool_message(messages[index - 1], only_results=True)
            and fmt == "openai"
        ):
            index -= 1
        call = index - 1
        if _completed(messages, call, last_result + 1, fmt):
            if native:
                ends.append(last_result)
            elif last_result + 1 < limit and not is_tool_message(
                messages[last_result + 1], only_results=True
            ):
                ends.append(last_result + 1)
        index = call - 1
    return ends


def _completed(messages: Sequence[dict[str, Any]], call: int, stop: int, fmt: Format) -> bool:
    """Whether every call of ``messages[call]`` is answered before ``stop``."""
    if call < 0:
        return False
    group = tool_group(messages, call, fmt, stop=stop)
    return group is not None and not group.unanswered
