"""How the kernel and every plugin declare the configuration keys they read.

One :class:`SettingsSpec` per owner and section; plugins hand theirs to the kernel in the
``declare_settings`` hook, which validates every selected plugin's keys at :func:`ctxengine.load`
with the same messages as its own (``docs/configuration.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from ctxengine._config.fields import ConfigProblem, Field, fields_of, format_value, printable

T = TypeVar("T")

Check = Callable[["SettingsView"], None]
"""A rule across keys: it reads values through the view and reports with
:meth:`SettingsView.problem`. Checks run after every key was validated on its own."""

CORE_OWNER = "kernel"
"""The owner name of the keys the kernel itself reads."""

PLUGIN_GROUPS = ("engines", "strategies", "gateways")
"""Top-level sections holding one ``<group>.<name>`` section per plugin (engines, cache
strategies, gateway extensions such as hygiene)."""

PLUGIN_SECTIONS = ("prompt_caching", "coordination")
"""Kernel sections a plugin may add keys to besides its own ``<group>.<name>``."""

_PLUGIN_SECTION = re.compile(r"(engines|strategies|gateways)\.[A-Za-z0-9_.-]+")
_KEY_PATH = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _fields(value: Iterable[Field]) -> tuple[Field, ...]:
    return tuple(value)


def _checks(value: Iterable[Check]) -> tuple[Check, ...]:
    return tuple(value)


class SettingsDeclarationError(ValueError):
    """A plugin declared settings the kernel cannot accept (bad section, duplicate key, ...)."""


@attrs.frozen(eq=False)
class SettingsSpec(Generic[T]):
    """The keys one owner reads in one section.

    :ivar section: ``"engines.<name>"``, ``"strategies.<name>"``, ``"gateways.<name>"``,
        ``"prompt_caching"`` or ``"coordination"`` (the kernel also declares its own sections,
        ``context``, ``model`` and so on).
    :ivar fields: the keys, in documentation order; each :class:`~ctxengine.Field` may name an
        environment variable (``env``) that overrides it.
    :ivar build: called with every field's value as keyword arguments to make the typed value
        :meth:`ctxengine.Config.settings` returns; ``None`` returns a read-only mapping.
    :ivar checks: rules across keys (see :class:`SettingsView`).
    :ivar trigger: for an engine, the field holding the fraction of the window at which it
        compacts; other plugins' checks (gateway hygiene's) compare against it.
    :ivar doc: one line for the generated configuration reference.

    Specs compare by identity: keep each in a module-level constant.
    """

    section: str
    fields: tuple[Field, ...] = attrs.field(converter=_fields)
    build: Callable[..., T] | None = None
    checks: tuple[Check, ...] = attrs.field(default=(), converter=_checks)
    trigger: str | None = None
    doc: str = ""

    def __attrs_post_init__(self) -> None:
        names = [f.name for f in self.fields]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SettingsDeclarationError(
                f"settings for {self.section!r} declare {', '.join(duplicates)} more than once"
            )
        if self.trigger is not None and self.trigger not in names:
            raise SettingsDeclarationError(
                f"settings for {self.section!r}: trigger {self.trigger!r} is not one of the "
                f"declared keys ({', '.join(names)})"
            )
        for field in self.fields:
            if field.storage and not (field.nullable and field.default is None):
                raise SettingsDeclarationError(
                    f"{self.section}.{field.name}: a storage field must be nullable with default "
                    "null (null = a place under ctx.data_dir), so a sandbox can redirect it"
                )
            if field.env is not None and _ENV_NAME.fullmatch(field.env) is None:
                raise SettingsDeclarationError(
                    f"{self.section}.{field.name}: environment variable {field.env!r} must be "
                    "upper-case letters, digits and '_'"
                )
            if field.alias is not None and _KEY_PATH.fullmatch(field.alias) is None:
                raise SettingsDeclarationError(
                    f"{self.section}.{field.name}: alias {field.alias!r} must be a dotted key path"
                )

    @classmethod
    def of(
        cls,
        section: str,
        settings: type[T],
        *,
        build: Callable[..., T] | None = None,
        checks: Iterable[Check] = (),
        trigger: str | None = None,
        doc: str = "",
    ) -> SettingsSpec[T]:
        """The spec of an ``attrs`` class whose keys are declared with
        :func:`~ctxengine.setting`; ``build`` defaults to the class itself."""
        return cls(section, fields_of(settings), build or settings, checks, trigger, doc)

    def key(self, name: str) -> str:
        """The dotted key path of field ``name``."""
        return f"{self.section}.{name}"

    def storage_keys(self) -> list[str]:
        """The key paths of the fields marked ``storage`` (where the owner keeps data)."""
        return [self.key(f.name) for f in self.fields if f.storage]


@attrs.frozen
class OwnedSpec:
    """A spec together with the plugin (or ``"kernel"``) that declared it."""

    spec: SettingsSpec[Any]
    owner: str


class SettingsRegistry:
    """Collects the specs of every registered plugin during ``declare_settings``.

    The kernel hands each plugin a view stamped with its name (:meth:`for_owner`), so every key
    knows its owner. Two owners declaring the same key, or a plugin declaring keys outside its
    allowed sections, is a :class:`SettingsDeclarationError` naming both sides.
    """

    def __init__(self) -> None:
        self._specs: list[OwnedSpec] = []
        self._owner_of: dict[str, str] = {}

    @property
    def specs(self) -> tuple[OwnedSpec, ...]:
        return tuple(self._specs)

    def for_owner(self, owner: str) -> PluginSettings:
        """The registry as one plugin sees it: its ``add`` stamps ``owner`` on each spec."""
        return PluginSettings(self, owner)


class PluginSettings:
    """What ``declare_settings`` receives: ``settings.add(SPEC)`` declares one section."""

    def __init__(self, registry: SettingsRegistry, owner: str) -> None:
        self._registry = registry
        self.owner = owner

    def add(self, spec: SettingsSpec[Any]) -> None:
        """Declare ``spec`` as this plugin's.

        :raises SettingsDeclarationError: for a section plugins may not use or a key another
            owner declared.
        """
        owner, registry = self.owner, self._registry
        if not isinstance(spec, SettingsSpec):
            raise SettingsDeclarationError(
                f"plugin {owner!r} declared {spec!r}, not a ctxengine.SettingsSpec"
            )
        if not (spec.section in PLUGIN_SECTIONS or _PLUGIN_SECTION.fullmatch(spec.section)):
            raise SettingsDeclarationError(
                f"plugin {owner!r} declared settings under {spec.section!r}; plugins may declare "
                "keys under engines.<name>, strategies.<name>, gateways.<name> or in "
                f"{', '.join(PLUGIN_SECTIONS)}"
            )
        if any(o.spec is spec for o in registry._specs):
            return  # the same spec declared twice (e.g. a module registered under two names)
        paths = [spec.key(f.name) for f in spec.fields]
        paths += [f.alias for f in spec.fields if f.alias is not None]
        for key in paths:
            other = registry._owner_of.get(key)
            if other is not None:
                raise SettingsDeclarationError(
                    f"{key} is declared by both {other!r} and {owner!r}; each key has one owner"
                )
        registry._owner_of.update(dict.fromkeys(paths, owner))
        registry._specs.append(OwnedSpec(spec, owner))


@attrs.frozen
class SettingsView:
    """What a cross-key check sees: every declared key's value and source, and a way to report.

    Keys are dotted paths (``"engines.compressor.threshold"``), never a former path (an alias).
    A check should skip keys that already have a problem (:meth:`has_problem`, which counts a
    problem reported under a key's alias too): their value is not meaningful.
    """

    _values: Mapping[str, Any]
    _sources: Mapping[str, str]
    _problems: list[ConfigProblem]
    engine_trigger: str | None
    """The key path of the selected engine's trigger fraction, when it declares one."""
    _aliases: Mapping[str, str] = attrs.field(factory=dict)

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def value(self, key: str) -> Any:
        return self._values[key]

    def source(self, key: str) -> str:
        return self._sources.get(key, "default")

    def has_problem(self, *keys: str) -> bool:
        bad = {self._aliases.get(p.key, p.key) for p in self._problems}
        return any(key in bad for key in keys)

    def describe(self, key: str, *, seen_from: str) -> str:
        """``key (value)``, naming its source when it differs from ``seen_from`` (the source of
        the key the message is about): ``engines.compressor.threshold (0.5, the default)``."""
        other_source = self.source(key)
        if other_source == seen_from:
            where = ""
        elif other_source == "default":
            where = ", the default"
        else:
            where = f", from {other_source}"
        return f"{key} ({format_value(printable(key, self._values[key]))}{where})"

    def problem(self, key: str, rule: str) -> None:
        """Report ``key``'s value as invalid because of ``rule`` ("must be ..."), with its
        source."""
        self._problems.append(ConfigProblem(key, self._values.get(key), rule, self.source(key)))
