"""Kernel side of prompt caching: routes, settings, status lines, breakpoint reports, the plugin."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from ctxengine._accounting.models import lookup_model
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._config.core import config_from_mapping
from ctxengine._kernel.cache_settings import cache_settings_for, caching_status_line, detect_route
from ctxengine._messages.markers import marker_positions, marker_problems
from ctxengine._plugin.context import CacheSettings, EngineContext
from ctxengine_caching.breakpoints import Breakpoint, breakpoint_report

# --- route detection -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "base_url", "api", "route"),
    [
        ("claude-sonnet-4-6", None, None, "anthropic"),
        ("claude-sonnet-4-6", "", None, "anthropic"),
        ("claude-sonnet-4-6", "https://api.anthropic.com", None, "anthropic"),
        ("claude-sonnet-4-6", "https://api.anthropic.com/v1/", "openai", "anthropic"),
        ("anthropic/claude-sonnet-4.5", "https://openrouter.ai/api/v1", None, "openrouter"),
        ("anthropic/claude-sonnet-4.5", "openrouter.ai/api/v1", None, "openrouter"),
        ("anthropic/claude-sonnet-4.5", "https://eu.openrouter.ai/api/v1", None, "openrouter"),
        ("claude-sonnet-4-6", "https://openrouter.ai.evil.example/v1", None, "openai-compatible"),
        (
            "claude-sonnet-4-6",
            "https://gateway.ai.cloudflare.com/v1/acct/gw/anthropic",
            None,
            "anthropic-compatible",
        ),
        ("claude-sonnet-4-6", "http://anthropic-proxy.internal:8080", None, "anthropic-compatible"),
        ("claude-sonnet-4-6", "http://127.0.0.1:4000", "anthropic", "anthropic-compatible"),
        ("claude-sonnet-4-6", "http://127.0.0.1:4000/v1", None, "openai-compatible"),
        ("gpt-4o", None, None, "openai-compatible"),
        ("my-local-model", None, None, "openai-compatible"),
        ("my-local-model", None, "anthropic", "anthropic"),
        ("claude-sonnet-4-6", None, "openai", "openai-compatible"),
    ],
)
def test_detect_route(model: str, base_url: str | None, api: Any, route: str) -> None:
    assert detect_route(model, base_url, api=api) == route


def test_detect_route_bad_input() -> None:
    with pytest.raises(TypeError, match="model_name must be a string, got NoneType"):
        detect_route(None, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="base_url must be a string or None, got int"):
        detect_route("claude-sonnet-4-6", 8080)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="api must be 'anthropic', 'openai' or None; got 'grpc'"):
        detect_route("claude-sonnet-4-6", None, api="grpc")  # type: ignore[arg-type]


# --- settings and status line --------------------------------------------------------------


def settings_for(
    name: str, base_url: str | None = None, **caching: Any
) -> tuple[CacheSettings | None, str, Any, Any]:
    config = config_from_mapping(
        {"model": {"name": name, "base_url": base_url}, "prompt_caching": caching}
    )
    model = lookup_model(name)
    settings, reason = cache_settings_for(config, model)
    return settings, reason, config, model


def test_auto_on_for_claude_via_openrouter() -> None:
    settings, reason, config, model = settings_for(
        "anthropic/claude-sonnet-4.5", "https://openrouter.ai/api/v1"
    )
    assert settings == CacheSettings(
        ttl="5m", route="openrouter", native=False, min_cacheable_tokens=1_024
    )
    assert reason == "Claude via OpenRouter"
    assert (
        caching_status_line(config, model, settings, reason)
        == "💾 Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)"
    )


def test_auto_on_for_native_anthropic_with_1h() -> None:
    settings, reason, config, model = settings_for("claude-opus-4-6", cache_ttl="1h")
    assert settings == CacheSettings(
        ttl="1h", route="anthropic", native=True, min_cacheable_tokens=4_096
    )
    assert (
        caching_status_line(config, model, settings, reason)
        == "💾 Prompt caching: ENABLED (Claude via Anthropic API, 1h TTL)"
    )


def test_auto_on_for_anthropic_compatible_gateway() -> None:
    settings, reason, _, _ = settings_for("claude-haiku-4-5", "https://gw.example.com/anthropic/v1")
    assert settings is not None
    assert (settings.route, settings.native) == ("anthropic-compatible", True)
    assert reason == "Claude via Anthropic-compatible gateway"


def test_auto_off_for_other_models() -> None:
    settings, reason, config, model = settings_for("gpt-4o")
    assert settings is None
    assert reason == "gpt-4o is not a Claude model; set prompt_caching.enabled: true to force it"
    assert caching_status_line(config, model, settings, reason) == (
        "💾 Prompt caching: DISABLED (gpt-4o is not a Claude model; "
        "set prompt_caching.enabled: true to force it)"
    )


def test_auto_off_for_claude_on_unknown_openai_compatible_endpoint() -> None:
    settings, reason, _, _ = settings_for("claude-sonnet-4-5", "http://localhost:4000/v1")
    assert settings is None
    assert reason == (
        "http://localhost:4000/v1 is an OpenAI-compatible endpoint that may not accept "
        "cache_control; set prompt_caching.enabled: true to force it"
    )


def test_enabled_true_forces_it_on() -> None:
    settings, reason, config, model = settings_for(
        "llama-3.3-70b", "http://localhost:4000/v1", enabled=True
    )
    assert settings == CacheSettings(
        ttl="5m", route="openai-compatible", native=False, min_cacheable_tokens=0
    )
    assert caching_status_line(config, model, settings, reason) == (
        "💾 Prompt caching: ENABLED (forced by prompt_caching.enabled, llama-3.3-70b via "
        "OpenAI-compatible endpoint, 5m TTL)"
    )


def test_enabled_false_forces_it_off() -> None:
    settings, reason, config, model = settings_for("claude-sonnet-4-6", enabled=False)
    assert settings is None
    assert caching_status_line(config, model, settings, reason) == (
        "💾 Prompt caching: DISABLED (prompt_caching.enabled is false)"
    )


def test_status_line_when_strategy_missing() -> None:
    _, reason, config, model = settings_for("claude-sonnet-4-6", strategy="fancy")
    # the kernel drops the settings when the named strategy is not loaded
    assert caching_status_line(config, model, None, reason) == (
        "💾 Prompt caching: DISABLED (cache strategy 'fancy' is not loaded)"
    )


def test_bad_ttl_on_a_hand_built_config() -> None:
    import attrs

    config = config_from_mapping({})
    caching = attrs.evolve(config.prompt_caching, cache_ttl="24h")  # type: ignore[arg-type]
    bad = attrs.evolve(config, prompt_caching=caching)
    with pytest.raises(
        ValueError, match=re.escape("prompt_caching.cache_ttl must be one of '5m', '1h'; got '24h'")
    ):
        cache_settings_for(bad, lookup_model("claude-sonnet-4-6"))


# --- breakpoint reports and marker checks ------------------------------------------------


class FixedCounter:
    """Ten tokens per message, five for any system prompt, three per tool."""

    def count_message(self, msg: dict[str, Any]) -> int:
        return 10

    def count_system(self, system: object) -> int:
        return 5 if system else 0

    def count_tools(self, tools: Any) -> int:
        return 3 * len(tools or ())


M5 = {"type": "ephemeral"}


def test_breakpoint_report_prefixes_and_minimum() -> None:
    request: dict[str, Any] = {
        "tools": [
            {"name": "a", "input_schema": {}},
            {"name": "b", "input_schema": {}, "cache_control": M5},
        ],
        "system": [{"type": "text", "text": "s", "cache_control": M5}],
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": [{"type": "text", "text": "a", "cache_control": M5}]},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "cache_control": M5},
        ],
    }
    report = breakpoint_report(request, FixedCounter(), 20)
    assert report == [
        Breakpoint("tools[1]", 6, False),
        Breakpoint("system[0]", 11, False),
        Breakpoint("messages[1].content[0]", 31, True),
        Breakpoint("messages[3]", 51, True),
    ]
    assert (
        breakpoint_report({"messages": [{"role": "user", "content": "x"}]}, FixedCounter(), 1) == []
    )


def test_breakpoint_report_counts_the_unmarked_messages() -> None:
    from ctxengine_caching.strategy import apply_system_and_3

    counter = TokenCounter()
    request: dict[str, Any] = {
        "system": "You are a careful agent. " * 40,
        "messages": [
            {"role": "user", "content": "word " * 300},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "word " * 900},
        ],
    }
    marked = apply_system_and_3(request, ttl="5m", native=True)
    report = breakpoint_report(marked, counter, 1_024, unmarked=request)
    system = counter.count_system(request["system"])
    first = system + counter.count_message(request["messages"][0])
    assert [(b.position, b.prefix_tokens) for b in report] == [
        ("system[0]", system),
        ("messages[0].content[0]", first),
        ("messages[1].content[0]", first + counter.count_message(request["messages"][1])),
        ("messages[2].content[0]", counter.count(request["messages"], request["system"])),
    ]
    assert [b.cacheable for b in report] == [False, False, False, True]
    # the counts came from the caller's objects (cached), not the marked copies
    assert report == breakpoint_report(marked, counter, 1_024, unmarked=request)


def test_marker_problems_wording() -> None:
    one_h = {"type": "ephemeral", "ttl": "1h"}
    request: dict[str, Any] = {
        "system": [{"type": "text", "text": "s", "cache_control": M5}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": " ", "cache_control": one_h}]},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "cache_control": M5}],
            },
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "persistent"}}],
            },
            {
                "role": "assistant",
                "content": "y",
                "cache_control": {"type": "ephemeral", "ttl": "2h"},
            },
        ],
    }
    assert marker_problems(request) == [
        "messages[0].content[0]: cache_control on an empty text block (the API rejects it); "
        "mark a non-empty block or the message instead",
        "messages[1].content[0]: cache_control on a thinking block",
        "messages[2].content[0]: cache_control must be {'type': 'ephemeral'}, optionally with "
        "'ttl': '5m' or '1h'; got {'type': 'persistent'}",
        "messages[3]: cache_control must be {'type': 'ephemeral'}, optionally with 'ttl': '5m' "
        "or '1h'; got {'type': 'ephemeral', 'ttl': '2h'}",
        "request: 5 cache_control breakpoints (system[0], messages[0].content[0], "
        "messages[1].content[0], messages[2].content[0], messages[3]); at most 4 are allowed",
        "messages[0].content[0]: a 1h cache_control after the 5m one at system[0]; longer TTLs "
        "must come first (in the order tools, system, messages)",
    ]
    assert [where for where, _ in marker_positions(request)][-1] == "messages[3]"


# --- the plugin -----------------------------------------------------------------------------


def make_ctx(name: str = "claude-sonnet-4-6") -> EngineContext:
    config = config_from_mapping({"model": {"name": name}})
    return EngineContext(
        session_id="s1",
        engine="compressor",
        config=config,
        model=lookup_model(name),
        tokens=TokenCounter(),
        summarizer=lambda: None,
    )


def test_plugin_marks_and_records_breakpoints(caplog: pytest.LogCaptureFixture) -> None:
    import ctxengine_caching
    from ctxengine_caching import STATE_KEY, StrategyState

    assert ctxengine_caching.CTXENGINE_KIND == "cache_strategy"
    ctx = make_ctx()
    settings = CacheSettings(ttl="5m", route="anthropic", native=True, min_cacheable_tokens=2_048)
    small: dict[str, Any] = {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    with caplog.at_level(logging.INFO, logger="ctxengine"):
        marked = ctxengine_caching.cache_strategy(ctx=ctx, request=small, settings=settings)
        ctxengine_caching.cache_strategy(ctx=ctx, request=small, settings=settings)
    assert marked is not None
    assert [where for where, _ in marker_positions(marked)] == [
        "system[0]",
        "messages[0].content[0]",
    ]
    state = ctx.state[STATE_KEY]
    assert isinstance(state, StrategyState)
    assert state.requests == 2
    assert state.below_minimum_requests == 2
    assert not state.reached_minimum
    assert [b.position for b in state.uncacheable] == ["system[0]", "messages[0].content[0]"]
    notices = [r.getMessage() for r in caplog.records if "prompt caching" in r.getMessage()]
    assert len(notices) == 1  # logged once per session, counted every time
    assert notices[0].startswith(
        "prompt caching: 2 of 2 breakpoints cover fewer than 2048 tokens (system[0]="
    )

    history: list[dict[str, Any]] = [{"role": "user", "content": "token " * 3_000}]
    big: dict[str, Any] = {"system": "Be brief.", "messages": history}
    ctxengine_caching.cache_strategy(ctx=ctx, request=big, settings=settings)
    assert ctx.state[STATE_KEY].reached_minimum  # (re-read: mypy narrowed the attribute)
    assert [b.cacheable for b in state.breakpoints] == [False, True]

    # Once the minimum was reached, reports are measured only when read, and always describe
    # the request as it was sent, even if the caller's list grows afterwards.
    history.extend([{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}])
    ctxengine_caching.cache_strategy(ctx=ctx, request=big, settings=settings)
    history.append({"role": "assistant", "content": "later"})
    assert state.requests == 4
    assert state.below_minimum_requests == 2
    report = state.breakpoints
    assert [b.position for b in report] == [
        "system[0]",
        "messages[0].content[0]",
        "messages[1].content[0]",
        "messages[2].content[0]",
    ]
    assert report[-1].prefix_tokens == ctx.tokens.count(history[:3], "Be brief.")
    assert state.breakpoints is report  # measured once


def test_kernel_session_prepare_uses_the_plugin() -> None:
    from ctxengine._kernel.kernel import load

    kernel = load(
        {
            "model": {
                "name": "anthropic/claude-sonnet-4.5",
                "base_url": "https://openrouter.ai/api/v1",
            },
            "prompt_caching": {"cache_ttl": "1h"},
        },
        env={},
    )
    assert "💾 Prompt caching: ENABLED (Claude via OpenRouter, 1h TTL)" in kernel.status_lines()
    session = kernel.session("chat")
    request: dict[str, Any] = {
        "model": "anthropic/claude-sonnet-4.5",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "r"},
        ],
    }
    prepared = session.prepare(request)
    assert [where for where, _ in marker_positions(prepared)] == [
        "messages[0].content[0]",
        "messages[1].content[0]",
        "messages[2]",
    ]
    assert "cache_control" not in request["messages"][0]
    kernel.close()
