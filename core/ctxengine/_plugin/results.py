"""Result records that engines return to the kernel."""

from __future__ import annotations

from typing import Literal

import attrs

from ctxengine._accounting.usage import Usage
from ctxengine._messages.conversation import Conversation, Message, SystemPrompt

CompressStatus = Literal["compacted", "noop", "aborted"]


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
        )
