"""One config key (:class:`Field`, declared with :func:`setting`), its validation, and the
errors and printable values every message is built from.

:mod:`ctxengine._config.resolve` validates every declared key (the kernel's and the plugins')
with these fields, so every message reads the same. Standard library and ``attrs`` only.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from ctxengine._config.urls import redact_url

__all__ = [
    "NAME_PATTERN",
    "ConfigError",
    "ConfigProblem",
    "Field",
    "FieldKind",
    "fields_of",
    "format_value",
    "printable",
    "setting",
]

# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


SECRET_NAMES = frozenset({"api_key", "password", "token", "secret"})
"""Last segments of key paths whose values are never shown (``auxiliary.compression.api_key``)."""


class Hidden(str):
    """A secret's stand-in (``"***"``), shown unquoted by :func:`format_value` so that an error
    about a secret's type does not read as if the value were the string ``"***"``."""

    def __repr__(self) -> str:
        return str(self)


HIDDEN = Hidden("***")


def printable(key: str, value: object) -> object:
    """``value`` of ``key`` fit to show in a report or an error message: a secret key's value
    as ``"***"``, and any password inside a URL (``postgresql://bob:***@db/x``) hidden, whether
    or not the URL is valid for the key, because a mistyped URL is exactly what an error
    message echoes."""
    if value is None:
        return None
    if key.rpartition(".")[2] in SECRET_NAMES:
        return HIDDEN
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


def format_value(value: object) -> str:
    """Show a config value the way a YAML author would recognise it.

    Strings are quoted (so ``'yes'`` is visibly not the boolean ``true``), booleans and ``None``
    use YAML spelling, long values are shortened.
    """
    if value is True:
        text = "true"
    elif value is False:
        text = "false"
    elif value is None:
        text = "null"
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@attrs.frozen
class ConfigProblem:
    """One invalid key or value.

    :ivar key: dotted key path (``"engines.compressor.threshold"``); empty for file-level problems.
    :ivar value: the offending value as given.
    :ivar allowed: what is allowed instead (``"must be a number from 0.05 to 0.95"``), or for
        unknown keys and file problems the whole explanation.
    :ivar source: where the value came from: a file path, ``"env VAR"`` or ``"override"``.
    :ivar show_value: false when the value says nothing useful (unknown keys, file problems).
    """

    key: str
    value: object
    allowed: str
    source: str | None
    show_value: bool = attrs.field(default=True, kw_only=True)

    def __str__(self) -> str:
        where = f"config error in {self.source}" if self.source else "config error"
        if not self.key:
            return f"{where}: {self.allowed}"
        if self.show_value:
            shown = format_value(printable(self.key, self.value))
            return f"{where}: {self.key} = {shown}: {self.allowed}"
        return f"{where}: {self.key}: {self.allowed}"


class ConfigError(ValueError):
    """The configuration is invalid; ``str()`` lists every problem, one per line."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        if not problems:
            raise ValueError("ConfigError needs at least one problem")
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __reduce__(self) -> tuple[type[ConfigError], tuple[list[ConfigProblem]]]:
        return (type(self), (self.problems,))


# ---------------------------------------------------------------------------------------------
# Field descriptions (shared by the core sections and by engines)
# ---------------------------------------------------------------------------------------------

FieldKind = Literal["bool", "int", "number", "str", "name", "url", "choice", "str_list"]
"""What a :class:`Field` accepts:

- ``bool``: a real boolean (a quoted ``"yes"`` is an error);
- ``int``: an integer, never a boolean; ``number``: an int or float (returned as float), finite;
- ``str``: a non-empty string; ``name``: letters, digits, ``_``, ``.`` and ``-``;
- ``url``: an ``http://`` or ``https://`` URL; ``choice``: one of ``choices`` (type-exact);
- ``str_list``: a list of non-empty strings (returned as a tuple).
"""

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")
_BOOL_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(
    ("0", "false", "no", "off"), False
)
_TEXT_KINDS = ("str", "name", "url")
_UNPARSED = object()
"""Text that is not of the field's kind (in :meth:`Field.convert_text`)."""


def _is_http_url(text: object) -> bool:
    from urllib.parse import urlsplit

    if not isinstance(text, str) or not text or any(c.isspace() for c in text):
        return False
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  # raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "bool": ("must be true or false", lambda v: isinstance(v, bool)),
    "str": ("must be a non-empty string", lambda v: isinstance(v, str) and bool(v.strip())),
    "name": (
        "must be a non-empty name made of letters, digits, '_', '.' and '-'",
        lambda v: isinstance(v, str) and NAME_PATTERN.fullmatch(v) is not None,
    ),
    "url": ("must be an http:// or https:// URL", _is_http_url),
    "str_list": (
        "must be a list of non-empty strings",
        lambda v: isinstance(v, (list, tuple)) and all(isinstance(s, str) and s for s in v),
    ),
}
"""The kinds without bounds or choices: the rule a value breaks, and the test it must pass."""


@attrs.frozen
class Field:
    """One key of a config section: its type, default and allowed range.

    Bounds: ``ge`` (>=), ``gt`` (>) and ``le`` (<=) apply to ``int`` and ``number`` kinds.
    ``nullable`` also admits ``null``. ``doc`` is a one-line description for generated docs;
    ``env`` names an environment variable that overrides the key (its text is parsed like a
    YAML value of the field's kind: ``1/0``, ``yes/no``, ``null``, ...).

    ``storage`` marks where the plugin keeps persistent data (a database file, a folder). Such a
    field must be nullable, and ``null`` must mean a place under ``ctx.data_dir``: a kernel
    loaded with ``sandbox=`` (``ctxengine replay`` does that) resets every storage field to
    ``null`` and points ``ctx.data_dir`` at the sandbox, so simulations never write to the
    user's data.

    ``alias`` is the key's former dotted path (``"compression.threshold"``): still read, with a
    deprecation notice, and an error when it is given beside the key with a different value.
    """

    name: str
    kind: FieldKind
    default: Any = None
    nullable: bool = attrs.field(default=False, kw_only=True)
    ge: float | None = attrs.field(default=None, kw_only=True)
    gt: float | None = attrs.field(default=None, kw_only=True)
    le: float | None = attrs.field(default=None, kw_only=True)
    choices: tuple[object, ...] = attrs.field(default=(), kw_only=True)
    doc: str = attrs.field(default="", kw_only=True)
    env: str | None = attrs.field(default=None, kw_only=True)
    storage: bool = attrs.field(default=False, kw_only=True)
    alias: str | None = attrs.field(default=None, kw_only=True)

    def allowed(self, *, from_text: bool = False) -> str:
        """The "must be ..." sentence used in error messages.

        :param from_text: describe the spellings accepted from environment variables too.
        """
        if self.kind in ("int", "number"):
            text = (
                "must be an integer" if self.kind == "int" else "must be a number"
            ) + self._range()
        elif self.kind == "choice":
            text = "must be one of " + ", ".join(format_value(c) for c in self.choices)
        else:
            text = _KINDS[self.kind][0]
        if self.nullable:
            text += " or null"
        if from_text and (self.kind == "bool" or True in self._bool_choices()):
            text += " (true/false may be written 1/0, yes/no, on/off)"
        if from_text and self.kind == "str_list":
            text += f" (in an environment variable: separated by {os.pathsep!r})"
        return text

    def _range(self) -> str:
        if self.ge is not None and self.le is not None:
            return f" from {self.ge!r} to {self.le!r}"
        limits = ((">=", self.ge), (">", self.gt), ("<=", self.le))
        bounds = [f"{op} {bound!r}" for op, bound in limits if bound is not None]
        return " " + " and ".join(bounds) if bounds else ""

    def _bool_choices(self) -> list[bool]:
        return [c for c in self.choices if isinstance(c, bool)]

    def _in_range(self, value: float) -> bool:
        below = (self.ge is not None and value < self.ge) or (
            self.gt is not None and value <= self.gt
        )
        return not (below or (self.le is not None and value > self.le))

    def read(self, value: object, *, text: bool) -> tuple[bool, Any, bool]:
        """Validate ``value``; with ``text``, a string for a key that is not a string is parsed
        like an environment variable (CLI flags, overrides).

        Returns ``(ok, normalised value or the value to show, parsed from text)``.
        """
        if text and isinstance(value, str) and self.kind not in _TEXT_KINDS:
            return (*self.convert_text(value), True)
        return (*self.convert(value), False)

    def convert(self, value: object) -> tuple[bool, Any]:
        """Validate a value as written in YAML: ``(True, normalised value)`` or
        ``(False, value)``."""
        if value is None:
            return self.nullable, None
        if self.kind == "choice":
            # Type-exact, so the string "true" is not the boolean true, and 1 is not true.
            return any(type(value) is type(c) and value == c for c in self.choices), value
        if self.kind not in ("int", "number"):
            ok = _KINDS[self.kind][1](value)
            return ok, tuple(value) if ok and self.kind == "str_list" else value  # type: ignore[arg-type]
        numbers = int if self.kind == "int" else (int, float)
        if isinstance(value, bool) or not isinstance(value, numbers):
            return False, value
        number = value if self.kind == "int" else float(value)
        if (self.kind == "int" or math.isfinite(number)) and self._in_range(number):
            return True, number
        return False, value

    def convert_text(self, text: str) -> tuple[bool, Any]:
        """Validate a value given as text (environment variable, CLI flag).

        Returns ``(True, value)`` or ``(False, shown)`` where ``shown`` is the parsed value when
        the text parsed but is out of range, else the text itself.
        """
        stripped = text.strip()
        word = stripped.lower()
        value: object = text
        if self.nullable and word in ("null", "none"):
            return True, None
        if self.kind == "bool" or (self._bool_choices() and word in _BOOL_WORDS):
            value = _BOOL_WORDS.get(word, _UNPARSED)
        elif self.kind in ("int", "number"):
            try:
                value = int(stripped) if self.kind == "int" else float(stripped)
            except ValueError:
                value = _UNPARSED
        elif self.kind == "choice":
            value = stripped
        elif self.kind == "str_list":
            value = [part for part in text.split(os.pathsep) if part.strip()]
        return (False, text) if value is _UNPARSED else self.convert(value)


_FIELD_KEY = "ctxengine.field"


def setting(kind: FieldKind, default: Any = None, *, secret: bool = False, **options: Any) -> Any:
    """Declare one key as an attribute of an ``attrs`` settings class: its kind, default and
    the :class:`Field` options (bounds, choices, ``env``, ``doc``, ``storage``, ``alias``) in
    one place. :meth:`SettingsSpec.of <ctxengine.SettingsSpec.of>` reads the class's keys back,
    in attribute order. ``secret`` keeps the value out of the class's ``repr``.
    """
    field = Field("", kind, default, **options)
    return attrs.field(default=default, repr=not secret, metadata={_FIELD_KEY: field})


def fields_of(cls: type[Any]) -> tuple[Field, ...]:
    """The keys declared with :func:`setting` on the ``attrs`` class ``cls``, named after its
    attributes."""
    return tuple(
        attrs.evolve(a.metadata[_FIELD_KEY], name=a.name)
        for a in attrs.fields(cls)
        if _FIELD_KEY in a.metadata
    )
