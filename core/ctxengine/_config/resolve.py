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
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxengine._config.fields import NAME_PATTERN, ConfigProblem, Field, format_value, printable
from ctxengine._config.files import TOP_SECTIONS
from ctxengine._config.spec import CORE_OWNER, PLUGIN_GROUPS, OwnedSpec, SettingsSpec, SettingsView

SHARED_SECTIONS = ("compression", "prompt_caching", "coordination")
"""Sections whose unread keys may belong to a plugin that is not selected (``compression``
holds former paths only)."""

TYPO_CUTOFF = 0.8
"""How alike an unread key must be to a read one in a shared section to count as a typo (an
error) rather than a key of a plugin that is not selected (reported as unused)."""

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


def _closest(word: str, candidates: Sequence[str], cutoff: float) -> str | None:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return found[0] if found else None


class Resolved:
    """One validation of ``raw`` against ``specs`` (the kernel's and the selected plugins').

    Never raises for bad input: every problem is collected in :attr:`problems`.

    :ivar values: key path -> validated value, for every declared key and ``models.<name>.*``.
    :ivar sources: key path -> ``"default"``, the file, ``"env VAR"`` or ``"override"``; also
        ``models.<name>.<field>`` and ``engines.<name>.<option>`` (``engines.<name>`` for an
        empty section).
    :ivar owners: key path -> the plugin (or ``"kernel"``) that declared it.
    :ivar models: ``models.<name>`` -> field values, for every model given a value.
    :ivar engines: every ``engines.<name>`` section as written (a private copy).
    :ivar aliases: every declared former path -> the key path it stands for.
    :ivar deprecations: the former paths given, in layer order.
    """

    def __init__(
        self,
        raw: RawConfig,
        specs: Sequence[OwnedSpec],
        *,
        model_fields: Sequence[Field],
        engine_trigger: str | None = None,
    ) -> None:
        """:param model_fields: the fields of one ``models.<name>`` entry.
        :param engine_trigger: the key path of the selected engine's trigger, for checks that
            compare against it."""
        self.raw = raw
        self.model_fields = tuple(model_fields)
        self.fields: dict[str, Field] = {}
        self.aliases: dict[str, str] = {}
        self.names: dict[str, list[str]] = {}
        """Section path -> the names valid in it (keys, former keys, subsections)."""
        self.closed: set[str] = set()
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.owners: dict[str, str] = {}
        for owned in specs:
            self._declare(owned)
        self.given: dict[str, tuple[str, object]] = {}
        """Key path -> (the path it was given under, its value) in the layer being applied."""
        self.deprecations: list[Deprecation] = []
        self.model_names: list[str] = []
        self.engines: dict[str, dict[str, Any]] = {}
        self.unused: list[UnusedKey] = []
        self.problems: list[ConfigProblem] = list(raw.file_problems)
        for section, value in raw.data.items():
            self._top(section, value, raw.source or "<mapping>")
        self._apply_env()
        self.given = {}
        for key, value in raw.overrides.items():
            self._override(key, value)
        view = SettingsView(self.values, self.sources, self.problems, engine_trigger, self.aliases)
        for owned in specs:
            for rule in owned.spec.checks:
                rule(view)
        self.models = self._models_given(view)

    def problems_of(self, spec: SettingsSpec[Any]) -> list[ConfigProblem]:
        """The problems with ``spec``'s keys (given under their key path or their alias)."""
        prefix = spec.section + "."
        return [p for p in self.problems if self.aliases.get(p.key, p.key).startswith(prefix)]

    def values_of(self, spec: SettingsSpec[Any]) -> dict[str, Any]:
        """``spec``'s fields' values by name."""
        return {f.name: self.values[spec.key(f.name)] for f in spec.fields}

    # -- declarations --------------------------------------------------------------------------

    def _declare(self, owned: OwnedSpec) -> None:
        section = owned.spec.section
        self._name(section)
        for field in owned.spec.fields:
            self._key(section, field, owned.owner)
            if field.alias is not None:
                self.aliases[field.alias] = owned.spec.key(field.name)
                old_section, _, old_name = field.alias.rpartition(".")
                self._name(old_section)
                self.names[old_section].append(old_name)

    def _key(self, section: str, field: Field, owner: str) -> None:
        key = f"{section}.{field.name}"
        self.fields[key] = field
        self.values[key] = field.default
        self.sources[key] = "default"
        self.owners[key] = owner
        self.names[section].append(field.name)

    def _name(self, section: str) -> None:
        """Make ``section`` (and its parents, outside the plugin groups) known; a declared
        section is closed unless it is shared."""
        parent, _, leaf = section.rpartition(".")
        if section not in self.names:
            self.names[section] = []
            if parent and parent not in PLUGIN_GROUPS:
                self._name(parent)
                self.names[parent].append(leaf)
        if section not in SHARED_SECTIONS:
            self.closed.add(section)

    def _model(self, name: str) -> str:
        """Declare the keys of ``models.<name>`` (a closed section) once; its path."""
        section = f"models.{name}"
        if section not in self.names:
            self.names[section] = []
            self.closed.add(section)
            self.model_names.append(name)
            for field in self.model_fields:
                self._key(section, field, CORE_OWNER)
        return section

    # -- problems ------------------------------------------------------------------------------

    def _problem(
        self, key: str, value: object, allowed: str, source: str | None, *, show: bool = True
    ) -> None:
        self.problems.append(ConfigProblem(key, value, allowed, source, show_value=show))

    def _unknown(
        self,
        section: str,
        key: object,
        allowed: Sequence[str],
        source: str,
        *,
        what: str = "key",
        listed: str | None = None,
    ) -> None:
        """An unknown ``key`` of ``section``, suggesting the closest of ``allowed``; ``listed``
        describes what is allowed when the list itself is too long to show."""
        text = f"unknown {what}"
        close = _closest(str(key), allowed, 0.6)
        if close:
            text += f"; did you mean {close!r}?"
        text += f" (allowed: {listed or ', '.join(allowed)})"
        self._problem(f"{section}.{key}" if section else str(key), key, text, source, show=False)

    def _mapping(
        self, data: object, key_path: str, allowed: Sequence[str] | None, source: str
    ) -> Mapping[Any, Any]:
        """``data`` as a section's mapping: ``None`` (an empty YAML section) reads as empty,
        anything else that is not a mapping is a problem (and reads as empty)."""
        if data is None:
            return {}
        if isinstance(data, Mapping):
            return data
        text = "must be a mapping of key: value"
        if allowed:
            text += f" (allowed keys: {', '.join(allowed)})"
        self._problem(key_path, data, text, source)
        return {}

    # -- values --------------------------------------------------------------------------------

    def _set(self, path: str, value: object, source: str, *, text: bool) -> None:
        """Set the key at ``path`` (a key path or a former one) from one layer."""
        key = self.aliases.get(path, path)
        if key != path:
            self.deprecations.append(Deprecation(path, key, source))
        field = self.fields[key]
        ok, converted, from_text = field.read(value, text=text)
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

    def _unclaimed(self, section: str, key: object, value: object, source: str) -> None:
        """A key of ``section`` that no declared field reads."""
        names = self.names.get(section, [])
        path = f"{section}.{key}"
        if section in self.closed:
            self._unknown(section, key, names, source)
            return
        note = f"no selected plugin reads {section}"
        if section in SHARED_SECTIONS:
            if isinstance(key, str) and _closest(key, names, TYPO_CUTOFF) is not None:
                self._unknown(section, key, names, source)
                return
            note = f"no selected plugin reads {path}"
        self.unused.append(UnusedKey(path, copy.deepcopy(value), source, note))

    # -- the file ------------------------------------------------------------------------------

    def _top(self, section: object, value: object, source: str) -> None:
        if section == "models":
            for name, entry in self._mapping(value, "models", None, source).items():
                if not isinstance(name, str) or not name.strip():
                    self._problem("models", name, "model names must be non-empty strings", source)
                else:
                    self._section(self._model(name), entry, source)
        elif isinstance(section, str) and section in PLUGIN_GROUPS:
            for name, options in self._mapping(value, section, None, source).items():
                self._plugin_section(section, name, options, source)
        elif isinstance(section, str) and section in TOP_SECTIONS:
            self._section(section, value, source)
        else:
            self._unknown("", section, TOP_SECTIONS, source, what="section")

    def _section(self, section: str, data: object, source: str, *, text: bool = False) -> None:
        for key, value in self._mapping(data, section, self.names.get(section), source).items():
            path = f"{section}.{key}"
            if path in self.fields or path in self.aliases:
                self._set(path, value, source, text=text)
            elif isinstance(key, str) and path in self.names:
                self._section(path, value, source)
            else:
                self._unclaimed(section, key, value, source)

    def _plugin_section(self, group: str, name: object, options: object, source: str) -> None:
        """``<group>.<name>``: validated when a selected plugin declares it; an engine's
        section is also kept as written (for engines that declare no settings)."""
        section = f"{group}.{name}"
        if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
            rule = f"{_SINGULAR[group]} names must be made of letters, digits, '_', '.' and '-'"
            self._problem(section, name, rule, source, show=False)
            return
        if options is not None and not isinstance(options, Mapping):
            self._mapping(options, section, None, source)
            return
        if group == "engines" and name not in self.engines:
            self.engines[name] = {}
            self.sources.setdefault(section, source)
        for key, value in (options or {}).items():
            if not isinstance(key, str):
                rule = "option names must be strings"
                self._problem(f"{section}.{key}", key, rule, source, show=False)
                continue
            if group == "engines":
                # A private copy: later changes to the caller's data must not leak in.
                self.engines[name][key] = copy.deepcopy(value)
                if f"{section}.{key}" not in self.fields:
                    self.sources[f"{section}.{key}"] = source
            self._section(section, {key: value}, source, text=source == "override")
        if group == "engines" and self.engines[name]:
            self.sources.pop(section, None)  # the section's source stands for its options

    # -- environment and overrides -------------------------------------------------------------

    def _apply_env(self) -> None:
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

    def _override(self, key: object, value: object) -> None:
        if not isinstance(key, str) or "." not in key:
            rule = "override keys must be dotted strings"
            self._problem(str(key), key, rule, "override", show=False)
            return
        group = key.partition(".")[0]
        if group == "models":
            self._override_model(key, value)
        elif group in PLUGIN_GROUPS:
            self._override_plugin(key, value)
        elif key in self.fields or key in self.aliases:
            self._set(key, value, "override", text=True)
        else:
            self._override_unknown(key, value)

    def _override_model(self, key: str, value: object) -> None:
        # Model names may contain dots ("claude-3.5-..."), field names never do.
        name, _, field_name = key[len("models.") :].rpartition(".")
        if not name.strip():
            rule = "must be written models.<name>.<field>"
            self._problem(key, value, rule, "override", show=False)
        else:
            self._section(self._model(name), {field_name: value}, "override", text=True)

    def _override_unknown(self, key: str, value: object) -> None:
        section, _, name = key.rpartition(".")
        if section in self.names or section in SHARED_SECTIONS:
            self._unclaimed(section, name, value, "override")
            return
        listed = (
            "the keys listed by `ctxengine config`, "
            "models.<name>.<field> or <engines|strategies|gateways>.<name>.<option>"
        )
        self._unknown("", key, [*self.fields, *self.aliases], "override", listed=listed)

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

    # -- the models ----------------------------------------------------------------------------

    def _models_given(self, view: SettingsView) -> dict[str, dict[str, Any]]:
        """Each model given a value (its output below its window), by name; a model named
        without any value is no override."""
        models: dict[str, dict[str, Any]] = {}
        for name in self.model_names:
            keys = {f.name: f"models.{name}.{f.name}" for f in self.model_fields}
            if all(self.sources[key] == "default" for key in keys.values()):
                for key in keys.values():
                    del self.sources[key]
                continue
            less_than(view, keys["max_output_tokens"], keys["context_length"])
            models[name] = {field: self.values[key] for field, key in keys.items()}
        return models


def less_than(view: SettingsView, small: str, large: str) -> None:
    """Report ``small`` unless it is below ``large`` (either ``None`` passes)."""
    value, limit = view.value(small), view.value(large)
    if view.has_problem(small, large) or value is None or limit is None or value < limit:
        return
    view.problem(small, f"must be less than {view.describe(large, seen_from=view.source(small))}")


__all__ = ["CORE_OWNER", "Deprecation", "RawConfig", "Resolved", "UnusedKey", "less_than"]
