"""Gateway hygiene, the safety net: compact an oversized stored session before the agent sees it.

The decision belongs to whichever plugin answers ``should_compress`` at the ``"gateway"`` stage
(the built-in hygiene plugin), with its reason and, for a hard message limit, a message budget;
the compaction to the selected engine, forced past cooldowns and told the budget. The returned
history is the stored one unless a compaction really happened. A budget the result does not meet,
a malformed history and an engine that could not compact are reported in ``error``: the gateway
knows the history is still over its limit and why.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import attrs

from ctxengine._accounting.estimate import TokenEstimate, rough_conversation_tokens
from ctxengine._messages.conversation import Message, SystemPrompt
from ctxengine._messages.errors import MessageFormatError
from ctxengine._plugin.results import CompressResult, GatewayVerdict

if TYPE_CHECKING:
    from ctxengine._kernel.session import Session


TokenSource = Literal["measured", "estimate"]


@attrs.frozen
class HygieneReport:
    """What gateway hygiene (the safety net) did to one stored session.

    :ivar messages: the history to hand to the agent (the input itself unless ``compacted``).
    :ivar token_source: ``"measured"`` (the previous turn's real prompt tokens, plus an
        estimate of what was added since when the session prepared that turn) or ``"estimate"``
        (the session's calibrated estimate; the decision is the one exact counts give).
    :ivar notice: one line for logs or the chat, e.g. why nothing was dropped.
    :ivar error: set when the safety net could not do what its policy asked: the history is
        malformed, the engine could not compact, or the result is still over the message
        budget (the notice then starts with ``ERROR:``).
    :ivar message_budget: the most messages the policy asked the compaction to leave.
    :ivar reason: why the policy fired or not (e.g. "6,000 messages >= ... 5,000").
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
    error: str | None = None
    message_budget: int | None = None
    reason: str = ""


def run_hygiene(
    session: Session,
    history: Sequence[Message],
    *,
    system: SystemPrompt | None = None,
    last_prompt_tokens: int | None = None,
) -> HygieneReport:
    """Compact ``history`` when the hygiene policy (the ``"gateway"`` stage's verdict) says so;
    see :meth:`Session.hygiene`."""
    messages = list(history)
    # Taken before anything else, without waiting: a second worker on the same session (in
    # this process or, on a shared coordination backend, in any other) must not queue up
    # behind the first one's compaction and then compact the same history again.
    if not session.gateway_lock.acquire(blocking=False):
        tokens = last_prompt_tokens
        if tokens is None:
            tokens = rough_conversation_tokens(messages, system)
        return _report(
            TokenEstimate.known(tokens, measured=last_prompt_tokens is not None),
            GatewayVerdict(False),
            "another worker is already compacting this session; history unchanged",
            fired=False,
            messages=messages,
            system=system,
        )
    try:
        # One call for the session's state: one load and one save on a shared backend.
        with session.call_lock:
            return _hygiene_locked(session, messages, system, last_prompt_tokens)
    finally:
        session.gateway_lock.release()


def _hygiene_locked(
    session: Session,
    messages: list[Message],
    system: SystemPrompt | None,
    last_prompt_tokens: int | None,
) -> HygieneReport:
    if last_prompt_tokens is not None:
        prompt = TokenEstimate.known(last_prompt_tokens, measured=True)
    else:
        prompt = session.prompt(messages, system)
    verdict = session.gateway_verdict(messages, system, prompt=prompt)
    unchanged = functools.partial(_report, prompt, verdict, messages=messages, system=system)
    if not verdict.compact:
        return unchanged(
            f"no compaction needed ({prompt.value:,} tokens, {_source(prompt)})", fired=False
        )
    why = f" ({verdict.reason})" if verdict.reason else ""
    budget = verdict.message_budget
    try:
        result = session.compress(
            messages, system, force=True, stage="gateway", message_budget=budget
        )
    except MessageFormatError as exc:
        problems = "; ".join(str(p) for p in exc.problems[:3]) or str(exc)
        return unchanged(
            "",
            fired=True,
            error=f"compaction needed{why} but the stored history is malformed, so nothing was "
            f"compacted and no messages were dropped: {problems}",
        )
    over_budget = budget is not None and len(result.messages) > budget
    if not result.compacted:
        verb = "aborted" if result.status == "aborted" else "skipped"
        error = None
        if over_budget:
            error = (
                f"the history holds {len(messages):,} messages, over the budget of "
                f"{budget:,}{why}, and the engine {result.engine!r} did not compact it: "
                f"{result.reason}; no messages were dropped"
            )
        notice = f"compaction {verb}: {result.reason}; no messages were dropped"
        return unchanged(notice, fired=True, result=result, error=error)
    error = None
    if over_budget:
        error = (
            f"the engine {result.engine!r} compacted {result.messages_before:,} -> "
            f"{result.messages_after:,} messages, still over the budget of {budget:,}{why}"
        )
    return _compacted(session, prompt, verdict, result, error)


def _source(prompt: TokenEstimate) -> TokenSource:
    return "measured" if prompt.measured else "estimate"


def _report(
    prompt: TokenEstimate,
    verdict: GatewayVerdict,
    notice: str,
    *,
    fired: bool,
    messages: list[Message],
    system: SystemPrompt | None,
    tokens_after: int | None = None,
    result: CompressResult | None = None,
    error: str | None = None,
) -> HygieneReport:
    """The report of one run: ``tokens_after`` is given when the engine compacted ``messages``,
    else they are the stored history handed back as it was."""
    return HygieneReport(
        messages=messages,
        system=system,
        fired=fired,
        compacted=tokens_after is not None,
        tokens_before=prompt.value,
        tokens_after=prompt.value if tokens_after is None else tokens_after,
        token_source=_source(prompt),
        notice=f"ERROR: {error}" if error else notice,
        result=result,
        error=error,
        message_budget=verdict.message_budget,
        reason=verdict.reason,
    )


def _compacted(
    session: Session,
    prompt: TokenEstimate,
    verdict: GatewayVerdict,
    result: CompressResult,
    error: str | None,
) -> HygieneReport:
    """The report of a run whose engine compacted the history."""
    # Before and after in the same currency: the session's estimate when "before" was one (the
    # compaction made the last usage stale, so this is the calibrated estimate of the result),
    # the engine's count on the provider's scale when "before" was measured.
    if prompt.measured:
        after = round(result.tokens_after * session.ctx.tokens.point_ratio)
    else:
        after = session.prompt(result.messages, result.system).value
    notice = (
        f"compacted {result.messages_before} -> {result.messages_after} messages, "
        f"~{prompt.value:,} -> ~{after:,} tokens"
    )
    return _report(
        prompt,
        verdict,
        notice,
        fired=True,
        messages=result.messages,
        system=result.system,
        tokens_after=after,
        result=result,
        error=error,
    )
