"""Model metadata: name matching, unknown models, config overrides."""

from __future__ import annotations

import attrs
import pytest

from ctxengine._accounting import models
from ctxengine._accounting.models import (
    UNKNOWN_CONTEXT_LENGTH,
    UNKNOWN_MAX_OUTPUT_TOKENS,
    is_claude,
    lookup_model,
    model_for_settings,
)
from ctxengine._config.core import Config, ModelOverride, ModelSettings


def test_exact_name() -> None:
    info = lookup_model("claude-sonnet-4-5")
    assert info.name == "claude-sonnet-4-5"
    assert info.family == "claude"
    assert (info.context_length, info.max_output_tokens) == (200_000, 64_000)
    assert (info.input_price, info.output_price) == (3.0, 15.0)
    assert info.min_cacheable_tokens == 1_024
    assert info.known


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-4.6:thinking", "claude-opus-4-6"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("Claude-Sonnet-4.5", "claude-sonnet-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4-1", "gpt-4.1"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4o", "gpt-4o"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("google/gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
        ("qwen/qwen3-32b", "qwen3"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
        ("deepseek-reasoner", "deepseek-r1"),
        ("mistralai/mistral-large-2411", "mistral-large"),
    ],
)
def test_name_matching(name: str, canonical: str) -> None:
    info = lookup_model(name)
    assert info.known
    assert info.name == canonical


def test_longest_prefix_wins() -> None:
    assert lookup_model("gpt-4o-mini").input_price == 0.15
    assert lookup_model("gpt-4o").input_price == 2.50
    assert lookup_model("o3-mini").output_price == 4.40
    assert lookup_model("o3").output_price == 8.0


def test_another_version_number_is_not_the_older_model() -> None:
    # "claude-opus-4-7" must not inherit claude-opus-4's $15 price and 32K output.
    info = lookup_model("claude-opus-4-7")
    assert not info.known
    assert info.family == "claude"
    assert lookup_model("gpt-4o").name == "gpt-4o"
    assert not lookup_model("gpt-5.7").known


def test_minimum_cacheable_prefixes() -> None:
    assert lookup_model("claude-opus-4-5").min_cacheable_tokens == 4_096
    assert lookup_model("claude-haiku-4-5").min_cacheable_tokens == 4_096
    assert lookup_model("claude-3-5-haiku").min_cacheable_tokens == 2_048
    assert lookup_model("claude-3-7-sonnet").min_cacheable_tokens == 1_024
    assert lookup_model("claude-opus-4-1").min_cacheable_tokens == 1_024
    assert lookup_model("gpt-4o").min_cacheable_tokens == 1_024
    assert lookup_model("llama-3.3-70b").min_cacheable_tokens == 0


def test_unknown_model_gets_conservative_defaults() -> None:
    info = lookup_model("my-local-model")
    assert info == attrs.evolve(
        info,
        name="my-local-model",
        family="unknown",
        context_length=UNKNOWN_CONTEXT_LENGTH,
        max_output_tokens=UNKNOWN_MAX_OUTPUT_TOKENS,
        input_price=0.0,
        output_price=0.0,
        known=False,
    )
    assert (UNKNOWN_CONTEXT_LENGTH, UNKNOWN_MAX_OUTPUT_TOKENS) == (128_000, 4_096)


def test_bad_name_is_refused() -> None:
    with pytest.raises(ValueError, match="model name must be a non-empty string, got ''"):
        lookup_model("")
    with pytest.raises(ValueError, match="got None"):
        lookup_model(None)  # type: ignore[arg-type]


def test_is_claude() -> None:
    assert is_claude("claude-sonnet-4-6")
    assert is_claude("openrouter/anthropic/claude-3.7-sonnet")
    assert is_claude("us.anthropic.claude-opus-4-1-20250805-v1:0")
    assert not is_claude("gpt-4o")
    assert not is_claude("meta-llama/llama-4-maverick")


def test_override_replaces_only_given_fields() -> None:
    overrides = {"claude-sonnet-4-5": ModelOverride(context_length=1_000_000, input_price=6.0)}
    info = lookup_model("anthropic/claude-sonnet-4.5-20250929", overrides)
    assert info.context_length == 1_000_000
    assert info.input_price == 6.0
    assert info.output_price == 15.0
    assert info.max_output_tokens == 64_000
    assert lookup_model("claude-sonnet-4", overrides).context_length == 200_000


def test_override_for_the_callers_spelling_wins() -> None:
    overrides = {
        "claude-sonnet-4-5": ModelOverride(context_length=300_000),
        "openrouter/anthropic/claude-sonnet-4.5": ModelOverride(context_length=400_000),
    }
    info = lookup_model("openrouter/anthropic/claude-sonnet-4.5", overrides)
    assert info.context_length == 400_000


def test_override_adds_an_unknown_model() -> None:
    overrides = {
        "my-local-model": ModelOverride(
            context_length=32_768, max_output_tokens=2_048, input_price=0.0, output_price=0.0
        )
    }
    info = lookup_model("my-local-model", overrides)
    assert info.known
    assert (info.context_length, info.max_output_tokens) == (32_768, 2_048)


def test_model_for_settings_applies_model_section_last() -> None:
    config = Config(
        model=ModelSettings(name="gpt-4.1", context_length=200_000, max_tokens=8_000),
        models={"gpt-4.1": ModelOverride(context_length=500_000, output_price=9.0)},
    )
    info = model_for_settings(config)
    assert (info.name, info.context_length, info.max_output_tokens) == ("gpt-4.1", 200_000, 8_000)
    assert info.output_price == 9.0
    default = model_for_settings(Config())
    assert default.name == "claude-sonnet-4-6"
    assert default.known


def test_table_names_are_unique_and_resolve_to_themselves() -> None:
    names = [row.name for row in models._TABLE]
    assert len(names) == len(set(names))
    for name in names:
        assert lookup_model(name).name == name
