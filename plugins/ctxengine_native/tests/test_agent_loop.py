"""An agent loop through the real SDKs against the fake API, with ``engine: native``: the server
compacts, its block goes back unchanged, and the next request is valid and smaller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import ctxengine
from ctxengine.messages import is_compaction_block, validate
from ctxengine_fakeapi import FakeAPI, RecordedRequest
from ctxengine_fakeapi.native import prompt_tokens, responses_tokens

from .helpers import MODEL, RESPONSES_MODEL, agent_requests, is_compaction_request, native_config

FILLER = "the build log shows the same warning again and again " * 40
TURNS = 22


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def _compaction_reply(api: FakeAPI) -> Any:
    replies = [r for r in api.replies if r.path in ("/v1/messages", "/v1/responses/compact")]
    for reply in replies:
        content = reply.body.get("content") or reply.body.get("output") or []
        if any(is_compaction_block(block) for block in content):
            return next(block for block in content if is_compaction_block(block))
    raise AssertionError("the fake never sent a compaction")


def _first_after_compaction(api: FakeAPI) -> tuple[RecordedRequest, RecordedRequest]:
    """The agent's last request before the compaction and its first one after."""
    requests = [r for r in api.requests if r.method == "POST"]
    index = next(i for i, r in enumerate(requests) if is_compaction_request(r))
    before = [r for r in agent_requests(api) if requests.index(r) < index][-1]
    after = next(r for r in agent_requests(api) if requests.index(r) > index)
    return before, after


def test_anthropic_loop_compacts_on_the_server_and_sends_the_block_back(api: FakeAPI) -> None:
    kernel = ctxengine.load(native_config(api), env={})
    client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
    wrapped = ctxengine.wrap(client, kernel=kernel)
    history: list[Any] = []
    system = "You are a careful coding agent."
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"turn {turn}: what now? {FILLER}"})
        api.reply_text(f"Answer {turn}: " + "fine " * 30)
        reply = wrapped.messages.create(
            model=MODEL, max_tokens=512, system=system, messages=history
        )
        history.append({"role": "assistant", "content": reply.content})
    compactions = [c for record in wrapped.records for c in record.compactions]
    assert any(c.compacted and c.fallback is None for c in compactions), [
        c.reason for c in compactions
    ]
    done = next(c for c in compactions if c.compacted)
    assert "the server compacted" in done.reason
    assert done.usage is not None and done.usage.compaction is not None
    assert done.usage.compaction.input_tokens > 0

    block = _compaction_reply(api)
    before, after = _first_after_compaction(api)
    body = after.body
    # Verbatim, first block of the first message, and the API's request is valid.
    assert body["messages"][0]["role"] == "assistant"
    assert body["messages"][0]["content"][0] == block
    assert block["encrypted_content"].startswith("fakeenc:")
    problems = validate(
        body["messages"],
        "anthropic",
        system=body.get("system"),
        context_management=body.get("context_management"),
        allow_pending_tool_call=False,
    )
    assert problems == []
    assert "compact-2026-01-12" in after.headers["anthropic-beta"]
    counter = api.counter  # what the fake prices with
    assert prompt_tokens(body, counter) < prompt_tokens(before.body, counter)
    # The fake answered it (it rejects invalid requests with a 400).
    statuses = [r.status for r in api.replies if r.path == "/v1/messages"]
    assert 400 not in statuses


def test_responses_loop_compacts_on_the_server_and_sends_the_item_back(api: FakeAPI) -> None:
    kernel = ctxengine.load(native_config(api, responses=True), env={})
    client = openai.OpenAI(api_key="k", base_url=api.openai_base_url, max_retries=0)
    wrapped = ctxengine.wrap(client, kernel=kernel)
    history: list[Any] = [{"role": "developer", "content": "You are a careful coding agent."}]
    for turn in range(TURNS):
        # The bulk is in the model's answers: the compacted output repeats every user message
        # (as the Responses API's does) and replaces the rest with its item.
        history.append({"role": "user", "content": f"turn {turn}: what now?"})
        api.reply_text(f"Answer {turn}: {FILLER}")
        reply = wrapped.responses.create(model=RESPONSES_MODEL, input=history)
        history.extend(item.to_dict() for item in reply.output)
    compactions = [c for record in wrapped.records for c in record.compactions]
    assert any(c.compacted and c.fallback is None for c in compactions), [
        c.reason for c in compactions
    ]
    done = next(c for c in compactions if c.compacted)
    assert "the server compacted" in done.reason
    # The compacted conversation, in the chat form engines read, is valid with its item in it.
    assert validate(done.messages, "openai", system=done.system) == []
    item = _compaction_reply(api)
    assert [m["content"] for m in done.messages if isinstance(m.get("content"), list)] == [[item]]
    before, after = _first_after_compaction(api)
    sent = after.body["input"]
    assert item in sent  # the item as the server returned it, id and encrypted content
    # The developer message stays first, the compaction item follows the user messages.
    assert sent[0] == {"role": "developer", "content": "You are a careful coding agent."}
    assert responses_tokens(after.body) < responses_tokens(before.body)
    assert 400 not in [r.status for r in api.replies]


def test_a_compaction_of_a_small_head_is_not_sent(api: FakeAPI) -> None:
    """A tail kept verbatim that is most of the prompt (large tool results): an automatic
    compaction would save little and come back next turn, so nothing goes to the server."""
    kernel = ctxengine.load(native_config(api), env={})
    small = [
        message
        for turn in range(4)
        for message in (
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": f"answer {turn}"},
        )
    ]
    large = [
        {"role": "user", "content": f"the log: {FILLER * 3}"},
        {"role": "assistant", "content": "read it"},
        {"role": "user", "content": "and now?"},
    ]
    with kernel:
        session = kernel.session("s")
        result = session.compress([*small, *large], "system")
        assert result.status == "noop", result.reason
        assert result.reason.startswith("compacting would not pay: the server would replace 7 ")
        assert result.messages == [*small, *large]
        assert not [r for r in api.requests if is_compaction_request(r)]
        # Forced, it is sent all the same (and the summary, larger than 49 tokens, is refused).
        forced = session.compress([*small, *large], "system", force=True)
    assert [r for r in api.requests if is_compaction_request(r)]
    assert forced.status == "noop" and forced.fallback is None
    assert "is not smaller than they are" in forced.reason


def test_responses_compaction_of_user_messages_only_is_not_sent(api: FakeAPI) -> None:
    """The compacted output repeats every user message: a head that is mostly user messages
    would come back almost as large, so an automatic compaction is not sent."""
    kernel = ctxengine.load(native_config(api, responses=True), env={})
    history: list[Any] = [{"role": "developer", "content": "You are a careful coding agent."}]
    for turn in range(6):
        history.append({"role": "user", "content": f"turn {turn}: {FILLER}"})
        history.append({"role": "assistant", "content": f"answer {turn}"})
    history.append({"role": "user", "content": "and now?"})
    with kernel:
        result = kernel.session("s").compress(history)
    assert result.status == "noop", result.reason
    assert "compacting would not pay: the server would replace 4 messages" in result.reason
    assert result.messages == history
    assert not [r for r in api.requests if is_compaction_request(r)]
