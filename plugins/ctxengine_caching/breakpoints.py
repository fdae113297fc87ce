"""Which of a marked request's breakpoints can cache anything at all.

Below the model's minimum cacheable prefix (1,024-4,096 tokens) the API caches nothing and says
nothing; the ``system_and_3`` plugin keeps this report per session so hosts and ``ctxengine
replay`` can say why a short conversation shows no cache reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxengine import PrefixCounter, TokenCounter, TokenEstimate
from ctxengine.messages import marker_positions


@attrs.frozen
class Breakpoint:
    """One ``cache_control`` marker of a request and whether it can cache anything.

    :ivar position: where the marker sits: ``"tools[2]"``, ``"system[0]"``,
        ``"messages[7]"`` (on the message itself) or ``"messages[7].content[1]"``.
    :ivar prefix_tokens: tokens from the start of the prompt (tools, system, messages) up to
        and including the marked message or block (counted per message for messages).
    :ivar cacheable: ``prefix_tokens`` reaches the model's minimum cacheable prefix; when false
        the API caches nothing there and reports nothing.
    """

    position: str
    prefix_tokens: int
    cacheable: bool


def breakpoint_report(
    request: Mapping[str, Any],
    counter: PrefixCounter,
    min_cacheable_tokens: int,
    *,
    unmarked: Mapping[str, Any] | None = None,
) -> list[Breakpoint]:
    """Each marker of ``request`` with the size of the prefix it closes and whether that reaches
    ``min_cacheable_tokens``.

    Messages are counted whole with ``counter.count_message`` (a marker sits on a message's last
    block in practice, so this is the prefix up to the marker). Pass the caller's ``unmarked``
    request (same messages, before marking) so counts come from the caller's long-lived message
    objects, which a counter caches, instead of the fresh marked copies.
    """
    markers = marker_positions(request)
    if not markers:
        return []
    source = request if unmarked is None else unmarked
    tools = source.get("tools")
    tool_list: list[Any] = tools if isinstance(tools, list) else []
    tools_total = counter.count_tools(tool_list)
    system = source.get("system")
    system_tokens = counter.count_system(system if isinstance(system, (str, list)) else None)
    messages = source.get("messages")
    message_list: list[Any] = messages if isinstance(messages, list) else []
    last_message = max(_message_index(position) for position, _ in markers)
    cumulative: list[int] = []
    running = tools_total + system_tokens
    for msg in message_list[: last_message + 1]:
        running += counter.count_message(msg) if isinstance(msg, dict) else 0
        cumulative.append(running)

    report: list[Breakpoint] = []
    for position, _ in markers:
        if position.startswith("tools["):
            index = int(position[6:].split("]", 1)[0])
            prefix = counter.count_tools(tool_list[: index + 1])
        elif position.startswith("system"):
            prefix = tools_total + system_tokens
        else:
            index = _message_index(position)
            prefix = cumulative[index] if index < len(cumulative) else running
        report.append(Breakpoint(position, prefix, prefix >= min_cacheable_tokens))
    return report


def shortfall(
    request: Mapping[str, Any],
    unmarked: Mapping[str, Any],
    counter: TokenCounter,
    min_cacheable_tokens: int,
) -> tuple[int, bool, list[Breakpoint]]:
    """What :func:`breakpoint_report` would say about the minimum, counting exactly only the
    prefixes whose estimate cannot tell: ``(markers, whether the last one reaches the minimum,
    the breakpoints that do not, with their exact prefix tokens)``.

    ``request`` is the marked request, ``unmarked`` the caller's (same messages, before marking):
    markers can only sit on messages the strategy copied, so only those are looked at, and sizes
    come from the session's memo of the caller's objects.
    """
    marked_messages = request.get("messages")
    messages = unmarked.get("messages")
    if not isinstance(marked_messages, list) or not isinstance(messages, list):
        return 0, False, []
    copied = [
        index
        for index, (mine, theirs) in enumerate(zip(marked_messages, messages, strict=True))
        if mine is not theirs
    ]
    markers = marker_positions(request, messages=copied)
    if not markers:
        return 0, False, []
    tools = unmarked.get("tools")
    tool_list: list[Any] = tools if isinstance(tools, list) else []
    system = unmarked.get("system")
    system = system if isinstance(system, (str, list)) else None
    entries = counter.memo.view_of(messages).entries
    size = counter.size_of(())
    done = 0
    below: list[Breakpoint] = []
    cacheable = False
    for position, _ in markers:
        estimate: TokenEstimate
        index = _message_index(position)
        if position.startswith("tools["):
            tools_index = int(position[6:].split("]", 1)[0])
            estimate = TokenEstimate.known(counter.count_tools(tool_list[: tools_index + 1]))
        elif index < 0:  # the system prompt
            estimate = counter.tally((), system=system, tools=tool_list)
        else:
            size = counter.size_of(entries[done : index + 1], size)
            done = max(done, index + 1)
            estimate = counter.tally(entries[:done], system=system, tools=tool_list, size=size)
        cacheable = estimate.reaches(min_cacheable_tokens)
        if not cacheable:
            below.append(Breakpoint(position, estimate.exact(), False))
    return len(markers), cacheable, below


def _message_index(position: str) -> int:
    if not position.startswith("messages["):
        return -1
    return int(position[9:].split("]", 1)[0])
