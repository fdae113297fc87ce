"""Phase 4: put head, summary and tail back together.

The summary travels inside a wrapper that says what it is (reference material, not a request)
and where it ends; :func:`find_summary` reads it back on the next compaction so the summary can be
updated rather than rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxengine import Format, Message, SystemPrompt
from ctxengine.messages import visible_text
from ctxengine_compressor.sanitize import sanitize_tool_pairs

__all__ = [
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "SYSTEM_NOTE",
    "assemble",
    "find_summary",
    "first_summary_index",
    "has_system_note",
    "summary_indices",
    "unwrap_summary",
    "without_summary",
    "wrap_summary",
]

SUMMARY_PREFIX = (
    "[CONTEXT SUMMARY] Earlier turns of this conversation were compacted into the summary below. "
    "It is reference material from those turns, not a new request: do not reply to it."
)
SUMMARY_SUFFIX = (
    "[END OF CONTEXT SUMMARY] Continue the work: answer the message that follows this summary."
)
SYSTEM_NOTE = (
    "Note: earlier turns of this conversation were compacted to save space; a summary of them "
    "(marked [CONTEXT SUMMARY]) stands where they were."
)


def wrap_summary(summary: str) -> str:
    """The summary text as it appears in the conversation."""
    return f"{SUMMARY_PREFIX}\n\n{summary.strip()}\n\n{SUMMARY_SUFFIX}"


def unwrap_summary(text: str) -> str | None:
    """The summary inside ``text`` (a message's visible text), or ``None`` when there is none."""
    start = text.find(SUMMARY_PREFIX)
    if start < 0:
        return None
    start += len(SUMMARY_PREFIX)
    end = text.find(SUMMARY_SUFFIX, start)
    return (text[start:] if end < 0 else text[start:end]).strip()


def is_summary_message(msg: Message) -> bool:
    """Whether ``msg`` holds a summary written by this engine (alone or merged into a turn)."""
    content = msg.get("content")
    if isinstance(content, str):
        return SUMMARY_PREFIX in content
    if not isinstance(content, list):
        return False
    # Runs over every message on each compaction: look at text blocks without joining them.
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str) and SUMMARY_PREFIX in text:
                return True
    return False


def is_pure_summary_message(msg: Message) -> bool:
    """Whether ``msg`` is only a summary, not a real turn a summary was merged into.

    A merged turn still carries the user's (or assistant's) own words, so it can be the latest
    ask or reply that must stay verbatim.
    """
    if not is_summary_message(msg):
        return False
    text = visible_text(msg)
    start = text.find(SUMMARY_PREFIX)
    end = text.find(SUMMARY_SUFFIX, start)
    outside = text[:start] + (text[end + len(SUMMARY_SUFFIX) :] if end >= 0 else "")
    return not outside.strip()


def without_summary(msg: Message) -> Message:
    """``msg`` with a summary merged into it cut out (the turn's own words stay); ``msg`` itself
    when it holds none. Pure summary messages become empty."""
    content = msg.get("content")
    if isinstance(content, str):
        return {**msg, "content": _cut_summary(content)} if SUMMARY_PREFIX in content else msg
    if not isinstance(content, list) or not is_summary_message(msg):
        return msg
    blocks = [
        {**b, "text": _cut_summary(b["text"])}
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        else b
        for b in content
    ]
    return {**msg, "content": blocks}


def _cut_summary(text: str) -> str:
    start = text.find(SUMMARY_PREFIX)
    while start >= 0:
        end = text.find(SUMMARY_SUFFIX, start)
        end = len(text) if end < 0 else end + len(SUMMARY_SUFFIX)
        text = (text[:start].rstrip() + "\n\n" + text[end:].lstrip()).strip()
        start = text.find(SUMMARY_PREFIX)
    return text


def summary_indices(messages: Sequence[Message]) -> list[int]:
    """The indices of the messages that hold a summary (:func:`is_summary_message`), in order:
    the one walk over every message's text that the functions below and the compaction's other
    summary tests take their candidates from."""
    return [index for index, msg in enumerate(messages) if is_summary_message(msg)]


def first_summary_index(messages: Sequence[Message], summaries: Sequence[int]) -> int | None:
    """The index of the first user or assistant message holding a summary, if any
    (``summaries``: :func:`summary_indices` of ``messages``)."""
    for index in summaries:
        if messages[index].get("role") in ("user", "assistant"):
            return index
    return None


def find_summary(messages: Sequence[Message], summaries: Sequence[int]) -> tuple[int, str] | None:
    """The last user or assistant message holding a summary, and the summary text
    (``summaries``: :func:`summary_indices` of ``messages``)."""
    for index in reversed(summaries):
        msg = messages[index]
        if msg.get("role") in ("user", "assistant"):
            summary = unwrap_summary(visible_text(msg))
            if summary is not None:
                return index, summary
    return None


def _system_prompt_text(system: SystemPrompt | None) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))


def has_system_note(messages: Sequence[Message], fmt: Format, system: SystemPrompt | None) -> bool:
    """Whether the one-time compaction note is already in the system prompt."""
    if fmt == "anthropic":
        return SYSTEM_NOTE in _system_prompt_text(system)
    return (
        bool(messages)
        and messages[0].get("role") in ("system", "developer")
        and (SYSTEM_NOTE in visible_text(messages[0]))
    )


def _append_text(content: Any, text: str) -> Any:
    """``content`` (a string, a list of parts/blocks or ``None``) with ``text`` appended."""
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}]
    if isinstance(content, str) and content:
        return f"{content}\n\n{text}"
    return text


def _choose_role(prev: str | None, nxt: str | None, must_be_user: bool) -> str | None:
    for role in ("user", "assistant"):
        if role in (prev, nxt) or (must_be_user and role != "user"):
            continue
        return role
    return None


def assemble(
    messages: Sequence[Message],
    pruned: Sequence[Message],
    fmt: Format,
    system: SystemPrompt | None,
    *,
    system_end: int,
    head_end: int,
    tail_start: int,
    summary: str,
    add_note: bool,
) -> tuple[list[Message], SystemPrompt | None]:
    """The compacted conversation: head (from ``pruned``), summary message, tail (from
    ``messages``, untouched), then the tool-pair sanitizer.

    The summary message gets the role that differs from both neighbours (``user`` when it comes
    first after the system prompt, as Anthropic and every strict route require; after OpenAI tool
    results, which are the user's side, ``user`` or ``assistant`` as the tail needs); when both
    roles collide it is merged into the last head message instead.
    With ``add_note`` the system prompt gets :data:`SYSTEM_NOTE` (in ``system`` for Anthropic,
    in the first system message for OpenAI); without a system prompt there is nothing to note.
    """
    head = list(pruned[:head_end])
    new_system = system
    if add_note:
        if fmt == "anthropic" and system is not None:
            new_system = (
                _append_text(list(system), SYSTEM_NOTE)
                if isinstance(system, list)
                else _append_text(system, SYSTEM_NOTE)
            )
        elif fmt == "openai" and system_end > 0:
            first = head[0]
            head[0] = {**first, "content": _append_text(first.get("content"), SYSTEM_NOTE)}
    tail = list(messages[tail_start:])
    wrapped = wrap_summary(summary)
    body_head = head[system_end:]
    prev = body_head[-1].get("role") if body_head else None
    nxt = tail[0].get("role") if tail else None
    # First after the system prompt, the summary must be the user's (Anthropic, strict routes).
    role = _choose_role(prev, nxt, must_be_user=not body_head)
    if role is not None:
        out = [*head, {"role": role, "content": wrapped}, *tail]
    elif body_head:
        last = head[-1]
        head[-1] = {**last, "content": _append_text(last.get("content"), wrapped)}
        out = [*head, *tail]
    else:
        # Unreachable with boundaries from find_boundaries (an empty Anthropic head always meets
        # an assistant tail); kept as a loud guard rather than a silently invalid list.
        raise ValueError("no valid place for the summary message between head and tail")
    return sanitize_tool_pairs(out, fmt), new_system
