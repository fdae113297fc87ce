"""Where each API keeps the history, the tools and the tool calls: one :class:`Dialect` per API.

The turn logic (:mod:`ctxengine._wrap.turn`) is the same for every API; a dialect knows how one
API's request arguments and responses are shaped: where the history and the system prompt are,
how the kernel's form of the history maps to the API's (the same dicts for Messages and chat
completions, items for Responses), how tools are declared, how a response carries tool calls
and usage, and how tool results are written back. Responses may be the SDK's objects or plain
dicts (a stream's accumulated final message); every reader accepts both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ctxengine._kernel.session import Session
from ctxengine._messages.conversation import Format, Message, SystemPrompt
from ctxengine._messages.responses_items import ItemsConverter, item_kind
from ctxengine._messages.sdk_objects import field, plain

Api = Literal["anthropic.messages", "openai.chat", "openai.responses"]


@attrs.frozen
class EngineCall:
    """A tool call found in a response: its id, the tool's name and the raw arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str


def given(value: Any) -> bool:
    """False for ``None`` and the SDKs' "not given" markers (``NOT_GIVEN``, ``omit``)."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def listed(value: Any) -> list[Any]:
    """``value`` as a list: the host's own list when it is one (never mutated), else a copy."""
    return value if isinstance(value, list) else list(value)


def _needs_dump(message: Any) -> bool:
    """Whether ``message`` holds SDK objects (a response's content appended as is)."""
    if not isinstance(message, dict):
        return True
    content = message.get("content")
    if isinstance(content, list) and not all(isinstance(part, dict) for part in content):
        return True
    calls = message.get("tool_calls")
    return isinstance(calls, list) and not all(isinstance(call, dict) for call in calls)


class Dialect:
    """The shape of one API; subclasses fill in each step."""

    api: Api
    format: Format
    separate_system = False
    """Whether the system prompt is an argument of its own (``system``), not a message."""

    def split(self, kwargs: Mapping[str, Any]) -> tuple[list[Any], Any]:
        """The host's history (as it passed it, listed) and system prompt (``None`` where the
        history holds it)."""
        system = kwargs.get("system") if self.separate_system else None
        return listed(kwargs.get("messages") or []), system if given(system) else None

    def stateful(self, kwargs: Mapping[str, Any]) -> bool:
        """Whether the history lives on the server, out of the wrapper's reach."""
        return False

    def to_engine(self, host: Sequence[Any]) -> list[Message]:
        """Host messages in the kernel's form; dicts without SDK objects are kept as they are."""
        return [plain(m) if _needs_dump(m) else m for m in host]

    def join(
        self, kwargs: Mapping[str, Any], messages: list[Message], system: SystemPrompt | None
    ) -> dict[str, Any]:
        """The request arguments with ``messages`` and ``system`` (unless ``None``) in place."""
        request = {**kwargs, "messages": messages}
        if system is not None:
            request["system"] = system
        return request

    def tool_names(self, tools: Sequence[Any]) -> list[str]:
        """Names of the tools in a request's ``tools`` list (SDK objects or dicts)."""
        return [str(field(tool, "name")) for tool in tools]

    def engine_tools(self, session: Session) -> list[dict[str, Any]]:
        """The engine's tools as this API declares them."""
        return session.tool_schemas(self.format)

    def prepare(self, session: Session, request: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The request marked for prompt caching (when the kernel marks requests), and the
        markers the cache strategy reported it carries (:attr:`PreparedRequest.breakpoints`)."""
        with session.call_lock:  # the prepared request read back is this one
            prepared = session.prepare(request)
            last = session.ctx.last_request
            return prepared, last.breakpoints if last is not None else 0

    def calls(self, response: Any) -> list[EngineCall]:
        """Every tool call in ``response``, in order."""
        raise NotImplementedError

    def assistant(self, response: Any) -> list[Message]:
        """``response`` as history messages in the kernel's form."""
        raise NotImplementedError

    def results(self, answers: Sequence[tuple[EngineCall, str]]) -> list[Message]:
        """Messages carrying tool results, to follow :meth:`assistant`."""
        raise NotImplementedError

    def supply(
        self, messages: list[Message], answers: Mapping[str, str]
    ) -> tuple[list[Message], int]:
        """``messages`` with the results for call ids in ``answers`` where the host left them
        out (or put its own in their place); returns the new list and how many were supplied.

        Chat form: ``tool`` messages right after the assistant's call."""
        out: list[Message] = []
        supplied = 0
        i = 0
        while i < len(messages):
            message = messages[i]
            out.append(message)
            i += 1
            ids = [
                str(call.get("id"))
                for call in message.get("tool_calls") or []
                if message.get("role") == "assistant" and str(call.get("id")) in answers
            ]
            if not ids:
                continue
            # The host's tool messages for this turn, minus any it sent for the engine's calls.
            while i < len(messages) and messages[i].get("role") == "tool":
                if messages[i].get("tool_call_id") not in answers:
                    out.append(messages[i])
                i += 1
            out.extend(
                {"role": "tool", "tool_call_id": call_id, "content": answers[call_id]}
                for call_id in ids
            )
            supplied += len(ids)
        return out, supplied

    def usage(self, response: Any) -> Any:
        """The usage object of ``response``."""
        data = field(response, "usage")
        if data is None:
            raise ValueError(f"the {self.api} response carries no usage")
        return data

    def count_items(self, request: Mapping[str, Any]) -> int:
        """How many messages (or input items) ``request`` carries."""
        messages = request.get("messages")
        return len(messages) if isinstance(messages, list) else 0


class AnthropicDialect(Dialect):
    """``client.messages.create`` / ``.stream``: ``messages`` and a separate ``system``."""

    api: Api = "anthropic.messages"
    format: Format = "anthropic"
    separate_system = True

    def calls(self, response: Any) -> list[EngineCall]:
        return [
            EngineCall(
                id=str(field(block, "id")),
                name=str(field(block, "name")),
                arguments=field(block, "input") or {},
            )
            for block in field(response, "content") or []
            if field(block, "type") == "tool_use"
        ]

    def assistant(self, response: Any) -> list[Message]:
        data = plain(response)
        return [{"role": "assistant", "content": list(data.get("content") or [])}]

    def results(self, answers: Sequence[tuple[EngineCall, str]]) -> list[Message]:
        blocks = [
            {"type": "tool_result", "tool_use_id": call.id, "content": text}
            for call, text in answers
        ]
        return [{"role": "user", "content": blocks}]

    def supply(
        self, messages: list[Message], answers: Mapping[str, str]
    ) -> tuple[list[Message], int]:
        out = list(messages)
        supplied = 0
        for i, message in enumerate(out):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            ids = [
                str(b.get("id"))
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") in answers
            ]
            if not ids:
                continue
            ours = [
                {"type": "tool_result", "tool_use_id": call_id, "content": answers[call_id]}
                for call_id in ids
            ]
            supplied += len(ours)
            following = out[i + 1] if i + 1 < len(out) else None
            if following is None or following.get("role") != "user":
                out.insert(i + 1, {"role": "user", "content": ours})
                continue
            rest = following.get("content")
            if isinstance(rest, str):
                rest = [{"type": "text", "text": rest}]
            kept = [
                b
                for b in rest or []
                if not (
                    isinstance(b, Mapping)
                    and b.get("type") == "tool_result"
                    and b.get("tool_use_id") in answers
                )
            ]
            # tool_result blocks must open the user message.
            results = [b for b in kept if isinstance(b, Mapping) and b.get("type") == "tool_result"]
            others = [b for b in kept if b not in results]
            out[i + 1] = {**following, "content": [*ours, *results, *others]}
        return out, supplied


class ChatDialect(Dialect):
    """``client.chat.completions.create``: the system prompt is the first message."""

    api: Api = "openai.chat"
    format: Format = "openai"

    def tool_names(self, tools: Sequence[Any]) -> list[str]:
        names = []
        for tool in tools:
            function = field(tool, "function")
            names.append(str(None if function is None else field(function, "name")))
        return names

    def calls(self, response: Any) -> list[EngineCall]:
        found = []
        for call in field(self._message(response), "tool_calls") or []:
            function = field(call, "function")
            found.append(
                EngineCall(
                    id=str(field(call, "id")),
                    name=str(field(function, "name")),
                    arguments=field(function, "arguments") or "",
                )
            )
        return found

    def _message(self, response: Any) -> Any:
        """The first choice's message (the SDK's object or a dict)."""
        choices = field(response, "choices") or []
        if not choices:
            raise ValueError("the chat completion carries no choices")
        return field(choices[0], "message")

    def assistant(self, response: Any) -> list[Message]:
        message: Mapping[str, Any] = plain(self._message(response)) or {}
        kept: Message = {"role": "assistant", "content": message.get("content")}
        for key in ("tool_calls", "reasoning_content", "refusal"):
            if message.get(key):
                kept[key] = message[key]
        return [kept]

    def results(self, answers: Sequence[tuple[EngineCall, str]]) -> list[Message]:
        return [
            {"role": "tool", "tool_call_id": call.id, "content": text} for call, text in answers
        ]


class ResponsesDialect(Dialect):
    """``client.responses.create``: ``input`` items; ``instructions`` stay as they are."""

    api: Api = "openai.responses"
    format: Format = "openai"

    def __init__(self) -> None:
        self.items = ItemsConverter()

    def split(self, kwargs: Mapping[str, Any]) -> tuple[list[Any], Any]:
        value = kwargs.get("input")
        if isinstance(value, str):
            return [{"role": "user", "content": value}], None
        return list(value or []) if given(value) else [], None

    def stateful(self, kwargs: Mapping[str, Any]) -> bool:
        return given(kwargs.get("previous_response_id")) or given(kwargs.get("conversation"))

    def to_engine(self, host: Sequence[Any]) -> list[Message]:
        return self.items.to_chat(plain(item) for item in host)

    def join(
        self, kwargs: Mapping[str, Any], messages: list[Message], system: SystemPrompt | None
    ) -> dict[str, Any]:
        return {**kwargs, "input": self.items.to_items(messages)}

    def engine_tools(self, session: Session) -> list[dict[str, Any]]:
        return [
            {"type": "function", **schema["function"]} for schema in session.tool_schemas("openai")
        ]

    def prepare(self, session: Session, request: dict[str, Any]) -> tuple[dict[str, Any], int]:
        # The Responses API takes no cache_control (OpenAI caches prefixes by itself), so the
        # request goes out unmarked; preparing its chat form still records the local count that
        # the provider's usage calibrates, and gives the session's prompt_cache_key.
        chat = self.items.to_chat(plain(item) for item in request["input"])
        prepared = session.prepare({"model": request.get("model"), "messages": chat})
        routing: dict[str, Any] = {
            key: prepared[key]
            for key in ("prompt_cache_key", "prompt_cache_retention")
            if key in prepared and key not in request
        }
        return ({**request, **routing} if routing else request), 0

    def calls(self, response: Any) -> list[EngineCall]:
        output = plain(response).get("output") or []
        return [
            EngineCall(id=str(item["call_id"]), name=str(item["name"]), arguments=item["arguments"])
            for item in output
            if item_kind(item) == "function_call"
        ]

    def assistant(self, response: Any) -> list[Message]:
        return self.items.to_chat(plain(response).get("output") or [])

    def results(self, answers: Sequence[tuple[EngineCall, str]]) -> list[Message]:
        return self.items.to_chat(
            {"type": "function_call_output", "call_id": call.id, "output": text}
            for call, text in answers
        )

    def count_items(self, request: Mapping[str, Any]) -> int:
        items = request.get("input")
        return len(items) if isinstance(items, list) else 1
