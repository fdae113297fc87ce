"""Facts about messages, found again however the host hands them over: :class:`MessageMemo`.

ctxengine runs on every request of a growing conversation, and hosts hand the history over in
different ways: the same list appended in place, a new list of the same dicts, or new dicts every
turn (rebuilt from a framework's own objects, reloaded from a database, received over HTTP). Work
that depends only on what a message says (its token count, whether it carries cache markers, its
size for estimates) is done once per distinct content and found again in all of these cases.

Each :class:`MemoEntry` holds a *snapshot* of the message it describes: a copy of its dicts and
lists whose strings and numbers are the caller's own objects, so it costs the containers, not the
text. An entry is only ever handed out for a message that compares equal (``==``) to its snapshot,
so an edit in place (a block's text replaced, a key added, a block appended) is always seen: the
edited message no longer matches and is described anew.

How :meth:`MessageMemo.resolve` finds the entry of each message of a list:

1. **position**: the list is compared with the snapshots of the list resolved last, in one ``==``
   between two lists (no per-message work for the common prefix);
2. **identity**: a message past the first difference is looked up by ``id()``;
3. **content**: otherwise by a content key (role, text length, images, markers);
4. a message found nowhere gets a new entry: its snapshot, what
   :func:`ctxengine.messages.text_size` and :func:`ctxengine.messages.carries_marker` say of it
   (the content key of step 3 is made of these, so a message found by content is not copied).

Steps 2 and 3 check the candidate against its snapshot too, so a reused ``id()`` or a key shared
by different messages never hands out the wrong entry.

Memory is bounded: at most ``max_entries`` entries besides those of the list resolved last (the
least recently found go first). An entry holds its message's containers, and the strings it
shares with the caller's objects stay alive while it does. :meth:`MessageMemo.retain` drops
everything but one list (after a compaction).

Equality is Python's: ``1``, ``1.0`` and ``True`` are the same content here (a tool input whose
``1`` is replaced by ``true`` in place is not seen). Messages are JSON-like data (dicts, lists,
strings, numbers, booleans, ``None``); other objects inside them are kept by reference and
compared with their own ``==``, so mutating such an object in place is not seen.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ctxengine._messages.markers import carries_marker
from ctxengine._messages.read import text_size

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "MemoEntry",
    "MessageMemo",
    "MessageView",
    "NotAMessageError",
    "snapshot",
]

DEFAULT_MAX_ENTRIES = 10_000
"""Entries a :class:`MessageMemo` keeps besides those of the list it resolved last: twice the
gateway's default hard message limit (``gateways.hygiene.hard_message_limit``)."""

_ATOMS = frozenset({str, int, float, bool, type(None)})


class NotAMessageError(TypeError, ValueError):
    """An item of a message list is not a dict; the message names its index. A ``TypeError``
    for the marker functions and a ``ValueError`` for the token counter, as each documents."""


def snapshot(obj: Any) -> Any:
    """A copy of ``obj``'s dicts, lists and tuples whose other objects (strings, numbers) are
    shared: equal to ``obj`` until ``obj`` is edited in place, at the cost of its containers."""
    if isinstance(obj, dict):
        copied = dict(obj)
        for key, value in copied.items():
            if type(value) not in _ATOMS:
                copied[key] = snapshot(value)  # a value replaced: the dict's size is unchanged
        return copied
    if isinstance(obj, list):
        return [v if type(v) in _ATOMS else snapshot(v) for v in obj]
    if type(obj) is tuple:
        return tuple(v if type(v) in _ATOMS else snapshot(v) for v in obj)
    return obj


class MemoEntry:
    """What is known about one message content.

    :ivar snapshot: the content (see the module docstring); never mutate it.
    :ivar chars: length of its token-bearing text (``len(message_text(...))``).
    :ivar images: images in it.
    :ivar marked: it carries a ``cache_control`` marker somewhere
        :func:`ctxengine.messages.strip_cache_markers` would remove it.
    :ivar tokens: its exact token count, once the session's counter has computed it.
    :ivar edit_blocks: its :func:`ctxengine._messages.editing.edit_blocks`, once a request with
        server-side context edits needed them.
    :ivar key: the key the memo files it under: cheap, and the same for equal contents
        (different contents may share it; lookups compare snapshots).
    """

    __slots__ = ("chars", "edit_blocks", "images", "key", "marked", "snapshot", "tokens")

    def __init__(
        self, snapshot: dict[str, Any], chars: int, images: int, marked: bool, key: tuple[Any, ...]
    ) -> None:
        self.snapshot = snapshot
        self.chars = chars
        self.images = images
        self.marked = marked
        self.key = key
        self.tokens: int | None = None
        # ctxengine._messages.editing.EditBlock, spelled out: that module reads the memo.
        self.edit_blocks: tuple[tuple[int, str, str, str], ...] | None = None


class MessageView:
    """The entries of one list, position by position, as :meth:`MessageMemo.resolve` found them.

    ``entries[i]`` describes ``items[i]`` as the list was when it was resolved; the lists a view
    holds are shared with later views and must not be mutated.

    :ivar items: the list that was resolved (the caller's own list object when it was a list).
    :ivar marked: indices of the messages that carry cache markers.
    """

    __slots__ = (
        "_base",
        "_ids",
        "_shared",
        "entries",
        "items",
        "length",
        "marked",
        "snapshots",
        "tail",
    )

    def __init__(
        self,
        items: list[Any],
        entries: list[MemoEntry],
        snapshots: list[Any],
        marked: tuple[int, ...],
        *,
        base: list[MemoEntry] | None = None,
        shared: int = 0,
    ) -> None:
        """:param base: the entries of the view resolved before this one, of which the first
        ``shared`` are this view's first ``shared`` entries."""
        self.items = items
        self.entries = entries
        self.snapshots = snapshots
        self.marked = marked
        self.length = len(items)
        self.tail: object = items[-1] if items else None
        self._ids: dict[int, int] | None = None
        self._base = base
        self._shared = shared

    def starts_with(self, entries: list[MemoEntry]) -> bool:
        """Whether this view's entries begin with ``entries`` (the same entry objects, so the
        same contents): O(1) when ``entries`` are those of the view resolved before."""
        count = len(entries)
        if count > len(self.entries):
            return False
        if entries is self.entries or (entries is self._base and self._shared >= count):
            return True
        return self.entries[:count] == entries

    def describes(self, items: Sequence[Any]) -> bool:
        """Whether ``items`` is the very list this view resolved, at the same length and with the
        same last element (nothing appended, removed or replaced at the end since)."""
        return (
            items is self.items
            and len(items) == self.length
            and (not items or items[-1] is self.tail)
        )

    def index_of(self, message: object) -> int | None:
        """The position of ``message`` (by identity) in the resolved list, or ``None``."""
        if self._ids is None:
            self._ids = {id(item): index for index, item in enumerate(self.items[: self.length])}
        return self._ids.get(id(message))


class MessageMemo:
    """One session's memo of message facts (see the module docstring). Thread-safe.

    :param max_entries: entries kept besides those of the list resolved last (at least 1).
    :raises ValueError: for ``max_entries`` below 1.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be an integer of at least 1, got {max_entries!r}")
        self._max = max_entries
        self._lock = threading.RLock()
        self._last: MessageView | None = None
        self._reusable = False
        # content key -> entries with that key; insertion order of _order is the LRU order.
        self._table: dict[tuple[Any, ...], list[MemoEntry]] = {}
        self._order: dict[MemoEntry, tuple[Any, ...]] = {}
        # id(message) -> its entry; a hint only (checked against the snapshot), so it may go stale.
        self._by_id: dict[int, MemoEntry] = {}

    # -- lists ------------------------------------------------------------------------------

    def resolve(self, messages: Sequence[Any]) -> MessageView:
        """The entry of every message of ``messages``, checked against the messages as they are
        now (an edit in place since the last call is seen).

        :raises NotAMessageError: a message is not a dict (the error names its index).
        """
        items = messages if type(messages) is list else list(messages)
        with self._lock:
            view = self._resolve(items)
            self._last = view
            self._reusable = True
            return view

    def view_of(self, messages: Sequence[Any]) -> MessageView:
        """Like :meth:`resolve`, but hands back the view :meth:`resolve` made last when
        ``messages`` is that very list, unchanged in length and last element, and
        :meth:`release` was not called since.

        This lets the calls that serve one request share one check of the list: the session
        resolves the history once per turn and releases the view when the request is prepared.
        An edit in place made between :meth:`resolve` and this call is not seen.
        """
        with self._lock:
            last = self._last
            if self._reusable and last is not None and last.describes(messages):
                return last
            return self.resolve(messages)

    def release(self) -> None:
        """End the current turn: the next :meth:`view_of` checks the list again."""
        self._reusable = False

    def marked_indices(self, messages: list[Any]) -> tuple[int, ...]:
        """Indices of the messages that carry cache markers (for ``strip_cache_markers``),
        from :meth:`view_of`."""
        return self.view_of(messages).marked

    def _resolve(self, items: list[Any]) -> MessageView:
        last = self._last
        count = len(items)
        old_entries: list[MemoEntry] = [] if last is None else last.entries
        old_snaps: list[Any] = [] if last is None else last.snapshots
        known = len(old_snaps)
        limit = min(count, known)
        if last is None:
            start = 0
        elif items[:limit] == old_snaps[:limit]:  # the previous list, maybe grown or cut
            if count == known:
                return MessageView(
                    items, old_entries, old_snaps, last.marked, base=old_entries, shared=count
                )
            start = limit
        else:
            start = next(i for i in range(limit) if items[i] != old_snaps[i])
        entries = old_entries[:start]
        snaps = old_snaps[:start]
        marked = [i for i in last.marked if i < start] if last is not None else []
        for index in range(start, count):
            msg = items[index]
            if start < index < limit and msg == old_snaps[index]:
                entry = old_entries[index]
            else:
                entry = self._entry(msg, index, by_position=False)
            entries.append(entry)
            snaps.append(entry.snapshot)
            if entry.marked:
                marked.append(index)
        view = MessageView(items, entries, snaps, tuple(marked), base=old_entries, shared=start)
        self._evict(view)
        return view

    # -- single messages --------------------------------------------------------------------

    def entry(self, message: object) -> MemoEntry:
        """The entry of one message (by identity, then by content).

        :raises NotAMessageError: ``message`` is not a dict.
        """
        with self._lock:
            return self._entry(message, None, by_position=True)

    def _entry(self, message: object, index: int | None, *, by_position: bool) -> MemoEntry:
        """``by_position``: also look for the object in the list resolved last (worth it for
        single lookups; :meth:`_resolve` has compared positions already)."""
        if not isinstance(message, dict):
            where = "message" if index is None else f"messages[{index}]"
            raise NotAMessageError(f"{where}: expected a dict, got {type(message).__name__}")
        by_id = self._by_id
        found = by_id.get(id(message))
        if found is not None and message == found.snapshot:
            self._touch(found)
            return found
        last = self._last
        if by_position and last is not None:
            position = last.index_of(message)
            if position is not None and message == last.snapshots[position]:
                found = last.entries[position]
                by_id[id(message)] = found
                return found
        chars, images = text_size(message)
        marked = carries_marker(message)
        role = message.get("role")
        key = (role if type(role) is str else None, chars, images, marked)
        chain = self._table.setdefault(key, [])
        for candidate in chain:
            if message == candidate.snapshot:
                self._touch(candidate)
                by_id[id(message)] = candidate
                return candidate
        fresh = MemoEntry(snapshot(message), chars, images, marked, key)
        chain.append(fresh)
        self._order[fresh] = key
        if len(by_id) > 4 * self._max:  # hints only: dropping them costs a lookup by content
            by_id.clear()
        by_id[id(message)] = fresh
        return fresh

    def _touch(self, entry: MemoEntry) -> None:
        key = self._order.pop(entry, None)
        if key is not None:
            self._order[entry] = key

    def _evict(self, view: MessageView) -> None:
        """Drop the least recently found entries beyond ``max_entries`` (those of ``view`` stay),
        once the memo is a quarter over its bound."""
        order = self._order
        allowed = self._max + len(view.entries)
        if len(order) <= allowed + self._max // 4:
            return
        keep = {id(entry) for entry in view.entries}
        for entry in list(order):
            if len(order) <= allowed:
                break
            if id(entry) in keep:
                continue
            key = order.pop(entry)
            chain = self._table[key]
            chain.remove(entry)
            if not chain:
                del self._table[key]
        self._by_id.clear()

    # -- housekeeping -----------------------------------------------------------------------

    def retain(self, messages: Sequence[Any]) -> MessageView:
        """Forget every entry except those of ``messages`` (see :meth:`view_of`); returns their
        view."""
        with self._lock:
            view = self.view_of(messages)  # usually just resolved: counting the result did
            kept = {id(entry): entry for entry in view.entries}
            self._table = {}
            self._order = {}
            self._by_id = {}
            for entry in kept.values():
                key = entry.key
                self._table.setdefault(key, []).append(entry)
                self._order[entry] = key
            return view

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._table = {}
            self._order = {}
            self._by_id = {}
            self._last = None
            self._reusable = False

    def __len__(self) -> int:
        """How many entries the memo keeps."""
        return len(self._order)
