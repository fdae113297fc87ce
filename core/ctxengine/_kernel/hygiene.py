"""The gateway entry point: compact an oversized stored session before the agent sees it.

The decision belongs to whichever plugin answers ``should_compress`` at the ``"gateway"`` stage
(the built-in hygiene plugin); the compaction to the selected engine, forced past cooldowns.
The returned history is the stored one unless a compaction really happened.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from ctxengine._accounting.estimate import TokenEstimate, rough_conversation_tokens
from ctxengine._messages.conversation import Format, Message, Stage, SystemPrompt
from ctxengine._plugin.context import EngineContext
from ctxengine._plugin.results import CompressResult


class GatewaySession(Protocol):
    """What the safety net needs of a session (:class:`ctxengine.Session` has it)."""

    @property
    def gateway_lock(self) -> threading.Lock: ...

    @property
    def ctx(self) -> EngineContext: ...

    def prompt(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TokenEstimate: ...

    def should_compress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        stage: Stage = "agent",
        force: bool = False,
        prompt_tokens: int | None = None,
        measured: bool = True,
        prompt: TokenEstimate | None = None,
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
    :ivar token_source: ``"measured"`` (the previous turn's real prompt tokens, plus an
        estimate of what was added since when the session prepared that turn) or ``"estimate"``
        (the session's calibrated estimate; the decision is the one exact counts give).
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
    if last_prompt_tokens is not None:
        prompt = TokenEstimate.known(last_prompt_tokens, measured=True)
    else:
        prompt = session.prompt(messages, system)
    source: TokenSource = "measured" if prompt.measured else "estimate"
    tokens = prompt.value

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

    if not session.should_compress(messages, system, stage="gateway", force=True, prompt=prompt):
        return unchanged(f"no compaction needed ({tokens:,} tokens, {source})", fired=False)

    result = session.compress(messages, system, force=True, stage="gateway")
    if not result.compacted:
        verb = "aborted" if result.status == "aborted" else "skipped"
        return unchanged(
            f"compaction {verb}: {result.reason}; no messages were dropped",
            fired=True,
            result=result,
        )
    # Before and after in the same currency: the session's estimate when "before" was one (the
    # compaction made the last usage stale, so this is the calibrated estimate of the result),
    # the engine's count on the provider's scale when "before" was measured.
    if source == "estimate":
        after = session.prompt(result.messages, result.system).value
    else:
        after = round(result.tokens_after * session.ctx.tokens.point_ratio)
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
