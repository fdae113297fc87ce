"""The ``system_and_3`` layout: which four places of a request get a ``cache_control`` marker.

A request is the keyword arguments of one API call: ``messages`` plus, for Anthropic-format
requests, ``system`` (a string or a list of text blocks) and ``tools``. Nothing here mutates its
input. The result is a new request dict whose ``messages`` list is new, but whose messages are the
caller's own objects except for the few that were marked (or had markers removed): those, and
only those, are shallow-copied along the path to the marker. This runs on every request, so it
costs a pass over the message list, not a copy of the conversation.

Where a marker may go inside a message (string contents, block lists, empty contents, tool
messages) is the SDK's rule set, :mod:`ctxengine.messages` (``mark_message``,
``can_carry_marker``); this module only chooses the messages. Tool messages (OpenAI
``role: "tool"``, Anthropic user messages holding only ``tool_result`` blocks) are marked only
when ``native`` is true: OpenAI-envelope routes (OpenRouter and the like) reject markers there, so
their slot goes to the next earlier message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxengine import Format, MarkedRequest
from ctxengine.messages import (
    MarkedMessages,
    breakpoint_ttls,
    detect_request_format,
    is_tool_message,
    mark_message,
    strip_cache_markers,
)

ROLLING_BREAKPOINTS = 3
"""How many of the last non-system messages are marked."""

_SYSTEM_ROLES = frozenset({"system", "developer"})


def apply_system_and_3(
    request: Mapping[str, Any],
    *,
    ttl: str,
    native: bool,
    fmt: Format | None = None,
    memo: MarkedMessages | None = None,
    stable_ttl: str | None = None,
) -> dict[str, Any]:
    """The request of :func:`mark_system_and_3` (same arguments and errors)."""
    marked = mark_system_and_3(
        request, ttl=ttl, native=native, fmt=fmt, memo=memo, stable_ttl=stable_ttl
    )
    return marked.request


def mark_system_and_3(
    request: Mapping[str, Any],
    *,
    ttl: str,
    native: bool,
    fmt: Format | None = None,
    memo: MarkedMessages | None = None,
    stable_ttl: str | None = None,
) -> MarkedRequest:
    """``request`` marked with up to four ``cache_control`` breakpoints, and how many it got.

    Breakpoint 1 is the system prompt (Anthropic ``system``, or an OpenAI first message with role
    ``system``/``developer``); breakpoints 2-4 are the last three non-system messages that may
    carry a marker (see the module docstring for what may). Existing markers anywhere in the
    request are removed first, so the result never holds more than four breakpoints, and applying
    the function to its own result returns an equal request. The system prompt comes first and
    gets ``stable_ttl``, never shorter than ``ttl``, so Anthropic's "longer TTLs first" rule holds.

    :param ttl: ``"5m"`` or ``"1h"``, for the rolling breakpoints.
    :param stable_ttl: the system prompt's TTL (default ``ttl``); ``"5m"`` with a ``"1h"``
        ``ttl`` is refused.
    :param native: true on routes that accept markers on tool messages (native Anthropic API,
        Anthropic-compatible gateways); false on OpenAI-envelope routes such as OpenRouter.
    :param fmt: the request's format; detected with :func:`detect_request_format` when omitted.
    :param memo: the session's message memo, which knows which of the caller's messages carry
        markers (see :func:`strip_cache_markers`); without it every message is scanned.
    :returns: a new request dict (the caller's objects are untouched and only the marked
        messages, and the system prompt when marked, are copies) and the markers placed.
    :raises ValueError: for a TTL other than "5m"/"1h", or a stable TTL shorter than ``ttl``.
    :raises TypeError: for a request that is not a mapping with a list of dict messages.
    """
    ttl, stable = breakpoint_ttls(ttl, stable_ttl)  # validates before any work
    if fmt not in (None, "openai", "anthropic"):
        raise ValueError(f"fmt must be 'openai', 'anthropic' or None; got {fmt!r}")
    out = strip_cache_markers(request, memo=memo)
    if fmt is None:
        fmt = detect_request_format(out)
    messages: list[dict[str, Any]] = out["messages"]
    marked = list(messages)

    placed = 0
    if fmt == "anthropic":
        # The system prompt takes its marker by the rule of a message's content.
        carrier = mark_message(
            {"role": "user", "content": out.get("system")}, stable, fmt, tool=False
        )
        if carrier is not None:
            out["system"] = carrier["content"]
            placed = 1
    elif messages and messages[0].get("role") in _SYSTEM_ROLES:
        first = mark_message(messages[0], stable, fmt, tool=False)
        if first is not None:
            marked[0] = first
            placed = 1

    rolling = 0
    for index in range(len(messages) - 1, -1, -1):
        if rolling == ROLLING_BREAKPOINTS:
            break
        msg = messages[index]
        if msg.get("role") in _SYSTEM_ROLES:
            continue
        tool = is_tool_message(msg, only_results=True)
        if tool and not native:
            continue
        new_msg = mark_message(msg, ttl, fmt, tool=tool)
        if new_msg is None:
            continue
        marked[index] = new_msg
        rolling += 1
    out["messages"] = marked
    return MarkedRequest(out, placed + rolling)
