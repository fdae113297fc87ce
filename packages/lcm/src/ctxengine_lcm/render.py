"""The active context rendered back as provider messages.

Summaries sit at the front of the active context (compaction always takes the oldest raw
messages, and condensation merges neighbouring summaries), so they render as one *summary block*:

- a ``user`` message holding every summary in order, introduced as reference material from
  earlier turns (not a new request) and ended with a note to carry on with what follows;
- when the next message is also a ``user`` message, a short ``assistant`` acknowledgement after
  it, so roles keep alternating and no real message has to be rewritten.

Raw messages render as the caller's own dicts (byte-for-byte), or as their *described* form when
a large tool output was stored aside.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import attrs

from ctxengine import Message
from ctxengine_lcm.store import ContextItem, Summary, message_ref

BLOCK_HEADER = (
    "[lcm: summaries of earlier turns of this conversation. This is reference material from "
    "earlier turns, not a new request. The original messages are stored losslessly; use "
    "lcm_expand, lcm_describe, lcm_grep or lcm_expand_query to recover details.]"
)
BLOCK_FOOTER = "[End of earlier-turn summaries. Continue with the conversation that follows.]"
ACK_TEXT = (
    "Understood. I will treat those summaries as reference and expand them with the lcm tools "
    "when I need details."
)
EXPAND_MARKER = "Expand for details:"
"""Every summary's last line starts with this."""


@attrs.define
class Item:
    """One entry of the active context in memory.

    :ivar tokens: what the item costs in context (a summary: its rendered section).
    :ivar message: for a message item, the dict placed in context.
    """

    kind: str
    ref: int | str
    tokens: int
    message: Message | None = None
    summary: Summary | None = None

    @property
    def key(self) -> ContextItem:
        return ("message", int(self.ref)) if self.kind == "message" else ("summary", str(self.ref))

    @property
    def depth(self) -> int:
        return self.summary.depth if self.summary is not None else -1


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "?"
    return dt.datetime.fromtimestamp(stamp, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def summary_section(summary: Summary) -> str:
    """How one summary appears inside the block (its content already ends with the expand line)."""
    covers = f"{summary.descendant_messages} messages"
    if summary.first_message_id is not None:
        first = message_ref(summary.first_message_id)
        covers += f", {first}..{message_ref(summary.last_message_id or 0)}"
    return (
        f'<summary id="{summary.id}" kind="{summary.kind}" depth="{summary.depth}" '
        f'covers="{covers}" time="{_when(summary.earliest_at)} - {_when(summary.latest_at)} UTC">\n'
        f"{summary.content}\n</summary>"
    )


def expand_line(
    summary_id: str,
    kind: str,
    *,
    message_count: int,
    first: int | None,
    last: int | None,
    children: int,
) -> str:
    """The last line of every summary: what the agent can expand for the details."""
    span = f" ({message_ref(first)}..{message_ref(last)})" if first and last else ""
    if kind == "leaf":
        return (
            f'{EXPAND_MARKER} lcm_expand(summary_id="{summary_id}") returns the '
            f"{message_count} original messages{span}; lcm_grep searches them."
        )
    return (
        f'{EXPAND_MARKER} lcm_describe(id="{summary_id}") lists the {children} summaries it '
        f'condenses; lcm_expand(summary_id="{summary_id}") returns the {message_count} original '
        f"messages{span}."
    )


def strip_expand_line(content: str) -> str:
    """A summary's content without its final expand line."""
    head, sep, tail = content.rpartition("\n")
    if sep and tail.startswith(EXPAND_MARKER):
        return head.rstrip()
    return content


@attrs.frozen
class Rendered:
    """Rendered messages plus, for the summary block, which items its messages stand for."""

    messages: list[Message]
    block: list[Message]
    block_items: list[ContextItem]


def render(items: Sequence[Item], leading: Sequence[Message] = ()) -> Rendered:
    """``leading`` (system messages, kept as given), the summary block, then raw messages."""
    summaries = [it for it in items if it.kind == "summary" and it.summary is not None]
    raw = [it for it in items if it.kind == "message"]
    out: list[Message] = list(leading)
    block: list[Message] = []
    if summaries:
        sections = "\n\n".join(summary_section(it.summary) for it in summaries if it.summary)
        block.append({"role": "user", "content": f"{BLOCK_HEADER}\n\n{sections}\n\n{BLOCK_FOOTER}"})
        nxt = raw[0].message if raw else None
        if nxt is not None and nxt.get("role") == "user":
            block.append({"role": "assistant", "content": ACK_TEXT})
    out += block
    out += [it.message for it in raw if it.message is not None]
    return Rendered(out, block, [it.key for it in summaries])
