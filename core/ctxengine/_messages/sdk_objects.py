"""Reading a key of an SDK object (a pydantic model of the ``anthropic`` or ``openai`` SDK, or
any object with attributes) and of a plain dict alike, cheaply: this runs on every response and
every stream event.

How a key is read is decided once per (type, key): ``obj.get(key)`` for a mapping, the model's
extra fields for a key a pydantic model does not declare, the attribute otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
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
