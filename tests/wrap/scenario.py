"""One multi-turn, tool-using conversation driven through a wrapped SDK client.

The host code here is what an agent author writes with a wrapped client: it keeps its own
history, appends what the SDK returned, runs its own tool (``read_file``) and skips the calls
that belong to the engine (``wrapped.engine_tool_names``). The fake API is scripted so that the
model uses the host's tool, an engine tool alone (the wrapper answers it), and both at once (the
wrapper hands the response back and supplies its result with the next request).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import attrs

import ctxengine
from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI

HOST_TOOL = {
    "name": "read_file",
    "description": "Read a file of the project.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
FILLER = "lorem ipsum dolor sit amet " * 90
TURNS = 16
HOST_TOOL_TURN = 3
ENGINE_TOOL_TURN = 6
MIXED_TURN = 9


@attrs.define
class Host:
    """How the host of one API builds its history; ``send`` makes one wrapped call and returns
    ``(value returned by the wrapper, the final response as the SDK types it)``."""

    user: Callable[[str], dict[str, Any]]
    append_reply: Callable[[list[Any], Any], None]
    tool_calls: Callable[[Any], list[tuple[str, str, dict[str, Any]]]]
    append_results: Callable[[list[Any], list[tuple[str, str]]], None]
    send: Callable[[list[Any]], tuple[Any, Any]]


MODEL = "claude-sonnet-4-6"


def anthropic_wrapped(api: FakeAPI, kernel: Kernel, **options: Any) -> Any:
    """An ``anthropic`` client for ``api``, wrapped with ``kernel``."""
    client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
    return ctxengine.wrap(client, kernel=kernel, **options)


def create(wrapped: Any, messages: list[Any], **extra: Any) -> Any:
    """One ``messages.create`` of the wrapped Anthropic client."""
    return wrapped.messages.create(model=MODEL, max_tokens=100, messages=messages, **extra)


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def run_conversation(api: FakeAPI, host: Host, engine_tools: frozenset[str]) -> list[Any]:
    """Drive :data:`TURNS` user turns; returns every value the wrapper returned."""
    history: list[Any] = []
    returned: list[Any] = []
    for turn in range(TURNS):
        history.append(host.user(f"turn {turn}: look at src/mod{turn}.py and fix it. {FILLER}"))
        if turn == HOST_TOOL_TURN:
            api.reply_blocks([tool_use(f"call_host_{turn}", "read_file", {"path": "a.py"})])
        elif turn == ENGINE_TOOL_TURN:
            api.reply_blocks([tool_use(f"call_lcm_{turn}", "lcm_grep", {"pattern": "mod1"})])
        elif turn == MIXED_TURN:
            api.reply_blocks(
                [
                    tool_use(f"call_host_{turn}", "read_file", {"path": "b.py"}),
                    tool_use(f"call_lcm_{turn}", "lcm_grep", {"pattern": "mod2"}),
                ]
            )
        api.reply_text(f"Done with turn {turn}. " + "ok " * 40)
        while True:
            value, final = host.send(history)
            returned.append(value)
            host.append_reply(history, final)
            calls = [c for c in host.tool_calls(final) if c[1] not in engine_tools]
            if not calls:
                break
            results = [(cid, f"contents of {args['path']}") for cid, _, args in calls]
            host.append_results(history, results)
    return returned


def model_requests(api: FakeAPI) -> list[Any]:
    """The requests that reached the model endpoints (all of them: lcm summarises locally)."""
    return [r for r in api.requests if r.body is not None]


def check_outcome(api: FakeAPI, wrapped: Any, *, markers: bool) -> None:
    """The acceptance checks every wrapper must pass (see the issue's 'done when')."""
    records = wrapped.records
    requests = model_requests(api)
    rounds = [r for record in records for r in record.rounds]
    # Compacted, and later requests are smaller than the uncompacted history would be.
    assert any(record.compacted for record in records), [r.compactions for r in records]
    # Usage recorded from every response, and the local estimate calibrated by it.
    assert len(rounds) == len(requests)
    assert all(r.usage.prompt_tokens > 0 for r in rounds)
    tokens = wrapped.session.ctx.tokens
    assert tokens.observations == len(requests)
    assert tokens.ratio != 1.0
    # Cache markers on every request (or on none, where the API takes none).
    marked = ["cache_control" in json.dumps(r.body) for r in requests]
    assert all(marked) if markers else not any(marked), marked
    assert all((r.breakpoints > 0) == markers for r in rounds)
    # The engine tool alone was answered inside the call; the mixed one in the next request.
    answered = [record for record in records if "lcm_grep" in record.tools_answered]
    assert len(answered) == 2
    assert any(len(record.rounds) == 2 for record in answered)
    mixed = (("lcm_grep", f"call_lcm_{MIXED_TURN}"),)
    assert any(record.handed_back == mixed for record in answered)
    assert sum(record.results_supplied for record in records) == 1
    for call_id in (f"call_lcm_{ENGINE_TOOL_TURN}", f"call_lcm_{MIXED_TURN}"):
        carrying = [
            r for r in requests if call_id in (text := json.dumps(r.body)) and '\\"hits\\"' in text
        ]
        assert carrying, f"no request carried the lcm_grep result for {call_id}"
    assert all(record.tools_added for record in records)
