"""The compressor's ``compress``: the four phases (``docs/builtins/compressor.md``) glued together,
with the result record. Each phase lives in its own module; this one decides what happens in which
order."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from ctxengine import CompressResult, SummaryCall
from ctxengine.messages import visible_text
from ctxengine_compressor.assemble import (
    assemble,
    find_summary,
    first_summary_index,
    has_system_note,
    is_pure_summary_message,
    summary_indices,
    unwrap_summary,
    without_summary,
)
from ctxengine_compressor.boundaries import Boundaries, find_boundaries
from ctxengine_compressor.prune import prune
from ctxengine_compressor.settings import budgets
from ctxengine_compressor.settings import settings as compressor_settings
from ctxengine_compressor.state import REMEMBERED_SUMMARIES, get_state
from ctxengine_compressor.summary import (
    EXTRACTIVE,
    SummaryJob,
    SummaryOutcome,
    summarize,
    summary_budget,
)

if TYPE_CHECKING:
    from ctxengine import (
        Conversation,
        EngineContext,
        Format,
        Message,
        MessageSizes,
        Stage,
        SystemPrompt,
        TextSize,
        TokenEstimate,
    )
    from ctxengine_compressor.boundaries import RunSizes

ENGINE = "compressor"

PAYS_RATIO = Fraction(4, 5)
"""The summary (with the rest of the rewrite) must cost less than this fraction of the tokens it
replaces, or the compaction is a ``noop``: a summary about as long as the turns it replaces only
breaks the prompt cache."""


def _like_the_tail(
    middle: TextSize, tail: TextSize, tail_tokens: int, bounds: TokenEstimate
) -> int:
    """The middle's tokens estimated with the tail's exact tokens per rough token: the same
    conversation, so the best local guess, and a function of the content alone (the tail is
    always counted), within the middle's proven bounds."""
    per_rough = (tail_tokens - tail.fixed) / tail.rough if tail.rough else 1.0
    estimate = middle.fixed + round(middle.rough * per_rough)
    return min(bounds.high, max(bounds.low, estimate))


@attrs.frozen(eq=False)
class _Compaction:
    """One call of :func:`compress`: its input, when it started and the conversation's sizes."""

    ctx: EngineContext
    conversation: Conversation
    started: float
    sizes: MessageSizes

    @property
    def messages(self) -> Sequence[Message]:
        return self.conversation.messages

    @property
    def fmt(self) -> Format:
        return self.conversation.format

    def unchanged(
        self,
        status: str,
        reason: str,
        provider: str | None = None,
        tokens: int | None = None,
        calls: tuple[SummaryCall, ...] = (),
    ) -> CompressResult:
        """The result that leaves the conversation as it was (``noop`` or ``aborted``)."""
        system = self.conversation.system
        return CompressResult.unchanged(
            "aborted" if status == "aborted" else "noop",
            reason,
            self.conversation,
            engine=ENGINE,
            tokens=self.sizes.total(system).value if tokens is None else tokens,
            provider=provider,
            duration_s=time.perf_counter() - self.started,
            calls=calls,
        )


@attrs.frozen(eq=False)
class _Cut:
    """Where the conversation is cut and what the parts weigh.

    :ivar bounds: the boundaries (system, head, middle, tail).
    :ivar summaries: the indices of the messages holding a summary.
    :ivar previous: the last summary message's index and text, if any.
    :ivar inside: the middle's summary messages, by their index in the middle.
    :ivar previous_text: the summary to update: the one being compacted now (one kept verbatim in
        the head or the tail stays where it is and is not folded in twice).
    :ivar kept_tokens: the exact tokens of what stays (system prompt, head, tail).
    :ivar middle_estimate: the middle's estimated tokens (see :func:`_like_the_tail`).
    """

    bounds: Boundaries
    summaries: Sequence[int]
    previous: tuple[int, str] | None
    middle: Sequence[Message]
    inside: frozenset[int]
    previous_text: str | None
    middle_tokens: TokenEstimate
    kept_tokens: int
    middle_estimate: int

    @property
    def tokens_before(self) -> int:
        return self.kept_tokens + self.middle_estimate


@attrs.frozen(eq=False)
class _Assembled:
    """The rewritten conversation, its exact tokens and whether it pays (:data:`PAYS_RATIO`);
    ``middle_estimate`` is the middle's estimate corrected by what the check proved."""

    messages: list[Message]
    system: SystemPrompt | None
    added_note: bool
    tokens_after: int
    pays: bool
    middle_estimate: int


def compress(
    ctx: EngineContext,
    conversation: Conversation,
    stage: Stage,
    force: bool,
    focus: str | None,
    message_budget: int | None = None,
) -> CompressResult:
    """Compact ``conversation`` (see the package docstring); never mutates it.

    Tokens are counted exactly where a decision or the result needs them: the kept tail (its
    budget), the head, the result, and the summarized middle only when its estimate cannot tell
    whether the summary pays. The middle's size elsewhere (the summary budget, ``tokens_before``)
    is its estimate, so a compaction costs the same on a session that never counted the
    conversation before.

    ``message_budget`` (the gateway's hard limit) caps the messages of the result. A forced call
    at the agent stage (a host's explicit "compact now") passes an open summary-provider breaker;
    the gateway's forced calls do not.
    """
    run = _Compaction(
        ctx, conversation, time.perf_counter(), ctx.tokens.sizes(conversation.messages)
    )
    refusal = _gate(run, force)
    if refusal is not None:
        return run.unchanged("noop", refusal)
    cut = _plan_boundaries(run, message_budget)
    if isinstance(cut, str):
        return run.unchanged("noop", cut)
    pruned, _stats = prune(
        run.messages,
        run.fmt,
        cut.bounds.system_end,
        cut.bounds.head_end,
        kept_from=cut.bounds.tail_start,
    )
    outcome = summarize(_summary_job(run, cut, pruned, focus, force=force and stage == "agent"))
    if outcome.aborted or outcome.text is None:
        return _aborted(run, cut, outcome)
    assembled = _assemble(run, cut, pruned, outcome.text)
    if not assembled.pays:
        return _not_paying(run, cut, outcome, assembled)
    return _record(run, cut, outcome, assembled)


def _gate(run: _Compaction, force: bool) -> str | None:
    """Why nothing is compacted before anything is looked at, or ``None``."""
    if not run.ctx.config.context.compaction and not force:
        return "compression is disabled (context.compaction: false)"
    if not run.messages:
        return "the conversation is empty"
    return None


def _plan_boundaries(run: _Compaction, message_budget: int | None) -> _Cut | str:
    """The cut and the sizes of its parts, or why the conversation cannot be cut."""
    messages, sizes = run.messages, run.sizes
    # One scan for earlier summaries; without any (the usual case) the middle needs no
    # summary-aware preparation, and with some only those messages are looked at again.
    summaries = summary_indices(messages)
    previous = find_summary(messages, summaries) if summaries else None
    bounds = boundaries_for(run.ctx, messages, run.fmt, message_budget, sizes, summaries)
    if bounds.reason is not None:
        return bounds.reason
    head_end, tail_start = bounds.head_end, bounds.tail_start
    previous_text = None
    if previous is not None and head_end <= previous[0] < tail_start:
        previous_text = previous[1]
    middle_tokens = sizes.run(head_end, tail_start)
    tail_tokens = sizes.run(tail_start).exact()  # counted by the tail budget already
    system_tokens = run.ctx.tokens.count_system(run.conversation.system)
    return _Cut(
        bounds=bounds,
        summaries=summaries,
        previous=previous,
        middle=messages[head_end:tail_start],
        inside=frozenset(i - head_end for i in summaries if head_end <= i < tail_start),
        previous_text=previous_text,
        middle_tokens=middle_tokens,
        kept_tokens=system_tokens + sizes.run(0, head_end).exact() + tail_tokens,
        middle_estimate=_like_the_tail(
            sizes.size(head_end, tail_start), sizes.size(tail_start), tail_tokens, middle_tokens
        ),
    )


def _summary_job(
    run: _Compaction, cut: _Cut, pruned: Sequence[Message], focus: str | None, *, force: bool
) -> SummaryJob:
    """What the summary of the middle is asked to do."""
    state = get_state(run.ctx)
    messages, bounds, inside = run.messages, cut.bounds, cut.inside
    # What the old summary carried comes in through its ledger (kept by this engine, or read
    # back from its text), not by mining the summary message as if it were a turn.
    previous_ledger = None
    if cut.previous_text is not None and cut.previous_text == state.previous_summary:
        previous_ledger = state.previous_ledger
    ledger_source = cut.middle
    if inside:
        ledger_source = [
            without_summary(m) if i in inside else m
            for i, m in enumerate(cut.middle)
            if i not in inside or not is_pure_summary_message(m)
        ]
    return SummaryJob(
        ctx=run.ctx,
        middle=cut.middle,
        fmt=run.fmt,
        previous=cut.previous_text,
        focus=focus,
        budget=summary_budget(cut.middle_estimate, budgets(run.ctx).max_summary_tokens),
        ledger_source=ledger_source,
        previous_ledger=previous_ledger,
        earlier=_older_summaries(cut.middle, sorted(inside), cut.previous_text),
        kept=[*pruned[: bounds.head_end], *messages[bounds.tail_start :]],
        max_calls=compressor_settings(run.ctx).summary_max_calls,
        force=force,
        conversation=messages,
        tail_start=bounds.tail_start,
        clean=state.redacted_summaries,
    )


def _aborted(run: _Compaction, cut: _Cut, outcome: SummaryOutcome) -> CompressResult:
    """The summary failed and the compaction aborts: automatic compaction pauses."""
    guard = get_state(run.ctx).guard
    reason = (
        f"{outcome.failure}; compaction aborted, messages unchanged, automatic compaction "
        f"paused for {guard.cooldown_s:g} s"
    )
    guard.start_cooldown(run.ctx.clock(), reason)
    return run.unchanged("aborted", reason, outcome.provider, cut.tokens_before, outcome.calls)


def _assemble(run: _Compaction, cut: _Cut, pruned: Sequence[Message], summary: str) -> _Assembled:
    """The rewritten conversation with ``summary`` in place of the middle, and whether it pays."""
    state = get_state(run.ctx)
    system = run.conversation.system
    add_note = not state.system_note_added and cut.previous is None
    add_note = add_note and not has_system_note(run.messages, run.fmt, system)
    new_messages, new_system = assemble(
        run.messages,
        pruned,
        run.fmt,
        system,
        system_end=cut.bounds.system_end,
        head_end=cut.bounds.head_end,
        tail_start=cut.bounds.tail_start,
        summary=summary,
        add_note=add_note,
    )
    tokens_after = run.ctx.tokens.count(new_messages, new_system)
    # It pays when kept + middle - after >= (1 - PAYS_RATIO) x middle, that is when the middle
    # has at least (after - kept) / PAYS_RATIO tokens: counted exactly only if that is close.
    need = math.ceil((tokens_after - cut.kept_tokens) / PAYS_RATIO)
    pays = cut.middle_tokens.reaches(need)
    # What the answer proved about the middle corrects its estimate (so a compaction never
    # reports fewer tokens before than after).
    estimate = max(cut.middle_estimate, need) if pays else min(cut.middle_estimate, need - 1)
    return _Assembled(new_messages, new_system, add_note, tokens_after, pays, estimate)


def _not_paying(
    run: _Compaction, cut: _Cut, outcome: SummaryOutcome, assembled: _Assembled
) -> CompressResult:
    """The summary is not clearly smaller than what it replaces: a ``noop`` that waits for the
    middle to grow before spending another summary call on it (not anti-thrash: not a
    compaction)."""
    tokens_before = cut.kept_tokens + assembled.middle_estimate
    # should_compress compares this with the prompt on the provider's scale (measured usage, or
    # local counts times the learned ratio), so the local figure is converted.
    local_mark = tokens_before + max(1, budgets(run.ctx).tail_token_budget)
    get_state(run.ctx).retry_above_tokens = round(local_mark * run.ctx.tokens.point_ratio)
    return run.unchanged(
        "noop",
        f"compaction would not pay: the summary is not clearly smaller than the "
        f"{len(cut.middle)} messages (~{assembled.middle_estimate:,} tokens) it would replace "
        f"(~{tokens_before:,} -> {assembled.tokens_after:,} tokens)",
        outcome.provider,
        tokens_before,
        outcome.calls,
    )


def _record(
    run: _Compaction, cut: _Cut, outcome: SummaryOutcome, assembled: _Assembled
) -> CompressResult:
    """The compaction's record in the session state, and its result."""
    ctx, state = run.ctx, get_state(run.ctx)
    tokens_before = cut.kept_tokens + assembled.middle_estimate
    tokens_after = assembled.tokens_after
    state.compactions += 1
    state.retry_above_tokens = None
    state.previous_summary = outcome.text
    state.previous_ledger = outcome.ledger
    if outcome.redacted and outcome.text is not None:
        remembered = (*state.redacted_summaries, outcome.text)
        state.redacted_summaries = remembered[-REMEMBERED_SUMMARIES:]
    state.system_note_added = state.system_note_added or assembled.added_note
    state.last_tokens_before = tokens_before
    # The real saving is measured against real prompt tokens: the last measured prompt when it
    # describes this conversation, else the calibrated estimate of it.
    baseline = (
        state.last_prompt_tokens
        if state.usage_fresh and state.last_prompt_tokens
        else round(tokens_before * ctx.tokens.point_ratio)
    )
    state.record_saving(1.0 - tokens_after / tokens_before, baseline=baseline)
    state.usage_fresh = False
    return CompressResult(
        status="compacted",
        reason=_compacted_reason(run, cut, outcome, tokens_before, tokens_after),
        conversation=run.conversation.with_messages(assembled.messages, assembled.system),
        engine=ENGINE,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        messages_before=len(run.messages),
        messages_after=len(assembled.messages),
        summary=outcome.text,
        provider=outcome.provider,
        fallback_used=outcome.fallback_used,
        duration_s=time.perf_counter() - run.started,
        calls=outcome.calls,
        unsummarized=outcome.unsummarized,
    )


def _compacted_reason(
    run: _Compaction, cut: _Cut, outcome: SummaryOutcome, tokens_before: int, tokens_after: int
) -> str:
    """The result's reason: what replaced how many messages, by whom, and the token change."""
    how = f"summary by {outcome.provider}"
    if outcome.cache_aware:
        how += " (cache-aware: the agent's cached request)"
    if outcome.fallback_used:
        how = f"local digest after {outcome.failure}"
    elif outcome.provider == EXTRACTIVE:
        how = "local digest (extractive provider)"
    reason = (
        f"compacted {len(cut.middle)} middle messages into one summary ({how}); "
        f"~{tokens_before:,} -> {tokens_after:,} tokens"
    )
    if len(outcome.calls) > 1:
        reason += f"; {len(outcome.calls)} summary calls (parts of the middle, then a merge)"
    if outcome.unsummarized:
        max_calls = compressor_settings(run.ctx).summary_max_calls
        reason += (
            f"; the {outcome.unsummarized} oldest middle messages did not fit the summary "
            f"model's calls (compression.summary_max_calls: {max_calls}) and "
            "were not summarised: the ledger carries their files, commands and errors"
        )
    return reason


def boundaries_for(
    ctx: EngineContext,
    messages: Sequence[Message],
    fmt: Format,
    message_budget: int | None = None,
    sizes: RunSizes | None = None,
    summaries: Sequence[int] | None = None,
) -> Boundaries:
    """Where :func:`compress` would cut ``messages`` with this session's settings (its result
    depends on the settings only through these boundaries and the window); ``sizes`` are
    ``ctx.tokens.sizes(messages)`` and ``summaries`` :func:`.assemble.summary_indices` of
    ``messages`` when the caller has them."""
    settings = compressor_settings(ctx)
    if summaries is None:
        summaries = summary_indices(messages)
    has_summary = bool(summaries) and find_summary(messages, summaries) is not None
    return find_boundaries(
        messages,
        fmt,
        protect_first_n=settings.protect_first_n,
        protect_last_n=settings.protect_last_n,
        tail_token_budget=budgets(ctx).tail_token_budget,
        sizes=sizes if sizes is not None else ctx.tokens.sizes(messages),
        is_summary=is_pure_summary_message,
        summary_at=first_summary_index(messages, summaries) if has_summary else None,
        max_messages=message_budget,
    )


def _older_summaries(
    middle: Sequence[Message], inside: Sequence[int], previous: str | None
) -> list[str]:
    """The summaries inside ``middle`` (at the indices ``inside``, in order) other than
    ``previous`` (the one being updated), oldest first: a summary kept in an earlier head comes
    back into a later middle."""
    found = []
    for index in inside:
        text = unwrap_summary(visible_text(middle[index]))
        if text is not None and text != previous:
            found.append(text)
    return found
