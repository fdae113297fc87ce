"""The configuration: the kernel's own keys, the typed :class:`Config`, and loading it.

The kernel declares its keys exactly the way plugins declare theirs (:data:`CORE_SPECS`, one
:class:`~ctxengine.SettingsSpec` per section); :mod:`ctxengine._config.resolve` validates both
with the same rules. :func:`load_config` validates the kernel's keys only; :func:`ctxengine.load`
validates them again together with every selected plugin's keys, so a typo under
``engines.lcm`` fails the load like a typo under ``model``. Plugins read their own validated
values with :meth:`Config.settings`.

Import cost: standard library and ``attrs`` only; ``yaml`` is imported when a file is read.
"""

from __future__ import annotations

import os
import threading
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs

from ctxengine._config.fields import (
    ConfigError,
    ConfigProblem,
    Field,
    FieldKind,
    RawSection,
    printable,
)
from ctxengine._config.files import ctxengine_home, find_file, read_yaml
from ctxengine._config.resolve import RawConfig, Resolved, UnusedKey, resolve
from ctxengine._config.spec import CORE_OWNER, OwnedSpec, SettingsSpec, SettingsView

__all__ = [
    "CORE_SPECS",
    "ENV_VARS",
    "MODEL_OVERRIDE_FIELDS",
    "SECTION_FIELDS",
    "AuxiliarySettings",
    "CompressionSettings",
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

T = TypeVar("T")

SummaryProviderName = Literal["auto", "anthropic", "openai", "main", "extractive"]
CacheTTL = Literal["5m", "1h", "auto"]
CacheRetention = Literal["in_memory", "24h"]


def _default(cls: type[Any], name: str) -> Any:
    return attrs.fields_dict(cls)[name].default


# ---------------------------------------------------------------------------------------------
# The kernel's typed settings
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class ContextSettings:
    """``context:`` — which engine runs, which extensions load, where directory plugins live."""

    engine: str = "compressor"
    plugin_dirs: tuple[str, ...] = ()
    strict: bool = False
    extensions: tuple[str, ...] = ()


@attrs.frozen
class ModelSettings:
    """``model:`` — the main model the agent talks to.

    ``base_url`` is where that model is served (``None`` = the native Anthropic API); it decides
    the prompt-caching route.
    """

    name: str = "claude-sonnet-4-6"
    context_length: int | None = None
    max_tokens: int | None = None
    base_url: str | None = None


@attrs.frozen
class CompressionSettings:
    """``compression:`` — the keys every engine honours. Each plugin declares its own keys in
    this section too (the compressor's ``threshold``, hygiene's ``hygiene_threshold``, ...)."""

    enabled: bool = True
    abort_on_summary_failure: bool = False


@attrs.frozen
class SummaryProviderSettings:
    """``auxiliary.compression:`` — the model that writes summaries."""

    provider: SummaryProviderName = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    timeout: float = 120.0
    context_length: int | None = None
    cache_aware: bool = True
    max_attempts: int = 3
    retry_backoff: float = 1.0
    retry_max_wait: float = 30.0
    breaker_failures: int = 3
    breaker_cooldown: float = 60.0
    fallback: tuple[str, ...] = ()


@attrs.frozen
class AuxiliarySettings:
    """``auxiliary:`` — helper models."""

    compression: SummaryProviderSettings = attrs.field(factory=SummaryProviderSettings)


@attrs.frozen
class PromptCachingSettings:
    """``prompt_caching:`` — whether and how requests are marked for prompt caching."""

    enabled: bool | Literal["auto"] = "auto"
    strategy: str = "system_and_3"
    cache_ttl: CacheTTL = "5m"
    cache_key: bool | Literal["auto"] = "auto"
    cache_retention: CacheRetention | None = None
    diagnostics: bool = False


@attrs.frozen
class ContextEditingSettings:
    """``context_editing:`` — Anthropic's server-side clearing added to prepared requests.

    ``clear_tool_uses`` adds ``clear_tool_uses_20250919`` (older tool results replaced by a
    placeholder once the prompt passes ``trigger``), ``clear_thinking`` adds
    ``clear_thinking_20251015`` to requests that enable extended thinking. ``trigger`` is a
    fraction of the usable window like every ctxengine threshold (``None`` = the API's default).
    """

    clear_tool_uses: bool = False
    trigger: float | None = None
    keep_tool_uses: int = 3
    clear_at_least_tokens: int | None = None
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    clear_thinking: bool = False
    keep_thinking_turns: int = 1

    @property
    def enabled(self) -> bool:
        """Whether any edit is configured."""
        return self.clear_tool_uses or self.clear_thinking


@attrs.frozen
class CoordinationSettings:
    """``coordination:`` — how the processes serving the same sessions exclude each other and
    share per-session state (``docs/fleet.md`` explains when to use which backend).

    :ivar backend: ``process`` (one process; state in memory, the kernel's own) or the backend of
        a plugin (``file`` and ``postgresql`` come with ``ctxengine-fleet``), whose own keys in
        this section it declares itself.
    :ivar lock_timeout_s: how long a session call waits for another worker's call on the same
        session before raising :class:`~ctxengine.SessionBusyError`.
    """

    backend: str = "process"
    lock_timeout_s: float = 30.0


@attrs.frozen
class ModelOverride:
    """``models.<name>:`` — corrections to the model metadata table; prices in USD per million
    tokens. ``None`` keeps the table's value."""

    context_length: int | None = None
    max_output_tokens: int | None = None
    min_cacheable_tokens: int | None = None
    input_price: float | None = None
    output_price: float | None = None


def _f(cls: type[Any], name: str, kind: FieldKind, **kw: Any) -> Field:
    """A field whose default is the settings class's own default (one source of truth)."""
    return Field(name, kind, _default(cls, name), **kw)


def _max_tokens_below_window(view: SettingsView) -> None:
    small, large = "model.max_tokens", "model.context_length"
    value, limit = view.value(small), view.value(large)
    if view.has_problem(small, large) or value is None or limit is None or value < limit:
        return
    rule = f"must be less than {view.describe(large, seen_from=view.source(small))}"
    view.problem(small, rule)


def _fallback_chain(view: SettingsView) -> None:
    """``auxiliary.compression.fallback``: known providers, each once, ``extractive`` last, and
    nothing after a primary that never fails."""
    key = "auxiliary.compression.fallback"
    chain, primary = view.value(key), view.value("auxiliary.compression.provider")
    if view.has_problem(key, "auxiliary.compression.provider") or not chain:
        return
    allowed = ("anthropic", "openai", "main", "extractive")
    unknown = [name for name in chain if name not in allowed]
    if unknown:
        view.problem(
            key, f"{unknown[0]!r} is not a summary provider; allowed: {', '.join(allowed)}"
        )
    elif len(set(chain)) != len(chain):
        view.problem(key, "names a provider twice; each provider is asked at most once")
    elif "extractive" in chain[:-1]:
        view.problem(key, "'extractive' never fails, so it can only be the last fallback")
    elif primary == "extractive":
        view.problem(
            key, "auxiliary.compression.provider is 'extractive', which never fails; remove it"
        )
    elif primary in chain:
        view.problem(key, f"names the provider itself ({primary!r}); list other providers")


_Ctx, _Mod, _Comp = ContextSettings, ModelSettings, CompressionSettings
_Sum, _Cache, _Over = SummaryProviderSettings, PromptCachingSettings, ModelOverride
_Edit = ContextEditingSettings
_Coord = CoordinationSettings

CONTEXT = SettingsSpec(
    "context",
    (
        _f(_Ctx, "engine", "name", env="CTXENGINE_ENGINE", doc="the context engine"),
        _f(
            _Ctx,
            "plugin_dirs",
            "str_list",
            env="CTXENGINE_PLUGIN_DIRS",
            doc="extra folders searched for directory plugins",
        ),
        _f(
            _Ctx,
            "strict",
            "bool",
            env="CTXENGINE_STRICT",
            doc="an engine that cannot be loaded is an error instead of a fallback",
        ),
        _f(
            _Ctx,
            "extensions",
            "str_list",
            env="CTXENGINE_EXTENSIONS",
            doc="opt-in extensions to load (always-on extensions load anyway)",
        ),
    ),
    build=ContextSettings,
)
MODEL = SettingsSpec(
    "model",
    (
        _f(_Mod, "name", "str", env="CTXENGINE_MODEL", doc="the main model"),
        _f(
            _Mod,
            "context_length",
            "int",
            nullable=True,
            ge=1024,
            env="CTXENGINE_CONTEXT_LENGTH",
            doc="overrides the model table's window",
        ),
        _f(
            _Mod,
            "max_tokens",
            "int",
            nullable=True,
            ge=1,
            env="CTXENGINE_MAX_TOKENS",
            doc="output reservation, subtracted from the window for thresholds; "
            "< model.context_length",
        ),
        _f(
            _Mod,
            "base_url",
            "url",
            nullable=True,
            env="CTXENGINE_BASE_URL",
            doc="where the model is served (null = native Anthropic API); decides the cache route",
        ),
    ),
    build=ModelSettings,
    checks=(_max_tokens_below_window,),
)
COMPRESSION = SettingsSpec(
    "compression",
    (
        _f(
            _Comp,
            "enabled",
            "bool",
            env="CTXENGINE_COMPRESSION_ENABLED",
            doc="compaction on or off, for every engine",
        ),
        _f(
            _Comp,
            "abort_on_summary_failure",
            "bool",
            doc="every failed summary aborts the compaction (no local digest instead)",
        ),
    ),
    build=CompressionSettings,
)
SUMMARY = SettingsSpec(
    "auxiliary.compression",
    (
        _f(
            _Sum,
            "provider",
            "choice",
            choices=("auto", "anthropic", "openai", "main", "extractive"),
            env="CTXENGINE_SUMMARY_PROVIDER",
            doc="who writes summaries",
        ),
        _f(
            _Sum,
            "model",
            "str",
            nullable=True,
            env="CTXENGINE_SUMMARY_MODEL",
            doc="null = the provider's default",
        ),
        _f(
            _Sum,
            "base_url",
            "url",
            nullable=True,
            env="CTXENGINE_SUMMARY_BASE_URL",
            doc="any OpenAI-compatible endpoint (OpenRouter, vLLM, llama.cpp, Ollama)",
        ),
        _f(
            _Sum,
            "api_key",
            "str",
            nullable=True,
            doc="null = the provider's usual environment variable",
        ),
        _f(_Sum, "timeout", "number", gt=0, env="CTXENGINE_SUMMARY_TIMEOUT", doc="seconds"),
        _f(
            _Sum,
            "context_length",
            "int",
            nullable=True,
            ge=1024,
            doc="the summary model's window (null = the model table's)",
        ),
        _f(
            _Sum,
            "cache_aware",
            "bool",
            doc="a summary written by the main model on the main route resends the agent's last "
            "request (read from the prompt cache) with the instruction appended",
        ),
        _f(
            _Sum,
            "max_attempts",
            "int",
            ge=1,
            le=10,
            env="CTXENGINE_SUMMARY_MAX_ATTEMPTS",
            doc="requests per provider and summary, retries included (429, 5xx, timeouts)",
        ),
        _f(
            _Sum,
            "retry_backoff",
            "number",
            ge=0,
            doc="seconds before the first retry, doubled for each further one",
        ),
        _f(
            _Sum,
            "retry_max_wait",
            "number",
            ge=0,
            doc="longest pause before a retry; a longer Retry-After ends the retries",
        ),
        _f(
            _Sum,
            "breaker_failures",
            "int",
            ge=1,
            doc="failed requests in a row that open the provider's circuit breaker",
        ),
        _f(
            _Sum,
            "breaker_cooldown",
            "number",
            gt=0,
            doc="seconds an open breaker sends no request to its provider",
        ),
        _f(
            _Sum,
            "fallback",
            "str_list",
            env="CTXENGINE_SUMMARY_FALLBACK",
            doc="providers asked in turn when the provider fails (anthropic, openai, main, "
            "extractive)",
        ),
    ),
    build=SummaryProviderSettings,
    checks=(_fallback_chain,),
)
PROMPT_CACHING = SettingsSpec(
    "prompt_caching",
    (
        _f(
            _Cache,
            "enabled",
            "choice",
            choices=("auto", True, False),
            env="CTXENGINE_PROMPT_CACHING",
            doc="auto = on for Claude models on routes that accept cache_control",
        ),
        _f(_Cache, "strategy", "name", doc="the cache strategy plugin"),
        _f(
            _Cache,
            "cache_ttl",
            "choice",
            choices=("5m", "1h", "auto"),
            env="CTXENGINE_CACHE_TTL",
            doc="lifetime of cache entries; auto = per breakpoint, from the measured request "
            "gaps and the prices",
        ),
        _f(
            _Cache,
            "cache_key",
            "choice",
            choices=("auto", True, False),
            doc="send a stable prompt_cache_key per session; auto = on OpenAI's own API",
        ),
        _f(
            _Cache,
            "cache_retention",
            "choice",
            choices=("in_memory", "24h"),
            nullable=True,
            doc="OpenAI prompt_cache_retention to send (null = the provider's default)",
        ),
        _f(
            _Cache,
            "diagnostics",
            "bool",
            doc="ask Anthropic why a prompt missed the cache (the diagnostics request field)",
        ),
    ),
    build=PromptCachingSettings,
)

CONTEXT_EDITING = SettingsSpec(
    "context_editing",
    (
        _f(
            _Edit,
            "clear_tool_uses",
            "bool",
            env="CTXENGINE_CLEAR_TOOL_USES",
            doc="Anthropic requests clear older tool results on the server (clear_tool_uses)",
        ),
        _f(
            _Edit,
            "trigger",
            "number",
            nullable=True,
            gt=0.0,
            le=1.0,
            doc="clear when prompt tokens >= trigger x window (null = the API's default)",
        ),
        _f(_Edit, "keep_tool_uses", "int", ge=0, doc="most recent tool uses never cleared"),
        _f(
            _Edit,
            "clear_at_least_tokens",
            "int",
            nullable=True,
            ge=1,
            doc="clear only when at least this many tokens go (null = any amount)",
        ),
        _f(_Edit, "exclude_tools", "str_list", doc="tools whose results are never cleared"),
        _f(_Edit, "clear_tool_inputs", "bool", doc="clear the cleared tool uses' inputs too"),
        _f(
            _Edit,
            "clear_thinking",
            "bool",
            doc="requests with extended thinking drop older thinking blocks (clear_thinking)",
        ),
        _f(_Edit, "keep_thinking_turns", "int", ge=1, doc="most recent thinking turns kept"),
    ),
    build=ContextEditingSettings,
)

COORDINATION = SettingsSpec(
    "coordination",
    (
        _f(
            _Coord,
            "backend",
            "name",
            env="CTXENGINE_COORDINATION",
            doc="process = one process; a plugin's backend (ctxengine-fleet: file = many "
            "processes on one host, postgresql = many hosts)",
        ),
        _f(
            _Coord,
            "lock_timeout_s",
            "number",
            gt=0,
            doc="a session call waits this long for another worker's call on the same session",
        ),
    ),
    build=CoordinationSettings,
)

CORE_SPECS: tuple[SettingsSpec[Any], ...] = (
    CONTEXT,
    MODEL,
    COMPRESSION,
    SUMMARY,
    PROMPT_CACHING,
    CONTEXT_EDITING,
    COORDINATION,
)
"""The kernel's own sections, in documentation order."""

SECTION_FIELDS: Mapping[str, tuple[Field, ...]] = types.MappingProxyType(
    {spec.section: spec.fields for spec in CORE_SPECS}
)
"""Section path -> the kernel's fields in it, in documentation order."""

MODEL_OVERRIDE_FIELDS: tuple[Field, ...] = (
    _f(_Over, "context_length", "int", nullable=True, ge=1024, doc="null = the model table's"),
    _f(
        _Over,
        "max_output_tokens",
        "int",
        nullable=True,
        ge=1,
        doc="null = the model table's; < context_length",
    ),
    _f(
        _Over,
        "min_cacheable_tokens",
        "int",
        nullable=True,
        ge=1,
        doc="shortest prefix the provider caches",
    ),
    # Zero is a real price (local models), so prices only refuse negatives.
    _f(_Over, "input_price", "number", nullable=True, ge=0, doc="USD per million tokens"),
    _f(_Over, "output_price", "number", nullable=True, ge=0, doc="USD per million tokens"),
)
"""The fields of one ``models.<name>`` entry."""

ENV_VARS: Mapping[str, str] = types.MappingProxyType(
    {f.env: spec.key(f.name) for spec in CORE_SPECS for f in spec.fields if f.env is not None}
)
"""The kernel's environment variables -> the key each overrides (plugins declare theirs on
their fields). An empty variable counts as unset; ``null`` sets a nullable key to null."""

_CORE_OWNED = tuple(OwnedSpec(spec, CORE_OWNER) for spec in CORE_SPECS)


# ---------------------------------------------------------------------------------------------
# The typed configuration
# ---------------------------------------------------------------------------------------------


def _freeze_models(value: Mapping[str, ModelOverride]) -> Mapping[str, ModelOverride]:
    return types.MappingProxyType(dict(value))


def _freeze_engines(value: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType(
        {k: v if isinstance(v, RawSection) else RawSection(v) for k, v in value.items()}
    )


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
    compression: CompressionSettings = attrs.field(factory=CompressionSettings)
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
        resolved = resolve(
            self.raw, (*_CORE_OWNED, OwnedSpec(spec, "plugin")), model_fields=MODEL_OVERRIDE_FIELDS
        )
        own = [p for p in resolved.problems if p.key.startswith(spec.section + ".")]
        if own:
            raise ConfigError(own)
        value = build_value(spec, resolved.spec_values[spec])
        with self._lock:
            return self._validated.setdefault(spec, value)  # type: ignore[no-any-return]

    def validated_specs(self) -> tuple[SettingsSpec[Any], ...]:
        """The plugin specs validated with this configuration, in declaration order."""
        with self._lock:
            return tuple(self._validated)

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
    :ivar note: for unused and undeclared keys, why.
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
    """

    config: Config
    path: Path | None
    sources: Mapping[str, str]
    owners: Mapping[str, str] = attrs.field(factory=dict)
    specs: tuple[OwnedSpec, ...] = _CORE_OWNED
    unused: tuple[UnusedKey, ...] = ()
    values: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    """Declared key path -> validated value (as the field holds it, before ``build``)."""

    def rows(self) -> list[ConfigRow]:
        """Every key in documentation order (the kernel's sections, then each plugin's, then
        ``models.*`` and undeclared ``engines.*``), then the unused keys.

        Values go through :func:`~ctxengine._config.fields.printable`: an API key is shown
        as ``"***"`` when set, a password inside any URL (``coordination.database_url``,
        ``engines.lcm.database_url``) too.
        """
        rows: list[ConfigRow] = []
        core = _core_values(self.config)
        declared_sections = {owned.spec.section for owned in self.specs}
        for owned in self.specs:
            for field in owned.spec.fields:
                key = owned.spec.key(field.name)
                value = core[key] if key in core else self.values.get(key, field.default)
                value = printable(key, value)
                rows.append(ConfigRow(key, value, self.sources.get(key, "default"), owned.owner))
        for name, override in self.config.models.items():
            for field in MODEL_OVERRIDE_FIELDS:
                key = f"models.{name}.{field.name}"
                value = printable(key, getattr(override, field.name))
                rows.append(ConfigRow(key, value, self.sources.get(key, "default"), CORE_OWNER))
        unused_keys = {u.key for u in self.unused}
        for name, options in self.config.engines.items():
            section = f"engines.{name}"
            if section in declared_sections:
                continue
            for option, value in options.items():
                key = f"{section}.{option}"
                if key in unused_keys:
                    continue
                note = "read by a plugin that declares no settings; not validated"
                rows.append(
                    ConfigRow(
                        key,
                        printable(key, value),
                        self.sources.get(key, "default"),
                        None,
                        "undeclared",
                        note,
                    )
                )
        for unused in self.unused:
            rows.append(
                ConfigRow(
                    unused.key,
                    printable(unused.key, unused.value),
                    unused.source,
                    None,
                    "unused",
                    unused.note,
                )
            )
        return rows

    def items(self) -> list[tuple[str, Any, str]]:
        """``(key path, value, source)`` for every row of :meth:`rows`."""
        return [(row.key, row.value, row.source) for row in self.rows()]


def _core_values(config: Config) -> dict[str, Any]:
    """The kernel's keys as ``config`` holds them (for a LoadedConfig built by hand)."""
    typed: dict[str, object] = {
        "context": config.context,
        "model": config.model,
        "compression": config.compression,
        "auxiliary.compression": config.auxiliary.compression,
        "prompt_caching": config.prompt_caching,
        "context_editing": config.context_editing,
        "coordination": config.coordination,
    }
    return {
        spec.key(f.name): getattr(typed[spec.section], f.name)
        for spec in CORE_SPECS
        for f in spec.fields
    }


# ---------------------------------------------------------------------------------------------
# Building a Config from the layers
# ---------------------------------------------------------------------------------------------


def _build(
    raw: RawConfig, resolved: Resolved, plugin_specs: Sequence[OwnedSpec]
) -> tuple[Config, dict[SettingsSpec[Any], Any]]:
    values = resolved.spec_values
    validated = {o.spec: build_value(o.spec, values[o.spec]) for o in plugin_specs}
    config = Config(
        context=ContextSettings(**values[CONTEXT]),
        model=ModelSettings(**values[MODEL]),
        compression=CompressionSettings(**values[COMPRESSION]),
        auxiliary=AuxiliarySettings(SummaryProviderSettings(**values[SUMMARY])),
        prompt_caching=PromptCachingSettings(**values[PROMPT_CACHING]),
        context_editing=ContextEditingSettings(**values[CONTEXT_EDITING]),
        coordination=CoordinationSettings(**values[COORDINATION]),
        models={name: ModelOverride(**fields) for name, fields in resolved.models.items()},
        engines=resolved.engines,
        raw=raw,
        validated=validated,
    )
    return config, validated


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
    resolved = resolve(
        raw, specs, model_fields=MODEL_OVERRIDE_FIELDS, engine_trigger=engine_trigger
    )
    if resolved.problems:
        raise ConfigError(resolved.problems)
    config, _ = _build(raw, resolved, plugin_specs)
    return LoadedConfig(
        config=config,
        path=path,
        sources=types.MappingProxyType(resolved.sources),
        owners=types.MappingProxyType(resolved.owners),
        specs=specs,
        unused=tuple(resolved.unused),
        values=types.MappingProxyType(resolved.values),
    )


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
