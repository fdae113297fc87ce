"""The stream collectors rebuild what the wrapper reads of a response from the SDK's own event
objects (or the same events as plain dicts): every block kind, deltas split over events, fields
the SDK's models do not declare, and the final usage."""

from __future__ import annotations

from typing import Any

from anthropic.types import RawMessageStreamEvent
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from ctxengine._wrap.streams import AnthropicCollector, ChatCollector


def test_the_anthropic_collector_builds_every_block_from_the_sdk_events() -> None:
    start: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1},
    }
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
