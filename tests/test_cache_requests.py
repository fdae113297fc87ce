"""What the kernel adds to requests besides markers: OpenAI's prompt_cache_key (and retention),
Anthropic's cache-miss diagnostics, ``ctx.last_request``; and the miss reason surfaced in the
usage record and the per-response cache line, through the real SDKs against the fake API."""

from __future__ import annotations

from typing import Any

import pytest

import ctxengine
from ctxengine._accounting.cache_stats import cache_line
from ctxengine._kernel.cache_settings import is_openai_api, session_cache_key
from ctxengine.messages import marker_positions
from ctxengine.testing import samples
from ctxengine_fakeapi import FakeAPI


def openai_request() -> dict[str, Any]:
    return {"model": "gpt-4.1", "messages": [{"role": "system", "content": "Be brief."}]}


def test_openai_api_gets_a_stable_key_per_session() -> None:
    kernel = ctxengine.load({"model": {"name": "gpt-4.1"}}, env={})
    first = kernel.session("chat-1").prepare(openai_request())
    again = kernel.session("chat-1").prepare(openai_request())
    other = kernel.session("chat-2").prepare(openai_request())
    assert first["prompt_cache_key"] == again["prompt_cache_key"] == session_cache_key("chat-1")
    assert other["prompt_cache_key"] != first["prompt_cache_key"]
    assert "chat-1" not in first["prompt_cache_key"] and len(first["prompt_cache_key"]) <= 64
    assert "prompt_cache_retention" not in first


def test_retention_and_the_hosts_own_key() -> None:
    kernel = ctxengine.load(
        {"model": {"name": "gpt-4.1"}, "prompt_caching": {"cache_retention": "24h"}}, env={}
    )
    session = kernel.session("s")
    prepared = session.prepare(openai_request())
    assert prepared["prompt_cache_retention"] == "24h"
    mine = session.prepare({**openai_request(), "prompt_cache_key": "host-key"})
    assert mine["prompt_cache_key"] == "host-key"


@pytest.mark.parametrize(
    ("config", "sent"),
    [
        ({"model": {"name": "llama-3", "base_url": "http://localhost:8000/v1"}}, False),
        (
            {
                "model": {"name": "llama-3", "base_url": "http://localhost:8000/v1"},
                "prompt_caching": {"cache_key": True},
            },
            True,
        ),
        ({"model": {"name": "gpt-4.1"}, "prompt_caching": {"cache_key": False}}, False),
        ({"model": {"name": "gpt-4.1"}, "prompt_caching": {"enabled": False}}, False),
        ({"model": {"name": "gpt-4.1", "base_url": "https://api.openai.com/v1"}}, True),
    ],
)
def test_when_a_key_is_sent(config: dict[str, Any], sent: bool) -> None:
    prepared = ctxengine.load(config, env={}).session("s").prepare(openai_request())
    assert ("prompt_cache_key" in prepared) is sent


def test_is_openai_api() -> None:
    assert is_openai_api(None, "openai-compatible")
    assert is_openai_api("https://api.openai.com/v1", "openai-compatible")
    assert not is_openai_api("https://openrouter.ai/api/v1", "openrouter")
    assert not is_openai_api("http://localhost:11434/v1", "openai-compatible")


def test_last_request_is_a_snapshot() -> None:
    kernel = ctxengine.load({}, env={})
    session = kernel.session("s")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello " * 10}]
    sent = session.prepare({"model": "m", "system": "sys", "messages": messages})
    messages.append({"role": "assistant", "content": "hi"})
    last = session.ctx.last_request
    assert last is not None
    assert last.format == "anthropic" and last.tokens > 0
    assert list(last.request["messages"]) == sent["messages"]
    assert len(last.messages) == 1 and last.messages[0] is messages[0]
    session.reset()
    assert session.ctx.last_request is None


def test_diagnostics_and_the_miss_reason_through_the_sdk() -> None:
    anthropic = pytest.importorskip("anthropic")
    with FakeAPI() as api:
        kernel = ctxengine.load(
            {
                "model": {"name": "claude-sonnet-4-6", "base_url": api.base_url},
                "prompt_caching": {"enabled": True, "diagnostics": True},
            },
            env={},
        )
        client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
        session = kernel.session("s")
        history: list[dict[str, Any]] = [{"role": "user", "content": "Explain the repo. " * 80}]
        first = session.prepare({"model": "claude-sonnet-4-6", "system": "A", "messages": history})
        assert first["diagnostics"] == {"previous_message_id": None}
        reply = client.messages.create(**first, max_tokens=64)
        assert session.update_usage(reply).cache_miss_reason is None
        history += [
            {"role": "assistant", "content": reply.content[0].text},
            {"role": "user", "content": "More."},
        ]
        # The host changes its system prompt: the whole prefix misses, and the API says why.
        second = session.prepare({"model": "claude-sonnet-4-6", "system": "B", "messages": history})
        assert second["diagnostics"] == {"previous_message_id": reply.id}
        usage = session.update_usage(client.messages.create(**second, max_tokens=64))
    assert usage.cache_miss_reason == "system_changed"
    assert usage.cache_missed_tokens > 0
    assert "miss: system_changed" in cache_line(usage)


def test_top_level_marker_through_the_sdk_reads_back() -> None:
    anthropic = pytest.importorskip("anthropic")
    with FakeAPI() as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read lib/. " * 100}]
        automatic = {"type": "ephemeral"}
        one = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=32, messages=messages, cache_control=automatic
        )
        messages += [
            {"role": "assistant", "content": one.content[0].text},
            {"role": "user", "content": "Next."},
        ]
        two = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=32, messages=messages, cache_control=automatic
        )
        too_many = [
            {"type": "text", "text": f"part {k}", "cache_control": {"type": "ephemeral"}}
            for k in range(4)
        ]
        with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks"):
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=32,
                messages=[{"role": "user", "content": too_many}],
                cache_control=automatic,
            )
        with pytest.raises(anthropic.BadRequestError, match="must not come after"):
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=32,
                system=[{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": "hi"}],
                cache_control={"type": "ephemeral", "ttl": "1h"},
            )
    assert one.usage.cache_creation_input_tokens > 0
    assert two.usage.cache_read_input_tokens == one.usage.cache_creation_input_tokens


def test_openai_prompt_cache_key_reads_back_through_the_sdk() -> None:
    openai = pytest.importorskip("openai")
    with FakeAPI() as api:
        kernel = ctxengine.load({"model": {"name": "gpt-4.1"}}, env={})
        session = kernel.session("s")
        client = openai.OpenAI(api_key="k", base_url=api.openai_base_url, max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read lib/. " * 200}]
        first = client.chat.completions.create(
            **session.prepare({"model": "gpt-4.1", "messages": messages})
        )
        session.update_usage(first.usage)
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
        second = client.chat.completions.create(
            **session.prepare({"model": "gpt-4.1", "messages": messages})
        )
        usage = session.update_usage(second.usage)
    assert api.requests[-1].body["prompt_cache_key"] == session_cache_key("s")
    assert usage.cache_read_tokens > 0
    assert usage.prompt_tokens == second.usage.prompt_tokens


def test_caching_off_prepares_without_markers() -> None:
    history = samples.openai_conversation(turns=5)
    request = {"model": "claude-sonnet-4-6", "messages": history}
    marked = ctxengine.load({"model": {"name": "claude-sonnet-4-6"}}).session("s").prepare(request)
    unmarked = (
        ctxengine.load(
            {"model": {"name": "claude-sonnet-4-6"}, "prompt_caching": {"enabled": False}}
        )
        .session("s")
        .prepare(request)
    )
    assert "cache_control" in repr(marked["messages"])
    assert "cache_control" not in repr(unmarked["messages"])


class BareStrategy:
    """A strategy written before MarkedRequest: it answers with the bare marked request."""

    CTXENGINE_KIND = "cache_strategy"

    @ctxengine.hookimpl
    def cache_strategy(self, request: dict[str, Any]) -> dict[str, Any]:
        last = {**request["messages"][-1], "cache_control": {"type": "ephemeral"}}
        return {**request, "messages": [*request["messages"][:-1], last]}


def test_a_strategy_answering_with_the_bare_request_has_its_markers_counted() -> None:
    with ctxengine.register_engine("bare", BareStrategy(), kind="cache_strategy"):
        kernel = ctxengine.load(
            {"model": {"name": "claude-sonnet-4-6"}, "prompt_caching": {"strategy": "bare"}}
        )
        session = kernel.session("s")
        history = samples.openai_conversation(turns=3)
        prepared = session.prepare({"model": "claude-sonnet-4-6", "messages": history})
        assert "cache_control" in prepared["messages"][-1]
        assert session.ctx.last_request is not None
        assert session.ctx.last_request.breakpoints == 1


def test_the_built_in_strategy_reports_the_markers_it_placed() -> None:
    session = ctxengine.load({"model": {"name": "claude-sonnet-4-6"}}).session("s")
    history = samples.openai_conversation(turns=5)
    prepared = session.prepare({"model": "claude-sonnet-4-6", "messages": history})
    assert session.ctx.last_request is not None
    assert session.ctx.last_request.breakpoints == len(marker_positions(prepared)) > 0
