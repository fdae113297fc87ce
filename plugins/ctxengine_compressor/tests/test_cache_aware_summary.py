"""Cache-aware summary calls through the real SDKs against the local fake API: the summary request
is the agent's last request byte for byte plus the instruction, and it reads the agent's cached
prefix."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ctxengine
from ctxengine import normalize_usage
from ctxengine.messages import marker_positions, validate
from ctxengine.testing import samples
from ctxengine_compressor.cache_aware import fits, with_instruction
from ctxengine_fakeapi import FakeAPI

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def kernel_for(
    api: FakeAPI,
    sleep: Callable[[float], None] | None = None,
    *,
    clock: Callable[[], float] | None = None,
    cache_ttl: str = "5m",
    base_url: str | None = None,
    context_editing: dict[str, Any] | None = None,
    **summary: Any,
) -> ctxengine.Kernel:
    """A kernel whose main model and summaries go to ``api`` (at ``base_url``, default its
    plain URL: an OpenAI-compatible route, where no context edits are added)."""

    def no_pause(seconds: float) -> None:
        raise AssertionError(f"the failure policy paused {seconds} s where no retry was due")

    url = base_url or api.base_url
    return ctxengine.load(
        {
            "model": {"name": MODEL, "base_url": url, "context_length": 60_000},
            "prompt_caching": {"enabled": True, "cache_ttl": cache_ttl},
            "context_editing": context_editing or {},
            "auxiliary": {
                "compression": {
                    "provider": "anthropic",
                    "model": MODEL,
                    "base_url": url,
                    "api_key": "test-key",
                    **summary,
                }
            },
        },
        env={},
        sleep=sleep or no_pause,
        clock=clock or time.monotonic,
    )


def agent_turn(client: Any, session: ctxengine.Session, system: Any, messages: list[Any]) -> Any:
    request = session.prepare({"model": MODEL, "system": system, "messages": messages})
    response = client.messages.create(**request, max_tokens=256)
    session.update_usage(response)
    return request


@pytest.mark.parametrize("clearing", [False, True], ids=["plain", "context-editing"])
def test_the_summary_call_reads_the_agents_cached_prefix(api: FakeAPI, clearing: bool) -> None:
    # With clearing, the fake is an Anthropic-compatible gateway whose server clears old tool
    # results: the agent's cached prefix is the conversation as those edits left it, so the
    # summary call must ask for the same edits to read it (and it sees what the agent saw).
    anthropic = pytest.importorskip("anthropic")
    url = api.gateway_url if clearing else api.base_url
    client = anthropic.Anthropic(api_key="test-key", base_url=url, max_retries=0)
    system, messages = samples.conversation("anthropic")
    history = messages[:-1]  # ends with the user's question
    edits = {"clear_tool_uses": True, "trigger": 0.02, "keep_tool_uses": 1} if clearing else None
    with kernel_for(api, base_url=url, context_editing=edits) as kernel:
        session = kernel.session("s")
        sent = agent_turn(client, session, system, history)
        history = [*history, messages[-1], {"role": "user", "content": "Carry on."}]
        result = session.compress(history, system, force=True)
        provider = kernel.summary_provider()
    assert result.status == "compacted", result.reason
    assert "cache-aware" in result.reason
    summary_body = api.requests[-1].body
    # Byte for byte the agent's request; the instruction is one more block of its last (user)
    # message, after the marked one, so every breakpoint closes the same prefix as before.
    assert summary_body["system"] == sent["system"]
    assert summary_body["messages"][:-1] == sent["messages"][:-1]
    assert summary_body["messages"][-1]["content"][:-1] == sent["messages"][-1]["content"]
    assert marker_positions(summary_body) == marker_positions(sent)
    if clearing:
        assert session.ctx.route == "anthropic-compatible"
        assert api.replies[0].body["context_management"]["applied_edits"]  # the server cleared
        assert summary_body["context_management"] == sent["extra_body"]["context_management"]
    else:
        assert "context_management" not in summary_body
    instruction = summary_body["messages"][-1]["content"][-1]["text"]
    assert instruction.startswith("Context compaction")
    assert "<kept-from>" in instruction  # where the verbatim tail begins
    assert validate(summary_body["messages"], "anthropic", system=summary_body["system"]) == []
    usage = normalize_usage(getattr(provider, "last_usage", None))
    # Everything the agent's request cached is read back; only the instruction is new.
    assert usage.cache_write_tokens == 0
    assert usage.cache_read_tokens > (0.85 if clearing else 0.9) * usage.prompt_tokens
    assert result.summary and "## Goal" in result.summary


def test_fits_keeps_a_safety_margin() -> None:
    class Window:
        def __init__(self, context_length: int) -> None:
            self.context_length = context_length

    # 5 % of 10,000 stays free: 9,500 - 500 reply tokens = 9,000 prompt tokens.
    assert fits(Window(10_000), 9_000, 500)  # type: ignore[arg-type]
    assert not fits(Window(10_000), 9_001, 500)  # type: ignore[arg-type]
    # A reply larger than the window leaves room for nothing.
    assert fits(Window(1_000), 0, 2_000)  # type: ignore[arg-type]
    assert not fits(Window(1_000), 1, 2_000)  # type: ignore[arg-type]


def test_the_instruction_after_an_assistant_message_is_a_new_user_turn() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    messages.append({"role": "assistant", "content": "hello"})
    request = {"model": MODEL, "messages": messages}
    out = with_instruction(request, "Summarise.")
    assert out["messages"][:2] == request["messages"]
    assert out["messages"][2] == {
        "role": "user",
        "content": [{"type": "text", "text": "Summarise."}],
    }
    assert len(request["messages"]) == 2  # the caller's request is untouched
    joined = with_instruction({"messages": [{"role": "user", "content": "hi"}]}, "S.")
    assert joined["messages"][0]["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "text", "text": "S."},
    ]
    with pytest.raises(ValueError, match="empty"):
        with_instruction(request, "  ")


def test_a_top_level_marker_stays_where_the_agents_request_had_it() -> None:
    # The API applies a top-level cache_control to the last cacheable block: with the
    # instruction appended that would be the instruction (a write nobody reads, and a miss of
    # the block the agent's request cached). It becomes an explicit marker on that block.
    last = {"role": "user", "content": [{"type": "text", "text": "Run the tests."}]}
    request: dict[str, Any] = {
        "model": MODEL,
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok"},
            last,
        ],
    }
    out = with_instruction(request, "Summarise.")
    assert "cache_control" not in out
    assert out["messages"][:2] == request["messages"][:2]
    assert out["messages"][-1]["content"] == [
        {
            "type": "text",
            "text": "Run the tests.",
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        },
        {"type": "text", "text": "Summarise."},
    ]
    assert marker_positions(out) == [("messages[2].content[0]", {"type": "ephemeral", "ttl": "1h"})]
    assert request["cache_control"] == {"type": "ephemeral", "ttl": "1h"}  # caller's untouched
    # A last message that already carries a marker keeps it; the top-level one is dropped
    # (it closed the same prefix).
    marked = {
        "role": "assistant",
        "content": [{"type": "text", "text": "done", "cache_control": {"type": "ephemeral"}}],
    }
    out = with_instruction({**request, "messages": [*request["messages"], marked]}, "S.")
    assert "cache_control" not in out
    assert out["messages"][3] == marked
    assert len(marker_positions(out)) == 1


@pytest.mark.parametrize(
    ("ttl", "wait", "aware"),
    [("5m", 299.0, True), ("5m", 301.0, False), ("1h", 301.0, True), ("1h", 3601.0, False)],
)
def test_the_summary_call_is_cache_aware_only_while_the_agents_prefix_is_cached(
    api: FakeAPI, ttl: str, wait: float, aware: bool
) -> None:
    # Once the prefix the agent's request cached has expired, resending it would write the whole
    # conversation (1.25x or 2x), far more than the bounded summariser input at 1x.
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
    system, messages = samples.conversation("anthropic")
    now = [0.0]
    kernel = kernel_for(api, clock=lambda: now[0], cache_ttl=ttl)
    with kernel:
        session = kernel.session("s")
        agent_turn(client, session, system, messages[:-1])
        now[0] = wait
        result = session.compress(messages, system, force=True)
    assert result.status == "compacted", result.reason
    assert ("cache-aware" in result.reason) is aware
    assert fresh_prompt_sent(api) is not aware


def turn_then_compact(
    api: FakeAPI,
    edit: Callable[[list[Any]], list[Any]] = list,
    *,
    failure: Callable[[FakeAPI], object] | None = None,
    sleep: Callable[[float], None] | None = None,
    **summary: Any,
) -> Any:
    """One agent turn through the SDK, then a forced compaction of ``edit(messages)``;
    ``failure`` scripts the first summary request's answer (the cache-aware call; later ones
    get the default reply), ``sleep`` records the failure policy's pauses."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
    system, messages = samples.conversation("anthropic")
    with kernel_for(api, sleep=sleep, **summary) as kernel:
        session = kernel.session("s")
        agent_turn(client, session, system, messages[:-1])
        if failure is not None:
            failure(api)
        return session.compress(edit(messages), system, force=True)


def fresh_prompt_sent(api: FakeAPI, after: int = 1) -> bool:
    """Whether the requests after the first ``after`` (the agent's turn) were all the
    summariser's own prompt (one call, or parts of the middle and their merge when it is too
    large)."""
    bodies = [r.body for r in api.requests if r.body is not None][after:]
    prompts = [b["messages"][0]["content"] for b in bodies if len(b["messages"]) == 1]
    return bool(bodies) and len(prompts) == len(bodies) and "<transcript>" in prompts[0]


@pytest.mark.parametrize(
    ("summary", "why"),
    [
        ({"cache_aware": False}, "switched off"),
        ({"model": "claude-haiku-4-5"}, "another model"),
        ({"context_length": 8_000}, "the prefix does not fit the summary model"),
    ],
)
def test_a_fresh_summarizer_prompt_otherwise(api: FakeAPI, summary: Any, why: str) -> None:
    result = turn_then_compact(api, **summary)
    assert result.status == "compacted", why
    assert "cache-aware" not in result.reason
    assert fresh_prompt_sent(api)


def test_a_conversation_that_changed_is_not_reused(api: FakeAPI) -> None:
    result = turn_then_compact(
        api, lambda messages: [{"role": "user", "content": "Another start."}, *messages[1:]]
    )
    assert result.status == "compacted"
    assert "cache-aware" not in result.reason
    assert fresh_prompt_sent(api)


@pytest.mark.parametrize(
    "failure",
    [
        lambda api: api.fail(400, "messages: the request is not valid"),
        lambda api: api.context_length_error(),
        lambda api: api.reply_text("Sure, I can help with that!"),
    ],
    ids=["error-reply", "context-length", "off-template"],
)
def test_a_cache_aware_call_that_fails_on_its_request_falls_back_to_the_bounded_input(
    api: FakeAPI, failure: Callable[[FakeAPI], object]
) -> None:
    # A failure of this request (not of the endpoint): the bounded input is another request.
    result = turn_then_compact(api, failure=failure)
    assert result.status == "compacted", result.reason
    assert "cache-aware" not in result.reason
    assert not result.fallback_used
    assert fresh_prompt_sent(api, after=2)  # the turn, the cache-aware call
    assert [c.purpose for c in result.calls] == ["cache-aware", "summary"]
    assert [a.outcome for a in result.calls[0].attempts] != ["ok"]


def test_a_cache_aware_call_is_retried_under_the_failure_policy(api: FakeAPI) -> None:
    pauses: list[float] = []
    result = turn_then_compact(
        api, failure=lambda api: api.fail(529, "Overloaded"), sleep=pauses.append
    )
    assert result.status == "compacted", result.reason
    assert "cache-aware" in result.reason
    assert [a.outcome for a in result.calls[0].attempts] == ["rate_limit", "ok"]
    assert pauses == [1.0]


def test_a_cache_aware_call_that_cannot_reach_the_endpoint_aborts(api: FakeAPI) -> None:
    result = turn_then_compact(api, failure=lambda api: api.fail(401, "invalid x-api-key"))
    assert result.status == "aborted"
    assert "summary failed (auth)" in result.reason
    assert [c.purpose for c in result.calls] == ["cache-aware"]
    assert len([r for r in api.requests if r.body is not None]) == 2  # the turn, one summary


def test_main_provider_with_a_request_sender(api: FakeAPI) -> None:
    """Provider ``main``: the host hands its own sender; the summary goes through it."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
    sent_requests: list[dict[str, Any]] = []

    def send(request: dict[str, Any], max_tokens: int) -> str:
        sent_requests.append(request)
        reply = client.messages.create(**{**request, "max_tokens": max_tokens})
        return "".join(b.text for b in reply.content if b.type == "text")

    system, messages = samples.conversation("anthropic")
    kernel = ctxengine.load(
        {
            "model": {"name": MODEL, "base_url": api.base_url, "context_length": 60_000},
            "prompt_caching": {"enabled": True},
            "auxiliary": {"compression": {"provider": "main"}},
        },
        env={},
        main_summarizer=lambda system, prompt, max_tokens: "unused",
        main_request=send,
    )
    with kernel:
        session = kernel.session("s")
        agent_turn(client, session, system, messages[:-1])
        result = session.compress(messages, system, force=True)
    assert result.status == "compacted", result.reason
    assert "cache-aware" in result.reason
    assert len(sent_requests) == 1 and "stream" not in sent_requests[0]
