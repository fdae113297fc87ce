"""The gateway entry point: compact an oversized stored session before the agent sees it.

The decision belongs to whichever plugin answers ``should_compress`` at the ``"gateway"`` stage
(the built-in hygiene plugin); the compaction to the selected engine, forced past cooldowns.
The returned history is the stored one unless a compaction really happened.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import attrs

from ctxengine.conversation import Message, SystemPrompt
from ctxengine.results import CompressResult
from ctxengine.tokens import rough_conversation_tokens

if TYPE_CHECKING:
    from ctxengine.session import Session

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


_locks_guard = threading.Lock()


def _gateway_lock(session: Session) -> threading.Lock:
    # One lock per session, created on first use; separate from the session's own lock so a
    # second worker can see "busy" instead of waiting and compacting the same history again.
    with _locks_guard:
        lock = session.ctx.state.get("_gateway_lock")
        if not isinstance(lock, type(threading.Lock())):
            lock = threading.Lock()
            session.ctx.state["_gateway_lock"] = lock
        return lock


def run_hygiene(
    session: Session,
    history: Sequence[Message],
    *,
    system: SystemPrompt | None = None,
    last_prompt_tokens: int | None = None,
) -> HygieneReport:
    """Compact ``history`` when the gateway policy says so; see :meth:`Kernel.hygiene`."""
    messages = list(history)
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

    lock = _gateway_lock(session)
    if not lock.acquire(blocking=False):
        return unchanged(
            "another worker is already compacting this session; history unchanged", fired=True
        )
    try:
        result = session.compress(messages, system, force=True, stage="gateway")
    finally:
        lock.release()
    if not result.compacted:
        verb = "aborted" if result.status == "aborted" else "skipped"
        return unchanged(
            f"compaction {verb}: {result.reason}; no messages were dropped",
            fired=True,
            result=result,
        )
    return HygieneReport(
        messages=result.messages,
        system=result.system,
        fired=True,
        compacted=True,
        tokens_before=tokens,
        tokens_after=result.tokens_after,
        token_source=source,
        notice=(
            f"compacted {result.messages_before} -> {result.messages_after} messages, "
            f"~{tokens:,} -> ~{result.tokens_after:,} tokens"
        ),
        result=result,
    )
