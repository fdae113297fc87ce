"""The compressor against a local HTTP server speaking the Anthropic Messages API and OpenAI chat
completions, through the real SDKs: success, iterative update, and every failure kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine
import ctxengine_compressor as plugin
from ctxengine import CompressResult, Format, Message, TokenEstimate
from ctxengine.messages import validate
from ctxengine.testing import samples
from ctxengine_compressor.assemble import (
    SUMMARY_PREFIX,
    is_pure_summary_message,
    without_summary,
)
from ctxengine_compressor.ledger import build_ledger, missing_from, readable_text
from ctxengine_fakeapi import FakeAPI

from .helpers import GOOD_SUMMARY, Clock, make_ctx, run

known = TokenEstimate.known
"""A prompt size known exactly (the engine's decisions are tested on exact sizes)."""

APIS = ("anthropic", "openai")


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def _provider(api: FakeAPI, which: str, timeout: float = 5.0) -> Any:
    # One attempt: each failure kind reaches the engine as the API's first answer.
    settings = {
        "provider": which,
        "model": "claude-haiku-4-5" if which == "anthropic" else "gpt-4o-mini",
        "base_url": api.base_url if which == "anthropic" else api.openai_base_url,
        "api_key": "test-key",
        "timeout": timeout,
        "max_attempts": 1,
    }
    return ctxengine.load({"auxiliary": {"compression": settings}}, env={}).summary_provider()


def _conversation(which: str) -> tuple[Any, list[Message], Format]:
    # Compact the conversation in the same format as the summary API, and in the other one.
    fmt: Format = "anthropic" if which == "anthropic" else "openai"
    system, messages = samples.conversation(fmt)
    return system, messages, fmt


def assert_nothing_lost(messages: list[Message], result: CompressResult) -> None:
    """Every original message is in the output verbatim, is a pruned head message in its place,
    or sits in the compacted middle whose files, commands and errors the summary carries."""
    out = result.messages
    if result.status != "compacted":
        assert out == messages
        return
    summaries = [m for m in out if SUMMARY_PREFIX in json.dumps(m)]
    assert len(summaries) == 1
    assert result.summary
    kept_ids = {id(m) for m in out}
    dropped = [
        m
        for i, m in enumerate(messages)
        if id(m) not in kept_ids
        and not (
            i < len(out)
            and out[i].get("role") == m.get("role")
            and SUMMARY_PREFIX not in json.dumps(out[i])
        )
    ]
    assert dropped
    fmt = result.conversation.format
    # An earlier summary among them is carried through its ledger, not as a turn.
    turns = [without_summary(m) for m in dropped if not is_pure_summary_message(m)]
    missing = missing_from(build_ledger(turns, fmt), result.summary)
    # What the kept messages still show need not be repeated in the summary.
    kept = readable_text([m for m in out if SUMMARY_PREFIX not in json.dumps(m)], fmt)
    missing = missing_from(missing, kept)
    assert not (missing.paths or missing.commands or missing.errors or missing.asks), missing


@pytest.mark.parametrize("which", APIS)
def test_success_then_iterative_update(api: FakeAPI, which: str) -> None:
    provider = _provider(api, which)
    # A 64K window: a 3,200-token summary budget, room for the whole ledger of the middle.
    ctx = make_ctx(provider, context_length=64_000)
    system, messages, fmt = _conversation(which)
    api.reply_text(GOOD_SUMMARY.replace("Module fixes.", "Refactoring marker-7781."))
    first = run(ctx, messages, fmt, system)
    assert first.status == "compacted", first.reason
    assert first.provider == which
    assert first.fallback_used is False
    assert "marker-7781" in (first.summary or "")
    assert validate(first.messages, fmt, system=first.system) == []
    assert_nothing_lost(messages, first)
    body = api.requests[-1].body
    assert body["max_tokens"] == 3_200  # 5 % of the 64K window
    prompt = json.dumps(body["messages"])
    assert "## Critical Context" in prompt

    _, more = samples.conversation(fmt, turns=12)
    grown = first.messages + [m for m in more if m.get("role") != "system"]
    api.reply_text(GOOD_SUMMARY)
    second = run(ctx, grown, fmt, first.system)
    assert second.status == "compacted", second.reason
    request = json.dumps(api.requests[-1].body["messages"])
    assert "<previous-summary>" in request and "marker-7781" in request
    assert "UPDATE that summary" in request
    assert validate(second.messages, fmt, system=second.system) == []
    assert_nothing_lost(grown, second)


def _aborts(api: FakeAPI, which: str, clock: Clock, timeout: float = 5.0) -> CompressResult:
    ctx = make_ctx(_provider(api, which, timeout=timeout), clock=clock)
    system, messages, fmt = _conversation(which)
    result = run(ctx, messages, fmt, system)
    assert result.status == "aborted", result.reason
    assert result.messages is messages
    assert result.system is system
    assert_nothing_lost(messages, result)
    # Cooldown: automatic compaction stays off for 60 s unless forced.
    assert plugin.should_compress(ctx, known(10**6), "agent", False) is False
    assert plugin.should_compress(ctx, known(10**6), "agent", True) is True
    clock.now += 60.5
    assert plugin.should_compress(ctx, known(10**6), "agent", False) is True
    return result


@pytest.mark.parametrize("which", APIS)
def test_timeout_aborts(api: FakeAPI, which: str) -> None:
    api.delay(3.0)
    result = _aborts(api, which, Clock(), timeout=0.3)
    assert "summary failed (timeout)" in result.reason


@pytest.mark.parametrize("which", APIS)
def test_401_aborts(api: FakeAPI, which: str) -> None:
    api.fail(401, "invalid x-api-key")
    result = _aborts(api, which, Clock())
    assert "summary failed (auth)" in result.reason
    assert "invalid x-api-key" in result.reason


@pytest.mark.parametrize("which", APIS)
def test_429_aborts(api: FakeAPI, which: str) -> None:
    api.fail(429, "slow down")
    result = _aborts(api, which, Clock())
    assert "summary failed (rate_limit)" in result.reason


def _falls_back(api: FakeAPI, which: str, kind: str) -> CompressResult:
    clock = Clock()
    ctx = make_ctx(_provider(api, which), clock=clock)
    system, messages, fmt = _conversation(which)
    result = run(ctx, messages, fmt, system)
    assert result.status == "compacted", result.reason
    assert result.fallback_used is True
    assert f"summary failed ({kind})" in result.reason
    assert result.summary and "## Goal" in result.summary
    assert validate(result.messages, fmt, system=result.system) == []
    assert_nothing_lost(messages, result)
    # A fallback is not an abort: no cooldown.
    assert plugin.should_compress(ctx, known(10**6), "agent", False) is True
    return result


@pytest.mark.parametrize("which", APIS)
def test_500_falls_back_to_the_digest(api: FakeAPI, which: str) -> None:
    api.fail(500, "internal error")
    _falls_back(api, which, "server")


@pytest.mark.parametrize("which", APIS)
def test_empty_content_falls_back(api: FakeAPI, which: str) -> None:
    api.reply_empty()
    _falls_back(api, which, "empty")


@pytest.mark.parametrize("which", APIS)
def test_non_text_reply_falls_back(api: FakeAPI, which: str) -> None:
    api.reply_blocks([{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}])
    _falls_back(api, which, "unparsable")


@pytest.mark.parametrize("which", APIS)
def test_context_length_error_falls_back(api: FakeAPI, which: str) -> None:
    api.context_length_error()
    _falls_back(api, which, "context_length")


@pytest.mark.parametrize("which", APIS)
def test_abort_on_summary_failure_aborts_a_500(api: FakeAPI, which: str) -> None:
    api.fail(500, "internal error")
    ctx = make_ctx(_provider(api, which), abort_on_failure=True)
    system, messages, fmt = _conversation(which)
    result = run(ctx, messages, fmt, system)
    assert result.status == "aborted"
    assert result.messages is messages
