"""The gateway entry point: compact an oversized stored session before the agent sees it.

The decision belongs to whichever plugin answers ``should_compress`` at the ``"gateway"`` stage
(the built-in hygiene plugin); the compaction to the selected engine, forced past cooldowns.
The returned history is the stored one unless a compaction really happened.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Literal, Protocol

import attrs

from ctxengine._accounting.tokens import rough_conversation_tokens
from ctxengine._messages.conversation import Format, Message, Stage, SystemPrompt
from ctxengine._plugin.context import EngineContext
from ctxengine._plugin.results import CompressResult


class GatewaySession(Protocol):
    """What the safety net needs of a session (:class:`ctxengine.Session` has it)."""

    @property
    def gateway_lock(self) -> threading.Lock: ...

    @property
    def ctx(self) -> EngineContext: ...

    def prompt_tokens_if_measured(self) -> tuple[int, bool]: ...

    def should_compress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        stage: Stage = "agent",
        force: bool = False,
        prompt_tokens: int | None = None,
        measured: bool = True,
    ) -> bool: ...

    def compress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        force: bool = False,
        focus: str | None = None,
        stage: Stage = "agent",
        format: Format | None = None,
    ) -> CompressResult: ...


TokenSource = Literal["measured", "estimate"]


@attrs.frozen
class HygieneReport:
    """What the gateway safety net did to one stored session.

    :ivar messages: the history to hand to the agent (the input itself unless ``compacted``).
    :ivar token_source: ``"measured"`` (the previous turn's real prompt tokens) or
        ``"estimate"`` (a character-based estimate).
    :ivar notice: one line for logs or the chat, e.g. why nothing was dropped.
    """

    messages: list[Message]
    system: SystemPrompt | None
    fired: bool
    compacted: bool
    tokens_before: int
    tokens_after: int
    token_source: TokenSource
    notice: str
    result: CompressResult | None = None


def run_hygiene(
    session: GatewaySession,
    history: Sequence[Message],
    *,
    system: SystemPrompt | None = None,
    last_prompt_tokens: int | None = None,
) -> HygieneReport:
    """Compact ``history`` when the gateway policy says so; see :meth:`Session.hygiene`."""
    messages = list(history)
    # Taken before anything else, without waiting: a second worker on the same session must
    # not queue up behind the first one's compaction and then compact the same history again.
    if not session.gateway_lock.acquire(blocking=False):
        busy_tokens = (
            last_prompt_tokens
            if last_prompt_tokens is not None
            else rough_conversation_tokens(messages, system)
        )
        return HygieneReport(
            messages=messages,
            system=system,
            fired=False,
            compacted=False,
            tokens_before=busy_tokens,
            tokens_after=busy_tokens,
            token_source="measured" if last_prompt_tokens is not None else "estimate",
            notice="another worker is already compacting this session; history unchanged",
        )
    try:
        return _hygiene_locked(session, messages, system, last_prompt_tokens)
    finally:
        session.gateway_lock.release()


def _hygiene_locked(
    session: GatewaySession,
    messages: list[Message],
    system: SystemPrompt | None,
    last_prompt_tokens: int | None,
) -> HygieneReport:
    source: TokenSource
    if last_prompt_tokens is not None:
        tokens, source = last_prompt_tokens, "measured"
    else:
        known, measured = session.prompt_tokens_if_measured()
        if measured:
            tokens, source = known, "measured"
        else:
            tokens, source = rough_conversation_tokens(messages, system), "estimate"

    def unchanged(notice: str, fired: bool, result: CompressResult | None = None) -> HygieneReport:
        return HygieneReport(
            messages=messages,
            system=system,
            fired=fired,
            compacted=False,
            tokens_before=tokens,
            tokens_after=tokens,
            token_source=source,
            notice=notice,
            result=result,
        )

    if not session.should_compress(
        messages,
        system,
        stage="gateway",
        force=True,
        prompt_tokens=tokens,
        measured=source == "measured",
    ):
        return unchanged(f"no compaction needed ({tokens:,} tokens, {source})", fired=False)

    result = session.compress(messages, system, force=True, stage="gateway")
    if not result.compacted:
        verb = "aborted" if result.status == "aborted" else "skipped"
        return unchanged(
            f"compaction {verb}: {result.reason}; no messages were dropped",
            fired=True,
            result=result,
        )
    # Before and after in the same currency: rough when "before" was rough, the provider's
    # scale (calibrated local count) when it was measured.
    if source == "estimate":
        after = rough_conversation_tokens(result.messages, result.system)
    else:
        after = session.ctx.tokens.scale(result.tokens_after)
    return HygieneReport(
        messages=result.messages,
        system=result.system,
        fired=True,
        compacted=True,
        tokens_before=tokens,
        tokens_after=after,
        token_source=source,
        notice=(
            f"compacted {result.messages_before} -> {result.messages_after} messages, "
            f"~{tokens:,} -> ~{after:,} tokens"
        ),
        result=result,
    )
