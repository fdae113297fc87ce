"""OpenAI Responses input items to and from the OpenAI chat messages ctxengine reads.

The kernel and its engines read chat messages; the Responses API takes a list of *items*
(``message``, ``function_call``, ``function_call_output``, ``reasoning`` and many built-in tool
items). :class:`ItemsConverter` turns a list of items into chat messages and back without losing
anything an engine leaves alone:

- user / system / developer messages become chat messages of that role (text parts become text);
- a run of assistant-side items (``reasoning``, assistant ``message``, ``function_call`` and any
  other non-input item) becomes one assistant message: the visible text as ``content``, the
  function calls as ``tool_calls`` (``id`` = the item's ``call_id``) and the reasoning summaries
  as ``reasoning_content``, so parallel calls stay in one message with their results after it;
- a ``function_call_output`` becomes a ``tool`` message;
- a ``compaction`` item (the opaque summary the Responses API's compaction returns) becomes an
  assistant message of its own whose only content part is the item itself, so an engine can
  recognise it (:func:`ctxengine.messages.is_compaction_block`) and it goes back verbatim.

The converter remembers, for every chat message it made, the items it came from. Converting back,
a chat message an engine returned untouched gives back exactly those items (ids, encrypted
reasoning, statuses and all); a message an engine changed (a pruned tool output, shortened
arguments) is rebuilt from its chat form, keeping the original items' ids and reasoning where the
call ids still match; a new message (a summary) becomes a plain message item, and a compaction
part becomes its item again, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxengine._messages.conversation import Message
from ctxengine._messages.editing import is_compaction_block

__all__ = ["Item", "ItemsConverter", "item_kind"]

Item = dict[str, Any]
_INPUT_ROLES = ("user", "system", "developer")


def item_kind(item: Mapping[str, Any]) -> str:
    """An item's type; a bare ``{"role", "content"}`` is a ``message``."""
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _chat_parts(content: Any) -> str | list[dict[str, Any]]:
    """Input content as chat content: text stays text; images become ``image_url`` parts."""
    if not isinstance(content, list):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            parts.append({"type": "text", "text": f"[{kind}]"})
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _input_parts(content: Any) -> str | list[dict[str, Any]]:
    """Chat content as Responses input content."""
    if not isinstance(content, list):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, Mapping) else url
            parts.append({"type": "input_image", "image_url": str(url), "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": str(part.get("text", ""))})
    return parts


def _reasoning_text(item: Mapping[str, Any]) -> str:
    return "\n".join(_text([part]) for part in item.get("summary") or [] if part)


class ItemsConverter:
    """Converts one conversation's Responses items to chat messages and back.

    Keep one converter per conversation: it remembers which items each chat message stands for.
    Call :meth:`retain` with the messages still in use so the memory does not grow forever.
    """

    def __init__(self) -> None:
        # id(chat message) -> (the message, the items it was made from)
        self._origin: dict[int, tuple[Message, list[Item]]] = {}
        # call id -> the assistant items that carried the call
        self._call_origin: dict[str, list[Item]] = {}

    def to_chat(self, items: Iterable[Mapping[str, Any]]) -> list[Message]:
        """Chat messages for ``items`` (dicts; SDK objects must be dumped first)."""
        messages: list[Message] = []
        group: list[Item] = []

        def flush() -> None:
            if group:
                messages.append(self._assistant(list(group)))
                group.clear()

        for raw in items:
            item = dict(raw)
            kind = item_kind(item)
            if kind == "message" and item.get("role") in _INPUT_ROLES:
                flush()
                message: Message = {"role": item["role"], "content": _chat_parts(item["content"])}
                self._remember(message, [item])
                messages.append(message)
            elif is_compaction_block(item):
                flush()
                compaction: Message = {"role": "assistant", "content": [item]}
                self._remember(compaction, [item])
                messages.append(compaction)
            elif kind == "function_call_output":
                flush()
                output = item.get("output")
                tool: Message = {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id")),
                    "content": output if isinstance(output, str) else _text(output),
                }
                self._remember(tool, [item])
                messages.append(tool)
            else:
                group.append(item)
        flush()
        return messages

    def _assistant(self, items: list[Item]) -> Message:
        text = "".join(_text(item.get("content")) for item in items if item_kind(item) == "message")
        calls: list[dict[str, Any]] = [
            {
                "id": str(item.get("call_id")),
                "type": "function",
                "function": {
                    "name": str(item.get("name")),
                    "arguments": str(item.get("arguments", "")),
                },
            }
            for item in items
            if item_kind(item) == "function_call"
        ]
        other = [
            f"[{item_kind(item)}]"
            for item in items
            if item_kind(item) not in ("message", "function_call", "reasoning")
        ]
        message: Message = {"role": "assistant", "content": text or " ".join(other) or None}
        if calls:
            message["tool_calls"] = calls
        reasoning = "\n".join(
            _reasoning_text(item) for item in items if item_kind(item) == "reasoning"
        ).strip()
        if reasoning:
            message["reasoning_content"] = reasoning
        self._remember(message, items)
        for call in calls:
            self._call_origin[call["id"]] = items
        return message

    def _remember(self, message: Message, items: list[Item]) -> None:
        self._origin[id(message)] = (message, items)

    def to_items(self, messages: Sequence[Message]) -> list[Item]:
        """Responses input items for chat ``messages`` (see the module docstring)."""
        items: list[Item] = []
        for message in messages:
            known = self._origin.get(id(message))
            if known is not None and known[0] is message:
                items.extend(known[1])
            else:
                items.extend(self._rebuild(message))
        return items

    def _rebuild(self, message: Message) -> list[Item]:
        role = message.get("role")
        if role == "tool":
            return [
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id")),
                    "output": _text(message.get("content")),
                }
            ]
        if role != "assistant":
            return [{"role": str(role), "content": _input_parts(message.get("content"))}]
        content = message.get("content")
        if isinstance(content, list) and any(is_compaction_block(p) for p in content):
            # The item as the API returned it; any text beside it stays a message of its own.
            kept = [dict(p) for p in content if is_compaction_block(p)]
            rest = [p for p in content if not is_compaction_block(p)]
            text = _text(rest)
            message = {k: v for k, v in message.items() if k != "content"}
            message["content"] = text or None
            more = self._rebuild(message) if text or message.get("tool_calls") else []
            return [*kept, *more]
        calls = message.get("tool_calls") or []
        original: list[Item] = []
        for call in calls:
            original = self._call_origin.get(str(call.get("id")), [])
            if original:
                break
        items: list[Item] = [i for i in original if item_kind(i) == "reasoning"]
        text = _text(message.get("content"))
        if text:
            items.append({"role": "assistant", "content": text})
        by_call = {str(i.get("call_id")): i for i in original if item_kind(i) == "function_call"}
        for call in calls:
            function = call.get("function") or {}
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            base = by_call.get(str(call.get("id")), {"type": "function_call"})
            items.append(
                {
                    **base,
                    "call_id": str(call.get("id")),
                    "name": str(function.get("name")),
                    "arguments": arguments,
                }
            )
        return items

    def retain(self, messages: Iterable[Message]) -> None:
        """Forget every chat message not in ``messages`` (and calls no kept message makes)."""
        keep = {id(m): m for m in messages}
        self._origin = {
            key: value
            for key, value in self._origin.items()
            if key in keep and keep[key] is value[0]
        }
        calls = {
            str(call.get("id"))
            for message, _ in self._origin.values()
            for call in message.get("tool_calls") or []
        }
        self._call_origin = {k: v for k, v in self._call_origin.items() if k in calls}
