"""The ``system_and_3`` plugin's breakpoint report, the marker rule set, the plugin in a kernel."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ctxengine import CacheSettings, EngineContext, TokenCounter, config_from_mapping, lookup_model
from ctxengine.messages import marker_positions
from ctxengine.testing.markers import marker_problems
from ctxengine_caching.breakpoints import Breakpoint, breakpoint_report

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
    assert [where for where, _ in marker_positions(marked.request)] == [
        "system[0]",
        "messages[0].content[0]",
    ]
    assert marked.breakpoints == 2
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
    from ctxengine import load

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
