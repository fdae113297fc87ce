"""LangChain messages to and from the OpenAI chat dicts ctxengine reads.

LangChain's message model mirrors OpenAI chat: ``HumanMessage`` is a ``user`` message,
``AIMessage`` an ``assistant`` message whose ``tool_calls`` become OpenAI ``tool_calls``
(arguments as JSON text), ``ToolMessage`` a ``tool`` message, ``SystemMessage`` a ``system``
one. Content blocks an OpenAI dict cannot hold (Anthropic ``thinking`` / ``redacted_thinking``,
``tool_use`` blocks duplicated in ``tool_calls``) are left out of the dict: reasoning goes into
``reasoning_content`` so engines can see it, and the original message keeps everything.

:class:`Converter` remembers which LangChain message each dict came from. Converting back, a
dict an engine returned untouched gives back the original message object (ids, reasoning,
metadata, usage and all); a changed one (a pruned tool output, shortened arguments) becomes a
copy of its original, found by tool-call id, with only the changed fields replaced; a new one
(a summary) becomes a new message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

Message = dict[str, Any]
MessageT = TypeVar("MessageT", bound=BaseMessage)
_HIDDEN_BLOCKS = ("thinking", "redacted_thinking", "reasoning", "tool_use")


def _text_parts(content: Any) -> str | list[dict[str, Any]]:
    """LangChain content as OpenAI content: a string, or text and image parts."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content or []:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif isinstance(block, Mapping) and block.get("type") == "image_url":
            parts.append({"type": "image_url", "image_url": block["image_url"]})
        elif isinstance(block, Mapping) and block.get("type") not in _HIDDEN_BLOCKS:
            parts.append({"type": "text", "text": f"[{block.get('type')} block]"})
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _reasoning(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(block.get("thinking") or block.get("reasoning") or "")
        for block in content
        if isinstance(block, Mapping) and block.get("type") in ("thinking", "reasoning")
    ).strip()


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, Mapping))


class Converter:
    """Converts one conversation's LangChain messages to OpenAI chat dicts and back."""

    def __init__(self) -> None:
        self._origin: dict[int, tuple[Message, BaseMessage]] = {}
        self._dict_of: dict[int, tuple[BaseMessage, Message]] = {}
        self._by_call: dict[str, BaseMessage] = {}

    def to_dicts(self, messages: Iterable[BaseMessage]) -> list[Message]:
        """OpenAI chat dicts for ``messages`` (remembered for :meth:`to_messages`)."""
        out: list[Message] = []
        for message in messages:
            # The same message object gets the same dict back, so the kernel's per-message
            # token counts and the lossless engine's ingest see one object per message.
            known = self._dict_of.get(id(message))
            if known is not None and known[0] is message:
                out.append(known[1])
                continue
            converted = self._to_dict(message)
            self._origin[id(converted)] = (converted, message)
            self._dict_of[id(message)] = (message, converted)
            out.append(converted)
        return out

    def _to_dict(self, message: BaseMessage) -> Message:
        if isinstance(message, SystemMessage):
            return {"role": "system", "content": _text_parts(message.content)}
        if isinstance(message, HumanMessage):
            return {"role": "user", "content": _text_parts(message.content)}
        if isinstance(message, ToolMessage):
            self._by_call[message.tool_call_id] = message
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": _plain_text(_text_parts(message.content)),
            }
        if isinstance(message, AIMessage):
            content = _text_parts(message.content)
            result: Message = {"role": "assistant", "content": content or None}
            if message.tool_calls:
                result["tool_calls"] = [
                    {
                        "id": str(call["id"]),
                        "type": "function",
                        "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                    }
                    for call in message.tool_calls
                ]
                for call in message.tool_calls:
                    self._by_call[str(call["id"])] = message
            reasoning = _reasoning(message.content)
            if reasoning:
                result["reasoning_content"] = reasoning
            return result
        raise TypeError(
            f"ctxengine cannot read a {type(message).__name__} message; expected System, Human, "
            "AI or Tool messages"
        )

    def original(self, converted: Message) -> BaseMessage | None:
        """The LangChain message ``converted`` was made from, if it is one of ours."""
        known = self._origin.get(id(converted))
        return known[1] if known is not None and known[0] is converted else None

    def to_messages(self, dicts: Sequence[Message]) -> list[BaseMessage]:
        """LangChain messages for ``dicts`` (see the module docstring)."""
        return [self.original(d) or self._rebuild(d) for d in dicts]

    def _rebuild(self, message: Message) -> BaseMessage:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            base = self._by_call.get(str(message.get("tool_call_id")))
            if isinstance(base, ToolMessage):
                return base.model_copy(update={"content": _plain_text(content)})
            return ToolMessage(content=_plain_text(content), tool_call_id=message["tool_call_id"])
        if role == "assistant":
            calls = [
                {
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "args": _arguments(call["function"].get("arguments")),
                    "type": "tool_call",
                }
                for call in message.get("tool_calls") or []
            ]
            base = next((self._by_call[c["id"]] for c in calls if c["id"] in self._by_call), None)
            if isinstance(base, AIMessage):
                kept = (
                    [b for b in base.content if isinstance(b, Mapping)]
                    if isinstance(base.content, list)
                    else []
                )
                hidden = [b for b in kept if b.get("type") in ("thinking", "redacted_thinking")]
                new_content: Any = (
                    [*hidden, {"type": "text", "text": _plain_text(content)}]
                    if (hidden)
                    else _plain_text(content)
                )
                return base.model_copy(update={"content": new_content, "tool_calls": calls})
            return AIMessage(content=_plain_text(content) if content else "", tool_calls=calls)
        if role == "system":
            return SystemMessage(content=content if content is not None else "")
        return HumanMessage(content=content if content is not None else "")

    def retain(self, messages: Iterable[BaseMessage]) -> None:
        """Forget conversions whose LangChain message is no longer in ``messages``."""
        keep = {id(m) for m in messages}
        self._origin = {k: v for k, v in self._origin.items() if id(v[1]) in keep}
        self._dict_of = {k: v for k, v in self._dict_of.items() if k in keep}
        self._by_call = {k: v for k, v in self._by_call.items() if id(v) in keep}


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def with_cache_marker(message: MessageT, marker: Mapping[str, Any]) -> MessageT:
    """A copy of ``message`` whose last content block carries ``marker`` (``cache_control``).

    The marker goes on the message's own content, so reasoning and tool blocks stay as they
    are; a string content becomes one text block. A message without content (an AI message
    that only calls tools) is returned unchanged: LangChain has no place for a marker there.
    """
    content = message.content
    if isinstance(content, str):
        if not content.strip():
            return message
        blocks: list[Any] = [{"type": "text", "text": content}]
    else:
        blocks = [
            dict(b) if isinstance(b, Mapping) else {"type": "text", "text": b} for b in content
        ]
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if block.get("type") in ("thinking", "redacted_thinking"):
            continue
        if block.get("type") == "text" and not str(block.get("text", "")).strip():
            continue
        blocks[index] = {**block, "cache_control": dict(marker)}
        return message.model_copy(update={"content": blocks})
    return message


def strip_cache_markers(message: MessageT) -> MessageT:
    """``message`` without ``cache_control`` in its content (the same object when it has none)."""
    content = message.content
    if not isinstance(content, list) or not any(
        isinstance(b, Mapping) and "cache_control" in b for b in content
    ):
        return message
    blocks = [
        {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, Mapping) else b
        for b in content
    ]
    return message.model_copy(update={"content": blocks})
