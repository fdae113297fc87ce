"""pydantic-ai messages to and from the OpenAI chat dicts ctxengine reads.

A ``ModelRequest`` becomes one dict per part: ``SystemPromptPart`` -> ``system``,
``UserPromptPart`` -> ``user`` (text; other content as a placeholder the engine can count),
``ToolReturnPart`` -> ``tool``, ``RetryPromptPart`` -> ``tool`` for a tool's retry (``user``
otherwise). A ``ModelResponse`` becomes one ``assistant`` dict: the text parts as ``content``,
``ToolCallPart`` as ``tool_calls`` (arguments as JSON text), ``ThinkingPart`` as
``reasoning_content``.

:class:`Converter` remembers where each dict came from. Converting back, runs of request dicts
are grouped into ``ModelRequest`` objects: when every dict of an original request comes back
untouched and in order, that very request object is returned (timestamps, instructions, run
ids and all); otherwise a request is rebuilt from the original part objects of the untouched
dicts and new parts for changed ones (a pruned tool return keeps its tool name and call id). An
untouched ``assistant`` dict gives back the original ``ModelResponse`` (usage, model name,
thinking signatures, provider details); a changed one is a copy of it with the changed text and
arguments; new dicts (a summary) become new parts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

Message = dict[str, Any]


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        item if isinstance(item, str) else f"[{type(item).__name__}]" for item in content
    )


def _return_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


class Converter:
    """Converts one conversation's pydantic-ai messages to OpenAI chat dicts and back."""

    def __init__(self) -> None:
        # id(dict) -> (dict, the message it came from, the part it came from or None)
        self._origin: dict[int, tuple[Message, ModelMessage, Any]] = {}
        # id(message) -> (message, its dicts), so the same message gives the same dicts back
        self._dicts: dict[int, tuple[ModelMessage, list[Message]]] = {}

    def to_dicts(self, messages: Iterable[ModelMessage]) -> list[Message]:
        """OpenAI chat dicts for ``messages``."""
        out: list[Message] = []
        for message in messages:
            known = self._dicts.get(id(message))
            if known is not None and known[0] is message:
                out.extend(known[1])
                continue
            converted = self._convert(message)
            self._dicts[id(message)] = (message, converted)
            out.extend(converted)
        return out

    def _convert(self, message: ModelMessage) -> list[Message]:
        if isinstance(message, ModelResponse):
            return [self._remember(self._response(message), message, None)]
        dicts = []
        for part in message.parts:
            dicts.append(self._remember(self._request_part(part), message, part))
        return dicts

    def _remember(self, converted: Message, message: ModelMessage, part: Any) -> Message:
        self._origin[id(converted)] = (converted, message, part)
        return converted

    @staticmethod
    def _request_part(part: ModelRequestPart) -> Message:
        if isinstance(part, SystemPromptPart):
            return {"role": "system", "content": part.content}
        if isinstance(part, UserPromptPart):
            return {"role": "user", "content": _user_text(part.content)}
        if isinstance(part, ToolReturnPart):
            return {
                "role": "tool",
                "tool_call_id": part.tool_call_id,
                "content": _return_text(part.content),
            }
        if isinstance(part, RetryPromptPart):
            text = part.model_response()
            if part.tool_name is not None:
                return {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
            return {"role": "user", "content": text}
        raise TypeError(f"ctxengine cannot read a {type(part).__name__} request part")

    @staticmethod
    def _response(message: ModelResponse) -> Message:
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = [
            {
                "id": p.tool_call_id,
                "type": "function",
                "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
            }
            for p in message.parts
            if isinstance(p, ToolCallPart)
        ]
        result: Message = {"role": "assistant", "content": text or None}
        if calls:
            result["tool_calls"] = calls
        reasoning = "\n".join(p.content for p in message.parts if isinstance(p, ThinkingPart))
        if reasoning.strip():
            result["reasoning_content"] = reasoning
        return result

    def _known(self, converted: Message) -> tuple[ModelMessage, Any] | None:
        known = self._origin.get(id(converted))
        if known is None or known[0] is not converted:
            return None
        return known[1], known[2]

    def to_messages(self, dicts: Sequence[Message]) -> list[ModelMessage]:
        """pydantic-ai messages for ``dicts`` (see the module docstring)."""
        out: list[ModelMessage] = []
        group: list[Message] = []
        for converted in dicts:
            if converted.get("role") == "assistant":
                out.extend(self._request(group))
                group = []
                out.append(self._response_for(converted))
            else:
                group.append(converted)
        out.extend(self._request(group))
        return out

    def _request(self, group: list[Message]) -> list[ModelMessage]:
        if not group:
            return []
        known = [self._known(d) for d in group]
        owners = {id(k[0]) for k in known if k is not None}
        if all(k is not None for k in known) and len(owners) == 1:
            original = known[0][0]  # type: ignore[index]
            parts = [k[1] for k in known]  # type: ignore[index]
            if isinstance(original, ModelRequest) and list(original.parts) == parts:
                return [original]
        parts = [
            k[1] if k is not None else self._new_part(d) for k, d in zip(known, group, strict=True)
        ]
        return [ModelRequest(parts=parts)]

    def _new_part(self, converted: Message) -> ModelRequestPart:
        role = converted.get("role")
        content = converted.get("content")
        text = (
            content
            if isinstance(content, str)
            else _user_text([p.get("text", "") for p in content or [] if isinstance(p, Mapping)])
        )
        if role == "tool":
            call_id = str(converted.get("tool_call_id"))
            base = self._part_by_call(call_id)
            if isinstance(base, ToolReturnPart):
                return dataclasses.replace(base, content=text)
            name = (
                base.tool_name if isinstance(base, RetryPromptPart) and base.tool_name else "tool"
            )
            return ToolReturnPart(tool_name=name, content=text, tool_call_id=call_id)
        if role == "system":
            return SystemPromptPart(content=text)
        return UserPromptPart(content=text)

    def _part_by_call(self, call_id: str) -> Any:
        for _, _, part in self._origin.values():
            if getattr(part, "tool_call_id", None) == call_id:
                return part
        return None

    def _response_for(self, converted: Message) -> ModelResponse:
        known = self._known(converted)
        if known is not None and isinstance(known[0], ModelResponse):
            return known[0]
        calls = converted.get("tool_calls") or []
        base = self._response_by_call([str(c.get("id")) for c in calls])
        parts: list[ModelResponsePart] = []
        if base is not None:
            parts.extend(p for p in base.parts if isinstance(p, ThinkingPart))
        content = converted.get("content")
        text = (
            content
            if isinstance(content, str)
            else _user_text([p.get("text", "") for p in content or [] if isinstance(p, Mapping)])
        )
        if text:
            parts.append(TextPart(content=text))
        old_calls = (
            {p.tool_call_id: p for p in base.parts if isinstance(p, ToolCallPart)} if base else {}
        )
        for call in calls:
            function = call.get("function") or {}
            call_id = str(call.get("id"))
            args = function.get("arguments")
            if call_id in old_calls:
                parts.append(dataclasses.replace(old_calls[call_id], args=args))
            else:
                parts.append(ToolCallPart(function.get("name", ""), args, call_id))
        if base is not None:
            return dataclasses.replace(base, parts=parts)
        return ModelResponse(parts=parts)

    def _response_by_call(self, call_ids: list[str]) -> ModelResponse | None:
        for _, message, _ in self._origin.values():
            if isinstance(message, ModelResponse) and any(
                isinstance(p, ToolCallPart) and p.tool_call_id in call_ids for p in message.parts
            ):
                return message
        return None

    def retain(self, messages: Iterable[ModelMessage]) -> None:
        """Forget conversions of messages no longer in ``messages``."""
        keep = {id(m) for m in messages}
        self._dicts = {k: v for k, v in self._dicts.items() if k in keep}
        kept_dicts = {id(d) for _, dicts in self._dicts.values() for d in dicts}
        self._origin = {k: v for k, v in self._origin.items() if k in kept_dicts}
