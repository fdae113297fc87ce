"""The wrapper's contract beyond the happy path: modes, errors, resets, server-side state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

import ctxengine
from ctxengine import Kernel
from ctxengine._messages.responses_items import ItemsConverter
from ctxengine._wrap import CallRecord
from ctxengine_fakeapi import FakeAPI
from tests.wrap.scenario import MODEL
from tests.wrap.scenario import anthropic_wrapped as _anthropic
from tests.wrap.scenario import create as _create


def test_wrap_rejects_what_it_cannot_wrap(lcm_kernel: Callable[..., Kernel]) -> None:
    with pytest.raises(TypeError, match="takes an anthropic client"):
        ctxengine.wrap(object())
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9")
    kernel = lcm_kernel()
    wrapped = ctxengine.wrap(client, kernel=kernel)
    with pytest.raises(TypeError, match="already wrapped"):
        ctxengine.wrap(wrapped, kernel=kernel)
    with pytest.raises(ValueError, match="tools must be one of answer, return, off"):
        ctxengine.wrap(client, kernel=kernel, tools="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tool_rounds must be at least 1"):
        ctxengine.wrap(client, kernel=kernel, max_tool_rounds=0)
    with pytest.raises(ValueError, match="either session, or kernel"):
        ctxengine.wrap(client, kernel=kernel, session=kernel.session("x"))
    with pytest.raises(NotImplementedError, match="tool_runner"):
        wrapped.beta.messages.tool_runner(model=MODEL, max_tokens=1, messages=[], tools=[])
    oa = ctxengine.wrap(openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9"), kernel=kernel)
    with pytest.raises(NotImplementedError, match=r"responses.stream .*create\(stream=True\)"):
        oa.responses.stream(model=MODEL, input="hi")
    assert oa.models is oa.unwrapped.models  # everything else is the SDK's own


def test_return_mode_hands_engine_calls_back(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel(), tools="return")
    call = {"type": "tool_use", "id": "c1", "name": "lcm_grep", "input": {"pattern": "x"}}
    api.reply_blocks([call])
    messages: list[Any] = [{"role": "user", "content": "find x"}]
    reply = _create(wrapped, messages)
    assert [b.name for b in reply.content] == ["lcm_grep"]
    record = wrapped.last_record
    assert record.handed_back == (("lcm_grep", "c1"),) and len(record.rounds) == 1
    assert "lcm_grep" in record.tools_added
    # The host runs it itself, as in the explicit loop.
    result = wrapped.session.call_tool("lcm_grep", {"pattern": "x"})
    messages += [
        {"role": "assistant", "content": reply.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": result}],
        },
    ]
    _create(wrapped, messages)
    assert wrapped.last_record.results_supplied == 0


def test_off_mode_offers_no_tools(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    wrapped = _anthropic(api, lcm_kernel(), tools="off")
    _create(wrapped, [{"role": "user", "content": "hi"}])
    assert "tools" not in api.requests[-1].body
    assert wrapped.last_record.tools_added == ()


def test_a_host_tool_named_like_an_engine_tool_is_an_error(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    clash = {"name": "lcm_grep", "description": "mine", "input_schema": {"type": "object"}}
    with pytest.raises(ValueError, match=r"already hold a tool named 'lcm_grep'.*tools='off'"):
        _create(wrapped, [{"role": "user", "content": "hi"}], tools=[clash])
    # The engine's own schema, passed by a host migrating from the explicit loop, is accepted.
    own = wrapped.session.tool_schemas("anthropic")
    _create(wrapped, [{"role": "user", "content": "hi"}], tools=own)
    names = [t["name"] for t in api.requests[-1].body["tools"]]
    assert sorted(names) == sorted(t["name"] for t in own)


def test_the_host_request_is_kept_apart_from_what_ctxengine_adds(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    messages = [{"role": "user", "content": "hi"}]
    before = json.dumps(messages)
    _create(
        wrapped, messages, stop_sequences=["END"], metadata={"user_id": "u1"}, system="Be brief."
    )
    body = api.requests[-1].body
    assert body["stop_sequences"] == ["END"] and body["metadata"] == {"user_id": "u1"}
    assert json.dumps(messages) == before  # the host's objects are never changed
    assert body["system"][0]["text"] == "Be brief."


def test_a_diverging_history_drops_the_view(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    first = [{"role": "user", "content": "one"}]
    reply = _create(wrapped, first)
    second = [
        *first,
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "two"},
    ]
    _create(wrapped, second)
    assert not wrapped.last_record.history_reset
    _create(wrapped, [{"role": "user", "content": "a new conversation"}])
    record = wrapped.last_record
    assert record.history_reset and "dropped" in record.notes[0]
    assert len(api.requests[-1].body["messages"]) == 1


def test_responses_with_server_state_are_sent_as_given(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    client = openai.OpenAI(api_key="k", base_url=api.openai_base_url, max_retries=0)
    wrapped = ctxengine.wrap(client, kernel=lcm_kernel())
    wrapped.responses.create(model=MODEL, input="hi", previous_response_id="resp_1")
    body = api.requests[-1].body
    assert body["previous_response_id"] == "resp_1" and "tools" not in body
    record = wrapped.last_record
    assert "kept by the server" in record.notes[0]
    assert record.rounds[0].usage.prompt_tokens > 0


def test_the_round_limit_defers_engine_results(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel(), max_tool_rounds=1)
    api.reply_blocks(
        [{"type": "tool_use", "id": "c9", "name": "lcm_grep", "input": {"pattern": "x"}}]
    )
    messages: list[Any] = [{"role": "user", "content": "find x"}]
    reply = _create(wrapped, messages)
    assert wrapped.last_record.handed_back == (("lcm_grep", "c9"),)
    assert "max_tool_rounds" in wrapped.last_record.notes[0]
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "and?"},
    ]
    _create(wrapped, messages)
    sent = api.requests[-1].body["messages"][-1]["content"]
    assert sent[0]["type"] == "tool_result" and sent[0]["tool_use_id"] == "c9"
    assert sent[-1]["text"] == "and?"
    assert wrapped.last_record.results_supplied == 1


def test_records_reach_the_callback(api: FakeAPI, lcm_kernel: Callable[..., Kernel]) -> None:
    seen: list[CallRecord] = []
    wrapped = _anthropic(api, lcm_kernel(), on_record=seen.append, keep_records=1)
    for text in ("a", "b"):
        _create(wrapped, [{"role": "user", "content": text}])
    assert len(seen) == 2 and wrapped.records == [seen[-1]]


def test_responses_items_round_trip_keeps_every_item() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "hm"}],
            "encrypted_content": "opaque",
        },
        {"type": "function_call", "id": "fc_1", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "id": "fc_2", "call_id": "b", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
    ]
    converter = ItemsConverter()
    chat = converter.to_chat(items)
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in chat[1]["tool_calls"]] == ["a", "b"]
    assert chat[1]["reasoning_content"] == "hm"
    assert converter.to_items(chat) == items
    # A changed tool result is rebuilt; a changed call keeps its item id and the reasoning.
    changed = [*chat[:2], {**chat[2], "content": "[pruned]"}, *chat[3:]]
    changed[1] = {
        **chat[1],
        "tool_calls": [
            {**chat[1]["tool_calls"][0], "function": {"name": "f", "arguments": '{"x":1}'}}
        ],
    }
    rebuilt = converter.to_items(changed)
    assert rebuilt[1]["encrypted_content"] == "opaque"
    assert rebuilt[2] == {**items[2], "arguments": '{"x":1}'}
    assert {"type": "function_call_output", "call_id": "a", "output": "[pruned]"} in rebuilt


def test_a_failed_call_supplies_the_engine_results_again(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel(), max_tool_rounds=1)
    call = {"type": "tool_use", "id": "c5", "name": "lcm_grep", "input": {"pattern": "x"}}
    api.reply_blocks([call])
    messages: list[Any] = [{"role": "user", "content": "find x"}]
    reply = _create(wrapped, messages)
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "?"}]
    api.fail(529, "Overloaded")
    with pytest.raises(anthropic.APIStatusError):
        _create(wrapped, messages)
    _create(wrapped, messages)
    sent = api.requests[-1].body["messages"][-1]["content"]
    assert sent[0]["tool_use_id"] == "c5" and wrapped.last_record.results_supplied == 1
    _create(
        wrapped,
        [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "."}],
    )
    assert wrapped.last_record.results_supplied == 0
