"""Per-session plugin state that survives a worker switch: :class:`SessionState`.

A plugin declares each piece of state that changes its decisions (cooldowns, anti-thrash
savings, the previous summary) as a :class:`SessionState` and reads it with
``ctx.session_state(SPEC)`` instead of ``ctx.plugin_state(key, factory)``. With the default
``coordination.backend: process`` the two behave alike: the object lives in ``ctx.state`` for
the life of the session. With a shared backend (``file``, ``postgresql``) the kernel serialises
every declared state object with ``dump`` when a session call ends and saves it under the
session's lock; the next call in any process that finds a newer saved state decodes it with
``load`` on first access. State that only speeds things up (caches, handles to files or
connections) stays in ``plugin_state``: it is never saved and is rebuilt where it is missing.

Times: a state object that holds deadlines in ``ctx.clock`` time gets ``now`` with both calls.
``dump(value, now)`` is given the saving process's current clock, so the value stores durations
(``deadline - now``); ``load(data, now)`` is given the moment of that save in the loading
process's clock (wall-clock time between the two processes taken into account), so
``now + duration`` is the deadline again. Clocks of different hosts never need to agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

T = TypeVar("T")

JSONValue = Any
"""What ``dump`` returns and ``load`` receives: ``dict``/``list``/``str``/``int``/``float``/
``bool``/``None`` nested, as :func:`json.dumps` writes them (finite numbers only)."""


@attrs.frozen(eq=False)
class SessionState(Generic[T]):
    """A declared piece of one plugin's per-session state, saved between calls on a shared
    coordination backend.

    :ivar key: its entry in ``ctx.state`` and in the saved document; start it with the
        plugin's name (``"compressor"``, ``"lcm.guard"``).
    :ivar factory: makes the state of a new session.
    :ivar dump: ``dump(value, now)`` -> JSON-serialisable data (see the module docstring for
        ``now``); must not mutate ``value``.
    :ivar load: ``load(data, now)`` -> a value equal to the one dumped.
    :ivar version: the shape of ``data``; saved data of another version is not handed to
        ``load``: the session starts that state afresh (and the kernel logs it).
    """

    key: str
    factory: Callable[[], T]
    dump: Callable[[T, float], JSONValue]
    load: Callable[[JSONValue, float], T]
    version: int = 1

    def __attrs_post_init__(self) -> None:
        if not self.key or not isinstance(self.key, str):
            raise ValueError(f"SessionState needs a non-empty string key, got {self.key!r}")


@attrs.frozen
class Undecoded:
    """Saved state of one key not decoded yet: it stays in ``ctx.state`` until the plugin asks
    for it (or is saved again as it is, for a plugin this process does not load).

    :ivar entry: the saved entry: ``{"v": version, "at": wall-clock save time, "data": ...}``.
    :ivar saved_at: the moment of that save in this process's ``ctx.clock``.
    """

    entry: dict[str, Any]
    saved_at: float


__all__ = ["JSONValue", "SessionState", "Undecoded"]
