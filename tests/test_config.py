"""The kernel's configuration: discovery, validation messages, layering, sources, owners."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import attrs
import pytest

from ctxengine._config.core import (
    CORE_SPECS,
    AuxiliarySettings,
    Config,
    ContextSettings,
    CoordinationSettings,
    LoadedConfig,
    ModelOverride,
    ModelSettings,
    PromptCachingSettings,
    SummaryProviderSettings,
    ctxengine_home,
    load_config,
)
from ctxengine._config.fields import ConfigError, ConfigProblem, Field
from ctxengine._config.spec import OwnedSpec
from ctxengine_compressor.settings import SETTINGS as COMPRESSOR
from ctxengine_hygiene import SETTINGS as HYGIENE

SRC = "/etc/cfg/config.yaml"

# The kernel validates its own keys together with the selected plugins' keys; these tests use
# the built-in compressor (the default engine) and gateway hygiene, as a default kernel does.
BUILTIN = (OwnedSpec(COMPRESSOR, "compressor"), OwnedSpec(HYGIENE, "hygiene"))

SECTION_FIELDS = {spec.section: spec.fields for spec in CORE_SPECS}
"""Section path -> the kernel's fields in it."""
ENV_VARS = {f.env: spec.key(f.name) for spec in CORE_SPECS for f in spec.fields if f.env}
"""The kernel's environment variables -> the key each sets."""


def config_from_mapping(data: dict[str, Any], *, source: str = "<mapping>") -> Config:
    from ctxengine._config.core import config_from_mapping as validate

    return validate(data, source=source, specs=BUILTIN)


def error_lines(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(data, source=SRC)
    return str(info.value).splitlines()


def only_error(data: dict[str, Any]) -> str:
    lines = error_lines(data)
    assert len(lines) == 1, lines
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty ctxengine home; the env dict built from it never sees the real ~/.ctxengine."""
    return tmp_path / "home"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"CTXENGINE_HOME": str(home), **extra}


# ---------------------------------------------------------------------------------------------
# Defaults
# ---------------------------------------------------------------------------------------------


def test_defaults_match_spec() -> None:
    c = Config()
    assert c.context == ContextSettings(
        engine="compressor", plugin_dirs=(), strict=False, extensions=(), compaction=True
    )
    assert c.model == ModelSettings(
        name="claude-sonnet-4-6", context_length=None, max_tokens=None, base_url=None
    )
    assert c.auxiliary.compression.abort_on_failure is False
    assert c.settings(COMPRESSOR) == COMPRESSOR.build(  # type: ignore[misc]
        threshold=0.50, target_ratio=0.20, protect_last_n=20, protect_first_n=3
    )
    assert c.settings(HYGIENE).threshold == 0.85
    assert c.settings(HYGIENE).hard_message_limit == 5000
    assert c.auxiliary == AuxiliarySettings(
        SummaryProviderSettings(
            provider="auto",
            model=None,
            base_url=None,
            api_key=None,
            timeout=120.0,
            context_length=None,
        )
    )
    assert c.prompt_caching == PromptCachingSettings(
        enabled="auto", strategy="system_and_3", cache_ttl="5m"
    )
    assert dict(c.models) == {}
    assert dict(c.engines) == {}


def test_empty_mapping_equals_defaults() -> None:
    assert config_from_mapping({}) == Config()


def test_empty_sections_equal_defaults() -> None:
    data = {
        "context": None,
        "model": {},
        "compression": None,
        "auxiliary": {"compression": None},
        "prompt_caching": {},
        "models": None,
        "engines": {},
    }
    assert config_from_mapping(data) == Config()


def test_field_defaults_come_from_the_settings_classes() -> None:
    assert {f.name: f.default for f in SECTION_FIELDS["context"]} == {
        "engine": "compressor",
        "plugin_dirs": (),
        "strict": False,
        "extensions": (),
        "compaction": True,
    }
    assert ContextSettings() == ContextSettings(
        **{f.name: f.default for f in SECTION_FIELDS["context"]}
    )


def test_full_valid_file_is_typed() -> None:
    c = config_from_mapping(
        {
            "context": {"engine": "lcm", "plugin_dirs": ["/opt/p"], "strict": True},
            "model": {
                "name": "gpt-x",
                "context_length": 128_000,
                "max_tokens": 8000,
                "base_url": "https://openrouter.ai/api/v1",
            },
            "engines": {
                "compressor": {
                    "threshold": 1 - 0.3,
                    "target_ratio": 0.5,
                    "protect_last_n": 1,
                    "protect_first_n": 0,
                },
                "lcm": {"db": "x.sqlite", "depth": [1, 2]},
            },
            "gateways": {"hygiene": {"threshold": 1, "hard_message_limit": 4}},
            "auxiliary": {
                "compression": {
                    "provider": "openai",
                    "model": "m",
                    "timeout": 5,
                    "base_url": "http://127.0.0.1:8080/v1",
                    "api_key": "k",
                    "context_length": 1024,
                }
            },
            "prompt_caching": {"enabled": False, "strategy": "my.strategy-1", "cache_ttl": "1h"},
            "models": {"gpt-x": {"context_length": 2048, "input_price": 0}},
        }
    )
    assert c.context.plugin_dirs == ("/opt/p",)
    assert c.settings(HYGIENE).threshold == 1.0
    assert isinstance(c.settings(HYGIENE).threshold, float)
    assert c.auxiliary.compression.timeout == 5.0
    assert isinstance(c.auxiliary.compression.timeout, float)
    assert c.prompt_caching.enabled is False
    assert c.models["gpt-x"] == ModelOverride(context_length=2048, input_price=0.0)
    assert c.engines["lcm"] == {"db": "x.sqlite", "depth": [1, 2]}


def test_config_maps_are_read_only_and_private() -> None:
    depth = [1, 2]
    data = {"engines": {"lcm": {"depth": depth}}}
    c = config_from_mapping(data)
    depth.append(3)
    assert c.engines["lcm"]["depth"] == [1, 2]
    assert data == {"engines": {"lcm": {"depth": [1, 2, 3]}}}
    with pytest.raises(TypeError):
        c.engines["x"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        c.models["x"] = ModelOverride()  # type: ignore[index]


# ---------------------------------------------------------------------------------------------
# Range errors (one per ranged key)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("engines.compressor", "threshold", 1.5, "1.5: must be a number from 0.05 to 0.95"),
        ("engines.compressor", "threshold", 0.01, "0.01: must be a number from 0.05 to 0.95"),
        ("engines.compressor", "target_ratio", 0.9, "0.9: must be a number from 0.1 to 0.8"),
        ("engines.compressor", "target_ratio", 0.05, "0.05: must be a number from 0.1 to 0.8"),
        ("engines.compressor", "protect_last_n", 0, "0: must be an integer >= 1"),
        ("engines.compressor", "protect_first_n", -1, "-1: must be an integer >= 0"),
        ("gateways.hygiene", "threshold", 1.2, "1.2: must be a number from 0.05 to 1.0"),
        ("gateways.hygiene", "hard_message_limit", 3, "3: must be an integer >= 4"),
        ("model", "context_length", 1000, "1000: must be an integer >= 1024 or null"),
        ("model", "max_tokens", 0, "0: must be an integer >= 1 or null"),
        ("auxiliary.compression", "timeout", 0, "0: must be a number > 0"),
        ("auxiliary.compression", "timeout", -3.5, "-3.5: must be a number > 0"),
        ("auxiliary.compression", "context_length", 512, "512: must be an integer >= 1024 or null"),
    ],
)
def test_range_errors(section: str, key: str, value: object, message: str) -> None:
    data: dict[str, Any] = {key: value}
    for part in reversed(section.split(".")):
        data = {part: data}
    assert only_error(data) == f"config error in {SRC}: {section}.{key} = {message}"


def test_threshold_message_exact_from_brief() -> None:
    assert only_error({"engines": {"compressor": {"threshold": 1.5}}}) == (
        f"config error in {SRC}: engines.compressor.threshold = 1.5: "
        "must be a number from 0.05 to 0.95"
    )


def test_non_finite_numbers_are_rejected() -> None:
    assert only_error({"auxiliary": {"compression": {"timeout": float("inf")}}}).endswith(
        "auxiliary.compression.timeout = inf: must be a number > 0"
    )
    assert only_error({"engines": {"compressor": {"threshold": float("nan")}}}).endswith(
        "engines.compressor.threshold = nan: must be a number from 0.05 to 0.95"
    )


def test_model_override_errors() -> None:
    lines = error_lines(
        {
            "models": {
                "m1": {
                    "context_length": 10,
                    "max_output_tokens": 0,
                    "min_cacheable_tokens": 0,
                    "input_price": -1,
                    "output_price": "free",
                    "window": 5,
                }
            }
        }
    )
    assert lines == [
        f"config error in {SRC}: models.m1.context_length = 10: must be an integer >= 1024 or null",
        f"config error in {SRC}: models.m1.max_output_tokens = 0: must be an integer >= 1 or null",
        f"config error in {SRC}: models.m1.min_cacheable_tokens = 0: "
        "must be an integer >= 1 or null",
        f"config error in {SRC}: models.m1.input_price = -1: must be a number >= 0 or null",
        f"config error in {SRC}: models.m1.output_price = 'free': must be a number >= 0 or null",
        f"config error in {SRC}: models.m1.window: unknown key "
        "(allowed: context_length, max_output_tokens, min_cacheable_tokens, input_price, "
        "output_price)",
    ]


def test_model_names_must_be_strings() -> None:
    assert only_error({"models": {5: {}}}) == (
        f"config error in {SRC}: models = 5: model names must be non-empty strings"
    )


# ---------------------------------------------------------------------------------------------
# Type errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("context.strict", "yes", "'yes': must be true or false"),
        ("context.strict", 1, "1: must be true or false"),
        ("context.compaction", "true", "'true': must be true or false"),
        ("auxiliary.compression.abort_on_failure", None, "null: must be true or false"),
        ("engines.compressor.protect_last_n", True, "true: must be an integer >= 1"),
        ("engines.compressor.protect_last_n", 20.0, "20.0: must be an integer >= 1"),
        ("gateways.hygiene.hard_message_limit", "5000", "'5000': must be an integer >= 4"),
        ("engines.compressor.threshold", True, "true: must be a number from 0.05 to 0.95"),
        ("engines.compressor.threshold", "0.5", "'0.5': must be a number from 0.05 to 0.95"),
        ("model.name", "", "'': must be a non-empty string"),
        ("model.name", None, "null: must be a non-empty string"),
        ("model.name", 42, "42: must be a non-empty string"),
        ("model.context_length", "200k", "'200k': must be an integer >= 1024 or null"),
        ("context.plugin_dirs", "/opt/p", "'/opt/p': must be a list of non-empty strings"),
        ("context.plugin_dirs", ["/a", 3], "['/a', 3]: must be a list of non-empty strings"),
        (
            "context.engine",
            "",
            "'': must be a non-empty name made of letters, digits, '_', '.' and '-'",
        ),
        (
            "context.engine",
            "my engine",
            "'my engine': must be a non-empty name made of letters, digits, '_', '.' and '-'",
        ),
        (
            "prompt_caching.strategy",
            "",
            "'': must be a non-empty name made of letters, digits, '_', '.' and '-'",
        ),
        (
            "model.base_url",
            "localhost:8080",
            "'localhost:8080': must be an http:// or https:// URL or null",
        ),
        (
            "model.base_url",
            "ftp://host/x",
            "'ftp://host/x': must be an http:// or https:// URL or null",
        ),
        (
            "auxiliary.compression.base_url",
            "http://",
            "'http://': must be an http:// or https:// URL or null",
        ),
        ("auxiliary.compression.api_key", 123, "***: must be a non-empty string or null"),
    ],
)
def test_type_errors(path: str, value: object, message: str) -> None:
    *sections, key = path.split(".")
    data: dict[str, Any] = {key: value}
    for part in reversed(sections):
        data = {part: data}
    assert only_error(data) == f"config error in {SRC}: {path} = {message}"


def test_yaml_booleans_are_accepted() -> None:
    c = config_from_mapping({"context": {"strict": True, "compaction": False}})
    assert c.context.strict is True
    assert c.context.compaction is False


def test_bad_provider() -> None:
    assert only_error({"auxiliary": {"compression": {"provider": "gemini"}}}) == (
        f"config error in {SRC}: auxiliary.compression.provider = 'gemini': must be one of "
        "'auto', 'anthropic', 'openai', 'main', 'extractive'"
    )


@pytest.mark.parametrize("ttl", ["10m", "5M", "1 h", 300, "", None])
def test_bad_cache_ttl(ttl: object) -> None:
    shown = {None: "null", 300: "300"}.get(ttl, repr(ttl))  # type: ignore[call-overload]
    assert only_error({"prompt_caching": {"cache_ttl": ttl}}) == (
        f"config error in {SRC}: prompt_caching.cache_ttl = {shown}: "
        "must be one of '5m', '1h', 'auto'"
    )


@pytest.mark.parametrize("value", ["yes", "true", 1, "on"])
def test_bad_prompt_caching_enabled(value: object) -> None:
    shown = repr(value)
    assert only_error({"prompt_caching": {"enabled": value}}) == (
        f"config error in {SRC}: prompt_caching.enabled = {shown}: "
        "must be one of 'auto', true, false"
    )


@pytest.mark.parametrize("value", ["auto", True, False])
def test_prompt_caching_enabled_values(value: object) -> None:
    c = config_from_mapping({"prompt_caching": {"enabled": value}})
    assert c.prompt_caching.enabled == value
    assert type(c.prompt_caching.enabled) is type(value)


def test_section_must_be_a_mapping() -> None:
    assert only_error({"compression": [1, 2]}) == (
        f"config error in {SRC}: compression = [1, 2]: must be a mapping of key: value "
        "(allowed keys: enabled, abort_on_summary_failure, threshold, target_ratio, "
        "protect_last_n, protect_first_n, summary_max_calls, hygiene_threshold, "
        "hygiene_hard_message_limit)"
    )
    assert only_error({"auxiliary": "openai"}) == (
        f"config error in {SRC}: auxiliary = 'openai': must be a mapping of key: value "
        "(allowed keys: compression)"
    )


# ---------------------------------------------------------------------------------------------
# Unknown keys and sections
# ---------------------------------------------------------------------------------------------


def test_unknown_key_suggests_closest() -> None:
    assert only_error({"compression": {"treshold": 0.5}}) == (
        f"config error in {SRC}: compression.treshold: unknown key; did you mean 'threshold'? "
        "(allowed: enabled, abort_on_summary_failure, threshold, target_ratio, protect_last_n, "
        "protect_first_n, summary_max_calls, hygiene_threshold, hygiene_hard_message_limit)"
    )


def test_unknown_key_without_close_match() -> None:
    assert only_error({"context": {"zzz": 1}}) == (
        f"config error in {SRC}: context.zzz: unknown key "
        "(allowed: engine, plugin_dirs, strict, extensions, compaction)"
    )


def test_unknown_nested_key() -> None:
    assert only_error({"auxiliary": {"compression": {"modle": "x"}}}) == (
        f"config error in {SRC}: auxiliary.compression.modle: unknown key; did you mean 'model'? "
        "(allowed: provider, model, base_url, api_key, timeout, context_length, cache_aware, "
        "max_attempts, retry_backoff, retry_max_wait, breaker_failures, breaker_cooldown, "
        "fallback, abort_on_failure)"
    )
    assert only_error({"auxiliary": {"compresion": {}}}) == (
        f"config error in {SRC}: auxiliary.compresion: unknown key; did you mean "
        "'compression'? (allowed: compression)"
    )


def test_unknown_section_suggests_closest() -> None:
    assert only_error({"prompt_cache": {}}) == (
        f"config error in {SRC}: prompt_cache: unknown section; did you mean 'prompt_caching'? "
        "(allowed: context, model, auxiliary, prompt_caching, context_editing, coordination, "
        "models, engines, strategies, gateways, compression)"
    )


def test_engine_names_are_checked() -> None:
    assert only_error({"engines": {"bad name": {}}}) == (
        f"config error in {SRC}: engines.bad name: engine names must be made of letters, "
        "digits, '_', '.' and '-'"
    )
    assert only_error({"engines": {"lcm": 3}}) == (
        f"config error in {SRC}: engines.lcm = 3: must be a mapping of key: value"
    )


# ---------------------------------------------------------------------------------------------
# Cross-key rules
# ---------------------------------------------------------------------------------------------


def test_hygiene_below_threshold() -> None:
    data = {
        "engines": {"compressor": {"threshold": 0.6}},
        "gateways": {"hygiene": {"threshold": 0.5}},
    }
    assert only_error(data) == (
        f"config error in {SRC}: gateways.hygiene.threshold = 0.5: "
        "must be >= engines.compressor.threshold (0.6) and <= 1.0"
    )


def test_threshold_above_default_hygiene_points_at_threshold() -> None:
    assert only_error({"engines": {"compressor": {"threshold": 0.9}}}) == (
        f"config error in {SRC}: engines.compressor.threshold = 0.9: must be <= "
        "gateways.hygiene.threshold (0.85, the default); raise "
        "gateways.hygiene.threshold as well"
    )


def test_hygiene_equal_to_threshold_is_fine() -> None:
    c = config_from_mapping(
        {"engines": {"compressor": {"threshold": 0.9}}, "gateways": {"hygiene": {"threshold": 0.9}}}
    )
    assert c.settings(HYGIENE).threshold == 0.9


def test_max_tokens_must_be_below_context_length() -> None:
    assert only_error({"model": {"context_length": 8192, "max_tokens": 8192}}) == (
        f"config error in {SRC}: model.max_tokens = 8192: "
        "must be less than model.context_length (8192)"
    )
    assert config_from_mapping({"model": {"max_tokens": 10**6}}).model.max_tokens == 10**6


def test_model_override_output_below_window() -> None:
    assert only_error({"models": {"m": {"context_length": 4096, "max_output_tokens": 5000}}}) == (
        f"config error in {SRC}: models.m.max_output_tokens = 5000: "
        "must be less than models.m.context_length (4096)"
    )


def test_cross_check_skipped_when_a_value_is_already_invalid() -> None:
    data = {
        "engines": {"compressor": {"threshold": 2}},
        "gateways": {"hygiene": {"threshold": 0.1}},
    }
    assert error_lines(data) == [
        f"config error in {SRC}: engines.compressor.threshold = 2: "
        "must be a number from 0.05 to 0.95"
    ]


def test_all_problems_collected_in_one_error() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(
            {
                "engines": {"compressor": {"threshold": 1.5, "treshold": 1}},
                "context": {"strict": "no"},
                "bogus": 1,
                "prompt_caching": {"cache_ttl": "2h"},
            },
            source=SRC,
        )
    keys = [p.key for p in info.value.problems]
    assert keys == [
        "engines.compressor.threshold",
        "engines.compressor.treshold",
        "context.strict",
        "bogus",
        "prompt_caching.cache_ttl",
    ]
    assert all(p.source == SRC for p in info.value.problems)
    assert len(str(info.value).splitlines()) == 5
    assert info.value.problems[0] == ConfigProblem(
        "engines.compressor.threshold", 1.5, "must be a number from 0.05 to 0.95", SRC
    )


def test_config_error_is_a_value_error_and_pickles() -> None:
    err = ConfigError([ConfigProblem("a.b", 1, "must be x", "f.yaml")])
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == "config error in f.yaml: a.b = 1: must be x"
    assert again.problems == err.problems


# ---------------------------------------------------------------------------------------------
# Files and discovery
# ---------------------------------------------------------------------------------------------


def test_no_file_anywhere_means_defaults(home: Path) -> None:
    loaded = load_config(env=env_for(home), specs=BUILTIN)
    assert loaded.config == Config()
    assert loaded.path is None
    assert set(loaded.sources.values()) == {"default"}


def test_home_file_is_found(home: Path) -> None:
    f = write(home / "config.yaml", "context:\n  engine: lcm\n")
    loaded = load_config(env=env_for(home), specs=BUILTIN)
    assert loaded.path == f
    assert loaded.config.context.engine == "lcm"
    assert loaded.sources["context.engine"] == str(f)


def test_env_config_beats_home(home: Path, tmp_path: Path) -> None:
    write(home / "config.yaml", "context:\n  engine: from_home\n")
    f = write(tmp_path / "env.yaml", "context:\n  engine: from_env\n")
    loaded = load_config(env=env_for(home, CTXENGINE_CONFIG=str(f)))
    assert loaded.config.context.engine == "from_env"
    assert loaded.path == f


def test_explicit_path_beats_env_and_home(home: Path, tmp_path: Path) -> None:
    write(home / "config.yaml", "context:\n  engine: from_home\n")
    env_file = write(tmp_path / "env.yaml", "context:\n  engine: from_env\n")
    explicit = write(tmp_path / "explicit.yaml", "context:\n  engine: explicit\n")
    loaded = load_config(explicit, env=env_for(home, CTXENGINE_CONFIG=str(env_file)))
    assert loaded.config.context.engine == "explicit"
    assert loaded.path == explicit


def test_discovery_uses_os_environ_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in [*ENV_VARS, "CTXENGINE_CONFIG"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CTXENGINE_HOME", str(tmp_path))
    write(tmp_path / "config.yaml", "model:\n  name: from-home\n")
    assert load_config(specs=BUILTIN).config.model.name == "from-home"
    assert ctxengine_home() == tmp_path


def test_home_defaults_to_dot_ctxengine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ctxengine_home({}) == tmp_path / ".ctxengine"
    assert ctxengine_home({"CTXENGINE_HOME": ""}) == tmp_path / ".ctxengine"
    assert ctxengine_home({"CTXENGINE_HOME": "~/elsewhere"}) == tmp_path / "elsewhere"


def test_missing_explicit_file(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(missing, env=env_for(home), specs=BUILTIN)
    assert str(info.value) == (
        f"config error in {missing}: config file does not exist (path given explicitly)"
    )


def test_missing_env_file(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(env=env_for(home, CTXENGINE_CONFIG=str(missing)))
    assert str(info.value) == (
        f"config error in {missing}: config file does not exist (path named by $CTXENGINE_CONFIG)"
    )


def test_explicit_path_that_is_a_directory(home: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, env=env_for(home), specs=BUILTIN)
    assert str(info.value) == (
        f"config error in {tmp_path}: config path is a directory, not a file "
        "(path given explicitly)"
    )


def test_empty_file_means_defaults(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "")
    assert load_config(f, env=env_for(home), specs=BUILTIN).config == Config()
    g = write(tmp_path / "d.yaml", "# only a comment\n")
    loaded = load_config(g, env=env_for(home), specs=BUILTIN)
    assert loaded.config == Config()
    assert loaded.path == g


def test_yaml_syntax_error_names_file_line_and_column(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "context:\n  engine: lcm\n  strict: [true\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home), specs=BUILTIN)
    message = str(info.value)
    assert message.startswith(f"config error in {f}: invalid YAML at line 4, column 1: ")
    assert "expected ',' or ']'" in message


def test_yaml_syntax_error_bad_indentation(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "context:\n  strict: true\n   engine: lcm\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home), specs=BUILTIN)
    assert str(info.value) == (
        f"config error in {f}: invalid YAML at line 3, column 10: "
        "mapping values are not allowed here"
    )


def test_top_level_must_be_a_mapping(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "- context\n- model\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home), specs=BUILTIN)
    assert str(info.value) == (
        f"config error in {f}: the top level must be a mapping of sections (context, model, "
        "auxiliary, prompt_caching, context_editing, coordination, models, engines, strategies, "
        "gateways, compression), not list ['context', 'model']"
    )


def test_file_not_utf8(home: Path, tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_bytes(b"model:\n  name: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home), specs=BUILTIN)
    assert str(info.value) == f"config error in {f}: file is not valid UTF-8 text"


def test_quoted_yes_in_file_is_an_error_but_bare_yes_is_a_boolean(
    home: Path, tmp_path: Path
) -> None:
    good = write(tmp_path / "good.yaml", "context:\n  strict: yes\n")
    assert load_config(good, env=env_for(home), specs=BUILTIN).config.context.strict is True
    bad = write(tmp_path / "bad.yaml", 'context:\n  strict: "yes"\n')
    with pytest.raises(ConfigError) as info:
        load_config(bad, env=env_for(home), specs=BUILTIN)
    assert (
        str(info.value) == f"config error in {bad}: context.strict = 'yes': must be true or false"
    )


def test_file_errors_name_the_file(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "engines:\n  compressor:\n    threshold: 1.5\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home), specs=BUILTIN)
    assert str(info.value) == (
        f"config error in {f}: engines.compressor.threshold = 1.5: "
        "must be a number from 0.05 to 0.95"
    )


def test_yaml_layout_from_spec_parses_to_defaults(home: Path, tmp_path: Path) -> None:
    spec_yaml = """\
context:
  engine: compressor
  plugin_dirs: []
  strict: false
  compaction: true
model:
  name: claude-sonnet-4-6
  context_length: null
  max_tokens: null
engines:
  compressor:
    threshold: 0.50
    target_ratio: 0.20
    protect_last_n: 20
    protect_first_n: 3
gateways:
  hygiene:
    threshold: 0.85
    hard_message_limit: 5000
auxiliary:
  compression:
    abort_on_failure: false
    provider: auto
    model: null
    base_url: null
    api_key: null
    timeout: 120
    context_length: null
prompt_caching:
  enabled: auto
  strategy: system_and_3
  cache_ttl: "5m"
"""
    f = write(tmp_path / "c.yaml", spec_yaml)
    loaded = load_config(f, env=env_for(home), specs=BUILTIN)
    # Config.engines holds the engine sections as written; everything else is the default.
    assert attrs.evolve(loaded.config, engines={}) == Config()
    for spec in (COMPRESSOR, HYGIENE):
        assert loaded.config.settings(spec) == Config().settings(spec)  # type: ignore[misc]
    assert loaded.sources["engines.compressor.threshold"] == str(f)
    assert loaded.sources["model.base_url"] == "default"


# ---------------------------------------------------------------------------------------------
# Environment variables
# ---------------------------------------------------------------------------------------------


def test_env_overrides_file(home: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path / "c.yaml",
        "context:\n  compaction: true\nengines:\n  compressor:\n    threshold: 0.6\n",
    )
    loaded = load_config(
        f,
        env=env_for(home, CTXENGINE_THRESHOLD="0.7", CTXENGINE_COMPRESSION_ENABLED="off"),
        specs=BUILTIN,
    )
    assert loaded.config.settings(COMPRESSOR).threshold == 0.7
    assert loaded.config.context.compaction is False
    assert loaded.sources["engines.compressor.threshold"] == "env CTXENGINE_THRESHOLD"
    assert loaded.sources["context.compaction"] == "env CTXENGINE_COMPRESSION_ENABLED"


def test_every_env_var(home: Path) -> None:
    env = env_for(
        home,
        CTXENGINE_ENGINE="lcm",
        CTXENGINE_PLUGIN_DIRS=os.pathsep.join(["/a", "", "/b"]),
        CTXENGINE_STRICT="1",
        CTXENGINE_EXTENSIONS="audit",
        CTXENGINE_MODEL="gpt-5",
        CTXENGINE_CONTEXT_LENGTH="400000",
        CTXENGINE_MAX_TOKENS="16000",
        CTXENGINE_BASE_URL="https://openrouter.ai/api/v1",
        CTXENGINE_COMPRESSION_ENABLED="no",
        CTXENGINE_THRESHOLD="0.6",
        CTXENGINE_HYGIENE_THRESHOLD="0.9",
        CTXENGINE_SUMMARY_PROVIDER="openai",
        CTXENGINE_SUMMARY_MODEL="gpt-5-mini",
        CTXENGINE_SUMMARY_BASE_URL="http://127.0.0.1:11434/v1",
        CTXENGINE_SUMMARY_TIMEOUT="30",
        CTXENGINE_SUMMARY_MAX_ATTEMPTS="5",
        CTXENGINE_SUMMARY_FALLBACK=os.pathsep.join(["anthropic", "extractive"]),
        CTXENGINE_PROMPT_CACHING="auto",
        CTXENGINE_CACHE_TTL="1h",
        CTXENGINE_CLEAR_TOOL_USES="yes",
        CTXENGINE_COORDINATION="postgresql",
    )
    plugin_vars = {"CTXENGINE_THRESHOLD", "CTXENGINE_HYGIENE_THRESHOLD"}
    assert set(env) - {"CTXENGINE_HOME"} | {"CTXENGINE_EXTENSIONS"} == set(ENV_VARS) | plugin_vars
    loaded = load_config(env=env, specs=BUILTIN)
    c = loaded.config
    assert c.context == ContextSettings(
        engine="lcm", plugin_dirs=("/a", "/b"), strict=True, extensions=("audit",), compaction=False
    )
    assert c.model == ModelSettings("gpt-5", 400_000, 16_000, "https://openrouter.ai/api/v1")
    assert c.settings(COMPRESSOR).threshold == 0.6
    assert c.settings(HYGIENE).threshold == 0.9
    assert c.auxiliary.compression == SummaryProviderSettings(
        provider="openai",
        model="gpt-5-mini",
        base_url="http://127.0.0.1:11434/v1",
        timeout=30.0,
        max_attempts=5,
        fallback=("anthropic", "extractive"),
    )
    assert c.prompt_caching == PromptCachingSettings(enabled="auto", cache_ttl="1h")
    assert c.context_editing.clear_tool_uses is True
    assert c.coordination == CoordinationSettings(backend="postgresql")
    for var, key in ENV_VARS.items():
        assert loaded.sources[key] == f"env {var}"
    assert loaded.sources["engines.compressor.threshold"] == "env CTXENGINE_THRESHOLD"
    assert loaded.owners["engines.compressor.threshold"] == "compressor"
    assert loaded.sources["gateways.hygiene.threshold"] == "env CTXENGINE_HYGIENE_THRESHOLD"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", True),
        ("TRUE", True),
        ("yes", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("NO", False),
        ("off", False),
    ],
)
def test_env_bool_spellings(home: Path, text: str, expected: bool) -> None:
    assert (
        load_config(env=env_for(home, CTXENGINE_STRICT=text), specs=BUILTIN).config.context.strict
        is expected
    )


@pytest.mark.parametrize(("text", "expected"), [("yes", True), ("0", False), ("auto", "auto")])
def test_env_prompt_caching_spellings(home: Path, text: str, expected: object) -> None:
    env = env_for(home, CTXENGINE_PROMPT_CACHING=text)
    assert load_config(env=env, specs=BUILTIN).config.prompt_caching.enabled == expected


def test_env_null_and_empty(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "model:\n  context_length: 100000\n  name: from-file\n")
    loaded = load_config(
        f, env=env_for(home, CTXENGINE_CONTEXT_LENGTH="null", CTXENGINE_MODEL=""), specs=BUILTIN
    )
    assert loaded.config.model.context_length is None
    assert loaded.sources["model.context_length"] == "env CTXENGINE_CONTEXT_LENGTH"
    # An empty variable counts as unset: the file's value stays.
    assert loaded.config.model.name == "from-file"
    assert loaded.sources["model.name"] == str(f)


@pytest.mark.parametrize(
    ("var", "text", "message"),
    [
        (
            "CTXENGINE_THRESHOLD",
            "1.5",
            "engines.compressor.threshold = 1.5: must be a number from 0.05 to 0.95",
        ),
        (
            "CTXENGINE_THRESHOLD",
            "half",
            "engines.compressor.threshold = 'half': must be a number from 0.05 to 0.95",
        ),
        (
            "CTXENGINE_STRICT",
            "maybe",
            "context.strict = 'maybe': must be true or false "
            "(true/false may be written 1/0, yes/no, on/off)",
        ),
        (
            "CTXENGINE_COMPRESSION_ENABLED",
            "2",
            "context.compaction = '2': must be true or "
            "false (true/false may be written 1/0, yes/no, on/off)",
        ),
        (
            "CTXENGINE_CONTEXT_LENGTH",
            "200k",
            "model.context_length = '200k': must be an integer >= 1024 or null",
        ),
        (
            "CTXENGINE_CONTEXT_LENGTH",
            "100",
            "model.context_length = 100: must be an integer >= 1024 or null",
        ),
        (
            "CTXENGINE_CACHE_TTL",
            "1d",
            "prompt_caching.cache_ttl = '1d': must be one of '5m', '1h', 'auto'",
        ),
        (
            "CTXENGINE_SUMMARY_PROVIDER",
            "claude",
            "auxiliary.compression.provider = 'claude': "
            "must be one of 'auto', 'anthropic', 'openai', 'main', 'extractive'",
        ),
        (
            "CTXENGINE_PROMPT_CACHING",
            "sometimes",
            "prompt_caching.enabled = 'sometimes': must be "
            "one of 'auto', true, false (true/false may be written 1/0, yes/no, on/off)",
        ),
        (
            "CTXENGINE_ENGINE",
            "my engine",
            "context.engine = 'my engine': must be a non-empty "
            "name made of letters, digits, '_', '.' and '-'",
        ),
        (
            "CTXENGINE_BASE_URL",
            "openrouter.ai",
            "model.base_url = 'openrouter.ai': must be an http:// or https:// URL or null",
        ),
        (
            "CTXENGINE_SUMMARY_TIMEOUT",
            "-1",
            "auxiliary.compression.timeout = -1.0: must be a number > 0",
        ),
    ],
)
def test_env_errors_name_the_variable(home: Path, var: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env=env_for(home, **{var: text}), specs=BUILTIN)
    assert str(info.value) == f"config error in env {var}: {message}"
    assert info.value.problems[0].source == f"env {var}"


def test_env_and_file_errors_are_reported_together(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "context:\n  strict: maybe\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home, CTXENGINE_CACHE_TTL="7m"), specs=BUILTIN)
    assert [p.source for p in info.value.problems] == [str(f), "env CTXENGINE_CACHE_TTL"]


def test_env_threshold_against_file_hygiene_names_both_sources(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "gateways:\n  hygiene:\n    threshold: 0.6\n")
    with pytest.raises(ConfigError) as info:
        load_config(f, env=env_for(home, CTXENGINE_THRESHOLD="0.7"), specs=BUILTIN)
    assert str(info.value) == (
        f"config error in {f}: gateways.hygiene.threshold = 0.6: must be >= "
        "engines.compressor.threshold (0.7, from env CTXENGINE_THRESHOLD) and <= 1.0"
    )


def test_discovery_env_vars_are_not_key_overrides() -> None:
    assert "CTXENGINE_CONFIG" not in ENV_VARS
    assert "CTXENGINE_HOME" not in ENV_VARS
    assert all(
        key in {f"{s}.{f.name}" for s, fs in SECTION_FIELDS.items() for f in fs}
        for key in ENV_VARS.values()
    )


# ---------------------------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------------------------


def test_overrides_apply_last(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "context:\n  engine: from_file\n")
    loaded = load_config(
        f,
        env=env_for(home, CTXENGINE_ENGINE="from_env", CTXENGINE_THRESHOLD="0.6"),
        overrides={"context.engine": "from_flag", "engines.compressor.protect_last_n": 5},
        specs=BUILTIN,
    )
    assert loaded.config.context.engine == "from_flag"
    assert loaded.sources["context.engine"] == "override"
    assert loaded.config.settings(COMPRESSOR).threshold == 0.6
    assert loaded.config.settings(COMPRESSOR).protect_last_n == 5
    assert loaded.sources["engines.compressor.protect_last_n"] == "override"


def test_override_strings_are_parsed_like_env(home: Path) -> None:
    loaded = load_config(
        env=env_for(home),
        overrides={
            "context.strict": "yes",
            "engines.compressor.threshold": "0.4",
            "model.context_length": "32768",
            "context.plugin_dirs": ["/x"],
        },
        specs=BUILTIN,
    )
    c = loaded.config
    assert c.context.strict is True
    assert c.settings(COMPRESSOR).threshold == 0.4
    assert c.model.context_length == 32768
    assert c.context.plugin_dirs == ("/x",)


def test_override_errors(home: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            env=env_for(home),
            overrides={
                "engines.compressor.threshold": 2.0,
                "engines.compressor.thresold": 0.5,
                "prompt_caching.cache_ttl": "2h",
                "models.m.windw": 5,
            },
            specs=BUILTIN,
        )
    assert str(info.value).splitlines() == [
        "config error in override: engines.compressor.threshold = 2.0: "
        "must be a number from 0.05 to 0.95",
        "config error in override: engines.compressor.thresold: unknown key; did you mean "
        "'threshold'? (allowed: threshold, target_ratio, protect_last_n, protect_first_n, "
        "summary_max_calls)",
        "config error in override: prompt_caching.cache_ttl = '2h': "
        "must be one of '5m', '1h', 'auto'",
        "config error in override: models.m.windw: unknown key (allowed: context_length, "
        "max_output_tokens, min_cacheable_tokens, input_price, output_price)",
    ]


def test_override_models_and_engines(home: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path / "c.yaml",
        "engines:\n  lcm:\n    db: a.sqlite\n    depth: 2\n"
        "models:\n  claude-3.5-x:\n    input_price: 3\n",
    )
    loaded = load_config(
        f,
        env=env_for(home),
        overrides={
            "engines.lcm.depth": 3,
            "models.claude-3.5-x.output_price": "15",
            "engines.other": {"k": 1},
        },
        specs=BUILTIN,
    )
    c = loaded.config
    assert c.engines["lcm"] == {"db": "a.sqlite", "depth": 3}
    assert c.engines["other"] == {"k": 1}
    assert c.models["claude-3.5-x"] == ModelOverride(input_price=3.0, output_price=15.0)
    assert loaded.sources["engines.lcm.db"] == str(f)
    assert loaded.sources["engines.lcm.depth"] == "override"
    assert loaded.sources["engines.other.k"] == "override"
    assert loaded.sources["models.claude-3.5-x.input_price"] == str(f)
    assert loaded.sources["models.claude-3.5-x.output_price"] == "override"
    assert loaded.sources["models.claude-3.5-x.context_length"] == "default"


# ---------------------------------------------------------------------------------------------
# Sources and listing
# ---------------------------------------------------------------------------------------------


def test_sources_cover_every_leaf(home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", "engines:\n  compressor:\n    threshold: 0.4\n  lcm: {}\n")
    loaded = load_config(
        f,
        env=env_for(home, CTXENGINE_CACHE_TTL="1h"),
        overrides={"context.strict": True},
        specs=BUILTIN,
    )
    leaves = {f"{s}.{fld.name}" for s, fs in SECTION_FIELDS.items() for fld in fs}
    leaves |= {spec.spec.key(fld.name) for spec in BUILTIN for fld in spec.spec.fields}
    assert leaves | {"engines.lcm"} == set(loaded.sources)
    assert loaded.sources["engines.compressor.threshold"] == str(f)
    assert loaded.sources["prompt_caching.cache_ttl"] == "env CTXENGINE_CACHE_TTL"
    assert loaded.sources["context.strict"] == "override"
    assert loaded.sources["context.compaction"] == "default"
    assert loaded.sources["engines.lcm"] == str(f)


def test_items_lists_key_value_source(home: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path / "c.yaml",
        "auxiliary:\n  compression:\n    api_key: sk-secret\n"
        "models:\n  m:\n    context_length: 4096\nengines:\n  lcm:\n    db: x\n",
    )
    loaded = load_config(f, env=env_for(home), specs=BUILTIN)
    rows = loaded.items()
    assert rows[0] == ("context.engine", "compressor", "default")
    by_key = {key: (value, source) for key, value, source in rows}
    assert by_key["auxiliary.compression.api_key"] == ("***", str(f))
    assert by_key["models.m.context_length"] == (4096, str(f))
    assert by_key["models.m.input_price"] == (None, "default")
    assert by_key["engines.lcm.db"] == ("x", str(f))
    assert "sk-secret" not in repr(rows)
    assert "sk-secret" not in repr(loaded.config)


@pytest.mark.parametrize(
    "text",
    [
        # A wrong type of secret: an error message that echoes the value must not echo the
        # password (the coordination backends' URLs: packages/fleet/tests).
        "auxiliary:\n  compression:\n    api_key: [hunter2]\n",
    ],
)
def test_config_errors_never_echo_a_password(home: Path, tmp_path: Path, text: str) -> None:
    f = write(tmp_path / "c.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_config(f, env=env_for(home), specs=BUILTIN)
    assert "hunter2" not in str(caught.value)
    assert "***" in str(caught.value) or "pool_size" in str(caught.value)


def test_report_hides_url_passwords_of_every_section(home: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path / "c.yaml",
        'engines:\n  lcm:\n    database_url: "postgresql://bob:hunter2@db/x"\n'
        'coordination:\n  backend: postgresql\n  database_url: "postgres://ann:hunter2@db/y"\n',
    )
    rows = {key: value for key, value, _ in load_config(f, env=env_for(home)).items()}
    assert rows["engines.lcm.database_url"] == "postgresql://bob:***@db/x"
    # Undeclared (its plugin is not loaded here), and still hidden.
    assert rows["coordination.database_url"] == "postgres://ann:***@db/y"


def test_items_without_sources() -> None:
    rows = LoadedConfig(config=Config(), path=None, sources={}).items()
    assert len(rows) == sum(len(fs) for fs in SECTION_FIELDS.values())
    assert {source for _, _, source in rows} == {"default"}


# ---------------------------------------------------------------------------------------------
# Field (the engine-facing API)
# ---------------------------------------------------------------------------------------------


def test_field_allowed_texts() -> None:
    assert Field("a", "int", 1, le=10).allowed() == "must be an integer <= 10"
    assert Field("a", "int", 1).allowed() == "must be an integer"
    assert Field("a", "str_list", ()).allowed(from_text=True) == (
        f"must be a list of non-empty strings (in an environment variable: separated by "
        f"{os.pathsep!r})"
    )


# ---------------------------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Plugin sections and former key paths
# ---------------------------------------------------------------------------------------------


def test_plugin_keys_live_in_their_own_sections() -> None:
    c = config_from_mapping(
        {
            "context": {"compaction": False},
            "auxiliary": {"compression": {"abort_on_failure": True}},
            "engines": {"compressor": {"threshold": 0.6, "protect_last_n": 5}},
            "gateways": {"hygiene": {"threshold": 0.9, "hard_message_limit": 100}},
        }
    )
    assert c.context.compaction is False
    assert c.auxiliary.compression.abort_on_failure is True
    assert (c.settings(COMPRESSOR).threshold, c.settings(COMPRESSOR).protect_last_n) == (0.6, 5)
    assert (c.settings(HYGIENE).threshold, c.settings(HYGIENE).hard_message_limit) == (0.9, 100)
    assert only_error({"gateways": {"hygiene": {"treshold": 0.9}}}) == (
        f"config error in {SRC}: gateways.hygiene.treshold: unknown key; did you mean "
        "'threshold'? (allowed: threshold, hard_message_limit)"
    )


def test_former_paths_set_the_new_keys_with_a_deprecation(home: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path / "c.yaml",
        "compression:\n  enabled: false\n  threshold: 0.6\n  hygiene_threshold: 0.9\n"
        "  abort_on_summary_failure: true\n",
    )
    with pytest.warns(DeprecationWarning, match="compression.threshold"):
        loaded = load_config(f, env=env_for(home), specs=BUILTIN)
    c = loaded.config
    assert c.context.compaction is False
    assert c.auxiliary.compression.abort_on_failure is True
    assert c.settings(COMPRESSOR).threshold == 0.6
    assert c.settings(HYGIENE).threshold == 0.9
    assert loaded.sources["engines.compressor.threshold"] == str(f)
    assert [(d.alias, d.key) for d in loaded.deprecations] == [
        ("compression.enabled", "context.compaction"),
        ("compression.threshold", "engines.compressor.threshold"),
        ("compression.hygiene_threshold", "gateways.hygiene.threshold"),
        ("compression.abort_on_summary_failure", "auxiliary.compression.abort_on_failure"),
    ]
    row = next(r for r in loaded.rows() if r.key == "engines.compressor.threshold")
    assert row.note == "given as compression.threshold, a deprecated name"
    with pytest.warns(DeprecationWarning, match="compression.protect_last_n"):
        overridden = load_config(
            env=env_for(home), overrides={"compression.protect_last_n": "5"}, specs=BUILTIN
        )
    assert overridden.config.settings(COMPRESSOR).protect_last_n == 5
    assert overridden.sources["engines.compressor.protect_last_n"] == "override"


def test_both_paths_with_different_values_name_both() -> None:
    with pytest.warns(DeprecationWarning):
        c = config_from_mapping(
            {"compression": {"threshold": 0.6}, "engines": {"compressor": {"threshold": 0.6}}}
        )
    assert c.settings(COMPRESSOR).threshold == 0.6
    assert only_error(
        {"compression": {"threshold": 0.6}, "engines": {"compressor": {"threshold": 0.7}}}
    ) == (
        f"config error in {SRC}: engines.compressor.threshold = 0.7: conflicts with "
        "compression.threshold = 0.6: compression.threshold is the deprecated name of "
        "engines.compressor.threshold; keep only engines.compressor.threshold"
    )
    assert only_error({"context": {"compaction": True}, "compression": {"enabled": False}}) == (
        f"config error in {SRC}: compression.enabled = false: conflicts with "
        "context.compaction = true: compression.enabled is the deprecated name of "
        "context.compaction; keep only context.compaction"
    )


def test_a_lower_layer_under_the_former_path_is_overridden_without_conflict(
    home: Path, tmp_path: Path
) -> None:
    f = write(tmp_path / "c.yaml", "compression:\n  threshold: 0.6\n")
    with pytest.warns(DeprecationWarning):
        loaded = load_config(
            f, env=env_for(home), overrides={"engines.compressor.threshold": 0.7}, specs=BUILTIN
        )
    assert loaded.config.settings(COMPRESSOR).threshold == 0.7


def test_settings_declared_on_a_class() -> None:
    import attrs

    from ctxengine import SettingsSpec, setting
    from ctxengine._config.spec import SettingsDeclarationError, SettingsRegistry

    @attrs.frozen
    class Marker:
        depth: int = setting("int", 2, ge=1, doc="breakpoints", alias="prompt_caching.depth")
        label: str | None = setting("str", nullable=True, secret=True)

    spec = SettingsSpec.of("strategies.marker", Marker)
    assert [(f.name, f.default, f.alias) for f in spec.fields] == [
        ("depth", 2, "prompt_caching.depth"),
        ("label", None, None),
    ]
    assert "label" not in repr(Marker(label="x"))
    registry = SettingsRegistry()
    registry.for_owner("marker").add(spec)
    c = config_from_mapping({"prompt_caching": {"depth": 3}})
    with pytest.warns(DeprecationWarning, match="prompt_caching.depth"):
        assert c.settings(spec) == Marker(depth=3)
    assert config_from_mapping({"strategies": {"marker": {"depth": 4}}}).settings(spec).depth == 4
    with pytest.raises(SettingsDeclarationError, match="plugins may declare keys under"):
        registry.for_owner("old").add(SettingsSpec("compression", (Field("x", "int", 1),)))
    other: SettingsSpec[Any] = SettingsSpec(
        "strategies.other", (Field("d", "int", 1, alias="prompt_caching.depth"),)
    )
    with pytest.raises(SettingsDeclarationError, match=r"prompt_caching\.depth is declared by"):
        registry.for_owner("other").add(other)
