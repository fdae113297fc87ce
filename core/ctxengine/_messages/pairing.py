"""Tool pairing: every call answered exactly once, by the results right after it.

The pairing rules of :func:`ctxengine.messages.validate` (``tool-call-unanswered``,
``tool-result-orphan``, ``tool-result-duplicate``, ``tool-call-duplicate-id``,
``tool-message-position``), read through the positional groups of :func:`.read.tool_groups`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ctxengine._messages.conversation import Format, Message
from ctxengine._messages.errors import Problem
from ctxengine._messages.read import (
    ToolGroup,
    match_results,
    tool_calls,
    tool_groups,
    tool_result_ids,
)

__all__ = ["pairing_problems"]


class _Findings:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, index: int, rule: str, where: str, text: str) -> None:
        self.problems.append(Problem(index, rule, f"{where}: {text}"))


def pairing_problems(
    msgs: Sequence[Message], fmt: Format, *, allow_pending: bool = True
) -> list[Problem]:
    """Every tool-pairing finding of ``msgs``, in message order within each group.

    With ``allow_pending`` a call at the very end of the list that has no result yet is not a
    problem (the agent is about to run it).
    """
    check = _Findings()
    grouped: set[int] = set()
    for group in tool_groups(msgs, fmt):
        grouped.update(group.result_indices)
        _check_group(check, msgs, group, fmt, allow_pending)
    for i, msg in enumerate(msgs):
        if i in grouped:
            continue
        if fmt == "openai":
            if msg.get("role") == "tool":
                prev = msgs[i - 1].get("role") if i > 0 else None
                after = f"it follows a {prev} message" if prev else "it opens the conversation"
                check.add(
                    i,
                    "tool-message-position",
                    f"messages[{i}]",
                    "a tool message must follow an assistant message with tool_calls (or "
                    f"another tool message answering it); {after}",
                )
            continue
        for rid in tool_result_ids(msg, fmt):
            check.add(
                i,
                "tool-result-orphan",
                f"messages[{i}]",
                f"tool_result for {rid!r} has no tool_use in the assistant message right before it",
            )
    return check.problems


def _check_group(
    check: _Findings, msgs: Sequence[Message], group: ToolGroup, fmt: Format, allow_pending: bool
) -> None:
    """The calls of one assistant message and the results right after them."""
    ci = group.call_index
    where = f"messages[{ci}]"
    call_word = "tool call" if fmt == "openai" else "tool_use"
    group_end = group.result_indices[-1] if group.result_indices else ci
    # OpenAI results arrive one tool message at a time, so a partly answered parallel call
    # at the very end is still pending; Anthropic answers all calls in one user message.
    last = len(msgs) - 1
    pending = allow_pending and (group_end == last if fmt == "openai" else ci == last)
    if group.unanswered and not pending:
        names = {c.id: c.name for c in tool_calls(msgs[ci], fmt)}
        needs = (
            "a tool message with its tool_call_id right after this assistant message"
            if fmt == "openai"
            else "a tool_result block in the next user message"
        )
        for call_id in group.unanswered:
            check.add(
                ci,
                "tool-call-unanswered",
                where,
                f"{call_word} {call_id!r} ({names.get(call_id, '?')}) has no result; "
                f"it needs {needs}",
            )
    for call_id, count in Counter(group.call_ids).items():
        if count > 1:
            check.add(
                ci,
                "tool-call-duplicate-id",
                where,
                f"{call_word} id {call_id!r} is used {count} times in one message; "
                "ids must be unique within a message",
            )
    located = [(r, rid) for r in group.result_indices for rid in tool_result_ids(msgs[r], fmt)]
    _, unmatched = match_results(group.call_ids, [rid for _, rid in located])
    for pos in unmatched:
        r, rid = located[pos]
        if rid in group.call_ids:
            check.add(
                r,
                "tool-result-duplicate",
                f"messages[{r}]",
                f"a second result for {call_word} {rid!r} of messages[{ci}]; "
                "each call gets exactly one result",
            )
        else:
            check.add(
                r,
                "tool-result-orphan",
                f"messages[{r}]",
                f"result for {rid!r} answers no {call_word} of messages[{ci}] "
                "(results must answer a call of the assistant message right before them)",
            )
