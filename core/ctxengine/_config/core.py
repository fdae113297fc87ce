"""Configuration: discovery, parsing and validation of ``config.yaml`` (SPEC §1.3).

Layers, lowest first: built-in defaults, the config file, single-key environment variables
(:data:`ENV_VARS`), then ``overrides`` (CLI flags). Every layer is validated with the same
rules, every problem in every layer is collected, and one :class:`ConfigError` lists them all.
An invalid value is never replaced by a default.

The file is found by :func:`load_config`: an explicit path, else ``$CTXENGINE_CONFIG``, else
``<home>/config.yaml`` (home = ``$CTXENGINE_HOME`` or ``~/.ctxengine``), else defaults only.

Engines validate their own ``engines.<name>`` options with :func:`parse_section` and
:class:`Field`, so their messages read exactly like the core's. That generic machinery lives in
:mod:`ctxengine.fields`; its public names are re-exported here.

Import cost: standard library and ``attrs`` only; ``yaml`` is imported when a file is read.
"""

from __future__ import annotations

import copy
import difflib
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ctxengine._config.fields import (
    NAME_PATTERN,
    ConfigError,
    ConfigProblem,
    Field,
    FieldKind,
    RawSection,
    as_mapping,
    convert_input,
    format_value,
    parse_fields,
    parse_section,
    unknown_key_problem,
)

__all__ = [
    "ENV_VARS",
    "MODEL_OVERRIDE_FIELDS",
    "SECTION_FIELDS",
    "AuxiliarySettings",
    "Budgets",
    "CompressionSettings",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "ContextSettings",
    "Field",
    "FieldKind",
    "LoadedConfig",
    "ModelOverride",
    "ModelSettings",
    "PromptCachingSettings",
    "RawSection",
    "SummaryProviderSettings",
    "budgets",
    "config_from_mapping",
    "ctxengine_home",
    "format_value",
    "load_config",
    "parse_section",
]

SummaryProviderName = Literal["auto", "anthropic", "openai", "main", "extractive"]
CacheTTL = Literal["5m", "1h"]


def _default(cls: type[Any], name: str) -> Any:
    return attrs.fields_dict(cls)[name].default


# ---------------------------------------------------------------------------------------------
# Typed settings (every default from SPEC §1.3)
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class ContextSettings:
    """``context:`` — which engine runs and where directory plugins live."""

    engine: str = "compressor"
    plugin_dirs: tuple[str, ...] = ()
    strict: bool = False


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
    """``compression:`` — when and how much the compressor and the gateway hygiene compact."""

    enabled: bool = True
    threshold: float = 0.50
    target_ratio: float = 0.20
    protect_last_n: int = 20
    protect_first_n: int = 3
    abort_on_summary_failure: bool = False
    hygiene_threshold: float = 0.85
    hygiene_hard_message_limit: int = 5000


@attrs.frozen
class SummaryProviderSettings:
    """``auxiliary.compression:`` — the model that writes summaries."""

    provider: SummaryProviderName = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    timeout: float = 120.0
    context_length: int | None = None


@attrs.frozen
class AuxiliarySettings:
    """``auxiliary:`` — helper models."""

    compression: SummaryProviderSettings = attrs.field(factory=SummaryProviderSettings)


@attrs.frozen
class PromptCachingSettings:
    """``prompt_caching:`` — Anthropic cache breakpoints."""

    enabled: bool | Literal["auto"] = "auto"
    strategy: str = "system_and_3"
    cache_ttl: CacheTTL = "5m"


@attrs.frozen
class ModelOverride:
    """``models.<name>:`` — corrections to the model metadata table; prices in USD per million
    tokens. ``None`` keeps the table's value."""

    context_length: int | None = None
    max_output_tokens: int | None = None
    min_cacheable_tokens: int | None = None
    input_price: float | None = None
    output_price: float | None = None


def _freeze_models(value: Mapping[str, ModelOverride]) -> Mapping[str, ModelOverride]:
    return types.MappingProxyType(dict(value))


def _freeze_engines(value: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType(
        {k: v if isinstance(v, RawSection) else RawSection(v) for k, v in value.items()}
    )


@attrs.frozen
class Config:
    """The whole validated configuration. ``Config()`` is all defaults.

    Direct construction does not validate; use :func:`config_from_mapping` or
    :func:`load_config` for user input.
    """

    context: ContextSettings = attrs.field(factory=ContextSettings)
    model: ModelSettings = attrs.field(factory=ModelSettings)
    compression: CompressionSettings = attrs.field(factory=CompressionSettings)
    auxiliary: AuxiliarySettings = attrs.field(factory=AuxiliarySettings)
    prompt_caching: PromptCachingSettings = attrs.field(factory=PromptCachingSettings)
    models: Mapping[str, ModelOverride] = attrs.field(factory=dict, converter=_freeze_models)
    engines: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, converter=_freeze_engines)


# ---------------------------------------------------------------------------------------------
# The schema: one Field per leaf key
# ---------------------------------------------------------------------------------------------


def _f(cls: type[Any], name: str, kind: FieldKind, **kw: Any) -> Field:
    """A field whose default is the settings class's own default (one source of truth)."""
    return Field(name, kind, _default(cls, name), **kw)


_Ctx, _Mod, _Comp = ContextSettings, ModelSettings, CompressionSettings
_Sum, _Cache, _Over = SummaryProviderSettings, PromptCachingSettings, ModelOverride

SECTION_FIELDS: Mapping[str, tuple[Field, ...]] = types.MappingProxyType(
    {
        "context": (
            _f(_Ctx, "engine", "name"),
            _f(_Ctx, "plugin_dirs", "str_list"),
            _f(_Ctx, "strict", "bool"),
        ),
        "model": (
            _f(_Mod, "name", "str"),
            _f(_Mod, "context_length", "int", nullable=True, ge=1024),
            _f(_Mod, "max_tokens", "int", nullable=True, ge=1),
            _f(_Mod, "base_url", "url", nullable=True),
        ),
        "compression": (
            _f(_Comp, "enabled", "bool"),
            _f(_Comp, "threshold", "number", ge=0.05, le=0.95),
            _f(_Comp, "target_ratio", "number", ge=0.10, le=0.80),
            _f(_Comp, "protect_last_n", "int", ge=1),
            _f(_Comp, "protect_first_n", "int", ge=0),
            _f(_Comp, "abort_on_summary_failure", "bool"),
            # Also >= compression.threshold: checked across keys in _Layers.cross_check.
            _f(_Comp, "hygiene_threshold", "number", ge=0.05, le=1.0),
            _f(_Comp, "hygiene_hard_message_limit", "int", ge=4),
        ),
        "auxiliary.compression": (
            _f(
                _Sum,
                "provider",
                "choice",
                choices=("auto", "anthropic", "openai", "main", "extractive"),
            ),
            _f(_Sum, "model", "str", nullable=True),
            _f(_Sum, "base_url", "url", nullable=True),
            _f(_Sum, "api_key", "str", nullable=True),
            _f(_Sum, "timeout", "number", gt=0),
            _f(_Sum, "context_length", "int", nullable=True, ge=1024),
        ),
        "prompt_caching": (
            _f(_Cache, "enabled", "choice", choices=("auto", True, False)),
            _f(_Cache, "strategy", "name"),
            _f(_Cache, "cache_ttl", "choice", choices=("5m", "1h")),
        ),
    }
)
"""Section path -> its fields, in documentation order."""

MODEL_OVERRIDE_FIELDS: tuple[Field, ...] = (
    _f(_Over, "context_length", "int", nullable=True, ge=1024),
    _f(_Over, "max_output_tokens", "int", nullable=True, ge=1),
    _f(_Over, "min_cacheable_tokens", "int", nullable=True, ge=1),
    # Zero is a real price (local models), so prices only refuse negatives.
    _f(_Over, "input_price", "number", nullable=True, ge=0),
    _f(_Over, "output_price", "number", nullable=True, ge=0),
)
"""The fields of one ``models.<name>`` entry."""

ENV_VARS: Mapping[str, str] = types.MappingProxyType(
    {
        "CTXENGINE_ENGINE": "context.engine",
        "CTXENGINE_PLUGIN_DIRS": "context.plugin_dirs",
        "CTXENGINE_STRICT": "context.strict",
        "CTXENGINE_MODEL": "model.name",
        "CTXENGINE_CONTEXT_LENGTH": "model.context_length",
        "CTXENGINE_MAX_TOKENS": "model.max_tokens",
        "CTXENGINE_BASE_URL": "model.base_url",
        "CTXENGINE_COMPRESSION_ENABLED": "compression.enabled",
        "CTXENGINE_THRESHOLD": "compression.threshold",
        "CTXENGINE_HYGIENE_THRESHOLD": "compression.hygiene_threshold",
        "CTXENGINE_SUMMARY_PROVIDER": "auxiliary.compression.provider",
        "CTXENGINE_SUMMARY_MODEL": "auxiliary.compression.model",
        "CTXENGINE_SUMMARY_BASE_URL": "auxiliary.compression.base_url",
        "CTXENGINE_SUMMARY_TIMEOUT": "auxiliary.compression.timeout",
        "CTXENGINE_PROMPT_CACHING": "prompt_caching.enabled",
        "CTXENGINE_CACHE_TTL": "prompt_caching.cache_ttl",
    }
)
"""Environment variable -> the single key it overrides. An empty variable counts as unset;
``null`` sets a nullable key to null."""

_LEAVES: dict[str, Field] = {
    f"{section}.{field.name}": field
    for section, fields in SECTION_FIELDS.items()
    for field in fields
}
_TOP_SECTIONS = (
    "context",
    "model",
    "compression",
    "auxiliary",
    "prompt_caching",
    "models",
    "engines",
)
_PLAIN_SECTIONS = ("context", "model", "compression", "prompt_caching")
_ENGINE_NAME_RULE = "engine names must be made of letters, digits, '_', '.' and '-'"


# ---------------------------------------------------------------------------------------------
# Layering
# ---------------------------------------------------------------------------------------------


class _Layers:
    """Accumulates values, their sources and problems across the config layers."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {key: f.default for key, f in _LEAVES.items()}
        self.sources: dict[str, str] = dict.fromkeys(_LEAVES, "default")
        self.models: dict[str, dict[str, Any]] = {}
        self.model_sources: dict[str, dict[str, str]] = {}
        self.engines: dict[str, dict[str, Any]] = {}
        self.engine_sources: dict[str, dict[str, str]] = {}
        self.engine_origin: dict[str, str] = {}
        self.problems: list[ConfigProblem] = []

    def _problem(
        self, key: str, value: object, allowed: str, source: str, *, show_value: bool = True
    ) -> None:
        self.problems.append(ConfigProblem(key, value, allowed, source, show_value=show_value))

    def _set(self, key: str, value: Any, source: str) -> None:
        self.values[key] = value
        self.sources[key] = source

    def _set_input(self, key: str, field: Field, value: object, source: str) -> None:
        ok, converted, from_text = convert_input(field, value)
        if ok:
            self._set(key, converted, source)
        else:
            self._problem(key, converted, field.allowed(from_text=from_text), source)

    def _model(self, name: str) -> tuple[dict[str, Any], dict[str, str]]:
        if name not in self.models:
            self.models[name] = {f.name: f.default for f in MODEL_OVERRIDE_FIELDS}
            self.model_sources[name] = {f.name: "default" for f in MODEL_OVERRIDE_FIELDS}
        return self.models[name], self.model_sources[name]

    # -- layers --------------------------------------------------------------------------------

    def apply_mapping(self, data: Mapping[Any, Any], source: str) -> None:
        for section, value in data.items():
            if section in _PLAIN_SECTIONS:
                self._apply_fields(value, section, source)
            elif section == "auxiliary":
                aux = as_mapping(value, "auxiliary", ("compression",), source, self.problems)
                for key, sub in (aux or {}).items():
                    if key == "compression":
                        self._apply_fields(sub, "auxiliary.compression", source)
                    else:
                        self.problems.append(
                            unknown_key_problem("auxiliary", key, ("compression",), source)
                        )
            elif section == "models":
                self._apply_models(value, source)
            elif section == "engines":
                self._apply_engines(value, source)
            else:
                self.problems.append(
                    unknown_key_problem("", section, _TOP_SECTIONS, source, "section")
                )

    def _apply_fields(self, data: object, key_path: str, source: str) -> None:
        given, problems = parse_fields(data, key_path, SECTION_FIELDS[key_path], source)
        self.problems.extend(problems)
        for name, value in given.items():
            self._set(f"{key_path}.{name}", value, source)

    def _apply_models(self, data: object, source: str) -> None:
        models = as_mapping(data, "models", None, source, self.problems)
        for name, entry in (models or {}).items():
            if not isinstance(name, str) or not name.strip():
                self._problem("models", name, "model names must be non-empty strings", source)
                continue
            given, problems = parse_fields(entry, f"models.{name}", MODEL_OVERRIDE_FIELDS, source)
            self.problems.extend(problems)
            values, sources = self._model(name)
            for field_name, value in given.items():
                values[field_name] = value
                sources[field_name] = source

    def _apply_engines(self, data: object, source: str) -> None:
        engines = as_mapping(data, "engines", None, source, self.problems)
        for name, options in (engines or {}).items():
            key_path = f"engines.{name}"
            if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
                self._problem(key_path, name, _ENGINE_NAME_RULE, source, show_value=False)
                continue
            mapping = as_mapping(options, key_path, None, source, self.problems)
            if mapping is None:
                continue
            self.engine_origin.setdefault(name, source)
            values = self.engines.setdefault(name, {})
            sources = self.engine_sources.setdefault(name, {})
            for key, value in mapping.items():
                if not isinstance(key, str):
                    rule = "option names must be strings"
                    self._problem(f"{key_path}.{key}", key, rule, source, show_value=False)
                    continue
                # A private copy: later changes to the caller's data must not leak in.
                values[key] = copy.deepcopy(value)
                sources[key] = source

    def apply_env(self, env: Mapping[str, str]) -> None:
        for var, key in ENV_VARS.items():
            raw = env.get(var)
            if raw is not None and raw.strip():
                field = _LEAVES[key]
                ok, converted = field.convert_text(raw)
                if ok:
                    self._set(key, converted, f"env {var}")
                else:
                    self._problem(key, converted, field.allowed(from_text=True), f"env {var}")

    def apply_overrides(self, overrides: Mapping[Any, Any]) -> None:
        for key, value in overrides.items():
            if not isinstance(key, str):
                rule = "override keys must be dotted strings"
                self._problem(str(key), key, rule, "override", show_value=False)
            elif key in _LEAVES:
                self._set_input(key, _LEAVES[key], value, "override")
            elif key.startswith("models."):
                self._override_model(key, value)
            elif key.startswith("engines."):
                self._override_engine(key, value)
            else:
                text = "unknown key"
                close = difflib.get_close_matches(key, list(_LEAVES), n=1, cutoff=0.6)
                if close:
                    text += f"; did you mean {close[0]!r}?"
                text += (
                    " (allowed: the keys listed by `ctxengine config`, "
                    "models.<name>.<field> or engines.<name>.<option>)"
                )
                self._problem(key, value, text, "override", show_value=False)

    def _override_model(self, key: str, value: object) -> None:
        # Model names may contain dots ("claude-3.5-..."), field names never do.
        name, _, field_name = key[len("models.") :].rpartition(".")
        fields = {f.name: f for f in MODEL_OVERRIDE_FIELDS}
        if not name.strip():
            rule = "must be written models.<name>.<field>"
            self._problem(key, value, rule, "override", show_value=False)
        elif field_name not in fields:
            self.problems.append(
                unknown_key_problem(f"models.{name}", field_name, list(fields), "override")
            )
        else:
            ok, converted, from_text = convert_input(fields[field_name], value)
            if not ok:
                allowed = fields[field_name].allowed(from_text=from_text)
                self._problem(key, converted, allowed, "override")
                return
            values, sources = self._model(name)
            values[field_name] = converted
            sources[field_name] = "override"

    def _override_engine(self, key: str, value: object) -> None:
        rest = key[len("engines.") :]
        if isinstance(value, Mapping) and NAME_PATTERN.fullmatch(rest):
            self._apply_engines({rest: value}, "override")
            return
        name, _, option = rest.rpartition(".")
        if name and option:
            self._apply_engines({name: {option: value}}, "override")
        else:
            rule = "must be written engines.<name>.<option> (or engines.<name>: mapping)"
            self._problem(key, value, rule, "override", show_value=False)

    # -- checks across keys --------------------------------------------------------------------

    def cross_check(self) -> None:
        """Rules between keys; skipped for keys that already have a problem."""
        bad = {p.key for p in self.problems}
        self._check_hygiene(bad)
        self._check_less(bad, "model.max_tokens", "model.context_length")
        for name, values in self.models.items():
            small, large = f"models.{name}.max_output_tokens", f"models.{name}.context_length"
            out, window = values["max_output_tokens"], values["context_length"]
            if {small, large} & bad or out is None or window is None or out < window:
                continue
            source = self.model_sources[name]["max_output_tokens"]
            self._problem(small, out, f"must be less than {large} ({window})", source)

    def _other(self, key: str, source: str) -> str:
        """``key (value)``, naming the other key's source when it differs from ``source``."""
        other_source = self.sources[key]
        if other_source == source:
            where = ""
        elif other_source == "default":
            where = ", the default"
        else:
            where = f", from {other_source}"
        return f"{key} ({format_value(self.values[key])}{where})"

    def _check_hygiene(self, bad: set[str]) -> None:
        low, high = "compression.threshold", "compression.hygiene_threshold"
        if {low, high} & bad or self.values[high] >= self.values[low]:
            return
        if self.sources[high] == "default":
            # The user only raised the threshold; point at the key they wrote.
            source = self.sources[low]
            rule = f"must be <= {self._other(high, source)}; raise {high} as well"
            self._problem(low, self.values[low], rule, source)
        else:
            source = self.sources[high]
            rule = f"must be >= {self._other(low, source)} and <= 1.0"
            self._problem(high, self.values[high], rule, source)

    def _check_less(self, bad: set[str], small: str, large: str) -> None:
        value, limit = self.values[small], self.values[large]
        if {small, large} & bad or value is None or limit is None or value < limit:
            return
        source = self.sources[small]
        self._problem(small, value, f"must be less than {self._other(large, source)}", source)

    # -- result --------------------------------------------------------------------------------

    def build(self) -> tuple[Config, dict[str, str]]:
        """The typed config and the flat sources map; raises the collected problems."""
        if self.problems:
            raise ConfigError(self.problems)

        def section(path: str) -> dict[str, Any]:
            return {f.name: self.values[f"{path}.{f.name}"] for f in SECTION_FIELDS[path]}

        config = Config(
            context=ContextSettings(**section("context")),
            model=ModelSettings(**section("model")),
            compression=CompressionSettings(**section("compression")),
            auxiliary=AuxiliarySettings(
                SummaryProviderSettings(**section("auxiliary.compression"))
            ),
            prompt_caching=PromptCachingSettings(**section("prompt_caching")),
            models={name: ModelOverride(**values) for name, values in self.models.items()},
            engines={
                name: RawSection(values, self.engine_origin[name], self.engine_sources[name])
                for name, values in self.engines.items()
            },
        )
        sources = dict(self.sources)
        for name, model_sources in self.model_sources.items():
            for field_name, source in model_sources.items():
                sources[f"models.{name}.{field_name}"] = source
        for name, engine_sources in self.engine_sources.items():
            if not engine_sources:
                sources[f"engines.{name}"] = self.engine_origin[name]
            for option, source in engine_sources.items():
                sources[f"engines.{name}.{option}"] = source
        return config, sources


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class LoadedConfig:
    """A validated config plus where it came from.

    :ivar path: the config file that was read, or ``None`` (defaults, env and overrides only).
    :ivar sources: every leaf key path -> ``"default"``, the file path, ``"env VAR"`` or
        ``"override"``. Model overrides appear as ``models.<name>.<field>``, engine options as
        ``engines.<name>.<option>`` (``engines.<name>`` for an engine with no options).
    """

    config: Config
    path: Path | None
    sources: Mapping[str, str]

    def items(self) -> list[tuple[str, Any, str]]:
        """``(key path, value, source)`` rows in documentation order, for ``ctxengine config``.

        ``auxiliary.compression.api_key`` is shown as ``"***"`` when set.
        """
        rows: list[tuple[str, Any, str]] = []
        sections: dict[str, object] = {
            "context": self.config.context,
            "model": self.config.model,
            "compression": self.config.compression,
            "auxiliary.compression": self.config.auxiliary.compression,
            "prompt_caching": self.config.prompt_caching,
        }
        for path, fields in SECTION_FIELDS.items():
            for field in fields:
                key = f"{path}.{field.name}"
                value = getattr(sections[path], field.name)
                if field.name == "api_key" and value is not None:
                    value = "***"
                rows.append((key, value, self.sources.get(key, "default")))
        for name, override in self.config.models.items():
            for field in MODEL_OVERRIDE_FIELDS:
                key = f"models.{name}.{field.name}"
                rows.append((key, getattr(override, field.name), self.sources.get(key, "default")))
        for name, options in self.config.engines.items():
            if not options:
                key = f"engines.{name}"
                rows.append((key, {}, self.sources.get(key, "default")))
            for option, value in options.items():
                key = f"engines.{name}.{option}"
                rows.append((key, value, self.sources.get(key, "default")))
        return rows


def ctxengine_home(env: Mapping[str, str] | None = None) -> Path:
    """``$CTXENGINE_HOME`` (``~`` expanded) when set and non-empty, else ``~/.ctxengine``."""
    env = os.environ if env is None else env
    home = env.get("CTXENGINE_HOME", "").strip()
    return Path(home).expanduser() if home else Path("~/.ctxengine").expanduser()


def config_from_mapping(data: Mapping[str, Any], *, source: str = "<mapping>") -> Config:
    """Validate a parsed config (the YAML top level) into a :class:`Config`.

    No environment variables are read. ``data`` is not modified.

    :raises ConfigError: listing every problem, each naming ``source``.
    """
    layers = _Layers()
    layers.apply_mapping(data, source)
    layers.cross_check()
    return layers.build()[0]


def _read_yaml(path: Path) -> tuple[Mapping[Any, Any], list[ConfigProblem]]:
    import yaml

    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return {}, [ConfigProblem("", None, "file is not valid UTF-8 text", source)]
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        return {}, [ConfigProblem("", None, f"cannot read file: {reason}", source)]
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "syntax error"
        return {}, [ConfigProblem("", None, f"invalid YAML{where}: {what}", source)]
    except yaml.YAMLError as exc:
        return {}, [ConfigProblem("", None, f"invalid YAML: {exc}", source)]
    if data is None:  # empty file, or only comments
        return {}, []
    if not isinstance(data, Mapping):
        text = (
            f"the top level must be a mapping of sections ({', '.join(_TOP_SECTIONS)}), "
            f"not {type(data).__name__} {format_value(data)}"
        )
        return {}, [ConfigProblem("", data, text, source)]
    return data, []


def _find_file(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    """The config file to read, or ``None`` for defaults; a named but missing file raises."""
    if path is not None:
        origin = "path given explicitly"
        candidate = Path(os.fspath(path)).expanduser()
    elif env.get("CTXENGINE_CONFIG", "").strip():
        origin = "path named by $CTXENGINE_CONFIG"
        candidate = Path(env["CTXENGINE_CONFIG"].strip()).expanduser()
    else:
        home_file = ctxengine_home(env) / "config.yaml"
        if not home_file.exists():
            return None
        origin = "default location <home>/config.yaml"
        candidate = home_file
    candidate = candidate.absolute()
    if not candidate.exists():
        problem = f"config file does not exist ({origin})"
    elif candidate.is_dir():
        problem = f"config path is a directory, not a file ({origin})"
    else:
        return candidate
    raise ConfigError([ConfigProblem("", str(candidate), problem, str(candidate))])


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LoadedConfig:
    """Find, read and validate the configuration.

    Discovery: ``path`` -> ``$CTXENGINE_CONFIG`` -> ``<home>/config.yaml`` -> defaults. A file
    named by ``path`` or ``$CTXENGINE_CONFIG`` must exist; a missing home file means defaults;
    an empty file means defaults. Then the :data:`ENV_VARS` apply, then ``overrides`` (dotted key
    -> value; string values for non-string keys are parsed like environment variables).

    :param env: the environment to read (default ``os.environ``).
    :raises ConfigError: listing every problem in every layer.
    """
    env = os.environ if env is None else env
    file = _find_file(path, env)
    layers = _Layers()
    if file is not None:
        data, problems = _read_yaml(file)
        layers.problems.extend(problems)
        layers.apply_mapping(data, str(file))
    layers.apply_env(env)
    if overrides:
        layers.apply_overrides(overrides)
    layers.cross_check()
    config, sources = layers.build()
    return LoadedConfig(config=config, path=file, sources=types.MappingProxyType(sources))


# ---------------------------------------------------------------------------------------------
# Token budgets derived from the settings
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class Budgets:
    """Token budgets for one model window (SPEC §1.3 derived values).

    :ivar window: context length minus the output reservation.
    :ivar threshold_tokens: the agent compressor fires at or above this prompt size.
    :ivar tail_token_budget: tokens of recent messages kept verbatim.
    :ivar max_summary_tokens: cap on one summary.
    :ivar hygiene_threshold_tokens: the gateway safety net fires at or above this.
    """

    window: int
    threshold_tokens: int
    tail_token_budget: int
    max_summary_tokens: int
    hygiene_threshold_tokens: int


def budgets(
    compression: CompressionSettings, context_length: int, max_tokens: int | None
) -> Budgets:
    """Derive the budgets; 200K window with defaults -> 100,000 / 20,000 / 10,000.

    :raises ValueError: when ``max_tokens`` leaves no window.
    """
    window = context_length - (max_tokens or 0)
    if window <= 0:
        raise ValueError(
            f"max_tokens ({max_tokens}) must be less than context_length ({context_length})"
        )
    threshold_tokens = int(compression.threshold * window)
    return Budgets(
        window=window,
        threshold_tokens=threshold_tokens,
        tail_token_budget=int(threshold_tokens * compression.target_ratio),
        max_summary_tokens=min(int(context_length * 0.05), 12_000),
        hygiene_threshold_tokens=int(compression.hygiene_threshold * window),
    )
