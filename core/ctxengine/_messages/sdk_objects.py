"""Reading the SDKs' objects (pydantic models of the ``anthropic`` and ``openai`` SDKs, or any
object with attributes) and plain dicts alike: :func:`field` reads one key, :func:`plain` turns
a whole object into JSON-shaped data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def field(obj: Any, key: str) -> Any:
    """``obj[key]`` for a mapping, ``obj.key`` for an SDK object (a key its model does not
    declare is read from the model's extra fields the same way), ``None`` when it has neither."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def plain(obj: Any) -> Any:
    """``obj`` as JSON-shaped data: SDK models dumped (unset and ``None`` fields left out),
    mappings and lists converted recursively, anything else as it is."""
    dump = getattr(obj, "to_dict", None)
    if callable(dump) and not isinstance(obj, Mapping):
        return dump(exclude_none=True)
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
