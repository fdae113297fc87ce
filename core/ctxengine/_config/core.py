"""The configuration: the kernel's own keys, the typed :class:`Config`, and loading it.

The kernel declares its keys exactly the way plugins declare theirs: each key once, as an
attribute of its section's settings class (:func:`~ctxengine.setting`), read back into one
:class:`~ctxengine.SettingsSpec` per section (:data:`CORE_SPECS`);
:mod:`ctxengine._config.resolve` validates both with the same rules. :func:`load_config`
validates the kernel's keys only; :func:`ctxengine.load` validates them again together with
every selected plugin's keys, so a typo under ``engines.lcm`` fails the load like a typo under
``model``. Plugins read their own validated values with :meth:`Config.settings`.

Import cost: standard library and ``attrs`` only; ``yaml`` is imported when a file is read.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import types
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import attrs

from ctxengine._config.fields import (
    ConfigError,
    ConfigProblem,
    Field,
    fields_of,
    printable,
    setting,
)
from ctxengine._config.files import ctxengine_home, find_file, read_yaml
from ctxengine._config.resolve import Deprecation, RawConfig, Resolved, UnusedKey, less_than
from ctxengine._config.spec import CORE_OWNER, OwnedSpec, SettingsSpec, SettingsView

__all__ = [
    "CORE_SPECS",
    "MODEL_OVERRIDE_FIELDS",
    "AuxiliarySettings",
    "Config",
    "ConfigRow",
    "ContextEditingSettings",
    "ContextSettings",
    "CoordinationSettings",
    "LoadedConfig",
    "ModelOverride",
    "ModelSettings",
    "PromptCachingSettings",
    "SummaryProviderSettings",
    "config_from_mapping",
    "ctxengine_home",
    "load_config",
    "resolve_loaded",
]

log = logging.getLogger("ctxengine.config")

T = TypeVar("T")

SummaryProviderName = Literal["auto", "anthropic", "openai", "main", "extractive"]
CacheTTL = Literal["5m", "1h", "auto"]
CacheRetention = Literal["in_memory", "24h"]


# ---------------------------------------------------------------------------------------------
# The kernel's typed settings, one declaration per key
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class ContextSettings:
    """``context:`` — which engine runs, which extensions load, where directory plugins live,
    and whether any engine compacts at all."""

    engine: str = setting("name", "compressor", env="CTXENGINE_ENGINE", doc="the context engine")
    plugin_dirs: tuple[str, ...] = setting(
        "str_list",
        (),
        env="CTXENGINE_PLUGIN_DIRS",
        doc="extra folders searched for directory plugins",
    )
    strict: bool = setting(
        "bool",
        False,
        env="CTXENGINE_STRICT",
        doc="an engine that cannot be loaded is an error instead of a fallback",
    )
    extensions: tuple[str, ...] = setting(
        "str_list",
        (),
        env="CTXENGINE_EXTENSIONS",
        doc="opt-in extensions to load (always-on extensions load anyway)",
    )
    compaction: bool = setting(
        "bool",
        True,
        env="CTXENGINE_COMPRESSION_ENABLED",
        alias="compression.enabled",
        doc="compaction on or off, for every engine",
    )


@attrs.frozen
class ModelSettings:
    """``model:`` — the main model the agent talks to."""

    name: str = setting("str", "claude-sonnet-4-6", env="CTXENGINE_MODEL", doc="the main model")
    context_length: int | None = setting(
        "int",
        nullable=True,
        ge=1024,
        env="CTXENGINE_CONTEXT_LENGTH",
        doc="overrides the model table's window",
    )
    max_tokens: int | None = setting(
        "int",
        nullable=True,
        ge=1,
        env="CTXENGINE_MAX_TOKENS",
        doc="output reservation, subtracted from the window for thresholds; < model.context_length",
    )
    base_url: str | None = setting(
        "url",
        nullable=True,
        env="CTXENGINE_BASE_URL",
        doc="where the model is served (null = native Anthropic API); decides the cache route",
    )


@attrs.frozen
class SummaryProviderSettings:
    """``auxiliary.compression:`` — the model that writes summaries, and what a failure does."""

    provider: SummaryProviderName = setting(
        "choice",
        "auto",
        choices=get_args(SummaryProviderName),
        env="CTXENGINE_SUMMARY_PROVIDER",
        doc="who writes summaries",
    )
    model: str | None = setting(
        "str", nullable=True, env="CTXENGINE_SUMMARY_MODEL", doc="null = the provider's default"
    )
    base_url: str | None = setting(
        "url",
        nullable=True,
        env="CTXENGINE_SUMMARY_BASE_URL",
        doc="any OpenAI-compatible endpoint (OpenRouter, vLLM, llama.cpp, Ollama)",
    )
    api_key: str | None = setting(
        "str", nullable=True, secret=True, doc="null = the provider's usual environment variable"
    )
    timeout: float = setting("number", 120.0, gt=0, env="CTXENGINE_SUMMARY_TIMEOUT", doc="seconds")
    context_length: int | None = setting(
        "int",
        nullable=True,
        ge=1024,
        doc="the summary model's window (null = the model table's)",
    )
    cache_aware: bool = setting(
        "bool",
        True,
        doc="a summary written by the main model on the main route resends the agent's last "
        "request (read from the prompt cache) with the instruction appended",
    )
    max_attempts: int = setting(
        "int",
        3,
        ge=1,
        le=10,
        env="CTXENGINE_SUMMARY_MAX_ATTEMPTS",
        doc="requests per provider and summary, retries included (429, 5xx, timeouts)",
    )
    retry_backoff: float = setting(
        "number", 1.0, ge=0, doc="seconds before the first retry, doubled for each further one"
    )
    retry_max_wait: float = setting(
        "number",
        30.0,
        ge=0,
        doc="longest pause before a retry; a longer Retry-After ends the retries",
    )
    breaker_failures: int = setting(
        "int", 3, ge=1, doc="failed requests in a row that open the provider's circuit breaker"
    )
    breaker_cooldown: float = setting(
        "number", 60.0, gt=0, doc="seconds an open breaker sends no request to its provider"
    )
    fallback: tuple[str, ...] = setting(
        "str_list",
        (),
        env="CTXENGINE_SUMMARY_FALLBACK",
        doc="providers asked in turn when the provider fails (anthropic, openai, main, extractive)",
    )
    abort_on_failure: bool = setting(
        "bool",
        False,
        alias="compression.abort_on_summary_failure",
        doc="every failed summary aborts the compaction (no local digest instead), for every "
        "engine",
    )


@attrs.frozen
class AuxiliarySettings:
    """``auxiliary:`` — helper models."""

    compression: SummaryProviderSettings = attrs.field(factory=SummaryProviderSettings)


@attrs.frozen
class PromptCachingSettings:
    """``prompt_caching:`` — whether and how requests are marked for prompt caching."""

    enabled: bool | Literal["auto"] = setting(
        "choice",
        "auto",
        choices=("auto", True, False),
        env="CTXENGINE_PROMPT_CACHING",
        doc="auto = on for Claude models on routes that accept cache_control",
    )
    strategy: str = setting("name", "system_and_3", doc="the cache strategy plugin")
    cache_ttl: CacheTTL = setting(
        "choice",
        "5m",
        choices=get_args(CacheTTL),
        env="CTXENGINE_CACHE_TTL",
        doc="lifetime of cache entries; auto = per breakpoint, from the measured request "
        "gaps and the prices",
    )
    cache_key: bool | Literal["auto"] = setting(
        "choice",
        "auto",
        choices=("auto", True, False),
        doc="send a stable prompt_cache_key per session; auto = on OpenAI's own API",
    )
    cache_retention: CacheRetention | None = setting(
        "choice",
        choices=get_args(CacheRetention),
        nullable=True,
        doc="OpenAI prompt_cache_retention to send (null = the provider's default)",
    )
    diagnostics: bool = setting(
        "bool",
        False,
        doc="ask Anthropic why a prompt missed the cache (the diagnostics request field)",
    )


@attrs.frozen
class ContextEditingSettings:
    """``context_editing:`` — Anthropic's server-side clearing added to prepared requests
    (``clear_tool_uses_20250919``, ``clear_thinking_20251015``); ``trigger`` is a fraction of
    the usable window like every ctxengine threshold."""

    clear_tool_uses: bool = setting(
        "bool",
        False,
        env="CTXENGINE_CLEAR_TOOL_USES",
        doc="Anthropic requests clear older tool results on the server (clear_tool_uses)",
    )
    trigger: float | None = setting(
        "number",
        nullable=True,
        gt=0.0,
        le=1.0,
        doc="clear when prompt tokens >= trigger x window (null = the API's default)",
    )
    keep_tool_uses: int = setting("int", 3, ge=0, doc="most recent tool uses never cleared")
    clear_at_least_tokens: int | None = setting(
        "int",
        nullable=True,
        ge=1,
        doc="clear only when at least this many tokens go (null = any amount)",
    )
    exclude_tools: tuple[str, ...] = setting(
        "str_list", (), doc="tools whose results are never cleared"
    )
    clear_tool_inputs: bool = setting("bool", False, doc="clear the cleared tool uses' inputs too")
    clear_thinking: bool = setting(
        "bool",
        False,
        doc="requests with extended thinking drop older thinking blocks (clear_thinking)",
    )
    keep_thinking_turns: int = setting("int", 1, ge=1, doc="most recent thinking turns kept")

    @property
    def enabled(self) -> bool:
        """Whether any edit is configured."""
        return self.clear_tool_uses or self.clear_thinking


@attrs.frozen
class CoordinationSettings:
    """``coordination:`` — how the processes serving the same sessions exclude each other and
    share per-session state (``docs/fleet.md`` explains when to use which backend). A backend's
    plugin declares its own keys in this section; a session call that waits longer than
    ``lock_timeout_s`` raises :class:`~ctxengine.SessionBusyError`."""

    backend: str = setting(
        "name",
        "process",
        env="CTXENGINE_COORDINATION",
        doc="process = one process; a plugin's backend (ctxengine-fleet: file = many "
        "processes on one host, postgresql = many hosts)",
    )
    lock_timeout_s: float = setting(
        "number",
        30.0,
        gt=0,
        doc="a session call waits this long for another worker's call on the same session",
    )


@attrs.frozen
class ModelOverride:
    """``models.<name>:`` — corrections to the model metadata table; prices in USD per million
    tokens. ``None`` keeps the table's value."""

    context_length: int | None = setting(
        "int", nullable=True, ge=1024, doc="null = the model table's"
    )
    max_output_tokens: int | None = setting(
        "int", nullable=True, ge=1, doc="null = the model table's; < context_length"
    )
    min_cacheable_tokens: int | None = setting(
        "int", nullable=True, ge=1, doc="shortest prefix the provider caches"
    )
    # Zero is a real price (local models), so prices only refuse negatives.
    input_price: float | None = setting("number", nullable=True, ge=0, doc="USD per million tokens")
    output_price: float | None = setting(
        "number", nullable=True, ge=0, doc="USD per million tokens"
    )


# ---------------------------------------------------------------------------------------------
# Checks across the kernel's keys
# ---------------------------------------------------------------------------------------------


def _max_tokens_below_window(view: SettingsView) -> None:
    less_than(view, "model.max_tokens", "model.context_length")


_PROVIDERS = get_args(SummaryProviderName)[1:]
"""The providers a fallback chain may name (every one but ``auto``)."""


def _chain_rule(chain: Sequence[str], primary: str) -> str | None:
    """What is wrong with the fallback ``chain`` of ``primary``, or ``None``."""
    unknown = [name for name in chain if name not in _PROVIDERS]
    if unknown:
        return f"{unknown[0]!r} is not a summary provider; allowed: {', '.join(_PROVIDERS)}"
    if len(set(chain)) != len(chain):
        return "names a provider twice; each provider is asked at most once"
    if "extractive" in chain[:-1]:
        return "'extractive' never fails, so it can only be the last fallback"
    if primary == "extractive":
        return "auxiliary.compression.provider is 'extractive', which never fails; remove it"
    if primary in chain:
        return f"names the provider itself ({primary!r}); list other providers"
    return None


def _fallback_chain(view: SettingsView) -> None:
    """``auxiliary.compression.fallback``: known providers, each once, ``extractive`` last, and
    nothing after a primary that never fails."""
    key, primary = "auxiliary.compression.fallback", "auxiliary.compression.provider"
    if view.has_problem(key, primary) or not view.value(key):
        return
    rule = _chain_rule(view.value(key), view.value(primary))
    if rule is not None:
        view.problem(key, rule)


CORE_SPECS: tuple[SettingsSpec[Any], ...] = (
    SettingsSpec.of("context", ContextSettings),
    SettingsSpec.of("model", ModelSettings, checks=(_max_tokens_below_window,)),
    SettingsSpec.of("auxiliary.compression", SummaryProviderSettings, checks=(_fallback_chain,)),
    SettingsSpec.of("prompt_caching", PromptCachingSettings),
    SettingsSpec.of("context_editing", ContextEditingSettings),
    SettingsSpec.of("coordination", CoordinationSettings),
)
"""The kernel's own sections, in documentation order; section ``a.b`` is ``Config.a.b``."""

MODEL_OVERRIDE_FIELDS: tuple[Field, ...] = fields_of(ModelOverride)
"""The fields of one ``models.<name>`` entry."""

_CORE_OWNED = tuple(OwnedSpec(spec, CORE_OWNER) for spec in CORE_SPECS)


# ---------------------------------------------------------------------------------------------
# The typed configuration
# ---------------------------------------------------------------------------------------------


def _freeze_models(value: Mapping[str, ModelOverride]) -> Mapping[str, ModelOverride]:
    return types.MappingProxyType(dict(value))


def _freeze_engines(value: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType({k: types.MappingProxyType(dict(v)) for k, v in value.items()})


@attrs.frozen
class Config:
    """The whole validated configuration. ``Config()`` is all defaults.

    Direct construction does not validate; use :func:`config_from_mapping`,
    :func:`load_config` or :func:`ctxengine.load` for user input. ``engines`` holds every
    ``engines.<name>`` section as written; plugins read their validated keys with
    :meth:`settings`.
    """

    context: ContextSettings = attrs.field(factory=ContextSettings)
    model: ModelSettings = attrs.field(factory=ModelSettings)
    auxiliary: AuxiliarySettings = attrs.field(factory=AuxiliarySettings)
    prompt_caching: PromptCachingSettings = attrs.field(factory=PromptCachingSettings)
    context_editing: ContextEditingSettings = attrs.field(factory=ContextEditingSettings)
    coordination: CoordinationSettings = attrs.field(factory=CoordinationSettings)
    models: Mapping[str, ModelOverride] = attrs.field(factory=dict, converter=_freeze_models)
    engines: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, converter=_freeze_engines)
    raw: RawConfig = attrs.field(factory=RawConfig, eq=False, repr=False)
    """The configuration as written; plugin keys are validated from it."""
    _validated: dict[SettingsSpec[Any], Any] = attrs.field(
        factory=dict, eq=False, repr=False, alias="validated"
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False, repr=False, init=False)

    def settings(self, spec: SettingsSpec[T]) -> T:
        """The validated value of ``spec``'s keys (``spec.build(**values)``, or a read-only
        mapping when the spec has no ``build``).

        A kernel built by :func:`ctxengine.load` validated every selected plugin's spec already;
        any other spec is validated here on first use, from the same configuration layers.

        :raises ConfigError: when the keys are invalid (naming each key, value and source).
        """
        with self._lock:
            if spec in self._validated:
                return self._validated[spec]  # type: ignore[no-any-return]
        specs = (*_CORE_OWNED, OwnedSpec(spec, "plugin"))
        resolved = Resolved(self.raw, specs, model_fields=MODEL_OVERRIDE_FIELDS)
        own = resolved.problems_of(spec)
        if own:
            raise ConfigError(own)
        _note_deprecations([d for d in resolved.deprecations if d.key.startswith(spec.section)])
        value = build_value(spec, resolved.values_of(spec))
        with self._lock:
            return self._validated.setdefault(spec, value)  # type: ignore[no-any-return]

    def validated_values(self) -> dict[SettingsSpec[Any], Any]:
        """A copy of the plugin values validated so far (spec -> built value)."""
        with self._lock:
            return dict(self._validated)


def build_value(spec: SettingsSpec[T], values: Mapping[str, Any]) -> T:
    """``spec.build(**values)``, or the values as a read-only mapping without a builder."""
    if spec.build is None:
        return types.MappingProxyType(dict(values))  # type: ignore[return-value]
    return spec.build(**values)


@attrs.frozen
class ConfigRow:
    """One line of ``ctxengine config``.

    :ivar owner: the plugin that reads the key (``"kernel"`` for the kernel's own), or ``None``
        for a key that nothing selected reads (``status == "unused"``) or that a plugin reads
        without declaring it (``status == "undeclared"``).
    :ivar note: for unused and undeclared keys, why; for a key given under its former path,
        that path.
    """

    key: str
    value: Any
    source: str
    owner: str | None
    status: Literal["ok", "unused", "undeclared"] = "ok"
    note: str = ""


@attrs.frozen
class LoadedConfig:
    """A validated config plus where it came from.

    :ivar path: the config file that was read, or ``None`` (defaults, env and overrides only).
    :ivar sources: every declared key path -> ``"default"``, the file path, ``"env VAR"`` or
        ``"override"``. Model overrides appear as ``models.<name>.<field>``, engine options as
        ``engines.<name>.<option>`` (``engines.<name>`` for an engine with no options).
    :ivar owners: declared key path -> the plugin that reads it (``"kernel"`` for the kernel).
    :ivar specs: the specs validated, with their owners (the kernel's first).
    :ivar unused: keys that no selected plugin reads.
    :ivar deprecations: the keys given under a former path (``ctxengine config`` lists them).
    """

    config: Config
    path: Path | None
    sources: Mapping[str, str]
    owners: Mapping[str, str] = attrs.field(factory=dict)
    specs: tuple[OwnedSpec, ...] = _CORE_OWNED
    unused: tuple[UnusedKey, ...] = ()
    deprecations: tuple[Deprecation, ...] = ()
    values: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    """Declared key path -> validated value (as the field holds it, before ``build``)."""

    def rows(self) -> list[ConfigRow]:
        """Every key in documentation order (the kernel's sections, then each plugin's, then
        ``models.*`` and undeclared ``engines.*``), then the unused keys.

        Values go through :func:`~ctxengine._config.fields.printable`: an API key is shown
        as ``"***"`` when set, a password inside any URL (``coordination.database_url``,
        ``engines.lcm.database_url``) too.
        """
        core = _core_values(self.config)
        renamed = {d.key: f"given as {d.alias}, a deprecated name" for d in self.deprecations}
        rows: list[tuple[str, Any, str, str | None, Any, str]] = []
        for owned in self.specs:
            for field in owned.spec.fields:
                key = owned.spec.key(field.name)
                value = core[key] if key in core else self.values.get(key, field.default)
                source = self.sources.get(key, "default")
                rows.append((key, value, source, owned.owner, "ok", renamed.get(key, "")))
        for name, override in self.config.models.items():
            for field in MODEL_OVERRIDE_FIELDS:
                key = f"models.{name}.{field.name}"
                value = getattr(override, field.name)
                rows.append((key, value, self.sources.get(key, "default"), CORE_OWNER, "ok", ""))
        declared = {owned.spec.section for owned in self.specs}
        unused = {u.key for u in self.unused}
        note = "read by a plugin that declares no settings; not validated"
        for name, options in self.config.engines.items():
            if f"engines.{name}" in declared:
                continue
            for option, value in options.items():
                key = f"engines.{name}.{option}"
                if key not in unused:
                    source = self.sources.get(key, "default")
                    rows.append((key, value, source, None, "undeclared", note))
        rows += [(u.key, u.value, u.source, None, "unused", u.note) for u in self.unused]
        return [ConfigRow(k, printable(k, v), *rest) for k, v, *rest in rows]

    def items(self) -> list[tuple[str, Any, str]]:
        """``(key path, value, source)`` for every row of :meth:`rows`."""
        return [(row.key, row.value, row.source) for row in self.rows()]


def _core_values(config: Config) -> dict[str, Any]:
    """The kernel's keys as ``config`` holds them (for a LoadedConfig built by hand): section
    ``a.b`` is ``config.a.b``."""
    values: dict[str, Any] = {}
    for spec in CORE_SPECS:
        typed = functools.reduce(getattr, spec.section.split("."), config)
        values.update({spec.key(f.name): getattr(typed, f.name) for f in spec.fields})
    return values


# ---------------------------------------------------------------------------------------------
# Building a Config from the layers
# ---------------------------------------------------------------------------------------------


def resolve_loaded(
    raw: RawConfig,
    path: Path | None,
    plugin_specs: Sequence[OwnedSpec] = (),
    *,
    engine_trigger: str | Literal["auto"] | None = "auto",
) -> LoadedConfig:
    """Validate ``raw`` against the kernel's specs and ``plugin_specs`` into a
    :class:`LoadedConfig`.

    :param engine_trigger: the key path of the selected engine's trigger; ``"auto"`` takes the
        first spec that declares one (a kernel passes its engine's explicitly).
    :raises ConfigError: listing every problem of every layer and every spec.
    """
    specs = (*_CORE_OWNED, *plugin_specs)
    if engine_trigger == "auto":
        engine_trigger = next(
            (o.spec.key(o.spec.trigger) for o in plugin_specs if o.spec.trigger is not None), None
        )
    resolved = Resolved(
        raw, specs, model_fields=MODEL_OVERRIDE_FIELDS, engine_trigger=engine_trigger
    )
    if resolved.problems:
        raise ConfigError(resolved.problems)
    _note_deprecations(resolved.deprecations)
    sections = {spec.section: build_value(spec, resolved.values_of(spec)) for spec in CORE_SPECS}
    config = Config(
        **{section: value for section, value in sections.items() if "." not in section},
        auxiliary=AuxiliarySettings(sections["auxiliary.compression"]),
        models={name: ModelOverride(**fields) for name, fields in resolved.models.items()},
        engines=resolved.engines,
        raw=raw,
        validated={o.spec: build_value(o.spec, resolved.values_of(o.spec)) for o in plugin_specs},
    )
    return LoadedConfig(
        config=config,
        path=path,
        sources=types.MappingProxyType(resolved.sources),
        owners=types.MappingProxyType(resolved.owners),
        specs=specs,
        unused=tuple(resolved.unused),
        deprecations=tuple(dict.fromkeys(resolved.deprecations)),
        values=types.MappingProxyType(resolved.values),
    )


_LOGGED: set[Deprecation] = set()
"""Deprecations already logged: a file is validated more than once per load (the kernel's keys
alone, then with the plugins'), and each former path is worth one log line per process."""


def _note_deprecations(deprecations: Sequence[Deprecation]) -> None:
    """A :class:`DeprecationWarning` for each former path given, and one log line each."""
    for deprecation in dict.fromkeys(deprecations):
        warnings.warn(str(deprecation), DeprecationWarning, stacklevel=4)
        if deprecation not in _LOGGED:
            _LOGGED.add(deprecation)
            log.warning("%s", deprecation)


def config_from_mapping(
    data: Mapping[str, Any],
    *,
    source: str = "<mapping>",
    specs: Sequence[SettingsSpec[Any] | OwnedSpec] = (),
) -> Config:
    """Validate a parsed config (the YAML top level) into a :class:`Config`.

    No environment variables are read. ``data`` is not modified.

    :param specs: plugin specs to validate too (their values are then served by
        :meth:`Config.settings` without validating again).
    :raises ConfigError: listing every problem, each naming ``source``.
    """
    raw = RawConfig(data=data, source=source)
    return resolve_loaded(raw, None, _owned(specs)).config


def _owned(specs: Sequence[SettingsSpec[Any] | OwnedSpec]) -> tuple[OwnedSpec, ...]:
    return tuple(s if isinstance(s, OwnedSpec) else OwnedSpec(s, "plugin") for s in specs)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    specs: Sequence[SettingsSpec[Any] | OwnedSpec] = (),
) -> LoadedConfig:
    """Find, read and validate the configuration.

    Discovery: ``path`` -> ``$CTXENGINE_CONFIG`` -> ``<home>/config.yaml`` -> defaults. A file
    named by ``path`` or ``$CTXENGINE_CONFIG`` must exist; a missing home file means defaults;
    an empty file means defaults. Then each key's environment variable applies, then
    ``overrides`` (dotted key -> value; string values for non-string keys are parsed like
    environment variables).

    Only the kernel's keys (and ``specs``) are validated here; :func:`ctxengine.load` validates
    the selected plugins' keys as well.

    :param env: the environment to read (default ``os.environ``).
    :raises ConfigError: listing every problem in every layer.
    """
    env = os.environ if env is None else env
    file = find_file(path, env)
    data: Mapping[Any, Any] = {}
    problems: list[ConfigProblem] = []
    if file is not None:
        data, problems = read_yaml(file)
    raw = RawConfig(
        data=data,
        source=str(file) if file is not None else None,
        env=env,
        overrides=dict(overrides or {}),
        file_problems=tuple(problems),
    )
    return resolve_loaded(raw, file, _owned(specs))
