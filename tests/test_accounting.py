"""Cache accounting: per-response cost and line, per-session totals, for both providers' usage."""

from __future__ import annotations

import pytest

from ctxengine._accounting.cache_stats import CacheCost, SessionCacheStats, cache_line, cost_of
from ctxengine._accounting.models import lookup_model
from ctxengine._accounting.usage import Usage, normalize_usage

SONNET = lookup_model("claude-sonnet-4-5")  # $3 in / $15 out per million tokens

# Anthropic Messages usage with a 5m/1h write split (input_tokens excludes the cache).
ANTHROPIC_RAW = {
    "input_tokens": 0,
    "output_tokens": 500,
    "cache_read_input_tokens": 41_200,
    "cache_creation_input_tokens": 2_700,
    "cache_creation": {"ephemeral_5m_input_tokens": 700, "ephemeral_1h_input_tokens": 2_000},
}
# OpenAI chat usage as OpenRouter reports Claude (prompt_tokens includes reads and writes).
OPENROUTER_RAW = {
    "prompt_tokens": 10_000,
    "completion_tokens": 200,
    "total_tokens": 10_200,
    "prompt_tokens_details": {"cached_tokens": 8_000, "cache_write_tokens": 1_500},
}


def test_prices_of_the_model() -> None:
    assert (SONNET.input_price, SONNET.output_price) == (3.0, 15.0)


def test_anthropic_usage_with_write_split() -> None:
    usage = normalize_usage(ANTHROPIC_RAW)
    assert usage == Usage(
        input_tokens=0,
        output_tokens=500,
        cache_read_tokens=41_200,
        cache_write_5m_tokens=700,
        cache_write_1h_tokens=2_000,
    )
    cost = cost_of(usage, SONNET)
    assert cost.input_cost == 0.0
    assert cost.cache_read_cost == pytest.approx(41_200 * 3e-6 * 0.1)
    assert cost.cache_write_5m_cost == pytest.approx(700 * 3e-6 * 1.25)
    assert cost.cache_write_1h_cost == pytest.approx(2_000 * 3e-6 * 2.0)
    assert cost.output_cost == pytest.approx(500 * 15e-6)
    assert cost.total == pytest.approx(0.01236 + 0.002625 + 0.012 + 0.0075)
    assert cost.uncached_total == pytest.approx(43_900 * 3e-6 + 500 * 15e-6)
    assert cost.savings == pytest.approx(cost.uncached_total - cost.total)
    assert cost.savings_ratio == pytest.approx(1 - 0.034485 / 0.1392)
    assert cache_line(usage) == (
        "💾 Cache: 41,200/43,900 tokens (94% hit, 2,700 written, 2,000 of them 1h)"
    )


def test_anthropic_sdk_usage_object() -> None:
    from anthropic.types import Usage as AnthropicUsage

    raw = AnthropicUsage(
        input_tokens=2_700,
        output_tokens=120,
        cache_read_input_tokens=41_200,
        cache_creation_input_tokens=0,
    )
    usage = normalize_usage(raw)
    assert cache_line(usage) == "💾 Cache: 41,200/43,900 tokens (94% hit, 0 written)"
    cost = cost_of(usage, SONNET)
    assert cost.total == pytest.approx(2_700 * 3e-6 + 41_200 * 0.3e-6 + 120 * 15e-6)


def test_openrouter_chat_usage() -> None:
    usage = normalize_usage(OPENROUTER_RAW)
    assert usage == Usage(
        input_tokens=500, output_tokens=200, cache_read_tokens=8_000, cache_write_5m_tokens=1_500
    )
    cost = cost_of(usage, SONNET)
    assert cost.total == pytest.approx(500 * 3e-6 + 8_000 * 0.3e-6 + 1_500 * 3.75e-6 + 200 * 15e-6)
    assert cost.uncached_total == pytest.approx(10_000 * 3e-6 + 200 * 15e-6)
    assert cache_line(usage) == "💾 Cache: 8,000/10,000 tokens (80% hit, 1,500 written)"


def test_openai_sdk_usage_object_without_cache_details() -> None:
    from openai.types import CompletionUsage

    usage = normalize_usage(
        CompletionUsage(prompt_tokens=1_000, completion_tokens=10, total_tokens=1_010)
    )
    cost = cost_of(usage, SONNET)
    assert cost.total == pytest.approx(cost.uncached_total)
    assert cost.savings_ratio == pytest.approx(0.0)
    assert cache_line(usage) == "💾 Cache: 0/1,000 tokens (0% hit, 0 written)"


def test_cache_line_edges() -> None:
    assert cache_line(Usage()) == "💾 Cache: 0/0 tokens (0% hit, 0 written)"
    # a near-total hit is not shown as a perfect one
    assert cache_line(Usage(input_tokens=3, cache_read_tokens=997)) == (
        "💾 Cache: 997/1,000 tokens (99% hit, 0 written)"
    )
    assert cache_line(Usage(cache_read_tokens=50)) == "💾 Cache: 50/50 tokens (100% hit, 0 written)"


def test_unknown_prices_cost_nothing() -> None:
    cost = cost_of(normalize_usage(ANTHROPIC_RAW), lookup_model("some-unknown-model"))
    assert cost == CacheCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert cost.savings_ratio == 0.0


def test_session_totals_over_both_providers() -> None:
    stats = SessionCacheStats()
    first = normalize_usage(
        {"input_tokens": 20, "output_tokens": 100, "cache_creation_input_tokens": 5_000}
    )
    second = normalize_usage(ANTHROPIC_RAW)
    third = normalize_usage(OPENROUTER_RAW)
    costs = [stats.add(usage, SONNET) for usage in (first, second, third)]
    assert stats.responses == 3
    assert stats.usage == first + second + third
    assert stats.usage.cache_write_5m_tokens == 5_000 + 700 + 1_500
    assert stats.usage.cache_write_1h_tokens == 2_000
    assert stats.usage.input_tokens == 520
    assert stats.usage.output_tokens == 800
    assert stats.cost.total == pytest.approx(sum(c.total for c in costs))
    assert stats.cost.uncached_total == pytest.approx(sum(c.uncached_total for c in costs))
    assert stats.hit_ratio == pytest.approx(49_200 / (5_020 + 43_900 + 10_000))
    saved = round(100 * stats.cost.savings_ratio)
    assert stats.line() == (
        f"💾 Session cache: 3 responses, 49,200/58,920 prompt tokens from cache (84% hit), "
        f"${stats.cost.total:.4f} vs ${stats.cost.uncached_total:.4f} uncached ({saved}% saved)"
    )


def test_session_totals_keep_compactions_and_cleared_counts() -> None:
    stats = SessionCacheStats()
    compacted = Usage(
        input_tokens=300,
        output_tokens=20,
        compaction=Usage(input_tokens=90_000, output_tokens=2_000),
    )
    cleared = Usage(input_tokens=500, cleared_input_tokens=7_000, cleared_tool_uses=4)
    thought = Usage(input_tokens=100, cleared_thinking_turns=2)
    costs = [stats.add(usage, SONNET) for usage in (compacted, cleared, thought, compacted)]
    assert stats.usage == compacted + cleared + thought + compacted
    assert stats.usage.compaction == Usage(input_tokens=180_000, output_tokens=4_000)
    assert (stats.usage.cleared_input_tokens, stats.usage.cleared_tool_uses) == (7_000, 4)
    assert stats.usage.cleared_thinking_turns == 2
    # The compactions are priced in the totals, once each.
    assert stats.cost.total == pytest.approx(sum(c.total for c in costs))
    assert stats.cost.total == pytest.approx(cost_of(stats.usage, SONNET).total)


def test_writes_only_cost_more_than_no_caching() -> None:
    stats = SessionCacheStats()
    stats.add(Usage(cache_write_1h_tokens=10_000), SONNET)
    assert stats.cost.savings < 0
    assert stats.line().endswith("uncached (caching cost 100% more)")


def test_model_can_change_within_a_session() -> None:
    stats = SessionCacheStats()
    usage = Usage(input_tokens=1_000_000)
    stats.add(usage, SONNET)
    stats.add(usage, lookup_model("claude-haiku-4-5"))
    assert stats.cost.total == pytest.approx(3.0 + 1.0)


def test_cost_add_rejects_other_types() -> None:
    cost = cost_of(Usage(input_tokens=1), SONNET)
    with pytest.raises(TypeError):
        cost + 1  # type: ignore[operator]
