"""Validating the layers of a configuration against every declared spec, in one pass.

Layers, lowest first: each field's default, the config file, the field's environment variable,
then ``overrides`` (dotted key -> value, e.g. CLI flags). Every layer is validated with the same
rules, every problem is collected (in file order, then environment, then overrides, then the
checks across keys) and reported at once. An invalid value is never replaced by a default.

Which keys are valid depends on who reads them: the kernel's own sections (``context``,
``model``, ``auxiliary``, ``context_editing``, ``models``) are closed; ``prompt_caching`` and
``coordination`` hold the kernel's keys plus those of the selected plugins;
``<group>.<name>`` (``engines``, ``strategies``, ``gateways``) belongs to the plugin that
declares it. A key nobody reads is an error when it is in a closed section, in a plugin's own
section, or a near-miss of a key someone reads (a typo); otherwise it belongs to a plugin that is
not selected and is reported as *unused*.

A key's former path (its field's ``alias``, e.g. ``compression.threshold`` for
``engines.compressor.threshold``) is read as the key, with a :class:`Deprecation`; within one
layer, the two spellings given with different values are an error naming both. A problem with a
value given under the old path names the old path, as written.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxengine._config.fields import (
    NAME_PATTERN,
    ConfigProblem,
    Field,
    RawSection,
    as_mapping,
    convert_input,
    format_value,
    printable,
    unknown_key_problem,
)
from ctxengine._config.files import TOP_SECTIONS
from ctxengine._config.spec import (
    CORE_OWNER,
    PLUGIN_GROUPS,
    TYPO_CUTOFF,
    OwnedSpec,
    SettingsSpec,
    SettingsView,
    closest,
)

SHARED_SECTIONS = ("compression", "prompt_caching", "coordination")
"""Sections whose unread keys may belong to a plugin that is not selected (``compression``
holds only former paths now)."""

_SINGULAR = {"engines": "engine", "strategies": "strategy", "gateways": "gateway"}


@attrs.frozen(eq=False)
class RawConfig:
    """A configuration as written, before validation.

    :ivar data: the config file's top level (``{}`` without a file); never modified.
    :ivar source: what to call the file in messages (its path, or ``"<mapping>"``).
    :ivar env: the environment the fields' variables are read from.
    :ivar overrides: dotted key -> value, applied last (``"override"``).
    """

    data: Mapping[Any, Any] = attrs.field(factory=dict)
    source: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    overrides: Mapping[Any, Any] = attrs.field(factory=dict)
    file_problems: tuple[ConfigProblem, ...] = ()


@attrs.frozen
class UnusedKey:
    """A key that no selected plugin reads (listed by ``ctxengine config``, never an error)."""

    key: str
    value: Any
    source: str
    note: str


@attrs.frozen
class Deprecation:
    """A key given under its former path: ``alias`` (as written in ``source``) is ``key`` now."""

    alias: str
    key: str
    source: str

    def __str__(self) -> str:
        return f"config: {self.alias} (in {self.source}) is deprecated; write {self.key}"


@attrs.frozen
class Resolved:
    """The outcome of one validation.

    :ivar values: key path -> validated value, for every declared key.
    :ivar sources: key path -> ``"default"``, the file, ``"env VAR"`` or ``"override"``; also
        ``models.<name>.<field>`` and ``engines.<name>.<option>`` (``engines.<name>`` for an
        empty section).
    :ivar owners: key path -> the plugin (or ``"kernel"``) that declared it.
    :ivar spec_values: each spec -> its fields' values by name.
    :ivar models: ``models.<name>`` -> field values.
    :ivar engines: every ``engines.<name>`` section as written.
    :ivar aliases: every declared former path -> the key path it stands for.
    :ivar deprecations: the former paths given, in layer order.
    """

    values: dict[str, Any]
    sources: dict[str, str]
    owners: dict[str, str]
    spec_values: dict[SettingsSpec[Any], dict[str, Any]]
    models: dict[str, dict[str, Any]]
    engines: dict[str, RawSection]
    unused: list[UnusedKey]
    problems: list[ConfigProblem]
    aliases: dict[str, str] = attrs.field(factory=dict)
    deprecations: list[Deprecation] = attrs.field(factory=list)

    def problems_of(self, spec: SettingsSpec[Any]) -> list[ConfigProblem]:
        """The problems with ``spec``'s keys (given under their key path or their alias)."""
        prefix = spec.section + "."
        return [p for p in self.problems if self.aliases.get(p.key, p.key).startswith(prefix)]


class _Resolver:
    def __init__(
        self,
        raw: RawConfig,
        specs: Sequence[OwnedSpec],
        model_fields: Sequence[Field],
        engine_trigger: str | None,
    ) -> None:
        self.raw = raw
        self.specs = list(specs)
        self.model_fields = tuple(model_fields)
        self.engine_trigger = engine_trigger
        self.fields: dict[str, Field] = {}
        self.aliases: dict[str, str] = {}
        self.names: dict[str, list[str]] = {}
        """Section path -> the names valid in it (keys, former keys, subsections)."""
        self.closed: set[str] = set()
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.owners: dict[str, str] = {}
        for owned in self.specs:
            self._declare(owned)
        self.closed -= set(SHARED_SECTIONS)
        self.given: dict[str, tuple[str, object]] = {}
        """Key path -> (the path it was given under, its value) in the layer being applied."""
        self.deprecations: list[Deprecation] = []
        self.models: dict[str, dict[str, Any]] = {}
        self.model_sources: dict[str, dict[str, str]] = {}
        self.engines: dict[str, dict[str, Any]] = {}
        self.engine_sources: dict[str, dict[str, str]] = {}
        self.engine_origin: dict[str, str] = {}
        self.unused: list[UnusedKey] = []
        self.problems: list[ConfigProblem] = list(raw.file_problems)

    def _declare(self, owned: OwnedSpec) -> None:
        section = owned.spec.section
        kernel = owned.owner == CORE_OWNER
        self._name(section, kernel)
        for field in owned.spec.fields:
            key = owned.spec.key(field.name)
            self.fields[key] = field
            self.values[key] = field.default
            self.sources[key] = "default"
            self.owners[key] = owned.owner
            self.names[section].append(field.name)
            if field.alias is not None:
                self.aliases[field.alias] = key
                old_section, _, old_name = field.alias.rpartition(".")
                self._name(old_section, kernel)
                self.names[old_section].append(old_name)

    def _name(self, section: str, kernel: bool) -> None:
        """Make ``section`` (and its parents, outside the plugin groups) known."""
        parent, _, leaf = section.rpartition(".")
        if section not in self.names:
            self.names[section] = []
            if parent and parent not in PLUGIN_GROUPS:
                self._name(parent, kernel)
                self.names[parent].append(leaf)
        if kernel:
            self.closed.add(section)

    # -- helpers -------------------------------------------------------------------------------

    def _problem(
        self, key: str, value: object, allowed: str, source: str | None, *, show: bool = True
    ) -> None:
        self.problems.append(ConfigProblem(key, value, allowed, source, show_value=show))

    def _set(self, path: str, value: object, source: str, *, typed: bool) -> None:
        """Set the key at ``path`` (a key path or a former one) from one layer."""
        key = self.aliases.get(path, path)
        if key != path:
            self.deprecations.append(Deprecation(path, key, source))
        field = self.fields[key]
        ok, converted, from_text = self._convert(field, value, typed=typed)
        if not ok:
            self._problem(path, converted, field.allowed(from_text=from_text), source)
            return
        earlier_path, earlier = self.given.setdefault(key, (path, converted))
        if earlier_path != path and earlier != converted:
            alias = path if key != path else earlier_path
            rule = (
                f"conflicts with {earlier_path} = {format_value(printable(key, earlier))}: "
                f"{alias} is the deprecated name of {key}; keep only {key}"
            )
            self._problem(path, value, rule, source)
            return
        self.values[key] = converted
        self.sources[key] = source

    @staticmethod
    def _convert(field: Field, value: object, *, typed: bool) -> tuple[bool, Any, bool]:
        """(ok, value or the value to show, parsed from text); a YAML value that fails is
        shown as written."""
        if not typed:
            return convert_input(field, value)
        ok, converted = field.convert(value)
        return ok, converted if ok else value, False

    def _unclaimed(self, section: str, key: object, value: object, source: str) -> None:
        """A key of ``section`` that no declared field reads."""
        names = self.names.get(section, [])
        path = f"{section}.{key}"
        own = section.partition(".")[0] in PLUGIN_GROUPS and section in self.names
        if section in self.closed or own:
            self.problems.append(unknown_key_problem(section, key, names, source))
            return
        note = f"no selected plugin reads {section}"
        if section in SHARED_SECTIONS:
            if isinstance(key, str) and closest(key, names, TYPO_CUTOFF) is not None:
                self.problems.append(unknown_key_problem(section, key, names, source))
                return
            note = f"no selected plugin reads {path}"
        self.unused.append(UnusedKey(path, copy.deepcopy(value), source, note))

    # -- the file ------------------------------------------------------------------------------

    def apply_file(self) -> None:
        source = self.raw.source or "<mapping>"
        self.given = {}
        for section, value in self.raw.data.items():
            self._top(section, value, source)

    def _top(self, section: object, value: object, source: str) -> None:
        if section == "models":
            self._models(value, source)
        elif isinstance(section, str) and section in PLUGIN_GROUPS:
            plugins = as_mapping(value, section, None, source, self.problems)
            for name, options in (plugins or {}).items():
                self._plugin_section(section, name, options, source)
        elif isinstance(section, str) and section in TOP_SECTIONS:
            self._section(section, value, source)
        else:
            self.problems.append(unknown_key_problem("", section, TOP_SECTIONS, source, "section"))

    def _section(self, section: str, data: object, source: str) -> None:
        mapping = as_mapping(data, section, self.names.get(section), source, self.problems)
        for key, value in (mapping or {}).items():
            path = f"{section}.{key}"
            if path in self.fields or path in self.aliases:
                self._set(path, value, source, typed=True)
            elif isinstance(key, str) and path in self.names:
                self._section(path, value, source)
            else:
                self._unclaimed(section, key, value, source)

    def _models(self, data: object, source: str) -> None:
        models = as_mapping(data, "models", None, source, self.problems)
        for name, entry in (models or {}).items():
            if not isinstance(name, str) or not name.strip():
                self._problem("models", name, "model names must be non-empty strings", source)
                continue
            fields = [f.name for f in self.model_fields]
            mapping = as_mapping(entry, f"models.{name}", fields, source, self.problems)
            for key, value in (mapping or {}).items():
                self._model_value(name, key, value, source, typed=True)

    def _model_value(
        self, name: str, key: object, value: object, source: str, *, typed: bool
    ) -> None:
        by_name = {f.name: f for f in self.model_fields}
        field = by_name.get(key) if isinstance(key, str) else None
        if field is None:
            self.problems.append(unknown_key_problem(f"models.{name}", key, list(by_name), source))
            return
        ok, converted, from_text = self._convert(field, value, typed=typed)
        if not ok:
            self._problem(
                f"models.{name}.{key}", converted, field.allowed(from_text=from_text), source
            )
            return
        if name not in self.models:
            self.models[name] = {f.name: f.default for f in self.model_fields}
            self.model_sources[name] = {f.name: "default" for f in self.model_fields}
        self.models[name][field.name] = converted
        self.model_sources[name][field.name] = source

    def _plugin_section(self, group: str, name: object, options: object, source: str) -> None:
        """``<group>.<name>``: validated when a selected plugin declares it; an engine's
        section is also kept as written (for engines that declare no settings)."""
        section = f"{group}.{name}"
        if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
            rule = f"{_SINGULAR[group]} names must be made of letters, digits, '_', '.' and '-'"
            self._problem(section, name, rule, source, show=False)
            return
        mapping = as_mapping(options, section, None, source, self.problems)
        if mapping is None:
            return
        if group == "engines":
            self.engine_origin.setdefault(name, source)
            self.engines.setdefault(name, {})
            self.engine_sources.setdefault(name, {})
        for key, value in mapping.items():
            self._plugin_option(section, key, value, source)

    def _plugin_option(self, section: str, key: object, value: object, source: str) -> None:
        if not isinstance(key, str):
            rule = "option names must be strings"
            self._problem(f"{section}.{key}", key, rule, source, show=False)
            return
        group, _, name = section.partition(".")
        if group == "engines":
            # A private copy: later changes to the caller's data must not leak in.
            self.engines[name][key] = copy.deepcopy(value)
            self.engine_sources[name][key] = source
        if f"{section}.{key}" in self.fields:
            self._set(f"{section}.{key}", value, source, typed=True)
        else:
            self._unclaimed(section, key, value, source)

    # -- environment and overrides -------------------------------------------------------------

    def apply_env(self) -> None:
        for key, field in self.fields.items():
            text = self.raw.env.get(field.env) if field.env is not None else None
            if text is None or not text.strip():
                continue  # an empty variable counts as unset
            ok, converted = field.convert_text(text)
            if ok:
                self.values[key] = converted
                self.sources[key] = f"env {field.env}"
            else:
                self._problem(key, converted, field.allowed(from_text=True), f"env {field.env}")

    def apply_overrides(self) -> None:
        self.given = {}
        for key, value in self.raw.overrides.items():
            self._override(key, value)

    def _override(self, key: object, value: object) -> None:
        if not isinstance(key, str) or "." not in key:
            rule = "override keys must be dotted strings"
            self._problem(str(key), key, rule, "override", show=False)
        elif key.startswith("models."):
            self._override_model(key, value)
        elif key.partition(".")[0] in PLUGIN_GROUPS:
            self._override_plugin(key, value)
        elif key in self.fields or key in self.aliases:
            self._set(key, value, "override", typed=False)
        else:
            self._override_unknown(key, value)

    def _override_unknown(self, key: str, value: object) -> None:
        section, _, name = key.rpartition(".")
        if section in self.names or section in SHARED_SECTIONS:
            self._unclaimed(section, name, value, "override")
            return
        text = "unknown key"
        close = closest(key, [*self.fields, *self.aliases], 0.6)
        if close:
            text += f"; did you mean {close!r}?"
        text += (
            " (allowed: the keys listed by `ctxengine config`, "
            "models.<name>.<field> or <engines|strategies|gateways>.<name>.<option>)"
        )
        self._problem(key, value, text, "override", show=False)

    def _override_model(self, key: str, value: object) -> None:
        # Model names may contain dots ("claude-3.5-..."), field names never do.
        name, _, field_name = key[len("models.") :].rpartition(".")
        if not name.strip():
            rule = "must be written models.<name>.<field>"
            self._problem(key, value, rule, "override", show=False)
            return
        self._model_value(name, field_name, value, "override", typed=False)

    def _override_plugin(self, key: str, value: object) -> None:
        group, _, rest = key.partition(".")
        if isinstance(value, Mapping) and NAME_PATTERN.fullmatch(rest):
            self._plugin_section(group, rest, value, "override")
            return
        # The longest declared section that prefixes the key wins ("engines.a.b.c" is option
        # "c" of engine "a.b" when "a.b" is declared); else the last dot splits.
        declared = sorted(
            (s for s in self.names if s.startswith(group + ".") and key.startswith(s + ".")),
            key=len,
            reverse=True,
        )
        if declared:
            name, option = declared[0][len(group) + 1 :], key[len(declared[0]) + 1 :]
        else:
            name, _, option = rest.rpartition(".")
        if name and option:
            self._plugin_section(group, name, {option: value}, "override")
        else:
            rule = f"must be written {group}.<name>.<option> (or {group}.<name>: mapping)"
            self._problem(key, value, rule, "override", show=False)

    # -- checks and result ---------------------------------------------------------------------

    def check(self) -> None:
        view = SettingsView(
            self.values, self.sources, self.problems, self.engine_trigger, self.aliases
        )
        for owned in self.specs:
            for rule in owned.spec.checks:
                rule(view)
        for name, values in self.models.items():
            small, large = f"models.{name}.max_output_tokens", f"models.{name}.context_length"
            out, window = values["max_output_tokens"], values["context_length"]
            if {small, large} & {p.key for p in self.problems}:
                continue
            if out is None or window is None or out < window:
                continue
            source = self.model_sources[name]["max_output_tokens"]
            self._problem(small, out, f"must be less than {large} ({window})", source)

    def result(self) -> Resolved:
        sources = dict(self.sources)
        for name, model_sources in self.model_sources.items():
            for field_name, source in model_sources.items():
                sources[f"models.{name}.{field_name}"] = source
        for name, engine_sources in self.engine_sources.items():
            if not engine_sources:
                sources[f"engines.{name}"] = self.engine_origin[name]
            for option, source in engine_sources.items():
                sources.setdefault(f"engines.{name}.{option}", source)
        spec_values = {
            owned.spec: {f.name: self.values[owned.spec.key(f.name)] for f in owned.spec.fields}
            for owned in self.specs
        }
        engines = {
            name: RawSection(values, self.engine_origin[name], self.engine_sources[name])
            for name, values in self.engines.items()
        }
        return Resolved(
            values=self.values,
            sources=sources,
            owners=self.owners,
            spec_values=spec_values,
            models=self.models,
            engines=engines,
            unused=self.unused,
            problems=self.problems,
            aliases=self.aliases,
            deprecations=self.deprecations,
        )


def resolve(
    raw: RawConfig,
    specs: Sequence[OwnedSpec],
    *,
    model_fields: Sequence[Field],
    engine_trigger: str | None = None,
) -> Resolved:
    """Validate ``raw`` against ``specs`` (the kernel's and the selected plugins').

    Never raises for bad input: problems are collected in :attr:`Resolved.problems`.

    :param model_fields: the fields of one ``models.<name>`` entry.
    :param engine_trigger: the key path of the selected engine's trigger, for checks that
        compare against it.
    """
    resolver = _Resolver(raw, specs, model_fields, engine_trigger)
    resolver.apply_file()
    resolver.apply_env()
    resolver.apply_overrides()
    resolver.check()
    return resolver.result()


__all__ = ["CORE_OWNER", "Deprecation", "RawConfig", "Resolved", "UnusedKey", "resolve"]
