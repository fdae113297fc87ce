"""Gateway session hygiene: the 85 % safety net before the agent runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine
from ctxengine import (
    CompressResult,
    Conversation,
    EngineContext,
    Kernel,
    Message,
    TokenCounter,
    hookimpl,
    register_engine,
)
from ctxengine.messages import validate
from ctxengine.testing import samples
from ctxengine.testing.transcripts import TRANSCRIPTS
from ctxengine_fakeapi import FakeAPI

WINDOW = 32_000


def gateway_kernel(compaction: bool = True, **hygiene: Any) -> Kernel:
    return ctxengine.load(
        {
            "context": {"compaction": compaction},
            "model": {"name": "claude-sonnet-4-6", "context_length": WINDOW},
            "engines": {"compressor": {"protect_last_n": 4}},
            "gateways": {"hygiene": hygiene},
            "auxiliary": {"compression": {"provider": "extractive"}},
        }
    )


def history() -> list[Message]:
    _, messages = samples.conversation("openai", turns=12)
    return messages


def test_below_85_percent_nothing_happens() -> None:
    kernel = gateway_kernel()
    messages = history()
    report = kernel.hygiene("s", messages, last_prompt_tokens=int(WINDOW * 0.84))
    assert report.fired is False
    assert report.compacted is False
    assert report.messages == messages
    assert report.token_source == "measured"
    assert report.notice == f"no compaction needed ({int(WINDOW * 0.84):,} tokens, measured)"


def test_at_85_percent_the_history_is_compacted() -> None:
    kernel = gateway_kernel()
    messages = history()
    report = kernel.hygiene("s", messages, last_prompt_tokens=int(WINDOW * 0.85))
    assert report.fired is True
    assert report.compacted is True, report.notice
    assert len(report.messages) < len(messages)
    assert report.tokens_before == int(WINDOW * 0.85)
    assert report.result is not None and report.result.status == "compacted"
    assert not validate(report.messages, "openai")
    # Tool calls and results survive as structured messages, not flattened text.
    assert any(m.get("tool_calls") for m in report.messages)
    assert any(m.get("role") == "tool" for m in report.messages)


def test_agent_threshold_does_not_fire_the_gateway() -> None:
    # 60 % of the window is over the agent's 50 % but under the gateway's 85 %.
    kernel = gateway_kernel()
    report = kernel.hygiene("s", history(), last_prompt_tokens=int(WINDOW * 0.6))
    assert report.fired is False


def test_fewer_than_four_messages_are_never_compacted() -> None:
    kernel = gateway_kernel()
    _, short = samples.short_conversation("openai")
    assert len(short) == 4
    report = kernel.hygiene("s", short[:3], last_prompt_tokens=WINDOW * 10)
    assert report.fired is False
    assert report.messages == short[:3]


def test_hard_message_limit_fires_regardless_of_tokens() -> None:
    kernel = gateway_kernel(hard_message_limit=30)
    messages = history()
    assert len(messages) >= 30
    report = kernel.hygiene("s", messages, last_prompt_tokens=100)
    assert report.fired is True
    assert report.compacted is True, report.notice


def test_estimated_tokens_are_used_without_a_real_count() -> None:
    kernel = gateway_kernel()
    _, big = samples.conversation("openai", turns=60)
    report = kernel.hygiene("s", big)
    assert report.token_source == "estimate"
    assert report.tokens_before > WINDOW * 0.85
    assert report.compacted is True


def test_the_sessions_last_real_usage_counts_as_measured() -> None:
    kernel = gateway_kernel()
    session = kernel.session("s")
    session.update_usage({"input_tokens": 10, "cache_read_input_tokens": 200, "output_tokens": 1})
    report = kernel.hygiene("s", history())
    assert report.token_source == "measured"
    assert report.tokens_before == 210
    assert report.fired is False


def test_disabled_compression_never_fires() -> None:
    kernel = gateway_kernel(compaction=False)
    report = kernel.hygiene("s", history(), last_prompt_tokens=WINDOW * 2)
    assert report.fired is False
    assert report.compacted is False


def test_aborted_summary_leaves_the_history_unchanged() -> None:
    with FakeAPI() as api:
        api.fail(401, "invalid x-api-key", type="authentication_error")
        kernel = ctxengine.load(
            {
                "model": {"name": "claude-sonnet-4-6", "context_length": WINDOW},
                "engines": {"compressor": {"protect_last_n": 4}},
                "auxiliary": {
                    "compression": {
                        "provider": "anthropic",
                        "base_url": api.base_url,
                        "api_key": "bad-key",
                        "timeout": 5,
                    }
                },
            }
        )
        messages = history()
        report = kernel.hygiene("s", messages, last_prompt_tokens=WINDOW)
    assert report.fired is True
    assert report.compacted is False
    assert report.messages == messages
    assert report.result is not None and report.result.status == "aborted"
    assert report.notice.startswith("compaction aborted: ")
    assert report.notice.endswith("; no messages were dropped")


class BlockingEngine:
    """An engine that waits inside compress until the test lets it go."""

    CTXENGINE_KIND = "engine"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    @hookimpl
    def compress(self, ctx: EngineContext, conversation: Conversation) -> CompressResult:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(10)
        kept = conversation.messages[-2:]
        return CompressResult(
            status="compacted",
            reason="test",
            conversation=conversation.with_messages(kept),
            engine=ctx.engine,
            tokens_before=100,
            tokens_after=10,
            messages_before=len(conversation.messages),
            messages_after=len(kept),
        )


@pytest.fixture
def blocking() -> Iterator[BlockingEngine]:
    engine = BlockingEngine()
    with register_engine("blocking", engine):
        yield engine


def test_two_workers_never_compact_the_same_session_at_once(blocking: BlockingEngine) -> None:
    kernel = ctxengine.load(
        {"context": {"engine": "blocking"}, "model": {"context_length": WINDOW}}
    )
    messages = history()
    reports: dict[str, Any] = {}

    def first() -> None:
        reports["first"] = kernel.hygiene("s", messages, last_prompt_tokens=WINDOW)

    worker = threading.Thread(target=first)
    worker.start()
    assert blocking.entered.wait(10)
    second = kernel.hygiene("s", messages, last_prompt_tokens=WINDOW)
    blocking.release.set()
    worker.join(10)
    assert second.compacted is False
    assert second.messages == messages
    assert second.notice == "another worker is already compacting this session; history unchanged"
    assert reports["first"].compacted is True
    assert blocking.calls == 1
    # Another session is not blocked by this one.
    blocking.entered.clear()
    other = kernel.hygiene("other", messages, last_prompt_tokens=WINDOW)
    assert other.compacted is True


def _longest_session() -> list[Message]:
    best: list[Message] = []
    size = 0
    with (TRANSCRIPTS / "claude_code_spotter.openai.jsonl").open() as lines:
        for line in lines:
            if len(line) > size:
                size, best = len(line), json.loads(line)["messages"]
    return best


def test_replaying_the_longest_real_session_as_a_gateway_stays_valid_and_in_the_window() -> None:
    """History grows turn by turn; hygiene runs before each agent turn with a 32K window."""
    kernel = gateway_kernel()
    session = _longest_session()
    counter = TokenCounter()
    stored: list[Message] = []
    compactions = 0
    for index, message in enumerate(session):
        stored = [*stored, message]
        next_is_agent = index + 1 < len(session) and session[index + 1]["role"] == "assistant"
        if not next_is_agent:
            continue
        report = kernel.hygiene("replay", stored)
        stored = report.messages
        compactions += report.compacted
        assert not validate(stored, "openai"), report.notice
        assert counter.count(stored) <= WINDOW, report.notice
    assert compactions >= 3


def test_estimated_before_and_after_use_the_same_counting() -> None:
    from ctxengine import rough_conversation_tokens

    kernel = gateway_kernel()
    _, big = samples.conversation("openai", turns=60)
    report = kernel.hygiene("s", big)
    assert report.compacted is True
    assert report.tokens_before == rough_conversation_tokens(big)
    assert report.tokens_after == rough_conversation_tokens(report.messages, report.system)


# -- the hard message limit holds, or says why not (regression: defect 5 of issue "Hardening") --


def _many_messages(count: int) -> list[Message]:
    """A long, cheap chat: ``count`` short messages, user and assistant in turn."""
    messages: list[Message] = [{"role": "system", "content": "You are a helpful bot."}]
    for k in range(count - 1):
        role = "user" if k % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"{role} line {k} about order #{k % 97}."})
    return messages


def test_the_hard_message_limit_brings_a_cheap_history_under_it() -> None:
    # 6,000 messages in a 1M window: far below the token threshold, so the compressor's tail
    # budget covered everything and the result was "nothing to compact".
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 1_000_000},
            "auxiliary": {"compression": {"provider": "extractive"}},
        }
    )
    messages = _many_messages(6_000)
    report = kernel.hygiene("big", messages)
    assert report.fired and report.compacted, report.notice
    assert report.error is None
    assert report.message_budget == 2_500
    assert len(report.messages) <= 2_500
    assert "gateways.hygiene.hard_message_limit 5,000" in report.reason
    assert validate(report.messages, "openai", profile="strict") == []
    assert report.messages[-1] is messages[-1]
    # Under the limit now: the next turn does not fire again.
    again = kernel.hygiene("big", [*report.messages, {"role": "user", "content": "hi"}])
    assert again.fired is False


class NeverShrinks:
    """An engine that compacts nothing (a noop every time)."""

    CTXENGINE_KIND = "engine"

    @hookimpl
    def compress(self, ctx: EngineContext, conversation: Conversation) -> CompressResult:
        return CompressResult.unchanged(
            "noop", "this engine never compacts", conversation, engine="never", tokens=0
        )


def test_an_engine_that_cannot_meet_the_limit_gets_a_clear_error() -> None:
    with register_engine("never", NeverShrinks()):
        kernel = ctxengine.load({"context": {"engine": "never"}}, env={})
        messages = _many_messages(5_001)
        report = kernel.hygiene("s", messages)
    assert report.fired and not report.compacted
    assert report.messages == messages
    assert report.error is not None and report.notice.startswith("ERROR: ")
    assert "5,001 messages, over the budget of 2,500" in report.error
    assert "this engine never compacts" in report.error


def test_a_malformed_history_is_handed_back_with_a_clear_error() -> None:
    kernel = gateway_kernel()
    messages = history()
    at = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    messages[at] = {**messages[at], "tool_calls": "not a list"}
    report = kernel.hygiene("s", messages, last_prompt_tokens=WINDOW)
    assert report.fired and not report.compacted
    assert report.messages == messages
    assert report.error is not None
    assert "malformed" in report.error and f"messages[{at}].tool_calls" in report.error
