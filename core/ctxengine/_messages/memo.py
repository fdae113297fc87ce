"""Remembering facts about the caller's message objects by identity, cheaply.

ctxengine runs on every request of a growing conversation whose older messages are the same
objects turn after turn. Work that depends only on a message (its token count, whether it
carries cache markers) is done once per object and looked up by ``id()`` afterwards. A stored
entry keeps a reference to its object, so the id cannot be reused by another object while the
entry lives, and a cheap :func:`fingerprint` catches the usual in-place edits (keys added or
removed, ``content`` replaced, blocks appended). Deeper in-place edits (changing a block's text)
are not seen: callers that edit messages in place must tell the owner of the memo.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fingerprint(obj: Any) -> tuple[int, int, int]:
    """A cheap shape of a message (or list) that changes with the usual in-place edits."""
    if isinstance(obj, dict):
        content = obj.get("content")
        return len(obj), id(content), len(content) if isinstance(content, list) else -1
    return len(obj), 0, 0


class ListProgress:
    """How far per-message work got into a caller's list, valid while it is only appended to.

    Agent loops grow one list with ``messages.append``; work done for its first ``n`` messages
    (counting them, checking them for markers) need not be redone while the same list object
    still holds the same message at position ``n - 1``. Replacing or editing earlier elements in
    place is not detected: the owner must :meth:`reset`. Not thread-safe by itself; owners call
    it under their own lock or accept a lost update (which only costs a rescan).
    """

    def __init__(self) -> None:
        self._items: Sequence[object] | None = None
        self._done = 0
        self._tail: object = None
        self.value: Any = None
        """Whatever the owner accumulated over the first :meth:`resume` items."""

    def resume(self, items: Sequence[object]) -> int:
        """How many leading items of ``items`` are already done (0 for another list)."""
        done = self._done
        if (
            self._items is items
            and len(items) >= done
            and (done == 0 or items[done - 1] is self._tail)
        ):
            return done
        return 0

    def record(self, items: Sequence[object], done: int, value: Any = None) -> None:
        """The first ``done`` items of ``items`` are done, with ``value`` accumulated."""
        self._items = items
        self._done = done
        self._tail = items[done - 1] if done else None
        self.value = value

    def reset(self) -> None:
        self._items, self._done, self._tail, self.value = None, 0, None, None
