"""FakeAPI streaming and Responses: the real SDKs read them as they read the real APIs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from ctxengine_fakeapi import FakeAPI
from ctxengine_fakeapi.responses import check_responses_request
from ctxengine_fakeapi.streams import DELTA_CHARS

TEXT = "A reply long enough to be cut into several deltas by the fake."
BLOCKS: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "First, think it over.", "signature": "sig-9"},
    {"type": "text", "text": TEXT},
    {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "src/app.py"}},
]


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def _anthropic(api: FakeAPI) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)


def _openai(api: FakeAPI) -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url=api.openai_base_url, max_retries=0)


def test_messages_stream_matches_the_unstreamed_reply(api: FakeAPI) -> None:
    client = _anthropic(api)
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
    }
    api.reply_blocks(BLOCKS)
    whole = client.messages.create(**request)
    api.reply_blocks(BLOCKS)
    with client.messages.stream(**request) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(deltas) == -(-len(TEXT) // DELTA_CHARS) and "".join(deltas) == TEXT
    streamed: list[Any] = list(final.content)
    unstreamed: list[Any] = list(whole.content)
    assert [b.type for b in streamed] == [b.type for b in unstreamed]
    assert streamed[1].text == unstreamed[1].text == TEXT
    assert streamed[2].input == unstreamed[2].input == {"path": "src/app.py"}
    assert streamed[0].signature == "sig-9"
    assert final.stop_reason == "tool_use"
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert api.requests[-1].body["stream"] is True


def test_chat_stream_sends_usage_only_when_asked(api: FakeAPI) -> None:
    client = _openai(api)
    request: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    api.reply_blocks(BLOCKS)
    plain = list(client.chat.completions.create(**request, stream=True))
    assert all(chunk.usage is None for chunk in plain)
    api.reply_blocks(BLOCKS)
    chunks = list(
        client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments = "".join(
        call.function.arguments or ""
        for c in chunks
        if c.choices
        for call in c.choices[0].delta.tool_calls or []
    )
    assert text == TEXT and json.loads(arguments) == {"path": "src/app.py"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_responses_create_and_stream(api: FakeAPI) -> None:
    client = _openai(api)
    api.reply_blocks(BLOCKS)
    response = client.responses.create(model="gpt-4o", input="hi", instructions="Be brief.")
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text == TEXT
    call: Any = response.output[2]
    assert call.call_id == "call_1" and json.loads(call.arguments) == {"path": "src/app.py"}
    assert response.usage is not None and response.usage.input_tokens > 0
    assert response.usage.output_tokens_details.reasoning_tokens > 0

    api.reply_blocks(BLOCKS)
    with client.responses.stream(model="gpt-4o", input=[{"role": "user", "content": "hi"}]) as s:
        kinds = [event.type for event in s]
        final = s.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert "response.function_call_arguments.delta" in kinds
    assert final.output_text == TEXT
    assert final.usage is not None and final.usage.total_tokens > 0


def test_async_clients_read_the_streams(api: FakeAPI) -> None:
    async def run() -> tuple[str, int]:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0)
        api.reply_text(TEXT)
        async with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        ) as stream:
            text = "".join([t async for t in stream.text_stream])
        oa = openai.AsyncOpenAI(api_key="k", base_url=api.openai_base_url, max_retries=0)
        api.reply_text(TEXT)
        events = [e async for e in await oa.responses.create(model="m", input="x", stream=True)]
        return text, len(events)

    text, count = asyncio.run(run())
    assert text == TEXT and count > 5


def test_responses_requests_are_checked(api: FakeAPI) -> None:
    client = _openai(api)
    with pytest.raises(openai.BadRequestError, match="No tool call found for function call"):
        client.responses.create(
            model="gpt-4o", input=[{"type": "function_call_output", "call_id": "x", "output": "y"}]
        )
    assert check_responses_request({"model": "m", "input": "hi"}) == []
    problems = check_responses_request(
        {
            "input": [
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "input_text",
                            "text": "next",
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                },
                {"type": "bogus"},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
        }
    )
    text = " | ".join(problems)
    assert "Missing required parameter: 'model'." in text
    assert "No tool output found for function call a" in text
    assert "Invalid value: 'bogus'" in text
    assert "tools[0].name" in text and "tools[0].function" in text
    assert "Unknown parameter: 'cache_control'." in text
    # With stored state, an output may answer a call made in an earlier response.
    stateful = {
        "model": "m",
        "previous_response_id": "r1",
        "input": [{"type": "function_call_output", "call_id": "x", "output": "y"}],
    }
    assert check_responses_request(stateful) == []
