"""The kernel's side of prompt caching: routes, cache settings, status lines."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ctxengine._accounting.models import lookup_model
from ctxengine._config.core import config_from_mapping
from ctxengine._kernel.cache_settings import cache_settings_for, caching_status_line, detect_route
from ctxengine._plugin.context import CacheSettings

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
        ttl="1h", route="anthropic", native=True, min_cacheable_tokens=4_096, automatic=True
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
        ValueError,
        match=re.escape("prompt_caching.cache_ttl must be one of '5m', '1h', 'auto'; got '24h'"),
    ):
        cache_settings_for(bad, lookup_model("claude-sonnet-4-6"))
