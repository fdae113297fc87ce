"""The middleware inside LangChain's own agent loop, against the fake Anthropic API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI, check_anthropic_request
from ctxengine_langchain import Converter, CtxengineMiddleware, usage_from_metadata

FILLER = "lorem ipsum dolor sit amet " * 90
TURNS = 14
THINKING_TURN = TURNS - 2


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}"


def _agent(api: FakeAPI, middleware: CtxengineMiddleware) -> Any:
    model = ChatAnthropic(
        model_name="claude-sonnet-4-6",
        base_url=api.base_url,
        api_key=SecretStr("k"),
        max_retries=0,
        timeout=30,
        stop=None,
    )
    return create_agent(
        model,
        tools=[read_file],
        system_prompt="You are a careful coding agent.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
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


def _check(
    api: FakeAPI, middleware: CtxengineMiddleware, state: dict[str, Any], session: Any
) -> None:
    requests = [r for r in api.requests if r.body is not None]
    # Compacted: the checkpointed history now starts with the engine's summary.
    assert any(result.compacted for result in middleware.compactions)
    history = state["messages"]
    assert "lcm: summaries of earlier turns" in str(history[0].content)
    assert len(history) < 2 * TURNS
    # The history is valid for LangChain (it ran on it) and for the provider: every request
    # passed the fake's checks, and the history converts to a valid Anthropic request.
    converted = Converter().to_dicts(history)
    assert all(m["role"] in ("user", "assistant", "tool") for m in converted)
    last = requests[-1].body
    assert check_anthropic_request(last) == []
    # Cache markers on every request; usage from every response, calibrating the estimate.
    assert all("cache_control" in json.dumps(r.body) for r in requests)
    tokens = session.ctx.tokens
    assert tokens.observations == len(requests)
    assert tokens.ratio != 1.0
    # The engine tool ran through LangChain's tool node and its result reached the model.
    answered = [r for r in requests if "t_lcm" in (t := json.dumps(r.body)) and "hits" in t]
    assert answered, "the lcm_grep result never reached the model"
    assert any(isinstance(m, ToolMessage) and m.name == "lcm_grep" for m in history) or (
        middleware.compactions
    )
    # Ids and reasoning survive: the thinking turn is in the kept tail with its signature, and
    # it was sent back to the provider (the fake checks thinking blocks) on the last request.
    assert all(m.id for m in history)
    thought = [
        m
        for m in history
        if isinstance(m, AIMessage)
        and isinstance(m.content, list)
        and any(isinstance(b, dict) and b.get("signature") == "sig-1" for b in m.content)
    ]
    assert len(thought) == 1
    assert "sig-1" in json.dumps(last)


def test_agent_loop_compacts_its_own_history(api: FakeAPI, kernel: Kernel) -> None:
    middleware = CtxengineMiddleware(kernel)
    agent = _agent(api, middleware)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    state: dict[str, Any] = {}
    for turn in range(TURNS):
        _script(api, turn)
        message = HumanMessage(f"turn {turn}: look at src/mod{turn}.py and fix it. {FILLER}")
        state = agent.invoke({"messages": [message]}, config)
        assert isinstance(state["messages"][-1], AIMessage)
    _check(api, middleware, state, kernel.session("t1"))


def test_async_agent_loop(api: FakeAPI, kernel: Kernel) -> None:
    middleware = CtxengineMiddleware(kernel, session_id="async")
    agent = _agent(api, middleware)
    config: RunnableConfig = {"configurable": {"thread_id": "ignored"}}

    async def run() -> dict[str, Any]:
        state: dict[str, Any] = {}
        for turn in range(TURNS):
            _script(api, turn)
            message = HumanMessage(f"turn {turn}: look at src/mod{turn}.py. {FILLER}")
            state = await agent.ainvoke({"messages": [message]}, config)
        return state

    state = asyncio.run(run())
    _check(api, middleware, state, kernel.session("async"))


def test_usage_from_metadata_splits_cache_reads_and_writes() -> None:
    usage = usage_from_metadata(
        {
            "input_tokens": 1000,
            "output_tokens": 50,
            "total_tokens": 1050,
            "input_token_details": {
                "cache_read": 600,
                "ephemeral_1h_input_tokens": 100,
                "ephemeral_5m_input_tokens": 200,
            },
            "output_token_details": {"reasoning": 20},
        }
    )
    assert (usage.input_tokens, usage.cache_read_tokens) == (100, 600)
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (200, 100)
    assert usage.prompt_tokens == 1000 and usage.reasoning_tokens == 20
