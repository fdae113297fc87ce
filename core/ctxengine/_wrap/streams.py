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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from functools import partial
from itertools import chain
from operator import is_not
from types import TracebackType
from typing import Any

from ctxengine._messages.sdk_objects import field, is_mapping, scalar_dump
from ctxengine._wrap.dialects import plain

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
        """Take ``event`` in; returns it (to be handed to the host)."""
        # Runs on every event of every streamed request: the SDK's event objects are read by
        # attribute (one C call each) and only the parts each event contributes are dumped.
        read, kind = event, getattr(event, "type", None)
        if kind is None and is_mapping(event):  # a plain dict has no attributes: read its keys
            read = _Fields(event)
            kind = read.type
        if kind == "content_block_delta":  # the most frequent, one per token or so
            if self.message is not None:
                index = getattr(read, "index", None)
                self._delta(self.message["content"][index], index, getattr(read, "delta", None))
            return event
        if kind == "message_start":
            message = getattr(read, "message", None)
            self.message = {
                "role": "assistant",
                "content": [_block(block) for block in getattr(message, "content", None) or []],
                "usage": _usage(getattr(message, "usage", None)),
            }
            return event
        if self.message is None:
            return event
        if kind == "content_block_start":
            self.message["content"].append(_block(getattr(read, "content_block", None)))
        elif kind == "content_block_stop":
            index = getattr(read, "index", None)
            if index in self._json:
                text = self._json.pop(index)
                self.message["content"][index]["input"] = json.loads(text) if text.strip() else {}
        elif kind == "message_delta":
            delta = getattr(read, "delta", None)
            for key in ("stop_reason", "stop_sequence"):
                value = getattr(delta, key, None)
                if value is not None:
                    self.message[key] = value
            # message_delta usage is cumulative: its counts replace those of message_start.
            usage = _usage(getattr(read, "usage", None))
            self.message["usage"] = {**self.message.get("usage", {}), **usage}
        return event

    def _delta(self, block: dict[str, Any], index: Any, delta: Any) -> None:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            block["text"] = block.get("text", "") + (getattr(delta, "text", None) or "")
        elif kind == "input_json_delta":
            part = getattr(delta, "partial_json", None) or ""
            self._json[index] = self._json.get(index, "") + part
        elif kind == "thinking_delta":
            part = getattr(delta, "thinking", None) or ""
            block["thinking"] = block.get("thinking", "") + part
        elif kind == "signature_delta":
            block["signature"] = getattr(delta, "signature", None) or ""
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(plain(getattr(delta, "citation", None)))

    def final(self) -> dict[str, Any]:
        if self.message is None:
            raise ValueError("the Messages stream ended before message_start")
        return self.message


class _Fields:
    """A mapping read by attribute, the mappings inside it too (also in lists): an event that
    is a plain dict (one the SDK does not model) is read the way the collectors read the SDK's
    event objects."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):  # not a key of the data: hasattr() and copies ask for these
            raise AttributeError(key)
        return _as_fields(self._data.get(key))

    def to_dict(self, *, exclude_none: bool = True) -> Any:
        """What :func:`plain` reads of it: the mapping's data, as plain reads a mapping (which
        leaves ``None`` values out whatever ``exclude_none`` says)."""
        return plain(self._data)


def _as_fields(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _Fields(value)
    if isinstance(value, list):
        return [_as_fields(item) for item in value]
    return value


def _usage(usage: Any) -> dict[str, Any]:
    """``plain(usage)`` (``{}`` for none), read without the SDK's dump where it can be."""
    found = scalar_dump(usage)
    return found if found is not None else plain(usage) or {}


def _block(block: Any) -> dict[str, Any]:
    """A content block as a dict (a text block read directly: dumping is the costly part of
    collecting a stream whose blocks are text)."""
    if field(block, "type") == "text" and field(block, "citations") is None:
        return {"type": "text", "text": field(block, "text") or ""}
    return dict(plain(block))


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
        """Take ``event`` (a chunk) in; returns it, or :data:`HIDDEN` for the usage chunk the
        host is not to see."""
        # Runs on every chunk, one per token or so of the reply: the SDK's objects are read by
        # attribute (the delta's fields, not a dump of it), as the Anthropic collector does.
        chunk, choices = event, getattr(event, "choices", None)
        if choices is None and is_mapping(event):  # a plain dict has no attributes
            chunk = _Fields(event)
            choices = chunk.choices
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            if usage:
                self.usage = _usage(usage)
            if self.hide_usage and not choices:
                return HIDDEN
        for choice in choices or ():
            if (getattr(choice, "index", None) or 0) != 0:
                continue
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            self.content += getattr(delta, "content", None) or ""
            # Not a field of the SDK's delta (a provider's extra): read where the SDK keeps it.
            self.reasoning += field(delta, "reasoning_content") or ""
            for call in getattr(delta, "tool_calls", None) or ():
                slot = self.calls.setdefault(
                    getattr(call, "index", None) or 0,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call_id = getattr(call, "id", None)
                if call_id:
                    slot["id"] = call_id
                function = getattr(call, "function", None)
                if function is not None:
                    slot["function"]["name"] += getattr(function, "name", None) or ""
                    slot["function"]["arguments"] += getattr(function, "arguments", None) or ""
            finish_reason = getattr(choice, "finish_reason", None)
            if finish_reason:
                self.finish_reason = finish_reason
        return event

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
        if getattr(event, "type", None) in self._FINAL:
            self.response = event.response
        return event

    def final(self) -> Any:
        if self.response is None:
            raise ValueError("the Responses stream ended without response.completed")
        return self.response


Collector = AnthropicCollector | ChatCollector | ResponsesCollector


# -- one round's stream ---------------------------------------------------------------------------


_handed_on = partial(is_not, HIDDEN)
"""Whether the host is handed what a collector's ``feed`` returned (in C: it runs per event)."""


class _CollectingRound:
    """What both raw rounds share: the SDK's stream and a collector (fed every event)."""

    def __init__(self, stream: Any, collector: Collector) -> None:
        self.stream = stream
        self.collector = collector

    @property
    def response(self) -> Any:
        return self.stream.response

    def final(self) -> Any:
        return self.collector.final()


class RawRound(_CollectingRound):
    """One round of a ``create(stream=True)`` call: the SDK's stream and a collector."""

    def events(self) -> Iterator[Any]:
        # map and filter run in C: no generator of the wrapper's own between the SDK's stream
        # and the host's loop (a resumption per event); both are lazy, as the stream is.
        return filter(_handed_on, map(self.collector.feed, self.stream))

    def close(self) -> None:
        self.stream.close()


class AsyncRawRound(_CollectingRound):
    """:class:`RawRound` for async clients."""

    async def events(self) -> AsyncIterator[Any]:
        feed = self.collector.feed  # read once: this runs per event
        async for event in self.stream:
            if feed(event) is not HIDDEN:
                yield event

    async def close(self) -> None:
        await self.stream.close()


class HelperRound:
    """One round of Anthropic's ``messages.stream()``: the SDK's manager and its stream."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.stream = manager.__enter__()

    @property
    def response(self) -> Any:
        return self.stream.response

    def events(self) -> Iterator[Any]:
        yield from self.stream

    def final(self) -> Any:
        return self.stream.get_final_message()

    def close(self) -> None:
        self.manager.__exit__(None, None, None)


class AsyncHelperRound:
    """:class:`HelperRound` for async clients (open it with :meth:`open`)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.stream: Any = None

    async def open(self) -> AsyncHelperRound:
        self.stream = await self.manager.__aenter__()
        return self

    @property
    def response(self) -> Any:
        return self.stream.response

    async def events(self) -> AsyncIterator[Any]:
        async for event in self.stream:
            yield event

    def final(self) -> Any:
        return self.stream.current_message_snapshot

    async def close(self) -> None:
        await self.manager.__aexit__(None, None, None)


# -- what the host iterates -----------------------------------------------------------------------


class ChainedStream:
    """The stream a wrapped ``create(stream=True)`` returns: every event of every round.

    Iterate it like the SDK's stream; ``response`` is the current round's HTTP response and
    ``close()`` releases it. The first round is opened when the call is made, so request errors
    are raised there, as the SDK does.
    """

    def __init__(self, make_events: Callable[[Callable[[Any], None]], Iterator[Any]]) -> None:
        self.current: Any = None
        self._events = make_events(self.opened)
        self._first: Any = next(self._events, _END)

    def opened(self, source: Any) -> None:
        """Called by the driver with each round's source."""
        self.current = source

    @property
    def response(self) -> Any:
        return self.current.response if self.current is not None else None

    def __iter__(self) -> Iterator[Any]:
        # The first event (taken when the call was made), then the rest, chained in C: no
        # generator of the wrapper's own is resumed per event. The first is handed out only
        # when the chain is read, so an iterator made and dropped, or next() called before
        # reading it, loses nothing and keeps the order.
        return chain(self._pending(), self._events)

    def _pending(self) -> Iterator[Any]:
        if self._first is not _END:
            first, self._first = self._first, _END
            yield first

    def __next__(self) -> Any:
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


class AsyncChainedStream:
    """:class:`ChainedStream` for async clients (await :meth:`start` before handing it out)."""

    def __init__(self, make_events: Callable[[Callable[[Any], None]], AsyncIterator[Any]]) -> None:
        self.current: Any = None
        self._events = make_events(self.opened)
        self._first: Any = _END

    async def start(self) -> AsyncChainedStream:
        try:
            self._first = await self._events.__anext__()
        except StopAsyncIteration:
            self._first = _END
        return self

    def opened(self, source: Any) -> None:
        self.current = source

    @property
    def response(self) -> Any:
        return self.current.response if self.current is not None else None

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

    @property
    def current_message_snapshot(self) -> Any:
        return self.current.stream.current_message_snapshot


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

    @property
    def current_message_snapshot(self) -> Any:
        return self.current.stream.current_message_snapshot


class StreamManager:
    """What a wrapped ``messages.stream(...)`` returns: enter it to start the call."""

    def __init__(self, start: Callable[[], MessageStreamChain]) -> None:
        self._start = start
        self._stream: MessageStreamChain | None = None

    def __enter__(self) -> MessageStreamChain:
        self._stream = self._start()
        return self._stream

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stream is not None:
            self._stream.close()


class AsyncStreamManager:
    """:class:`StreamManager` for async clients (``async with``)."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self._stream: AsyncMessageStreamChain | None = None

    async def __aenter__(self) -> AsyncMessageStreamChain:
        self._stream = await self._start()
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stream is not None:
            await self._stream.close()
