"""What one wrapped SDK call did: :class:`CallRecord` and its :class:`RoundRecord` entries."""

from __future__ import annotations

import attrs

from ctxengine._accounting.usage import Usage
from ctxengine._plugin.results import CompressResult


@attrs.frozen
class RoundRecord:
    """One request the wrapper sent to the provider during a call.

    A call has more than one round when the model used an engine tool and the wrapper answered
    it and asked again.

    :ivar usage: the provider's usage for this request, normalised (from the final event for a
        stream).
    :ivar breakpoints: ``cache_control`` markers the request carried on its tools, system prompt
        and messages, as the cache strategy reported them (see :class:`ctxengine.MarkedRequest`;
        0 for a request no strategy marked, a Responses request among them).
    :ivar messages: messages (or Responses input items) the request carried.
    :ivar tools_answered: names of the engine tools the wrapper ran after this response, in call
        order (empty for the last round).
    """

    usage: Usage
    breakpoints: int
    messages: int
    tools_answered: tuple[str, ...] = ()


@attrs.frozen
class CallRecord:
    """One wrapped call, from the host's request to the value returned to it.

    :ivar api: ``"anthropic.messages"``, ``"openai.chat"`` or ``"openai.responses"``.
    :ivar stream: whether the host asked for a stream.
    :ivar compactions: every compaction attempted during the call (any status), in order.
    :ivar rounds: the requests sent, in order; the last one produced the returned value.
    :ivar tools_added: engine tools added to the request's ``tools``.
    :ivar handed_back: engine tool calls left in the returned response for the host (mode
        ``"return"``, calls mixed with the host's own tools, or the round limit reached), as
        ``(tool name, call id)``. In mode ``"answer"`` the wrapper supplies their results in the
        next request.
    :ivar results_supplied: engine tool results the wrapper put into this request for calls a
        previous response handed back.
    :ivar history_reset: the host's history no longer started with what the previous call sent,
        so the wrapper's compacted view of it was dropped and the history sent as given.
    :ivar notes: anything else the wrapper did or could not do, in words.
    """

    api: str
    stream: bool
    compactions: tuple[CompressResult, ...] = ()
    rounds: tuple[RoundRecord, ...] = ()
    tools_added: tuple[str, ...] = ()
    handed_back: tuple[tuple[str, str], ...] = ()
    results_supplied: int = 0
    history_reset: bool = False
    notes: tuple[str, ...] = ()

    @property
    def compacted(self) -> bool:
        """Whether a compaction really happened during the call."""
        return any(result.compacted for result in self.compactions)

    @property
    def usage(self) -> Usage:
        """The usage of every round, added up."""
        return sum((round_.usage for round_ in self.rounds), Usage())

    @property
    def tools_answered(self) -> tuple[str, ...]:
        """Every engine tool the wrapper ran during the call, in order."""
        return tuple(name for round_ in self.rounds for name in round_.tools_answered)
