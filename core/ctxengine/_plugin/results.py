"""Result records that engines return to the kernel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs

from ctxengine._accounting.usage import Usage
from ctxengine._messages.conversation import Conversation, Message, SystemPrompt

if TYPE_CHECKING:
    from ctxengine._summarize.errors import SummaryAttempt

CompressStatus = Literal["compacted", "noop", "aborted"]


@attrs.frozen
class SummaryCall:
    """One summary an engine asked a model for during a compaction, with every request the
    failure policy made for it.

    :ivar purpose: what the call was for, e.g. ``"summary"``, ``"chunk 2 of 5"``, ``"merge"``.
    :ivar messages: how many messages of the conversation this call's prompt showed the model
        (0 for a call that merged earlier summaries).
    :ivar provider: the provider that answered, or ``None`` when the call failed.
    :ivar attempts: each request (or skipped request, for an open breaker) in order.
    """

    purpose: str
    messages: int
    provider: str | None
    attempts: tuple[SummaryAttempt, ...] = ()


@attrs.frozen
class GatewayVerdict:
    """A gateway-stage answer of ``should_compress`` that says why, and how far to compact.

    Truthy exactly when ``compact`` is, so it works wherever a ``bool`` answer does.

    :ivar reason: one line for the gateway's report ("6,000 messages >= the hard limit of 5,000").
    :ivar message_budget: the most messages the compaction may leave; the kernel passes it to
        the engine's ``compress`` and reports an error when the result holds more.
    """

    compact: bool
    reason: str = ""
    message_budget: int | None = None

    def __bool__(self) -> bool:
        return self.compact


@attrs.frozen
class CompressResult:
    """What one ``compress`` call did.

    Contract every engine keeps:

    - ``status == "compacted"``: ``conversation`` is the new, shorter conversation;
    - ``status == "noop"`` or ``"aborted"``: ``conversation`` is the input, unchanged, and
      ``reason`` says why nothing happened (an aborted compaction also starts a cooldown);
    - the caller's message list is never mutated.

    :ivar fallback: set when the engine could not compact its own way and handed the work to
        another (the native engine's local fallback): a short stable id of why (for example
        ``"server-error"``); ``reason`` then says both what failed and what the fallback did.
    :ivar usage: what the compaction itself cost when it called a model and the provider
        reported it (e.g. a server-side compaction's ``usage.iterations``), else ``None``.
    """

    status: CompressStatus
    reason: str
    conversation: Conversation
    engine: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    summary: str | None = None
    provider: str | None = None
    fallback_used: bool = False
    duration_s: float = 0.0
    fallback: str | None = None
    usage: Usage | None = None
    calls: tuple[SummaryCall, ...] = ()
    """Every summary call of this compaction (none for a local digest)."""
    unsummarized: int = 0
    """Messages of the compacted span that no summary call saw (its call budget ran out); their
    files, commands and errors are still carried by the engine's ledger when it has one."""

    @property
    def messages(self) -> list[Message]:
        """The resulting message list (the input itself when nothing was compacted)."""
        return self.conversation.messages

    @property
    def system(self) -> SystemPrompt | None:
        """The resulting Anthropic system prompt (``None`` for OpenAI-format conversations)."""
        return self.conversation.system

    @property
    def messages_dropped(self) -> int:
        """How many messages the compaction removed from the prompt."""
        return max(0, self.messages_before - self.messages_after)

    @property
    def compacted(self) -> bool:
        return self.status == "compacted"

    @classmethod
    def unchanged(
        cls,
        status: Literal["noop", "aborted"],
        reason: str,
        conversation: Conversation,
        *,
        engine: str,
        tokens: int,
        provider: str | None = None,
        duration_s: float = 0.0,
        calls: tuple[SummaryCall, ...] = (),
    ) -> CompressResult:
        """A ``noop`` or ``aborted`` record that hands back ``conversation`` untouched."""
        count = len(conversation.messages)
        return cls(
            status=status,
            reason=reason,
            conversation=conversation,
            engine=engine,
            tokens_before=tokens,
            tokens_after=tokens,
            messages_before=count,
            messages_after=count,
            provider=provider,
            duration_s=duration_s,
            calls=calls,
        )
