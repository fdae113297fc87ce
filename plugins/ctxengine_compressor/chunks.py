"""How the summarizer's input is cut so the summary model sees the whole middle.

The middle is rendered one transcript entry per message (:func:`~.summary.render_message`) and
each entry clipped head+tail. :func:`plan_calls` decides the calls, within the summary model's
window and ``compression.summary_max_calls``:

1. **One call** when the whole middle fits with every entry kept to at least
   :data:`SINGLE_CALL_MIN_CHARS` (entries are clipped from :data:`CAPS` ``[0]`` down to that).
2. Otherwise **map, then merge**: consecutive chunks, each summarized on its own into the
   template, then one call merges the part summaries (and updates the previous summary). Entries
   are clipped as little as the call budget allows (the caps of :data:`CAPS`, largest first);
   each part summary gets ``min(budget, merge room / parts)`` tokens, so the merge always fits.
3. When even the smallest cap needs more calls than the budget (or ``summary_max_calls`` is 1
   or 2, too few for parts and a merge), the newest messages that fit are summarized and the
   oldest are left out: the plan says how many, the result reports them, and the
   critical-context ledger (built from the whole middle) still carries their paths, commands and
   errors.

Sizes are planned in characters (about :data:`CHARS_PER_TOKEN` per token, with
:data:`TOKEN_SAFETY` for the summary model's tokenizer) and every prompt is then counted exactly;
a prompt that still overshoots is re-planned smaller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from ctxengine import TextSize

__all__ = [
    "CAPS",
    "CHARS_PER_TOKEN",
    "MIN_INPUT_TOKENS",
    "SINGLE_CALL_MIN_CHARS",
    "TOKEN_SAFETY",
    "Chunk",
    "Plan",
    "TooSmall",
    "clip",
    "plan_calls",
]

CAPS = (6_000, 3_000, 1_500, 600, 300)
"""Per-entry character caps, tried largest first."""
SINGLE_CALL_MIN_CHARS = 1_500
"""One call is used only while every entry keeps at least this much; below, chunks."""
TOKEN_SAFETY = 1.15
"""The summary model's tokenizer may count more than ours (Claude ~+20 % over o200k)."""
CHARS_PER_TOKEN = TextSize.CHARS_PER_TOKEN
"""The kernel's rough-estimate ratio: plans in characters are in the estimate's units."""
MIN_INPUT_TOKENS = 512
"""Below this much room for a transcript the summary model is too small to be useful."""
MIN_PART_TOKENS = 300
"""A part summary smaller than this says too little to be merged."""
REPLANS = 5
"""How often a plan is made smaller when an exactly counted prompt still overshoots."""


class TooSmall(Exception):
    """The summary model's window cannot hold the instructions and a reply, whatever the input."""


@attrs.frozen
class Chunk:
    """Consecutive entries summarized by one call: ``entries`` is ``texts[start:end]`` clipped."""

    start: int
    end: int
    entries: tuple[str, ...]


@attrs.frozen
class Plan:
    """The summary calls of one compaction.

    :ivar chunks: the chunk of a single call, or the parts of map-then-merge.
    :ivar merged: the parts are summarized one by one and then merged by one more call.
    :ivar part_tokens: the output budget of each part summary (0 for a single call).
    :ivar skipped: the oldest entries no call shows the model.
    """

    chunks: tuple[Chunk, ...]
    merged: bool = False
    part_tokens: int = 0
    skipped: int = 0


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail with a marker between.

    Cuts fall on whitespace where possible so a secret or a path is not split in half.
    """
    if len(text) <= limit:
        return text
    keep_head = limit * 2 // 3
    keep_tail = limit - keep_head
    head_end = text.rfind(" ", keep_head - 200, keep_head)
    head_end = head_end if head_end > 0 else keep_head
    tail_start = text.find(" ", len(text) - keep_tail, len(text) - keep_tail + 200)
    tail_start = tail_start if tail_start > 0 else len(text) - keep_tail
    omitted = tail_start - head_end
    return f"{text[:head_end]}\n[... {omitted:,} characters omitted ...]\n{text[tail_start:]}"


def _room(window: int, reply_tokens: int, fixed_tokens: int) -> int:
    """Tokens left for a transcript in a prompt with ``fixed_tokens`` of instructions."""
    return int((window - reply_tokens) / TOKEN_SAFETY) - fixed_tokens


def _pack(entries: Sequence[str], chars: int, separator: int) -> list[tuple[int, int]]:
    """Consecutive ``(start, end)`` runs of ``entries`` of at most ``chars`` each (an entry
    larger than ``chars`` on its own still gets a run)."""
    runs: list[tuple[int, int]] = []
    start, used = 0, 0
    for index, entry in enumerate(entries):
        size = len(entry) + separator
        if index > start and used + size > chars:
            runs.append((start, index))
            start, used = index, 0
        used += size
    if start < len(entries):
        runs.append((start, len(entries)))
    return runs


def plan_calls(
    texts: Sequence[str],
    *,
    window: int,
    budget: int,
    max_calls: int,
    single_fixed: int,
    chunk_fixed: int,
    merge_fixed: int,
    prompt_tokens: Callable[[Plan], list[int]],
) -> Plan:
    """The calls that show the summary model as much of ``texts`` as the window and
    ``max_calls`` allow (see the module docstring).

    :param texts: the rendered entries, oldest first (not yet clipped).
    :param budget: the final summary's output tokens.
    :param single_fixed, chunk_fixed, merge_fixed: tokens of each kind of prompt without its
        transcript (system prompt included; ``merge_fixed`` without the part summaries).
    :param prompt_tokens: exact token counts of the plan's prompts, one per chunk, system prompt
        included (used to confirm the plan).
    :raises TooSmall: when not even an empty transcript fits the window.
    """
    single_room = _room(window, budget, single_fixed)
    if single_room < MIN_INPUT_TOKENS:
        raise TooSmall(f"room for {max(single_room, 0)} transcript tokens")
    for cap in (c for c in CAPS if c >= SINGLE_CALL_MIN_CHARS):
        plan = _single(texts, cap, single_room * CHARS_PER_TOKEN)
        if plan is not None and _confirmed(plan, window, budget, prompt_tokens):
            return plan
    if max_calls >= 3:
        plan = _chunked(texts, window, budget, max_calls, chunk_fixed, merge_fixed, prompt_tokens)
        if plan is not None:
            return plan
    return _newest_that_fit(texts, window, budget, single_room, prompt_tokens)


def _single(texts: Sequence[str], cap: int, chars: int) -> Plan | None:
    entries = tuple(clip(t, cap) for t in texts)
    if sum(len(e) + 2 for e in entries) > chars:
        return None
    return Plan((Chunk(0, len(texts), entries),))


def _confirmed(
    plan: Plan, window: int, reply_tokens: int, prompt_tokens: Callable[[Plan], list[int]]
) -> bool:
    return all(used * TOKEN_SAFETY + reply_tokens <= window for used in prompt_tokens(plan))


def _chunked(
    texts: Sequence[str],
    window: int,
    budget: int,
    max_calls: int,
    chunk_fixed: int,
    merge_fixed: int,
    prompt_tokens: Callable[[Plan], list[int]],
) -> Plan | None:
    merge_room = _room(window, budget, merge_fixed)
    most_parts = max_calls - 1
    for cap in CAPS:
        entries = [clip(t, cap) for t in texts]
        # Part summaries share the merge prompt: the more parts, the shorter each.
        part_tokens = min(budget, max(MIN_PART_TOKENS, window // 8))
        shrink = 1.0
        for _ in range(REPLANS):
            room = int(_room(window, part_tokens, chunk_fixed) * shrink)
            if room < MIN_INPUT_TOKENS:
                return None
            runs = _pack(entries, room * CHARS_PER_TOKEN, 2)
            if len(runs) > most_parts:
                break  # a smaller cap, or the newest parts only
            fair = merge_room // len(runs)
            if fair < MIN_PART_TOKENS:
                break
            if fair < part_tokens:
                part_tokens = fair
                continue  # a smaller reply leaves more room per chunk: pack again
            chunks = tuple(Chunk(a, b, tuple(entries[a:b])) for a, b in runs)
            plan = Plan(chunks, merged=True, part_tokens=part_tokens)
            counts = prompt_tokens(plan)
            worst = max(used * TOKEN_SAFETY + part_tokens - window for used in counts)
            if worst <= 0:
                return plan
            shrink *= 0.9 * (1 - worst / window)
    return None


def _newest_that_fit(
    texts: Sequence[str],
    window: int,
    budget: int,
    room: int,
    prompt_tokens: Callable[[Plan], list[int]],
) -> Plan:
    """One call over the newest entries that fit at the smallest cap; the oldest are left out."""
    entries = [clip(t, CAPS[-1]) for t in texts]
    chars = room * CHARS_PER_TOKEN
    for _ in range(REPLANS + 1):
        start, used = len(entries), 0
        while start > 0 and used + len(entries[start - 1]) + 2 <= chars:
            start -= 1
            used += len(entries[start]) + 2
        start = min(start, len(entries) - 1)  # the newest message is always shown
        plan = Plan((Chunk(start, len(texts), tuple(entries[start:])),), skipped=start)
        counts = prompt_tokens(plan)
        over = counts[0] * TOKEN_SAFETY + budget - window
        if over <= 0 or start == len(entries) - 1:
            return plan
        chars = int(chars * 0.9 * (1 - over / window))
    return plan
