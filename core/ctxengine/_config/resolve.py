"""Validating the layers of a configuration against every declared spec, in one pass.

Layers, lowest first: each field's default, the config file, the field's environment variable,
then ``overrides`` (dotted key -> value, e.g. CLI flags). Every layer is validated with the same
rules, every problem is collected (in file order, then environment, then overrides, then the
checks across keys) and reported at once. An invalid value is never replaced by a default.

Which keys are valid depends on who reads them: the kernel's own sections (``context``,
``model``, ``auxiliary.compression``, ``models``) are closed; ``compression``, ``prompt_caching``
and ``coordination`` hold the kernel's keys plus those of the selected plugins; ``engines.<name>``
belongs to the plugin that declares it. A key nobody reads is an error when it is in a closed
section, in a plugin's own ``engines.<name>`` section, or a near-miss of a key someone reads (a
typo); otherwise it belongs to a plugin that is not selected and is reported as *unused*.
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
    unknown_key_problem,
)
from ctxengine._config.files import TOP_SECTIONS
from ctxengine._config.spec import (
    CORE_OWNER,
    PLUGIN_SECTIONS,
    TYPO_CUTOFF,
    OwnedSpec,
    SettingsSpec,
    SettingsView,
    closest,
)

_ENGINE_NAME_RULE = "engine names must be made of letters, digits, '_', '.' and '-'"
_CLOSED = ("context", "model", "auxiliary.compression", "context_editing")


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
    """

    values: dict[str, Any]
    sources: dict[str, str]
    owners: dict[str, str]
    spec_values: dict[SettingsSpec[Any], dict[str, Any]]
    models: dict[str, dict[str, Any]]
    engines: dict[str, RawSection]
    unused: list[UnusedKey]
    problems: list[ConfigProblem]


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
        self.fields: dict[str, dict[str, tuple[Field, OwnedSpec]]] = {}
        for owned in self.specs:
            section = self.fields.setdefault(owned.spec.section, {})
            for field in owned.spec.fields:
                section[field.name] = (field, owned)
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.owners: dict[str, str] = {}
        for owned in self.specs:
            for field in owned.spec.fields:
                key = owned.spec.key(field.name)
                self.values[key] = field.default
                self.sources[key] = "default"
                self.owners[key] = owned.owner
        self.models: dict[str, dict[str, Any]] = {}
        self.model_sources: dict[str, dict[str, str]] = {}
        self.engines: dict[str, dict[str, Any]] = {}
        self.engine_sources: dict[str, dict[str, str]] = {}
        self.engine_origin: dict[str, str] = {}
        self.unused: list[UnusedKey] = []
        self.problems: list[ConfigProblem] = list(raw.file_problems)

    # -- helpers -------------------------------------------------------------------------------

    def _problem(
        self, key: str, value: object, allowed: str, source: str | None, *, show: bool = True
    ) -> None:
        self.problems.append(ConfigProblem(key, value, allowed, source, show_value=show))

    def _names(self, section: str) -> list[str]:
        return list(self.fields.get(section, {}))

    def _set(self, key: str, field: Field, value: object, source: str, *, typed: bool) -> None:
        ok, converted, from_text = self._convert(field, value, typed=typed)
        if ok:
            self.values[key] = converted
            self.sources[key] = source
        else:
            self._problem(key, converted, field.allowed(from_text=from_text), source)

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
        names = self._names(section)
        path = f"{section}.{key}"
        if section in _CLOSED or (section.startswith("engines.") and section in self.fields):
            self.problems.append(unknown_key_problem(section, key, names, source))
            return
        if section in PLUGIN_SECTIONS:
            close = closest(str(key), names, TYPO_CUTOFF) if isinstance(key, str) else None
            if close is not None:
                self.problems.append(unknown_key_problem(section, key, names, source))
                return
            note = f"no selected plugin reads {path}"
        else:
            note = f"no selected plugin reads {section}"
        self.unused.append(UnusedKey(path, copy.deepcopy(value), source, note))

    # -- the file ------------------------------------------------------------------------------

    def apply_file(self) -> None:
        source = self.raw.source or "<mapping>"
        for section, value in self.raw.data.items():
            if section in (
                "context",
                "model",
                "compression",
                "prompt_caching",
                "context_editing",
                "coordination",
            ):
                self._section(section, value, source)
            elif section == "auxiliary":
                aux = as_mapping(value, "auxiliary", ("compression",), source, self.problems)
                for key, sub in (aux or {}).items():
                    if key == "compression":
                        self._section("auxiliary.compression", sub, source)
                    else:
                        self.problems.append(
                            unknown_key_problem("auxiliary", key, ("compression",), source)
                        )
            elif section == "models":
                self._models(value, source)
            elif section == "engines":
                engines = as_mapping(value, "engines", None, source, self.problems)
                for name, options in (engines or {}).items():
                    self._engine(name, options, source)
            else:
                self.problems.append(
                    unknown_key_problem("", section, TOP_SECTIONS, source, "section")
                )

    def _section(self, section: str, data: object, source: str) -> None:
        names = self._names(section)
        mapping = as_mapping(data, section, names, source, self.problems)
        for key, value in (mapping or {}).items():
            entry = self.fields.get(section, {}).get(key) if isinstance(key, str) else None
            if entry is None:
                self._unclaimed(section, key, value, source)
            else:
                self._set(f"{section}.{key}", entry[0], value, source, typed=True)

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

    def _engine(self, name: object, options: object, source: str) -> None:
        key_path = f"engines.{name}"
        if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
            self._problem(key_path, name, _ENGINE_NAME_RULE, source, show=False)
            return
        mapping = as_mapping(options, key_path, None, source, self.problems)
        if mapping is None:
            return
        self.engine_origin.setdefault(name, source)
        values = self.engines.setdefault(name, {})
        sources = self.engine_sources.setdefault(name, {})
        declared = self.fields.get(key_path)
        for key, value in mapping.items():
            if not isinstance(key, str):
                rule = "option names must be strings"
                self._problem(f"{key_path}.{key}", key, rule, source, show=False)
                continue
            # A private copy: later changes to the caller's data must not leak in.
            values[key] = copy.deepcopy(value)
            sources[key] = source
            if declared is None:
                self._unclaimed(key_path, key, value, source)
            elif key in declared:
                self._set(f"{key_path}.{key}", declared[key][0], value, source, typed=True)
            else:
                self._unclaimed(key_path, key, value, source)

    # -- environment and overrides -------------------------------------------------------------

    def apply_env(self) -> None:
        for owned in self.specs:
            for field in owned.spec.fields:
                if field.env is None:
                    continue
                text = self.raw.env.get(field.env)
                if text is None or not text.strip():
                    continue  # an empty variable counts as unset
                key = owned.spec.key(field.name)
                ok, converted = field.convert_text(text)
                if ok:
                    self.values[key] = converted
                    self.sources[key] = f"env {field.env}"
                else:
                    self._problem(key, converted, field.allowed(from_text=True), f"env {field.env}")

    def apply_overrides(self) -> None:
        for key, value in self.raw.overrides.items():
            if not isinstance(key, str) or "." not in key:
                rule = "override keys must be dotted strings"
                self._problem(str(key), key, rule, "override", show=False)
            elif key.startswith("models."):
                self._override_model(key, value)
            elif key.startswith("engines."):
                self._override_engine(key, value)
            else:
                section, _, name = key.rpartition(".")
                entry = self.fields.get(section, {}).get(name)
                if entry is not None:
                    self._set(key, entry[0], value, "override", typed=False)
                elif section in self.fields or section in PLUGIN_SECTIONS:
                    self._unclaimed(section, name, value, "override")
                else:
                    text = "unknown key"
                    close = closest(key, list(self.values), 0.6)
                    if close:
                        text += f"; did you mean {close!r}?"
                    text += (
                        " (allowed: the keys listed by `ctxengine config`, "
                        "models.<name>.<field> or engines.<name>.<option>)"
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

    def _override_engine(self, key: str, value: object) -> None:
        rest = key[len("engines.") :]
        if isinstance(value, Mapping) and NAME_PATTERN.fullmatch(rest):
            self._engine(rest, value, "override")
            return
        # The longest declared engine section that prefixes the key wins ("engines.a.b.c" is
        # option "c" of engine "a.b" when "a.b" is declared); else the last dot splits.
        declared = sorted(
            (s for s in self.fields if s.startswith("engines.") and key.startswith(s + ".")),
            key=len,
            reverse=True,
        )
        if declared:
            name, option = declared[0][len("engines.") :], key[len(declared[0]) + 1 :]
        else:
            name, _, option = rest.rpartition(".")
        if name and option:
            self._engine(name, {option: value}, "override")
        else:
            rule = "must be written engines.<name>.<option> (or engines.<name>: mapping)"
            self._problem(key, value, rule, "override", show=False)

    # -- checks and result ---------------------------------------------------------------------

    def check(self) -> None:
        view = SettingsView(self.values, self.sources, self.problems, self.engine_trigger)
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


__all__ = ["CORE_OWNER", "RawConfig", "Resolved", "UnusedKey", "resolve"]
