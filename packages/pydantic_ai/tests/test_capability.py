"""The capability inside pydantic-ai's own agent loop, against the fake Anthropic API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, ThinkingPart, ToolReturnPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.usage import RequestUsage

from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI, check_anthropic_request
from ctxengine_pydantic_ai import Ctxengine, usage_from_pydantic_ai

FILLER = "lorem ipsum dolor sit amet " * 90
TURNS = 14
THINKING_TURN = TURNS - 2


def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}"


def _agent(api: FakeAPI, capability: Ctxengine) -> Agent[None, str]:
    provider = AnthropicProvider(api_key="k", base_url=api.base_url)
    model = AnthropicModel("claude-sonnet-4-6", provider=provider)
    return Agent(
        model,
        instructions="You are a careful coding agent.",
        tools=[read_file],
        capabilities=[capability],
    )


def _script(api: FakeAPI, turn: int) -> None:
    if turn == 3:
        api.reply_blocks(
            [{"type": "tool_use", "id": "t_host", "name": "read_file", "input": {"path": "a.py"}}]
        )
    if turn == 6:
        api.reply_blocks(
            [{"type": "tool_use", "id": "t_lcm", "name": "lcm_grep", "input": {"pattern": "mod1"}}]
        )
    if turn == THINKING_TURN:
        api.reply_blocks(
            [
                {"type": "thinking", "thinking": "Let me think.", "signature": "sig-1"},
                {"type": "text", "text": f"Thought about turn {turn}."},
            ]
        )
        return
    api.reply_text(f"Done with turn {turn}. " + "ok " * 40)


def _check(api: FakeAPI, capability: Ctxengine, history: list[Any], session: Any) -> None:
    requests = [r for r in api.requests if r.body is not None]
    assert any(result.compacted for result in capability.compactions)
    first = history[0]
    assert isinstance(first, ModelRequest)
    assert "lcm: summaries of earlier turns" in str(first.parts)
    assert len(history) < 2 * TURNS
    # Valid for the provider: every request passed the fake's checks (the last one included).
    assert check_anthropic_request(requests[-1].body) == []
    assert all("cache_control" in json.dumps(r.body) for r in requests)
    tokens = session.ctx.tokens
    assert tokens.observations == len(requests)
    assert tokens.ratio != 1.0
    answered = [r for r in requests if "t_lcm" in (t := json.dumps(r.body)) and "hits" in t]
    assert answered, "the lcm_grep result never reached the model"
    returns = [
        p
        for m in history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "lcm_grep"
    ]
    assert returns or capability.compactions
    thought = [
        p
        for m in history
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ThinkingPart) and p.signature == "sig-1"
    ]
    assert len(thought) == 1
    assert "sig-1" in json.dumps(requests[-1].body)


def test_agent_loop_compacts_its_own_history(api: FakeAPI, kernel: Kernel) -> None:
    capability = Ctxengine(kernel, session_id="p1")
    agent = _agent(api, capability)
    history: list[Any] = []
    for turn in range(TURNS):
        _script(api, turn)
        result = agent.run_sync(
            f"turn {turn}: look at src/mod{turn}.py. {FILLER}", message_history=history
        )
        history = result.all_messages()
    _check(api, capability, history, kernel.session("p1"))


def test_async_agent_loop_on_the_conversation_id(api: FakeAPI, kernel: Kernel) -> None:
    capability = Ctxengine(kernel)
    agent = _agent(api, capability)

    async def run() -> list[Any]:
        history: list[Any] = []
        for turn in range(TURNS):
            _script(api, turn)
            result = await agent.run(
                f"turn {turn}: look at src/mod{turn}.py. {FILLER}",
                message_history=history,
                conversation_id="conv-1",
            )
            history = result.all_messages()
        return history

    history = asyncio.run(run())
    _check(api, capability, history, kernel.session("conv-1"))


def test_usage_keeps_cache_reads_and_writes_apart() -> None:
    usage = usage_from_pydantic_ai(
        RequestUsage(
            input_tokens=1000,
            cache_read_tokens=600,
            cache_write_tokens=300,
            cache_write_1h_tokens=100,
            output_tokens=50,
        )
    )
    assert (usage.input_tokens, usage.cache_read_tokens) == (100, 600)
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (200, 100)
    assert usage.prompt_tokens == 1000
