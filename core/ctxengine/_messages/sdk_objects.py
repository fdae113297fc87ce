"""Reading a key of an SDK object (a pydantic model of the ``anthropic`` or ``openai`` SDK, or
any object with attributes) and of a plain dict alike, cheaply: this runs on every response and
every stream event.

How a key is read is decided once per (type, key): ``obj.get(key)`` for a mapping, the model's
extra fields for a key a pydantic model does not declare, the attribute otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

_MAPPING_TYPES: dict[type, bool] = {dict: True}
"""Whether a type is a mapping, per type seen: ``isinstance`` against the ``Mapping`` ABC costs
more than the read itself on SDK objects, which every response and stream event is."""

_ITEM, _ATTRIBUTE, _EXTRA = range(3)
_READS: dict[tuple[type, str], int] = {}
"""How :func:`field` reads a key of a type, per (type, key) seen."""


def is_mapping(obj: Any) -> bool:
    """``isinstance(obj, Mapping)``, decided once per type."""
    kind = type(obj)
    mapping = _MAPPING_TYPES.get(kind)
    if mapping is None:
        mapping = _MAPPING_TYPES[kind] = isinstance(obj, Mapping)
    return mapping


def _read_of(kind: type, key: str, obj: Any) -> int:
    if is_mapping(obj):
        return _ITEM
    # A key the SDK's model does not declare (``reasoning_content`` on a chat delta, say) is
    # looked up in its extra fields: reading it as an attribute runs pydantic's __getattr__,
    # which raises and catches an AttributeError (microseconds per read, on every chunk).
    declared = key in (getattr(kind, "model_fields", None) or ()) or hasattr(kind, key)
    return _EXTRA if not declared and hasattr(obj, "__pydantic_extra__") else _ATTRIBUTE


def field(obj: Any, key: str) -> Any:
    """``obj[key]`` for a mapping, ``obj.key`` for an SDK object (read without dumping it),
    ``None`` when it has neither."""
    kind = type(obj)
    read = _READS.get((kind, key))
    if read is None:
        read = _READS[(kind, key)] = _read_of(kind, key, obj)
    if read == _ITEM:
        return obj.get(key)
    if read == _EXTRA:
        extra = obj.__pydantic_extra__
        return extra.get(key) if extra else None
    return getattr(obj, key, None)


_SCALARS = (int, str, float, bool)
_NAMED_AS_FIELDS: dict[type, bool] = {}
"""Whether a pydantic model type dumps every field under the field's own name (no alias), per
type seen."""


def _named_as_fields(kind: type) -> bool:
    fields = getattr(kind, "model_fields", None)
    return isinstance(fields, dict) and all(
        getattr(info, "alias", None) in (None, name)
        and getattr(info, "serialization_alias", None) in (None, name)
        for name, info in fields.items()
    )


def scalar_dump(obj: Any) -> dict[str, Any] | None:
    """What the SDK's ``obj.to_dict(exclude_none=True)`` gives (the fields the API set, in the
    model's order, ``None`` values left out, extras after them) for a pydantic model whose values
    are ints, strings, floats, bools or such models, read from the model without dumping it;
    ``None`` for anything else (a mapping, a model holding a list), which the caller dumps.

    A stream's usage objects (Anthropic's ``message_start`` and ``message_delta``, a chat
    stream's usage chunk) are such models, read once per streamed request: the dump costs
    microseconds, reading the set fields a fraction of that.
    """
    kind = type(obj)
    named = _NAMED_AS_FIELDS.get(kind)
    if named is None:
        named = _NAMED_AS_FIELDS[kind] = _named_as_fields(kind)
    if not named:
        return None
    out = _scalars(obj.__dict__, obj.__pydantic_fields_set__)
    extra = obj.__pydantic_extra__
    if out is None or not extra:
        return out
    more = _scalars(extra, None)
    return None if more is None else {**out, **more}


def _scalars(values: Mapping[str, Any], given: AbstractSet[str] | None) -> dict[str, Any] | None:
    """The non-``None`` ``values`` (of the keys in ``given``, unless it is ``None``), nested
    models read by :func:`scalar_dump`; ``None`` when one of them is something else."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or (given is not None and key not in given):
            continue
        if type(value) in _SCALARS:
            out[key] = value
            continue
        nested = scalar_dump(value)  # a nested usage breakdown (Anthropic's cache_creation)
        if nested is None:
            return None
        out[key] = nested
    return out
