"""The stream collectors rebuild what the wrapper reads of a response from the SDK's own event
objects (or the same events as plain dicts): every block kind, deltas split over events, fields
the SDK's models do not declare, and the final usage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from anthropic.types import RawMessageStreamEvent
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from ctxengine._wrap.streams import AnthropicCollector, AsyncRawRound, ChatCollector, RawRound


def _message_start(usage: dict[str, Any]) -> dict[str, Any]:
    """The message of a ``message_start`` event, with ``usage``."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "usage": usage,
    }


def test_the_anthropic_collector_builds_every_block_from_the_sdk_events() -> None:
    start = _message_start({"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1})
    raw: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Let me "},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "look."},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lcm_grep", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"pat'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'tern": "x"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42},
        },
        {"type": "message_stop"},
    ]
    collector = AnthropicCollector()
    for event in TypeAdapter(list[RawMessageStreamEvent]).validate_python(raw):
        collector.feed(event)
    final = collector.final()
    # Events as plain dicts (one the SDK does not model) are read the same way.
    from_dicts = AnthropicCollector()
    for data in raw:
        from_dicts.feed(data)
    assert from_dicts.final() == final
    assert final["role"] == "assistant" and final["stop_reason"] == "tool_use"
    assert final["content"] == [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "t1", "name": "lcm_grep", "input": {"pattern": "x"}},
    ]
    # message_delta's usage is cumulative: its counts replace those of message_start.
    assert final["usage"] == {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 42}


def test_the_chat_collector_joins_deltas_split_over_the_sdk_chunks() -> None:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "reasoning_content": "thinking "},
        {"reasoning_content": "hard", "content": "On it"},
        {
            "tool_calls": [
                {"index": 0, "id": "call_1", "function": {"name": "lcm_", "arguments": ""}}
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"name": "grep", "arguments": '{"pattern":'}}]},
        {
            "tool_calls": [
                {"index": 1, "id": "call_2", "function": {"name": "read", "arguments": "{}"}}
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]},
    ]
    chunks = [
        ChatCompletionChunk.model_validate({**head, "choices": [{"index": 0, "delta": delta}]})
        for delta in deltas
    ]
    chunks.append(
        ChatCompletionChunk.model_validate(
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        )
    )
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    chunks.append(ChatCompletionChunk.model_validate({**head, "choices": [], "usage": usage}))
    collector = ChatCollector()
    for chunk in chunks:
        collector.feed(chunk)
    final = collector.final()
    from_dicts = ChatCollector()
    for chunk in chunks:
        from_dicts.feed(chunk.model_dump())
    assert from_dicts.final() == final
    assert final["usage"] == usage
    assert final["choices"][0]["finish_reason"] == "tool_calls"
    assert final["choices"][0]["message"] == {
        "role": "assistant",
        "content": "On it",
        "reasoning_content": "thinking hard",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lcm_grep", "arguments": '{"pattern": "x"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": "{}"}},
        ],
    }


def test_the_stream_usage_is_the_dump_of_both_usage_events() -> None:
    start = _message_start(
        {
            "input_tokens": 10,
            "cache_creation": {"ephemeral_5m_input_tokens": 4, "ephemeral_1h_input_tokens": 0},
            "cache_creation_input_tokens": 4,
            "output_tokens": 1,
            "service_tier": "standard",
        }
    )
    delta_usage = {"output_tokens": 42, "input_tokens": 10, "server_tool_use": None, "odd": [1]}
    raw: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage},
        {"type": "message_stop"},
    ]
    events = TypeAdapter(list[RawMessageStreamEvent]).validate_python(raw)
    collector = AnthropicCollector()
    for event in events:
        assert collector.feed(event) is event  # the host is handed the very event
    expected = {**events[0].message.usage.to_dict(exclude_none=True)}  # type: ignore[union-attr]
    expected.update(events[1].usage.to_dict(exclude_none=True))  # type: ignore[union-attr]
    assert collector.final()["usage"] == expected
    assert expected["odd"] == [1] and expected["cache_creation"]["ephemeral_5m_input_tokens"] == 4


class _Listed:
    """An SDK stream over given events."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        return iter(self.events)

    async def __aiter__(self) -> AsyncIterator[Any]:
        for event in self.events:
            yield event

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def test_a_raw_round_hands_on_every_event_but_the_usage_chunk_it_keeps() -> None:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    chunks = [
        ChatCompletionChunk.model_validate(
            {**head, "choices": [{"index": 0, "delta": {"content": "hi"}}]}
        ),
        ChatCompletionChunk.model_validate(
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        ),
        ChatCompletionChunk.model_validate({**head, "choices": [], "usage": usage}),
    ]
    for hide in (False, True):
        sync = RawRound(_Listed(chunks), ChatCollector(hide_usage=hide))
        seen = list(sync.events())
        assert seen == (chunks[:2] if hide else chunks)
        assert all(a is b for a, b in zip(seen, chunks, strict=False))
        assert sync.final()["usage"] == usage  # collected whether shown or not

        async def collect(round_: AsyncRawRound) -> list[Any]:
            return [event async for event in round_.events()]

        async_round = AsyncRawRound(_Listed(chunks), ChatCollector(hide_usage=hide))
        assert asyncio.run(collect(async_round)) == seen
        assert async_round.final() == sync.final()


def test_the_first_event_is_handed_out_once_and_in_order_however_the_stream_is_read() -> None:
    from ctxengine._wrap.streams import ChainedStream

    def make(opened: Any) -> Any:
        return iter(["first", "second", "third"])

    dropped = ChainedStream(make)
    iter(dropped)  # made and thrown away unread: nothing is lost
    assert list(dropped) == ["first", "second", "third"]
    mixed = ChainedStream(make)
    events = iter(mixed)
    assert next(mixed) == "first"
    assert list(events) == ["second", "third"]
    empty = ChainedStream(lambda opened: iter([]))
    assert list(empty) == []
