"""Streamed calls: one round's stream per API, and the stream objects the host iterates.

A streamed call may take several rounds (the model used an engine tool, the wrapper answered
it and asked again). The host gets one stream that yields every event of every round, exactly
as the SDK produced them, so streaming keeps streaming; the usage of each round is recorded from
its final events. The round sources collect each round's whole response from its events:

- Anthropic raw events (``messages.create(stream=True)``): ``message_start`` opens the message,
  ``content_block_*`` events build its blocks (text, tool input JSON, thinking and signature,
  citations), ``message_delta`` sets the stop reason and the final, cumulative usage;
- Anthropic ``messages.stream()``: the SDK's own ``get_final_message()``;
- chat completion chunks: content, reasoning and tool-call deltas by index, and the usage chunk
  (``stream_options.include_usage`` is added when the host did not ask for it, and that chunk is
  then not passed on, so the host sees the stream it asked for);
- Responses events: the response carried by ``response.completed`` (or ``.incomplete`` /
  ``.failed``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ctxengine._messages.sdk_objects import field, plain

_END = object()
HIDDEN = object()
"""What a collector's ``feed`` returns for an event the host is not handed."""


# -- collecting a round's response from its events ------------------------------------------------


class AnthropicCollector:
    """Builds, from raw Messages stream events, the parts of the Message the wrapper reads (as
    a dict): ``role``, ``content``, ``stop_reason``, ``stop_sequence`` and ``usage``. The rest
    (id, model) is not collected: the host has it in the events it iterates."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self._json: dict[int, str] = {}

    def feed(self, event: Any) -> Any:
        """Take ``event`` (the SDK's event object or a plain dict) in; returns it (to be handed
        to the host)."""
        kind = field(event, "type")
        if kind == "message_start":
            message = field(event, "message")
            self.message = {
                "role": "assistant",
                "content": [dict(plain(block)) for block in field(message, "content") or []],
                "usage": plain(field(message, "usage")) or {},
            }
        elif self.message is not None:
            self._take(kind, event, self.message)
        return event

    def _take(self, kind: Any, event: Any, message: dict[str, Any]) -> None:
        """What an event after ``message_start`` adds to ``message``."""
        if kind == "content_block_delta":
            index = field(event, "index")
            self._delta(message["content"][index], index, field(event, "delta"))
            return
        if kind == "content_block_start":
            message["content"].append(dict(plain(field(event, "content_block"))))
            return
        if kind == "content_block_stop":
            index = field(event, "index")
            text = self._json.pop(index, None)
            if text is not None:
                message["content"][index]["input"] = json.loads(text) if text.strip() else {}
            return
        if kind == "message_delta":
            delta = field(event, "delta")
            for key in ("stop_reason", "stop_sequence"):
                value = field(delta, key)
                if value is not None:
                    message[key] = value
            # message_delta usage is cumulative: its counts replace those of message_start.
            message["usage"] = {**message.get("usage", {}), **(plain(field(event, "usage")) or {})}

    def _delta(self, block: dict[str, Any], index: Any, delta: Any) -> None:
        kind = field(delta, "type")
        appended = _APPENDED.get(kind)
        if appended is not None:  # text and thinking grow block by block
            block[appended] = block.get(appended, "") + (field(delta, appended) or "")
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + (field(delta, "partial_json") or "")
        elif kind == "signature_delta":
            block["signature"] = field(delta, "signature") or ""
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(plain(field(delta, "citation")))

    def final(self) -> dict[str, Any]:
        if self.message is None:
            raise ValueError("the Messages stream ended before message_start")
        return self.message


_APPENDED = {"text_delta": "text", "thinking_delta": "thinking"}
"""The deltas whose field of that name is appended to the block's field of the same name."""


class ChatCollector:
    """Builds the whole chat completion (as a dict) from its chunks."""

    def __init__(self, *, hide_usage: bool = False) -> None:
        self.hide_usage = hide_usage
        """Whether the usage chunk is the wrapper's own (the host did not ask for it): then
        :meth:`feed` returns :data:`HIDDEN` for it."""
        self.content = ""
        self.reasoning = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, event: Any) -> Any:
        """Take ``event`` (a chunk: the SDK's object or a plain dict) in; returns it, or
        :data:`HIDDEN` for the usage chunk the host is not to see."""
        choices = field(event, "choices")
        usage = field(event, "usage")
        if usage is not None:
            if usage:
                self.usage = plain(usage) or {}
            if self.hide_usage and not choices:
                return HIDDEN
        for choice in choices or ():
            if (field(choice, "index") or 0) == 0:
                self._choice(choice)
        return event

    def _choice(self, choice: Any) -> None:
        delta = field(choice, "delta")
        if delta is None:
            return
        self.content += field(delta, "content") or ""
        self.reasoning += field(delta, "reasoning_content") or ""  # a provider's extra field
        for call in field(delta, "tool_calls") or ():
            slot = self.calls.setdefault(
                field(call, "index") or 0,
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call_id = field(call, "id")
            if call_id:
                slot["id"] = call_id
            function = field(call, "function")
            if function is not None:
                slot["function"]["name"] += field(function, "name") or ""
                slot["function"]["arguments"] += field(function, "arguments") or ""
        finish_reason = field(choice, "finish_reason")
        if finish_reason:
            self.finish_reason = finish_reason

    def final(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return {"choices": [choice], "usage": self.usage}


class ResponsesCollector:
    """Keeps the response a Responses stream ends with."""

    _FINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self) -> None:
        self.response: Any = None

    def feed(self, event: Any) -> Any:
        """Take ``event`` in; returns it (to be handed to the host)."""
        if field(event, "type") in self._FINAL:
            self.response = field(event, "response")
        return event

    def final(self) -> Any:
        if self.response is None:
            raise ValueError("the Responses stream ended without response.completed")
        return self.response


Collector = AnthropicCollector | ChatCollector | ResponsesCollector


# -- one round's stream ---------------------------------------------------------------------------


class _Round:
    """What every round shares: ``stream``, the SDK's stream, and its HTTP response."""

    stream: Any

    @property
    def response(self) -> Any:
        return self.stream.response


class _CollectingRound(_Round):
    """What both raw rounds share: the SDK's stream and a collector (fed every event)."""

    def __init__(self, stream: Any, collector: Collector) -> None:
        self.stream = stream
        self.collector = collector

    def final(self) -> Any:
        return self.collector.final()


class RawRound(_CollectingRound):
    """One round of a ``create(stream=True)`` call: the SDK's stream and a collector."""

    def events(self) -> Iterator[Any]:
        for event in self.stream:
            if self.collector.feed(event) is not HIDDEN:
                yield event

    def close(self) -> None:
        self.stream.close()


class AsyncRawRound(_CollectingRound):
    """:class:`RawRound` for async clients."""

    async def events(self) -> AsyncIterator[Any]:
        async for event in self.stream:
            if self.collector.feed(event) is not HIDDEN:
                yield event

    async def close(self) -> None:
        await self.stream.close()


class HelperRound(_Round):
    """One round of Anthropic's ``messages.stream()``: the SDK's manager and its stream."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.stream = manager.__enter__()

    def events(self) -> Iterator[Any]:
        return iter(self.stream)

    def final(self) -> Any:
        return self.stream.get_final_message()

    def close(self) -> None:
        self.manager.__exit__(None, None, None)


class AsyncHelperRound(_Round):
    """:class:`HelperRound` for async clients (open it with :meth:`open`)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.stream = None

    async def open(self) -> AsyncHelperRound:
        self.stream = await self.manager.__aenter__()
        return self

    def events(self) -> AsyncIterator[Any]:
        return aiter(self.stream)

    def final(self) -> Any:
        return self.stream.current_message_snapshot

    async def close(self) -> None:
        await self.manager.__aexit__(None, None, None)


# -- what the host iterates -----------------------------------------------------------------------


class _Chain:
    """What every chained stream shares: the current round's source, set by the driver."""

    current: Any = None

    def opened(self, source: Any) -> None:
        """Called by the driver with each round's source."""
        self.current = source

    @property
    def response(self) -> Any:
        """The current round's HTTP response."""
        return self.current.response if self.current is not None else None

    @property
    def current_message_snapshot(self) -> Any:
        """The SDK's message so far (``messages.stream()`` rounds)."""
        return self.current.stream.current_message_snapshot


class ChainedStream(_Chain):
    """The stream a wrapped ``create(stream=True)`` returns: every event of every round.

    Iterate it like the SDK's stream; ``response`` is the current round's HTTP response and
    ``close()`` releases it. The first round is opened when the call is made, so request errors
    are raised there, as the SDK does.
    """

    def __init__(self, make_events: Callable[[Callable[[Any], None]], Iterator[Any]]) -> None:
        self._events = make_events(self.opened)
        self._first: Any = next(self._events, _END)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        # The first event was taken when the call was made: it is handed out first, once.
        if self._first is not _END:
            first, self._first = self._first, _END
            return first
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ChainedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChainedStream(_Chain):
    """:class:`ChainedStream` for async clients (await :meth:`start` before handing it out)."""

    def __init__(self, make_events: Callable[[Callable[[Any], None]], AsyncIterator[Any]]) -> None:
        self._events = make_events(self.opened)
        self._first: Any = _END

    async def start(self) -> AsyncChainedStream:
        try:
            self._first = await self._events.__anext__()
        except StopAsyncIteration:
            self._first = _END
        return self

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        if self._first is not _END:
            first, self._first = self._first, _END
            return first
        return await self._events.__anext__()

    async def close(self) -> None:
        close = getattr(self._events, "aclose", None)
        if callable(close):
            await close()

    async def __aenter__(self) -> AsyncChainedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _text_of(event: Any) -> str | None:
    if getattr(event, "type", None) == "content_block_delta":
        delta = event.delta
        if getattr(delta, "type", None) == "text_delta":
            return str(delta.text)
    return None


class MessageStreamChain(ChainedStream):
    """What ``with wrapped.messages.stream(...) as stream`` gives: the SDK's ``MessageStream``
    interface over every round (``text_stream``, ``get_final_message()``, ``get_final_text()``,
    ``until_done()``, ``current_message_snapshot``); the final message is the last round's."""

    def __init__(self, make_events: Callable[[Callable[[Any], None]], Iterator[Any]]) -> None:
        super().__init__(make_events)
        self.text_stream: Iterator[str] = self._texts()

    def _texts(self) -> Iterator[str]:
        for event in self:
            text = _text_of(event)
            if text is not None:
                yield text

    def until_done(self) -> None:
        for _ in self:
            pass

    def get_final_message(self) -> Any:
        self.until_done()
        return self.current.stream.get_final_message()

    def get_final_text(self) -> str:
        self.until_done()
        return str(self.current.stream.get_final_text())


class AsyncMessageStreamChain(AsyncChainedStream):
    """:class:`MessageStreamChain` for async clients."""

    def __init__(self, make_events: Callable[[Callable[[Any], None]], AsyncIterator[Any]]) -> None:
        super().__init__(make_events)
        self.text_stream: AsyncIterator[str] = self._texts()

    async def _texts(self) -> AsyncIterator[str]:
        async for event in self:
            text = _text_of(event)
            if text is not None:
                yield text

    async def until_done(self) -> None:
        async for _ in self:
            pass

    async def get_final_message(self) -> Any:
        await self.until_done()
        return await self.current.stream.get_final_message()

    async def get_final_text(self) -> str:
        await self.until_done()
        return str(await self.current.stream.get_final_text())


class StreamManager:
    """What a wrapped ``messages.stream(...)`` returns: enter it (``with``, or ``async with`` for
    an async client, whose ``start`` is a coroutine function) to start the call."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self._stream: Any = None

    def __enter__(self) -> MessageStreamChain:
        self._stream = self._start()
        return self._stream  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        if self._stream is not None:
            self._stream.close()

    async def __aenter__(self) -> AsyncMessageStreamChain:
        self._stream = await self._start()
        return self._stream  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: object) -> None:
        if self._stream is not None:
            await self._stream.close()
