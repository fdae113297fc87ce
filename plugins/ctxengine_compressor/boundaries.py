"""Phase 2: where the kept head ends and the kept tail starts.

Indices refer to the full message list. ``messages[:system_end]`` are OpenAI system/developer
messages (always kept), ``messages[system_end:head_end]`` the rest of the head,
``messages[head_end:tail_start]`` the middle that gets summarized, ``messages[tail_start:]`` the
tail, kept byte-for-byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from ctxengine import Format, Message, TextSize, TokenEstimate
from ctxengine.messages import cut_points, is_real_user_message, is_tool_message, visible_text

__all__ = [
    "Boundaries",
    "RunSizes",
    "find_boundaries",
    "has_visible_assistant_text",
    "system_prefix_length",
]


def has_visible_assistant_text(msg: Message) -> bool:
    """True for an assistant message with non-blank visible text (not only tool calls/thinking)."""
    return msg.get("role") == "assistant" and bool(visible_text(msg).strip())


class RunSizes(Protocol):
    """The token sizes boundaries are found with (``ctx.tokens.sizes(messages)`` has them):
    exact per message, estimated (exact on demand) per run, so only what a boundary depends on
    is tokenized."""

    def exact(self, index: int) -> int: ...

    def run(self, start: int = 0, stop: int | None = None) -> TokenEstimate: ...

    def size(self, start: int = 0, stop: int | None = None) -> TextSize:
        """The rough size :meth:`run` estimates from (its bounds are the run's)."""
        ...


@attrs.frozen
class Boundaries:
    """The split of one conversation; ``reason`` is set (and the split unusable) when the head
    and the tail meet."""

    system_end: int
    head_end: int
    tail_start: int
    reason: str | None = None

    @property
    def middle(self) -> range:
        return range(self.head_end, self.tail_start)


def system_prefix_length(messages: Sequence[Message], fmt: Format) -> int:
    """How many leading messages are system prompts (OpenAI ``system``/``developer``)."""
    if fmt != "openai":
        return 0
    count = 0
    for msg in messages:
        if msg.get("role") not in ("system", "developer"):
            break
        count += 1
    return count


def find_boundaries(
    messages: Sequence[Message],
    fmt: Format,
    *,
    protect_first_n: int,
    protect_last_n: int,
    tail_token_budget: int,
    sizes: RunSizes,
    is_summary: Callable[[Message], bool] = lambda msg: False,
    summary_at: int | None = None,
    max_messages: int | None = None,
) -> Boundaries:
    """Head and tail of ``messages`` by the rules of ``docs/builtins/compressor.md``.

    - head: the system prompt plus ``protect_first_n`` messages, on every compaction, but never
      reaching ``summary_at`` (the first message that holds an earlier summary): later
      compactions keep the head the first one kept -- the user's first task stays verbatim and
      in place -- and the summary after it is updated; a head that would not open with a real
      user message is left empty;
    - tail: walk back from the end while the messages fit ``tail_token_budget``, never fewer than
      ``protect_last_n`` messages, but the floor takes at most half of what lies after the head so
      something remains to compact;
    - the latest real user message and the latest assistant reply with visible text are kept
      verbatim: pulled into the tail, or - when what lies before them is smaller than what lies
      after (one task followed by hundreds of tool calls) and the list opens with the user - the
      head is extended to them instead, so the compaction still has a middle;
    - no boundary splits a tool call from its results (parallel calls included) and the tail never
      starts with a tool result;
    - when nothing but the system prompt is kept before the summary, the summary is the first
      message and must be the user's (Anthropic's rule, and every strict route's), so the tail
      starts with an assistant turn;
    - ``max_messages`` (the gateway's hard limit): the result holds at most that many messages
      (head, one summary, tail), overriding the tail's floors and the head's extension;
    - ``is_summary`` marks earlier summary messages, which never count as the latest ask or reply.

    Tokens counted exactly: the tail, message by message until the budget is spent (the message
    that overflows it only when its estimate cannot tell), and the runs before and after a kept
    ask or reply only when their estimates cannot tell which is larger.
    """
    n = len(messages)
    system_end = system_prefix_length(messages, fmt)
    cuts = cut_points(messages, fmt)
    plain_head = _plain_head(messages, fmt, cuts, system_end, protect_first_n, summary_at)
    tail_start = _budget_tail(sizes, plain_head, n, tail_token_budget, protect_last_n)
    head_end, tail_start = _keep_latest(
        messages, fmt, cuts, sizes, system_end, plain_head, tail_start, is_summary
    )
    if max_messages is not None:
        head_end, tail_start = _within_budget(
            messages, fmt, cuts, plain_head, head_end, tail_start, max_messages
        )
    tail_start = _snap_back(messages, fmt, cuts, tail_start, head_end)
    if head_end == system_end and tail_start < n:
        tail_start = _tail_after_empty_head(messages, cuts, tail_start, system_end)
        if max_messages is not None and system_end + 1 + n - tail_start > max_messages:
            later = _next_assistant_turn(messages, fmt, cuts, n - max_messages + system_end + 1)
            tail_start = later if later < n else tail_start
    if tail_start <= head_end:
        kept = n - system_end
        return Boundaries(
            system_end,
            head_end,
            max(tail_start, head_end),
            reason=(
                f"nothing to compact: all {kept} messages belong to the protected head "
                f"(system + {protect_first_n} first messages) or the protected tail (last "
                f"{protect_last_n} messages / {tail_token_budget:,} tokens, latest user "
                f"message and reply)"
            ),
        )
    return Boundaries(system_end, head_end, tail_start)


def _budget_tail(
    sizes: RunSizes, head_end: int, n: int, tail_token_budget: int, protect_last_n: int
) -> int:
    """Where the tail starts by its token budget, then by the message-count floor (capped at
    half of what follows the head)."""
    tail_start = n
    spent = 0
    # Everything after the head fits when even its most possible tokens do: nothing to count.
    if sizes.run(head_end, n).high <= tail_token_budget:
        tail_start = head_end
    while tail_start > head_end:
        # A message whose fewest possible tokens overflow the budget is not counted at all (the
        # one that ends the tail is often a huge tool output).
        if spent + sizes.size(tail_start - 1, tail_start).low > tail_token_budget:
            break
        cost = sizes.exact(tail_start - 1)
        if spent + cost > tail_token_budget:
            break
        spent += cost
        tail_start -= 1
    floor = min(max(0, protect_last_n), (n - head_end) // 2)
    # At least one message follows the summary, so "answer the message that follows" holds.
    return min(tail_start, n - max(floor, 1))


def _keep_latest(
    messages: Sequence[Message],
    fmt: Format,
    cuts: list[bool],
    sizes: RunSizes,
    system_end: int,
    head_end: int,
    tail_start: int,
    is_summary: Callable[[Message], bool],
) -> tuple[int, int]:
    """``(head_end, tail_start)`` moved so the latest ask and the latest visible reply stay
    verbatim: into the tail, or the head extended to them when what lies before them is
    smaller than what lies after and the head opens with the user."""
    n = len(messages)
    latest = {
        _last_index(messages, lambda m: is_real_user_message(m, fmt) and not is_summary(m)),
        _last_index(messages, lambda m: has_visible_assistant_text(m) and not is_summary(m)),
    }
    for index in sorted((i for i in latest if i >= 0), reverse=True):
        if index >= tail_start or index < head_end:
            continue
        # A head may only open with the user: an empty one is not extended past a list that
        # opens otherwise (the ask goes to the tail instead).
        opens_with_user = head_end > system_end or (
            system_end < n and is_real_user_message(messages[system_end], fmt)
        )
        before = sizes.run(head_end, index)
        after = sizes.run(index + 1, tail_start)
        if not opens_with_user or before.reaches(after):
            tail_start = index
        else:
            head_end = _snap_forward(cuts, index + 1)
    return head_end, tail_start


def _plain_head(
    messages: Sequence[Message],
    fmt: Format,
    cuts: list[bool],
    system_end: int,
    protect_first_n: int,
    summary_at: int | None,
) -> int:
    """System prompt + ``protect_first_n`` messages, moved forward to a cut, but ending before
    ``summary_at`` (moved back to a cut there). A head must open with a real user message (the
    first message after the system prompt is the user's on strict routes); when the list opens
    otherwise (an assistant turn, results whose calls are gone) only the system prompt is kept
    and the summary, a user message, comes first."""
    n = len(messages)
    if system_end >= n or not is_real_user_message(messages[system_end], fmt):
        return system_end
    head_end = _snap_forward(cuts, min(system_end + max(0, protect_first_n), n))
    if summary_at is not None and head_end > summary_at:
        head_end = max(summary_at, system_end)
        while head_end > system_end and not cuts[head_end]:
            head_end -= 1
    return head_end


def _within_budget(
    messages: Sequence[Message],
    fmt: Format,
    cuts: list[bool],
    plain_head: int,
    head_end: int,
    tail_start: int,
    max_messages: int,
) -> tuple[int, int]:
    """Head and tail such that head + one summary + tail hold at most ``max_messages``."""
    n = len(messages)
    if head_end + 1 + (n - tail_start) <= max_messages:
        return head_end, tail_start
    head_end = plain_head  # the extension past a lone early ask gives way to the limit
    lowest = n - max(1, max_messages - head_end - 1)
    later = _next_assistant_turn(messages, fmt, cuts, lowest, any_turn=True)
    # No place to start a tail within the limit: keep the tail (the caller reports the limit).
    return head_end, max(tail_start, later) if later < n else tail_start


def _next_assistant_turn(
    messages: Sequence[Message],
    fmt: Format,
    cuts: list[bool],
    index: int,
    *,
    any_turn: bool = False,
) -> int:
    """The first cut at or after ``index`` where a tail may start (not a tool result); with
    ``any_turn`` false it must also be an assistant message. ``len(messages)`` when none."""
    n = len(messages)
    index = max(0, index)
    while index < n and (
        not cuts[index]
        or is_tool_message(messages[index])
        or (not any_turn and messages[index].get("role") != "assistant")
    ):
        index += 1
    return index


def _snap_forward(cuts: list[bool], index: int) -> int:
    while not cuts[index]:
        index += 1
    return index


def _snap_back(
    messages: Sequence[Message], fmt: Format, cuts: list[bool], index: int, floor: int
) -> int:
    while index > floor and (
        not cuts[index] or (index < len(messages) and is_tool_message(messages[index]))
    ):
        index -= 1
    return index


def _tail_after_empty_head(
    messages: Sequence[Message], cuts: list[bool], tail_start: int, floor: int
) -> int:
    """With no head but the system prompt, the summary is the first message and must be
    ``user``; the tail must then start with an assistant turn, so move it back to the nearest
    one (``floor`` -- nothing to compact -- when there is none)."""
    index = tail_start
    while index > floor and not (cuts[index] and messages[index].get("role") == "assistant"):
        index -= 1
    return index if index > floor else floor


def _last_index(messages: Sequence[Message], test: Callable[[Message], bool]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if test(messages[index]):
            return index
    return -1
