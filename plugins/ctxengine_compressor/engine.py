"""The compressor's ``compress``: the four phases (``docs/builtins/compressor.md``) glued together,
with the result record. Each phase lives in its own module; this one decides what happens in which
order."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from ctxengine import COOLDOWN_SECONDS, CompressResult, SummaryCall
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
from ctxengine_compressor.summary import summarize, summary_budget

if TYPE_CHECKING:
    from ctxengine import (
        Conversation,
        EngineContext,
        Format,
        Message,
        Stage,
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
    budget), the head, the result, and the summarised middle only when its estimate cannot tell
    whether the summary pays. The middle's size elsewhere (the summary budget, ``tokens_before``)
    is its estimate, so a compaction costs the same on a session that never counted the
    conversation before.

    ``message_budget`` (the gateway's hard limit) caps the messages of the result. A forced call
    at the agent stage (a host's explicit "compact now") passes an open summary-provider breaker;
    the gateway's forced calls do not.
    """
    started = time.perf_counter()
    state = get_state(ctx)
    messages = conversation.messages
    fmt = conversation.format
    system = conversation.system
    settings = compressor_settings(ctx)
    sizes = ctx.tokens.sizes(messages)

    def unchanged(
        status: str,
        reason: str,
        provider: str | None = None,
        tokens: int | None = None,
        calls: tuple[SummaryCall, ...] = (),
    ) -> CompressResult:
        return CompressResult.unchanged(
            "aborted" if status == "aborted" else "noop",
            reason,
            conversation,
            engine=ENGINE,
            tokens=sizes.total(system).value if tokens is None else tokens,
            provider=provider,
            duration_s=time.perf_counter() - started,
            calls=calls,
        )

    if not ctx.config.compression.enabled and not force:
        return unchanged("noop", "compression is disabled (compression.enabled: false)")
    if not messages:
        return unchanged("noop", "the conversation is empty")

    limits = budgets(ctx)
    # One scan for earlier summaries; without any (the usual case) the middle needs no
    # summary-aware preparation below, and with some only those messages are looked at again.
    summaries = summary_indices(messages)
    previous = find_summary(messages, summaries) if summaries else None
    bounds = boundaries_for(ctx, messages, fmt, message_budget, sizes, summaries)
    if bounds.reason is not None:
        return unchanged("noop", bounds.reason)
    middle = messages[bounds.head_end : bounds.tail_start]
    # The middle's summary messages, by their index in ``middle``.
    inside = {i - bounds.head_end for i in summaries if bounds.head_end <= i < bounds.tail_start}
    # The summary to update is the one being compacted now; one kept verbatim (head or tail)
    # stays where it is and is not folded in twice.
    previous_text = None
    if previous is not None and bounds.head_end <= previous[0] < bounds.tail_start:
        previous_text = previous[1]
    middle_tokens = sizes.run(bounds.head_end, bounds.tail_start)
    tail_tokens = sizes.run(bounds.tail_start).exact()  # counted by the tail budget already
    kept_tokens = (
        ctx.tokens.count_system(system) + sizes.run(0, bounds.head_end).exact() + tail_tokens
    )
    middle_estimate = _like_the_tail(
        sizes.size(bounds.head_end, bounds.tail_start),
        sizes.size(bounds.tail_start),
        tail_tokens,
        middle_tokens,
    )
    tokens_before = kept_tokens + middle_estimate
    budget = summary_budget(middle_estimate, limits.max_summary_tokens)

    pruned, _stats = prune(
        messages, fmt, bounds.system_end, bounds.head_end, kept_from=bounds.tail_start
    )
    # What the old summary carried comes in through its ledger (kept by this engine, or read
    # back from its text), not by mining the summary message as if it were a turn.
    previous_ledger = None
    if previous_text is not None and previous_text == state.previous_summary:
        previous_ledger = state.previous_ledger
    outcome = summarize(
        ctx,
        middle,
        fmt,
        previous=previous_text,
        focus=focus,
        budget=budget,
        ledger_source=(
            [
                without_summary(m) if i in inside else m
                for i, m in enumerate(middle)
                if i not in inside or not is_pure_summary_message(m)
            ]
            if inside
            else middle
        ),
        previous_ledger=previous_ledger,
        earlier=_older_summaries(middle, sorted(inside), previous_text),
        kept=[*pruned[: bounds.head_end], *messages[bounds.tail_start :]],
        max_calls=settings.summary_max_calls,
        force=force and stage == "agent",
        conversation=messages,
        tail_start=bounds.tail_start,
        clean=state.redacted_summaries,
    )
    if outcome.aborted or outcome.text is None:
        reason = (
            f"{outcome.failure}; compaction aborted, messages unchanged, automatic compaction "
            f"paused for {COOLDOWN_SECONDS:g} s"
        )
        state.guard.start_cooldown(ctx.clock(), reason)
        return unchanged("aborted", reason, outcome.provider, tokens_before, outcome.calls)

    add_note = not state.system_note_added and previous is None
    add_note = add_note and not has_system_note(messages, fmt, system)
    new_messages, new_system = assemble(
        messages,
        pruned,
        fmt,
        system,
        system_end=bounds.system_end,
        head_end=bounds.head_end,
        tail_start=bounds.tail_start,
        summary=outcome.text,
        add_note=add_note,
    )
    tokens_after = ctx.tokens.count(new_messages, new_system)
    # It pays when kept + middle - after >= (1 - PAYS_RATIO) x middle, that is when the middle
    # has at least (after - kept) / PAYS_RATIO tokens: counted exactly only if that is close.
    need = math.ceil((tokens_after - kept_tokens) / PAYS_RATIO)
    pays = middle_tokens.reaches(need)
    # What the answer proved about the middle corrects its estimate (so a compaction never
    # reports fewer tokens before than after).
    middle_estimate = max(middle_estimate, need) if pays else min(middle_estimate, need - 1)
    tokens_before = kept_tokens + middle_estimate
    if not pays:
        # Not a compaction, so not anti-thrash; but wait for the middle to grow before spending
        # another summary call on it.
        # should_compress compares this with the prompt on the provider's scale (measured
        # usage, or local counts times the learned ratio), so the local figure is converted.
        local_mark = tokens_before + max(1, limits.tail_token_budget)
        state.retry_above_tokens = round(local_mark * ctx.tokens.point_ratio)
        return unchanged(
            "noop",
            f"compaction would not pay: the summary is not clearly smaller than the "
            f"{len(middle)} messages (~{middle_estimate:,} tokens) it would replace "
            f"(~{tokens_before:,} -> {tokens_after:,} tokens)",
            outcome.provider,
            tokens_before,
            outcome.calls,
        )

    state.compactions += 1
    state.retry_above_tokens = None
    state.previous_summary = outcome.text
    state.previous_ledger = outcome.ledger
    if outcome.redacted:
        remembered = (*state.redacted_summaries, outcome.text)
        state.redacted_summaries = remembered[-REMEMBERED_SUMMARIES:]
    state.system_note_added = state.system_note_added or add_note
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

    how = f"summary by {outcome.provider}"
    if outcome.cache_aware:
        how += " (cache-aware: the agent's cached request)"
    if outcome.fallback_used:
        how = f"local digest after {outcome.failure}"
    elif outcome.provider == "extractive":
        how = "local digest (extractive provider)"
    reason = (
        f"compacted {len(middle)} middle messages into one summary ({how}); "
        f"~{tokens_before:,} -> {tokens_after:,} tokens"
    )
    if len(outcome.calls) > 1:
        reason += f"; {len(outcome.calls)} summary calls (parts of the middle, then a merge)"
    if outcome.unsummarized:
        reason += (
            f"; the {outcome.unsummarized} oldest middle messages did not fit the summary "
            f"model's calls (compression.summary_max_calls: {settings.summary_max_calls}) and "
            "were not summarised: the ledger carries their files, commands and errors"
        )
    return CompressResult(
        status="compacted",
        reason=reason,
        conversation=conversation.with_messages(new_messages, new_system),
        engine=ENGINE,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        messages_before=len(messages),
        messages_after=len(new_messages),
        summary=outcome.text,
        provider=outcome.provider,
        fallback_used=outcome.fallback_used,
        duration_s=time.perf_counter() - started,
        calls=outcome.calls,
        unsummarized=outcome.unsummarized,
    )


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
