"""The wrapper's view of a history the host owns and re-sends on every call.

A host using a wrapped client keeps appending to its own message list and passes all of it on
each call. What the wrapper sends can differ from it: after a compaction, the compacted
conversation stands in for everything before; after the wrapper answered an engine tool, the
assistant's tool call and its result sit between the host's messages. :class:`HistoryView`
remembers, after each call, which host messages were covered and what was sent for them, and
on the next call sends that, followed by whatever the host added since.

**The continuation rule.** The host's history continues the covered one when it is at least as
long and each covered message is equal to the object covered there, as that object is now or as
it was when it was covered (a snapshot of it, see :func:`ctxengine._messages.memo.snapshot`).
So the same objects continue it (edited in place or not), and so does a history rebuilt as new
dicts, even after the host edited the old objects; an edit in place to such new dicts does not.
When the history does not continue, the view is dropped and the host's history is sent as it
is; the call's record says so. The host's messages are never copied or changed here, only
referenced.

The view is in one of two states after a call, which decide what is sent, not the rule:

- **as given**: what was sent was the host's own message objects, one for one, with its system
  prompt (nothing compacted, no engine tool round added, no result supplied). The next call
  sends the host's messages as they are then. The snapshots are the kernel's message memo's,
  which compares the messages with them when :meth:`Session.should_compress` resolves them: the
  rule is read from that resolution first (:meth:`HistoryView.confirm`);
- **mapped**: what was sent differs from the host's messages (a compaction, an engine tool
  round). The view's own list of what was sent grows from call to call, followed by whatever
  the host added since; the snapshots are the view's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import is_
from typing import Any, NamedTuple

from ctxengine._messages.conversation import Message, SystemPrompt
from ctxengine._messages.memo import MemoEntry, MessageView, snapshot


class ResolvedHistory(NamedTuple):
    """What to send for one call, before any compaction.

    :ivar messages: the messages to send, in the form the kernel reads: the host's own list
        when it is ``as_given`` and the host passed a list (which the host may still append to
        while the call runs: read it only up to the length it had when the request was built).
    :ivar system: the system prompt to send (Anthropic), else ``None``.
    :ivar reset: the host's history did not continue the covered one; the view was dropped.
    :ivar as_given: ``messages`` are the host's own message objects, one for one, and ``system``
        is the host's (what :meth:`HistoryView.commit` needs to stay as given).
    :ivar unconfirmed: the view was as given and ``messages`` are the host's, not yet checked
        against what was covered: call :meth:`HistoryView.confirm` with the memo's view of
        ``messages`` before anything else reads them as continuing the covered history.
    """

    messages: list[Message]
    system: SystemPrompt | None
    reset: bool
    as_given: bool = False
    unconfirmed: bool = False


class HistoryView:
    """Which of the host's messages the wrapper covered, and what it sent for them."""

    def __init__(self) -> None:
        self._host: list[Any] = []
        # What each covered object was when it was covered (the continuation rule).
        self._snapshots: Sequence[Any] = []
        self._host_system: Any = None
        self._sent: list[Message] = []
        self._committed = 0
        self._sent_system: SystemPrompt | None = None
        # As given: the memo entries of what was sent, which were the host's own messages; None
        # while mapped (or empty).
        self._given: list[MemoEntry] | None = None
        # What commit takes from the last resolve: the host's history (None: the covered list
        # plus _added) and the messages it added.
        self._next_host: list[Any] | None = []
        self._added: list[Any] = []
        self.pending: dict[str, tuple[str, str]] = {}
        """Engine tool results not yet sent: call id -> (tool name, result text)."""

    def _continues(self, host: list[Any], view: MessageView | None = None) -> bool:
        """The continuation rule (see the module docstring) for ``host``; ``view``: the memo's
        resolution of ``host`` while the view is as given."""
        covered = len(self._host)
        if len(host) < covered:
            return False
        if self._given is not None and view is not None and view.starts_with(self._given):
            return True  # the memo found every covered message equal to its snapshot
        if host[:covered] == self._host:
            return True
        pairs = zip(host, self._host, self._snapshots, strict=False)  # host may be longer
        return all(h in (r, s) for h, r, s in pairs)  # identity first, then ==

    def resolve(
        self,
        host: list[Any],
        host_system: Any,
        to_engine: Callable[[Sequence[Any]], list[Message]],
    ) -> ResolvedHistory:
        """What to send for ``host`` (the host's whole history for this call, as
        :meth:`Dialect.split` listed it).

        ``to_engine`` converts host messages the view has not seen yet into the kernel's form.
        What :meth:`commit` will remember of ``host`` is taken here, so messages the host adds
        to its list while the call runs (during a stream, say) are not taken as sent. As given,
        the rule is applied by :meth:`confirm`, once the memo has resolved the messages.
        """
        covered = len(self._host)
        deferred = self._given is not None and len(host) >= covered
        reset = bool(covered) and not deferred and not self._continues(host)
        if reset:
            self.clear()
            covered = 0
        added = host[covered:]
        new = to_engine(added)
        # The objects first covered stay the reference, also when the host passed new, equal
        # ones: an edit the host made to those in place later is then judged by the rule.
        self._next_host = None if covered else added
        self._added = added
        if deferred:
            as_given = _same_objects(new, added)
            # As given, the host's own list: the slice above is what commit takes, so messages
            # the host appends while the call runs are not taken as sent.
            messages = host if as_given else [*host[:covered], *new]
            return ResolvedHistory(messages, host_system, False, as_given, True)
        if not covered:
            return ResolvedHistory(new, host_system, reset, _same_objects(new, added))
        if len(self._sent) != self._committed:
            # A call that failed after resolving left its messages here: start from a copy of
            # what was committed, so nothing that counted this list mistakes it for the old one.
            self._sent = self._sent[: self._committed]
        # The view's own list grows in place, like a host appending to its history.
        self._sent.extend(new)
        system = self._sent_system if host_system == self._host_system else host_system
        return ResolvedHistory(messages=self._sent, system=system, reset=False)

    def confirm(self, view: MessageView) -> bool:
        """Whether the host's messages, resolved by the memo as ``view`` after
        :meth:`resolve` said ``unconfirmed``, continue what was covered. If not, the view is
        dropped (pending results stay): what :meth:`resolve` returned is the host's history as
        given, which is then what is sent."""
        if self._continues(view.items, view):
            return True
        covered, added = len(self._host), self._added
        self.clear()
        # Everything is new: the host's messages as resolved (its objects up to what was
        # covered, then those it added) are what commit takes.
        self._next_host, self._added = [*view.items[:covered], *added], []
        return False

    def commit(
        self,
        host_system: Any,
        sent: list[Message],
        sent_system: SystemPrompt | None,
        *,
        given: MessageView | None = None,
    ) -> None:
        """Remember that ``sent`` (with ``sent_system``) stood for the host's history of the
        last :meth:`resolve` (with ``host_system``) in this call.

        :param given: the memo's view of ``sent`` when ``sent`` is the host's own messages one
            for one with its system prompt (the view is then as given), else ``None``.
        """
        if self._next_host is None:
            self._host.extend(self._added)
            fresh, snapshots = self._added, self._snapshots
        else:
            self._host = fresh = self._next_host
            snapshots = []
        self._next_host, self._added = [], []
        self._host_system = host_system
        self._sent_system = sent_system
        if given is not None:
            self._given, self._snapshots = given.entries, given.snapshots
            self._sent, self._committed = [], 0
        else:
            self._given = None
            self._snapshots = [*snapshots, *map(snapshot, fresh)]
            self._sent = sent
            self._committed = len(sent)

    def clear(self) -> None:
        """Forget what was covered: the next call sends the host's history as given.

        Engine results not yet sent (:attr:`pending`) stay: the host's history may still hold
        the calls they answer (a host that edited an earlier message, or rebuilt its history
        differently, still appended the response that made them), and a call without its
        result is refused by the API. They are supplied wherever their call ids are, and
        forgotten after the next call that succeeds either way."""
        self._host = []
        self._snapshots = []
        self._host_system = None
        self._sent = []
        self._committed = 0
        self._sent_system = None
        self._given = None
        self._next_host, self._added = [], []


def _same_objects(converted: list[Message], host: Sequence[Any]) -> bool:
    """Whether ``converted`` holds the very objects of ``host`` (the dialect kept them as they
    are)."""
    return len(converted) == len(host) and all(map(is_, converted, host))
