"""The wrapper's view of a history the host owns and re-sends on every call.

A host using a wrapped client keeps appending to its own message list and passes all of it on
each call. What the wrapper sends can differ from it: after a compaction, the compacted
conversation stands in for everything before; after the wrapper answered an engine tool, the
assistant's tool call and its result sit between the host's messages. :class:`HistoryView`
remembers, after each call, which host messages were covered and what was sent for them, and
on the next call sends that, followed by whatever the host added since.

Matching is by the host's own message objects: the covered part must be exactly what the host
passes again (the same objects, or equal ones). If it is not (the host edited, truncated or
replaced its history), the view is dropped and the host's history is sent as it is; the call's
record says so. The host's messages are never copied or changed here, only referenced; the list
the view sends is its own and grows in place from call to call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ctxengine._messages.conversation import Message, SystemPrompt


@attrs.frozen
class ResolvedHistory:
    """What to send for one call, before any compaction.

    :ivar messages: the messages to send, in the form the kernel reads.
    :ivar system: the system prompt to send (Anthropic), else ``None``.
    :ivar reset: the host's history did not continue the covered one; the view was dropped.
    """

    messages: list[Message]
    system: SystemPrompt | None
    reset: bool


class HistoryView:
    """Which of the host's messages the wrapper covered, and what it sent for them."""

    def __init__(self) -> None:
        self._host: list[Any] = []
        self._host_system: Any = None
        self._sent: list[Message] = []
        self._committed = 0
        self._sent_system: SystemPrompt | None = None
        # What commit takes from the last resolve: the host's history (None: the covered list
        # plus _added) and the messages it added.
        self._next_host: list[Any] | None = []
        self._added: list[Any] = []
        self.pending: dict[str, tuple[str, str]] = {}
        """Engine tool results not yet sent: call id -> (tool name, result text)."""

    @property
    def covered(self) -> int:
        """How many of the host's messages the view stands for."""
        return len(self._host)

    @property
    def sent(self) -> list[Message]:
        """What was last sent for the covered host messages (do not mutate)."""
        return self._sent

    def resolve(
        self,
        host: Sequence[Any],
        host_system: Any,
        to_engine: Callable[[Sequence[Any]], list[Message]],
    ) -> ResolvedHistory:
        """What to send for ``host`` (the host's whole history for this call).

        ``to_engine`` converts host messages the view has not seen yet into the kernel's form.
        What :meth:`commit` will remember of ``host`` is taken here, so messages the host adds
        to its list while the call runs (during a stream, say) are not taken as sent.
        """
        covered = len(self._host)
        reset = False
        prefix: list[Any] = []
        if covered:
            # A list comparison runs in C, by identity first: O(covered) pointer checks for a
            # host that re-sends the same message objects.
            if len(host) == covered and isinstance(host, list):
                prefix = host
            elif len(host) > covered:
                prefix = host[:covered] if isinstance(host, list) else list(host[:covered])
            if len(host) < covered or prefix != self._host:
                reset = True
                self.clear()
                covered = 0
        added = host[covered:] if isinstance(host, list) else list(host[covered:])
        if not covered:
            self._next_host = added
        else:
            # The covered part is what the host passed (checked above): what it added is
            # appended to the covered list. The objects first covered stay the reference, also
            # when the host passed new, equal ones: had the view adopted those, an edit the
            # host made to them in place later would compare equal (the same object) and be
            # lost; against the old objects it is a difference, and the history is sent anew.
            self._next_host = None
        self._added = added
        new = to_engine(added)
        if not covered:
            return ResolvedHistory(messages=new, system=host_system, reset=reset)
        if len(self._sent) != self._committed:
            # A call that failed after resolving left its messages here: start from a copy of
            # what was committed, so nothing that counted this list mistakes it for the old one.
            self._sent = self._sent[: self._committed]
        # The view's own list grows in place, like a host appending to its history: the token
        # counter and the cache strategy then only look at the new messages.
        self._sent.extend(new)
        system = self._sent_system if host_system == self._host_system else host_system
        return ResolvedHistory(messages=self._sent, system=system, reset=False)

    def commit(
        self, host_system: Any, sent: list[Message], sent_system: SystemPrompt | None
    ) -> None:
        """Remember that ``sent`` (with ``sent_system``) stood for the host's history of the
        last :meth:`resolve` (with ``host_system``) in this call."""
        if self._next_host is None:
            self._host.extend(self._added)
        else:
            self._host = self._next_host
        self._next_host, self._added = [], []
        self._host_system = host_system
        self._sent = sent
        self._committed = len(sent)
        self._sent_system = sent_system

    def clear(self) -> None:
        """Forget everything: the next call sends the host's history as given."""
        self._host = []
        self._host_system = None
        self._sent = []
        self._committed = 0
        self._sent_system = None
        self._next_host, self._added = [], []
        self.pending = {}
