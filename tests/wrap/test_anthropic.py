"""The wrapped anthropic client: create, create(stream=True) and stream(), sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import Message

import ctxengine
from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI
from tests.wrap.scenario import HOST_TOOL, Host, check_outcome, run_conversation

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _append_reply(history: list[Any], final: Any) -> None:
    history.append({"role": "assistant", "content": final.content})  # the SDK's blocks, as is


def _tool_calls(final: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"]


def _append_results(history: list[Any], results: list[tuple[str, str]]) -> None:
    blocks = [{"type": "tool_result", "tool_use_id": cid, "content": text} for cid, text in results]
    history.append({"role": "user", "content": blocks})


def _arguments(history: list[Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 300,
        "system": SYSTEM,
        "messages": history,
        "tools": [HOST_TOOL],
    }


def _host(send: Callable[[list[Any]], tuple[Any, Any]]) -> Host:
    return Host(_user, _append_reply, _tool_calls, _append_results, send)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _sync(api: FakeAPI, kernel: Kernel) -> Any:
    client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
    return ctxengine.wrap(client, kernel=kernel, session_id="anthropic")


def _async(api: FakeAPI, kernel: Kernel) -> Any:
    client = anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0)
    return ctxengine.wrap(client, kernel=kernel, session_id="anthropic-async")


def test_create(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _sync(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        message = wrapped.messages.create(**_arguments(history))
        assert type(message) is Message
        return message, message

    run_conversation(api, _host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)


def test_create_async(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], loop: asyncio.AbstractEventLoop
) -> None:
    wrapped = _async(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        message = loop.run_until_complete(wrapped.messages.create(**_arguments(history)))
        assert type(message) is Message
        return message, message

    run_conversation(api, _host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)


def test_stream_helper(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _sync(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        with wrapped.messages.stream(**_arguments(history)) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert isinstance(final, Message)
        assert text == "".join(b.text for b in final.content if b.type == "text")
        return stream, final

    run_conversation(api, _host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)
    assert all(record.stream for record in wrapped.records)


def test_stream_helper_async(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], loop: asyncio.AbstractEventLoop
) -> None:
    wrapped = _async(api, lcm_kernel())

    async def one(history: list[Any]) -> tuple[Any, Any]:
        async with wrapped.messages.stream(**_arguments(history)) as stream:
            texts = [text async for text in stream.text_stream]
            final = await stream.get_final_message()
        assert "".join(texts) == "".join(b.text for b in final.content if b.type == "text")
        return stream, final

    run_conversation(
        api, _host(lambda h: loop.run_until_complete(one(h))), wrapped.engine_tool_names
    )
    check_outcome(api, wrapped, markers=True)


def test_create_stream_events(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    """create(stream=True): the SDK's raw events of every round; the host rebuilds the reply."""
    wrapped = _sync(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        stream = wrapped.messages.create(**_arguments(history), stream=True)
        events = list(stream)
        starts = [e for e in events if e.type == "message_start"]
        assert starts and all(type(e).__module__.startswith("anthropic.") for e in events)
        # The host keeps only the last round's message (earlier rounds were the engine's).
        last = max(i for i, e in enumerate(events) if e.type == "message_start")
        blocks: list[Any] = []
        for event in events[last:]:
            if event.type == "content_block_start":
                blocks.append(event.content_block.to_dict())
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                blocks[event.index]["_json"] = blocks[event.index].get("_json", "") + (
                    event.delta.partial_json
                )
        for block in blocks:
            if "_json" in block:
                import json

                block["input"] = json.loads(block.pop("_json"))
        final = Message.model_validate(
            {**starts[-1].message.to_dict(), "content": blocks, "stop_reason": "end_turn"}
        )
        return stream, final

    run_conversation(api, _host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)
