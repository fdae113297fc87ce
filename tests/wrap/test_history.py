"""What the wrapper remembers between calls is never stale: the host's history (its list grown,
edited or replaced, also while a stream runs), its tools, and the markers a request carried."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

import ctxengine
from ctxengine import Kernel
from ctxengine.messages import marker_positions
from ctxengine_fakeapi import FakeAPI
from tests.wrap.scenario import MODEL
from tests.wrap.scenario import anthropic_wrapped as _anthropic
from tests.wrap.scenario import create as _create


def _texts(body: dict[str, Any]) -> list[str]:
    """The text of each message a request carried (its first text block for block lists)."""
    texts = []
    for message in body["messages"]:
        content = message["content"]
        texts.append(content if isinstance(content, str) else content[0].get("text", ""))
    return texts


def _turns(count: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(count):
        history.append({"role": "user", "content": f"question {i}"})
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]})
    history.append({"role": "user", "content": "the last question"})
    return history


def test_a_history_grown_edited_or_replaced_in_place_is_sent_as_it_is_now(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    history = _turns(3)
    _create(wrapped, history)
    # Appended to the same list: the new messages follow what was sent.
    history += [
        {"role": "assistant", "content": [{"type": "text", "text": "more"}]},
        {"role": "user", "content": "and then?"},
    ]
    _create(wrapped, history)
    assert _texts(api.requests[-1].body)[-2:] == ["more", "and then?"]
    assert not wrapped.last_record.history_reset
    # A message edited in place (the same object): the request carries the edit.
    history[2]["content"] = "question 1, edited"
    history[3]["content"][0]["text"] = "answer 1, edited"
    _create(wrapped, history)
    assert _texts(api.requests[-1].body)[2:4] == ["question 1, edited", "answer 1, edited"]
    # A message replaced in the list: the view is dropped and the history sent as given.
    history[0] = {"role": "user", "content": "a different start"}
    _create(wrapped, history)
    assert wrapped.last_record.history_reset
    assert _texts(api.requests[-1].body) == _texts({"messages": history})
    # Truncated and grown back to the same length: not mistaken for the covered history.
    del history[-2:]
    history += [
        {"role": "assistant", "content": [{"type": "text", "text": "other"}]},
        {"role": "user", "content": "other question"},
    ]
    _create(wrapped, history)
    assert wrapped.last_record.history_reset
    assert _texts(api.requests[-1].body)[-2:] == ["other", "other question"]


def test_new_dicts_of_the_same_history_continue_it(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    _create(wrapped, _turns(3))
    rebuilt = [*_turns(3), {"role": "assistant", "content": "ok"}, {"role": "user", "content": "?"}]
    _create(wrapped, rebuilt)
    assert not wrapped.last_record.history_reset
    assert _texts(api.requests[-1].body) == _texts({"messages": rebuilt})
    # An edit the host then makes in place to the rebuilt dicts is seen (the view compares
    # them with the objects it first covered, not with themselves).
    rebuilt[0]["content"] = "edited after the rebuild"
    _create(wrapped, rebuilt)
    assert wrapped.last_record.history_reset
    assert _texts(api.requests[-1].body)[0] == "edited after the rebuild"
    # Rebuilt again with an edit: the edit is seen.
    again = _turns(3)
    again[0]["content"] = "edited in the rebuild"
    _create(wrapped, again)
    assert wrapped.last_record.history_reset
    assert _texts(api.requests[-1].body)[0] == "edited in the rebuild"


def test_messages_added_while_a_stream_runs_are_sent_with_the_next_call(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    history: list[Any] = [{"role": "user", "content": "hi"}]
    for event in _create(wrapped, history, stream=True):
        if event.type == "message_stop":  # before the stream ends: the call is not finished
            history.append({"role": "assistant", "content": "hello"})
            history.append({"role": "user", "content": "how are you?"})
    _create(wrapped, history)
    assert _texts(api.requests[-1].body) == ["hi", "hello", "how are you?"]


@pytest.mark.parametrize("engine_round", [False, True])
def test_messages_added_while_a_later_stream_runs_are_not_taken_as_sent(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], engine_round: bool
) -> None:
    # After a first call the view is as given, and the wrapper sends the host's own list: what
    # the host appends to it while the stream runs is neither part of that request, nor of the
    # engine tool round that follows it, nor of what the view takes as sent.
    wrapped = _anthropic(api, lcm_kernel())
    history: list[Any] = _turns(2)
    _create(wrapped, history)
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
    sent = _texts({"messages": history})
    if engine_round:
        call = {"type": "tool_use", "id": "c1", "name": "lcm_grep", "input": {"pattern": "x"}}
        api.reply_blocks([call])
    for event in _create(wrapped, history, stream=True):
        if event.type == "message_start" and len(history) == len(sent):
            history += [{"role": "assistant", "content": "late"}, {"role": "user", "content": "?"}]
    record = wrapped.last_record
    assert record.tools_answered == (("lcm_grep",) if engine_round else ())
    bodies = [request.body for request in api.requests[-len(record.rounds) :]]
    assert _texts(bodies[0]) == sent
    assert [round_.messages for round_ in record.rounds] == [len(b["messages"]) for b in bodies]
    if engine_round:  # the engine's call and its result follow what the first round carried
        assert _texts(bodies[1])[: len(sent)] == sent
        assert len(bodies[1]["messages"]) == len(sent) + 2
    _create(wrapped, history)
    assert not wrapped.last_record.history_reset
    assert _texts(api.requests[-1].body)[-2:] == ["late", "?"]
    if not engine_round:  # nothing was inserted: the host's history is sent as it is
        assert _texts(api.requests[-1].body) == _texts({"messages": history})


def test_a_change_of_the_host_tools_between_calls_is_seen(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped = _anthropic(api, lcm_kernel())
    engine = [tool["name"] for tool in wrapped.session.tool_schemas("anthropic")]
    schema = {"type": "object", "properties": {}}
    tools = [{"name": "read", "description": "Read a file.", "input_schema": schema}]
    history: list[Any] = [{"role": "user", "content": "hi"}]

    def sent_tools() -> list[str]:
        return [tool["name"] for tool in api.requests[-1].body["tools"]]

    _create(wrapped, history, tools=tools)
    assert sent_tools() == ["read", *engine]
    tools.append({"name": "write", "description": "Write a file.", "input_schema": schema})
    _create(wrapped, history, tools=tools)  # the same list, grown in place
    assert sent_tools() == ["read", "write", *engine]
    tools[0]["name"] = "open"  # a tool renamed in place
    _create(wrapped, history, tools=tools)
    assert sent_tools() == ["open", "write", *engine]
    assert list(wrapped.last_record.tools_added) == engine
    _create(wrapped, history)  # no tools of the host's
    assert sent_tools() == engine
    tools.append({"name": engine[0], "description": "mine", "input_schema": schema})
    with pytest.raises(ValueError, match=f"already hold a tool named '{engine[0]}'"):
        _create(wrapped, history, tools=tools)


@pytest.mark.parametrize("where", ["none", "middle", "end", "everywhere"])
def test_breakpoints_are_the_markers_the_request_carried(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel], where: str
) -> None:
    wrapped = _anthropic(api, lcm_kernel(context_length=200_000))
    history = _turns(12)
    marked = {"none": [], "middle": [9], "end": [len(history) - 2], "everywhere": [0, 9, 23]}
    for index in marked[where]:  # the host's own markers, on a block or on a string content
        content = history[index]["content"]
        block = content[0] if isinstance(content, list) else {"type": "text", "text": content}
        history[index]["content"] = [{**block, "cache_control": {"type": "ephemeral"}}]
    for system in (None, "Be brief."):
        extra = {} if system is None else {"system": system}
        _create(wrapped, history, **extra)
        body = api.requests[-1].body
        assert wrapped.last_record.rounds[-1].breakpoints == len(marker_positions(body)) > 0


def test_chat_breakpoints_are_the_markers_the_request_carried(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    client = openai.OpenAI(api_key="k", base_url=api.openai_base_url, max_retries=0)
    wrapped = ctxengine.wrap(client, kernel=lcm_kernel(context_length=200_000))
    history: list[Any] = [{"role": "system", "content": "Be brief."}]
    for i in range(12):
        history += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    history.append({"role": "user", "content": "the last question"})
    for _ in range(2):
        wrapped.chat.completions.create(model=MODEL, messages=history)
        body = api.requests[-1].body
        assert wrapped.last_record.rounds[-1].breakpoints == len(marker_positions(body)) > 0
        history[8] = {"role": "user", "content": [{"type": "text", "text": "marked", **_EPH}]}


_EPH = {"cache_control": {"type": "ephemeral"}}


def _rebuilt(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """New dicts with new strings, as a host that reloads its history sends them."""
    copy: list[dict[str, Any]] = json.loads(json.dumps(history))
    return copy


def test_an_edit_of_the_objects_sent_before_does_not_reach_a_rebuilt_history(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    # The host's own messages were sent as they were (nothing compacted): the next call sends
    # the host's new dicts, whatever became of the objects it passed before.
    wrapped = _anthropic(api, lcm_kernel())
    first = _turns(3)
    _create(wrapped, first)
    first[0]["content"] = "edited after it was sent"
    first[1]["content"][0]["text"] = "also edited"
    again = [*_turns(3), {"role": "assistant", "content": "ok"}, {"role": "user", "content": "?"}]
    _create(wrapped, again)
    assert _texts(api.requests[-1].body) == _texts({"messages": again})
    assert not wrapped.last_record.history_reset


def _handed_back_grep(api: FakeAPI, kernel: Kernel) -> tuple[Any, list[dict[str, Any]]]:
    """A wrapped client whose first call handed an engine call (lcm_grep "c1") back with the
    response, and the host's history after it: the response appended, then a new question."""
    wrapped = _anthropic(api, kernel, max_tool_rounds=1)
    call = {"type": "tool_use", "id": "c1", "name": "lcm_grep", "input": {"pattern": "x"}}
    api.reply_blocks([call])
    history: list[dict[str, Any]] = [{"role": "user", "content": "find x"}]
    reply = _create(wrapped, history)
    assert wrapped.last_record.handed_back == (("lcm_grep", "c1"),)
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        {"role": "user", "content": "and?"},
    ]
    return wrapped, history


def test_results_handed_back_still_join_a_history_that_was_reset(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    # The host edited an earlier message, so its history no longer continues the covered one
    # and the view is dropped; the engine's call it appended still needs its result, or the
    # API refuses the request.
    wrapped, history = _handed_back_grep(api, lcm_kernel())
    history[0] = {"role": "user", "content": "find x, please"}
    _create(wrapped, history)
    record = wrapped.last_record
    sent = api.requests[-1].body["messages"]
    assert record.history_reset and record.results_supplied == 1
    assert sent[-1]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": sent[-1]["content"][0]["content"],
    }
    assert sent[0]["content"][0]["text"] == "find x, please"  # as edited (and marked)
    # Supplied once: the call after it carries the host's history as it is.
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "thanks"}]
    _create(wrapped, history)
    assert wrapped.last_record.results_supplied == 0


def test_results_handed_back_join_a_rebuilt_history_that_continues(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    wrapped, history = _handed_back_grep(api, lcm_kernel())
    _create(wrapped, _rebuilt(history))
    record = wrapped.last_record
    sent = api.requests[-1].body["messages"]
    assert not record.history_reset and record.results_supplied == 1
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"][0]["type"] == "tool_result"
    assert sent[-1]["content"][0]["tool_use_id"] == "c1"
    assert sent[-1]["content"][-1]["text"] == "and?"


def test_a_compacted_view_of_a_rebuilt_history_sees_edits_to_it(
    api: FakeAPI, lcm_kernel: Callable[..., Kernel]
) -> None:
    # Sent as given until the history reaches the threshold, then compacted: the view then maps
    # the host's messages, and still sees an edit the host makes in place to dicts it rebuilt.
    wrapped = _anthropic(api, lcm_kernel())
    history: list[dict[str, Any]] = []
    filler = "lorem ipsum dolor sit amet " * 90
    turn = 0
    passed: list[list[dict[str, Any]]] = []
    while not any(record.compacted for record in wrapped.records):
        assert turn < 30, "the conversation never reached the compaction threshold"
        history.append({"role": "user", "content": f"turn {turn}: {filler}"})
        passed.append(_rebuilt(history))
        reply = _create(wrapped, passed[-1])
        assert not wrapped.last_record.history_reset
        history.append({"role": "assistant", "content": reply.content[0].text})
        turn += 1
    history.append({"role": "user", "content": "what now?"})
    rebuilt = _rebuilt(history)
    _create(wrapped, rebuilt)
    assert not wrapped.last_record.history_reset
    assert len(api.requests[-1].body["messages"]) < len(rebuilt)  # the compacted view
    # The same rule as before the compaction: an edit of the objects the host passed first does
    # not reach new dicts equal to what they were when they were covered.
    passed[0][0]["content"] = "edited after it was sent"
    rebuilt = _rebuilt(history)
    _create(wrapped, rebuilt)
    assert not wrapped.last_record.history_reset
    assert len(api.requests[-1].body["messages"]) < len(rebuilt)
    rebuilt[0]["content"] = "an edited start"
    _create(wrapped, rebuilt)
    assert wrapped.last_record.history_reset
