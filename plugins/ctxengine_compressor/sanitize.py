"""Tool-pair repair after a compaction: every tool call keeps its result and vice versa.

Engines that cut a conversation (the compressor, the lossless engine, third-party engines) can
leave a tool result whose call was summarized away, or a call whose result was. Providers reject
both. :func:`sanitize_tool_pairs` repairs exactly that and nothing else:

- a tool result with no matching call in the tool-call message right before it is dropped;
- a tool call whose result is missing is removed from its message (a result is never invented);
  a message left with no content and no calls is dropped;
- the trailing tool-call group - calls still waiting for their results because the agent is about
  to run them - is kept as it is;
- matching is positional within one group, so ids reused across turns (or within one turn) pair up
  correctly.

Untouched messages are returned as the same objects; a repaired message is a shallow copy, so the
caller's list and dicts are never mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxengine import Format, Message

__all__ = ["sanitize_tool_pairs"]


def sanitize_tool_pairs(
    messages: Sequence[Message], fmt: Format, *, keep_pending: bool = True
) -> list[Message]:
    """Return ``messages`` with broken tool call/result pairs repaired (see the module docstring).

    :param fmt: ``"openai"`` (calls in ``tool_calls``, results as ``role: "tool"`` messages) or
        ``"anthropic"`` (``tool_use`` blocks answered by ``tool_result`` blocks in the next user
        message).
    :param keep_pending: keep the unanswered calls of the final group (in-flight work); when
        false they are removed like any other unanswered call.
    :raises ValueError: when ``fmt`` is neither format.
    """
    if fmt == "openai":
        return _sanitize_openai(messages, keep_pending)
    if fmt == "anthropic":
        return _sanitize_anthropic(messages, keep_pending)
    raise ValueError(f"unknown message format {fmt!r}; allowed: 'openai', 'anthropic'")


def _is_empty_content(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return content == ""
    if isinstance(content, list):
        return len(content) == 0
    return False


# --- OpenAI -----------------------------------------------------------------------------------


def _openai_call_ids(msg: Message) -> list[str]:
    if msg.get("role") != "assistant":
        return []
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [str(call.get("id", "")) if isinstance(call, dict) else "" for call in calls]


def _sanitize_openai(messages: Sequence[Message], keep_pending: bool) -> list[Message]:
    out: list[Message] = []
    # The open group: where its call message sits in ``out`` and, per call position, whether a
    # result has been seen.
    group_pos: int | None = None
    group_ids: list[str] = []
    answered: list[bool] = []

    def close_group() -> None:
        nonlocal group_pos
        if group_pos is not None and not all(answered):
            _drop_unanswered_openai(out, group_pos, answered)
        group_pos = None

    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            call_id = str(msg.get("tool_call_id", ""))
            slot = _first_open_slot(group_ids, answered, call_id) if group_pos is not None else -1
            if slot < 0:
                continue  # orphan result: its call is gone
            answered[slot] = True
            out.append(msg)
            continue
        close_group()
        ids = _openai_call_ids(msg)
        out.append(msg)
        if ids:
            group_pos = len(out) - 1
            group_ids = ids
            answered = [False] * len(ids)
    if group_pos is not None and not keep_pending:
        close_group()
    return out


def _drop_unanswered_openai(out: list[Message], pos: int, answered: list[bool]) -> None:
    msg = out[pos]
    calls = msg["tool_calls"]
    kept = [call for call, ok in zip(calls, answered, strict=True) if ok]
    if kept:
        out[pos] = {**msg, "tool_calls": kept}
        return
    new = {key: value for key, value in msg.items() if key != "tool_calls"}
    if _is_empty_content(new.get("content")):
        # No text and no calls left: nothing the provider would accept. Nothing follows it in
        # ``out`` yet except answered results, and an all-unanswered group has none.
        del out[pos]
    else:
        out[pos] = new


def _first_open_slot(ids: list[str], answered: list[bool], call_id: str) -> int:
    for index, (known, done) in enumerate(zip(ids, answered, strict=True)):
        if not done and known == call_id:
            return index
    return -1


# --- Anthropic --------------------------------------------------------------------------------


def _blocks(msg: Message) -> list[Any]:
    content = msg.get("content")
    return content if isinstance(content, list) else []


def _is_block(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind


def _sanitize_anthropic(messages: Sequence[Message], keep_pending: bool) -> list[Message]:
    out: list[Message] = []
    dropped_before: set[int] = set()  # positions in ``out`` where a message was removed just before
    count = len(messages)
    index = 0
    while index < count:
        msg = messages[index]
        role = msg.get("role")
        call_ids = (
            [str(b.get("id", "")) for b in _blocks(msg) if _is_block(b, "tool_use")]
            if role == "assistant"
            else []
        )
        if not call_ids:
            kept = _strip_results(msg, [], [])
            if kept is None:
                dropped_before.add(len(out))
            else:
                out.append(kept)
            index += 1
            continue
        answered = [False] * len(call_ids)
        reply = messages[index + 1] if index + 1 < count else None
        reply_kept: Message | None = None
        if reply is not None and reply.get("role") == "user":
            reply_kept = _strip_results(reply, call_ids, answered)
        trailing = reply is None or (index + 2 >= count and reply.get("role") == "user")
        if all(answered) or (keep_pending and trailing):
            out.append(msg)
        else:
            fixed = _drop_unanswered_anthropic(msg, answered)
            if fixed is None:
                dropped_before.add(len(out))
            else:
                out.append(fixed)
        if reply is not None and reply.get("role") == "user":
            if reply_kept is None:
                dropped_before.add(len(out))
            else:
                out.append(reply_kept)
            index += 2
        else:
            index += 1
    return _merge_where_dropped(out, dropped_before)


def _strip_results(msg: Message, call_ids: list[str], answered: list[bool]) -> Message | None:
    """``msg`` without ``tool_result`` blocks that answer none of ``call_ids`` (marks ``answered``).

    Returns ``None`` when nothing is left of the message.
    """
    if msg.get("role") != "user":
        return msg
    blocks = _blocks(msg)
    if not any(_is_block(b, "tool_result") for b in blocks):
        return msg
    kept: list[Any] = []
    for block in blocks:
        if _is_block(block, "tool_result"):
            slot = _first_open_slot(call_ids, answered, str(block.get("tool_use_id", "")))
            if slot < 0:
                continue
            answered[slot] = True
        kept.append(block)
    if len(kept) == len(blocks):
        return msg
    if not kept:
        return None
    return {**msg, "content": kept}


def _drop_unanswered_anthropic(msg: Message, answered: list[bool]) -> Message | None:
    kept: list[Any] = []
    slot = 0
    for block in _blocks(msg):
        if _is_block(block, "tool_use"):
            ok = answered[slot]
            slot += 1
            if not ok:
                continue
        kept.append(block)
    if not any(_has_payload(block) for block in kept):
        return None
    return {**msg, "content": kept}


def _has_payload(block: Any) -> bool:
    if _is_block(block, "text"):
        return bool(block.get("text"))
    # thinking blocks alone do not make a valid assistant turn
    return not (_is_block(block, "thinking") or _is_block(block, "redacted_thinking"))


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    return []


def _merge_where_dropped(out: list[Message], dropped_before: set[int]) -> list[Message]:
    """Merge neighbours that became same-role because a message between them was dropped."""
    if not dropped_before:
        return out
    merged: list[Message] = []
    for pos, msg in enumerate(out):
        if pos in dropped_before and merged and merged[-1].get("role") == msg.get("role"):
            prev = merged[-1]
            content = _as_blocks(prev.get("content")) + _as_blocks(msg.get("content"))
            merged[-1] = {**prev, "content": content}
        else:
            merged.append(msg)
    return merged
