"""The wrapped openai client: chat completions and Responses, sync, async and streamed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

import ctxengine
from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI
from tests.wrap.scenario import HOST_TOOL, Host, check_outcome, run_conversation

MODEL = "claude-sonnet-4-6"  # a Claude model behind an OpenAI-compatible route takes markers
SYSTEM = "You are a careful coding agent."
CHAT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": HOST_TOOL["name"],
        "description": HOST_TOOL["description"],
        "parameters": HOST_TOOL["input_schema"],
    },
}
RESPONSES_TOOL = {"type": "function", **CHAT_TOOL["function"]}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _wrap(api: FakeAPI, kernel: Kernel, *, is_async: bool = False) -> Any:
    kind = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = kind(api_key="k", base_url=api.openai_base_url, max_retries=0)
    return ctxengine.wrap(client, kernel=kernel, session_id="openai")


# -- chat completions --------------------------------------------------------------------------


def _chat_host(send: Callable[[list[Any]], tuple[Any, Any]]) -> Host:
    def append_reply(history: list[Any], final: Any) -> None:
        history.append(final)  # the SDK's ChatCompletionMessage (or the host's own dict)

    def tool_calls(final: Any) -> list[tuple[str, str, dict[str, Any]]]:
        calls = final.get("tool_calls") if isinstance(final, dict) else final.tool_calls
        out = []
        for raw in calls or []:
            call = raw if isinstance(raw, dict) else raw.to_dict()
            function = call["function"]
            out.append((call["id"], function["name"], json.loads(function["arguments"])))
        return out

    def append_results(history: list[Any], results: list[tuple[str, str]]) -> None:
        history.extend({"role": "tool", "tool_call_id": cid, "content": t} for cid, t in results)

    return Host(_user, append_reply, tool_calls, append_results, send)


def _chat_arguments(history: list[Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": SYSTEM}, *history],
        "tools": [CHAT_TOOL],
    }


_SYSTEM_MESSAGE = {"role": "system", "content": SYSTEM}


def _chat_args(history: list[Any]) -> dict[str, Any]:
    # The same system dict every call, as a host keeps it; the list itself is new each time.
    return {**_chat_arguments(history), "messages": [_SYSTEM_MESSAGE, *history]}


def test_chat_create(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _wrap(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        completion = wrapped.chat.completions.create(**_chat_args(history))
        assert type(completion) is ChatCompletion
        return completion, completion.choices[0].message

    run_conversation(api, _chat_host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)


def test_chat_create_async(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], loop: asyncio.AbstractEventLoop
) -> None:
    wrapped = _wrap(api, lcm_kernel(), is_async=True)

    def send(history: list[Any]) -> tuple[Any, Any]:
        completion = loop.run_until_complete(wrapped.chat.completions.create(**_chat_args(history)))
        assert type(completion) is ChatCompletion
        return completion, completion.choices[0].message

    run_conversation(api, _chat_host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)


def _message_from_chunks(chunks: list[Any]) -> dict[str, Any]:
    """What a host builds from the chunks of the last round (a new id starts a round)."""
    last = [c for c in chunks if c.id == chunks[-1].id]
    content = "".join(c.choices[0].delta.content or "" for c in last if c.choices)
    calls: dict[int, dict[str, Any]] = {}
    for chunk in last:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = calls.setdefault(
                call.index,
                {"id": call.id, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            slot["function"]["name"] += call.function.name or ""
            slot["function"]["arguments"] += call.function.arguments or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def test_chat_stream(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _wrap(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        stream = wrapped.chat.completions.create(**_chat_args(history), stream=True)
        chunks = list(stream)
        assert all(type(c) is ChatCompletionChunk for c in chunks)
        # The host did not ask for usage, so the usage chunk the wrapper asked for is not shown.
        assert all(c.choices for c in chunks)
        return stream, _message_from_chunks(chunks)

    run_conversation(api, _chat_host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=True)
    assert all(r.body["stream_options"] == {"include_usage": True} for r in api.requests)


def test_chat_stream_async_keeps_the_usage_chunk_the_host_asked_for(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], loop: asyncio.AbstractEventLoop
) -> None:
    wrapped = _wrap(api, lcm_kernel(), is_async=True)

    async def one(history: list[Any]) -> tuple[Any, Any]:
        stream = await wrapped.chat.completions.create(
            **_chat_args(history), stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
        assert chunks[-1].usage is not None and not chunks[-1].choices
        return stream, _message_from_chunks(chunks)

    run_conversation(
        api, _chat_host(lambda h: loop.run_until_complete(one(h))), wrapped.engine_tool_names
    )
    check_outcome(api, wrapped, markers=True)


# -- Responses ---------------------------------------------------------------------------------


def _responses_host(send: Callable[[list[Any]], tuple[Any, Any]]) -> Host:
    def append_reply(history: list[Any], final: Any) -> None:
        history.extend(final.output)  # the SDK's output items, as is

    def tool_calls(final: Any) -> list[tuple[str, str, dict[str, Any]]]:
        return [
            (item.call_id, item.name, json.loads(item.arguments))
            for item in final.output
            if item.type == "function_call"
        ]

    def append_results(history: list[Any], results: list[tuple[str, str]]) -> None:
        history.extend(
            {"type": "function_call_output", "call_id": cid, "output": text}
            for cid, text in results
        )

    return Host(_user, append_reply, tool_calls, append_results, send)


def _responses_args(history: list[Any]) -> dict[str, Any]:
    return {"model": MODEL, "instructions": SYSTEM, "input": history, "tools": [RESPONSES_TOOL]}


def test_responses_create(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _wrap(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        response = wrapped.responses.create(**_responses_args(history))
        assert type(response) is Response
        return response, response

    run_conversation(api, _responses_host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=False)


def test_responses_create_async(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], loop: asyncio.AbstractEventLoop
) -> None:
    wrapped = _wrap(api, lcm_kernel(), is_async=True)

    def send(history: list[Any]) -> tuple[Any, Any]:
        response = loop.run_until_complete(wrapped.responses.create(**_responses_args(history)))
        assert type(response) is Response
        return response, response

    run_conversation(api, _responses_host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=False)


def test_responses_stream(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _wrap(api, lcm_kernel())

    def send(history: list[Any]) -> tuple[Any, Any]:
        stream = wrapped.responses.create(**_responses_args(history), stream=True)
        events = list(stream)
        done = [e for e in events if e.type == "response.completed"]
        assert events[-1].type == "response.completed"
        return stream, done[-1].response

    run_conversation(api, _responses_host(send), wrapped.engine_tool_names)
    check_outcome(api, wrapped, markers=False)


def test_responses_carry_the_sessions_prompt_cache_key(api: FakeAPI) -> None:
    from ctxengine._kernel.cache_settings import session_cache_key

    kernel = ctxengine.load({"model": {"name": "gpt-4.1"}}, env={})
    wrapped = _wrap(api, kernel)
    wrapped.responses.create(model="gpt-4.1", input=[_user("hello")])
    assert api.requests[-1].body["prompt_cache_key"] == session_cache_key("openai")
    wrapped.chat.completions.create(model="gpt-4.1", messages=[_user("hello")])
    assert api.requests[-1].body["prompt_cache_key"] == session_cache_key("openai")
