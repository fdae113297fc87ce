"""Compaction of the active context: leaf summaries of old raw messages, then condensation.

Invariant: summaries form a prefix of the active context (leaf passes take the oldest raw
messages right after them; condensation merges neighbouring summaries), followed by raw
messages, the newest of which form the protected *fresh tail*.

1. **Fresh tail**: the last ``fresh_tail_count`` messages, cut at a legal boundary, shrunk to
   ``fresh_tail_max_tokens`` (and at most half the threshold) by moving the boundary forward.
   A legal boundary splits no tool group, does not start with a tool result, and does not
   separate a user message from the assistant reply right after it.
2. **Leaf sweep**: from the oldest raw message, chunks of about ``leaf_chunk_tokens`` ending at a
   legal boundary become leaf summaries; a last, smaller chunk only when it has at least
   ``leaf_min_messages`` messages (or the context is over its target).
3. **Condensation**: while the context is above ``target_fill x threshold``, the oldest run of
   ``condense_fanout`` same-depth summaries (shallowest first) becomes one summary a level
   deeper; failing that, any run of two or more neighbouring summaries.

Each summary is accepted only when its section is strictly shorter than what it replaces, and
each one is committed together with the new active context in one transaction, so compaction
always terminates, always shrinks, and a crash leaves a consistent store.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import attrs

from ctxengine import Format, Message
from ctxengine.messages import cut_points, is_real_user_message, is_tool_message
from ctxengine_lcm.render import Item, expand_line, strip_expand_line, summary_section
from ctxengine_lcm.settings import LcmSettings
from ctxengine_lcm.store import NewSummary, Store, message_ref
from ctxengine_lcm.summarise import Summariser, clip, extract_lines, fit_lines, one_line, transcript

if TYPE_CHECKING:
    from ctxengine import EngineContext

SECTION_OVERHEAD = 60
"""Tokens a summary's ``<summary ...>`` wrapper adds around its content (upper estimate)."""

BLOCK_OVERHEAD = 120
"""Tokens of the summary block's header, footer and acknowledgement (upper estimate)."""


@attrs.frozen
class Budget:
    """Token limits of one session, derived from the model window and the engine settings."""

    window: int
    threshold_tokens: int
    target_tokens: int
    tail_cap: int
    large_output_tokens: int
    leaf_summary_tokens: int
    condensed_summary_tokens: int


def budget_for(ctx: EngineContext, settings: LcmSettings) -> Budget:
    """Limits for ``ctx``'s model, as fractions of its usable window."""
    window = ctx.window
    threshold = int(settings.threshold * window)
    return Budget(
        window=window,
        threshold_tokens=threshold,
        target_tokens=int(threshold * settings.target_fill),
        tail_cap=max(1, min(settings.fresh_tail_max_tokens, threshold // 2)),
        # An output bigger than a quarter of the threshold could never share the window.
        large_output_tokens=max(200, min(settings.large_output_tokens, threshold // 4)),
        leaf_summary_tokens=max(50, min(settings.leaf_summary_tokens, threshold // 8)),
        condensed_summary_tokens=max(50, min(settings.condensed_summary_tokens, threshold // 6)),
    )


def legal_starts(messages: Sequence[Message], fmt: Format) -> list[bool]:
    """``ok[i]``: the raw part may begin at ``messages[i]`` (``ok[len]`` is True)."""
    cuts = cut_points(messages, fmt)
    ok = [False] * (len(messages) + 1)
    ok[0] = ok[-1] = True
    for i in range(1, len(messages)):
        msg = messages[i]
        ok[i] = (
            cuts[i]
            and not is_tool_message(msg)
            and not (msg.get("role") == "assistant" and is_real_user_message(messages[i - 1], fmt))
        )
    if messages and is_tool_message(messages[0]):
        ok[0] = False
    return ok


def tail_start(raw: Sequence[Item], legal: Sequence[bool], count: int, cap: int) -> int:
    """Index in ``raw`` where the protected fresh tail begins."""
    n = len(raw)
    b = max(0, n - count)
    while b > 0 and not legal[b]:
        b -= 1
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + raw[i].tokens
    while suffix[b] > cap:
        nxt = next((j for j in range(b + 1, n) if legal[j]), None)
        if nxt is None:
            break
        b = nxt
    return b


@attrs.define
class Outcome:
    """What one compaction did."""

    items: list[Item]
    leaf: int = 0
    condensed: int = 0
    fallback: bool = False
    providers: set[str] = attrs.field(factory=set)
    notes: list[str] = attrs.field(factory=list)
    tail_messages: int = 0
    tail_tokens: int = 0


class Compactor:
    """Runs the leaf sweep and condensation for one session's active context."""

    def __init__(
        self,
        *,
        store: Store,
        conversation_id: int,
        settings: LcmSettings,
        budget: Budget,
        fmt: Format,
        summariser: Summariser,
        count: Callable[[str], int],
        fixed_tokens: int,
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.settings = settings
        self.budget = budget
        self.fmt = fmt
        self.summariser = summariser
        self.count = count
        self.fixed_tokens = fixed_tokens

    def total(self, items: Sequence[Item]) -> int:
        """Estimated prompt tokens of ``items`` plus the fixed part (system messages)."""
        summaries = any(it.kind == "summary" for it in items)
        return (
            self.fixed_tokens
            + sum(it.tokens for it in items)
            + (BLOCK_OVERHEAD if summaries else 0)
        )

    def section_tokens(self, content: str) -> int:
        return self.count(content) + SECTION_OVERHEAD

    # -- the loop ----------------------------------------------------------------------------

    def run(self, items: list[Item]) -> Outcome:
        outcome = Outcome(items=list(items))
        self._leaf_sweep(outcome)
        self._condense(outcome)
        outcome.fallback = outcome.fallback or bool(self.summariser.notes)
        outcome.notes.extend(dict.fromkeys(self.summariser.notes))
        return outcome

    def _split(self, items: Sequence[Item]) -> int:
        s = 0
        while s < len(items) and items[s].kind == "summary":
            s += 1
        return s

    def _leaf_sweep(self, outcome: Outcome) -> None:
        settings = self.settings
        while True:
            items = outcome.items
            s = self._split(items)
            raw = items[s:]
            msgs = [it.message or {} for it in raw]
            legal = legal_starts(msgs, self.fmt)
            b = tail_start(raw, legal, settings.fresh_tail_count, self.budget.tail_cap)
            outcome.tail_messages = len(raw) - b
            outcome.tail_tokens = sum(it.tokens for it in raw[b:])
            over = self.total(items) > self.budget.target_tokens
            end = self._chunk_end(raw, legal, b, over)
            if end is None:
                return
            new = self._leaf(raw[:end], outcome)
            if new is None:
                outcome.notes.append(
                    f"the oldest {end} raw messages could not be summarised shorter than they are"
                )
                return
            outcome.items = [*items[:s], new, *raw[end:]]
            outcome.leaf += 1

    def _chunk_end(
        self, raw: Sequence[Item], legal: Sequence[bool], b: int, over: bool
    ) -> int | None:
        acc = 0
        last: int | None = None
        for j in range(b):
            acc += raw[j].tokens
            if legal[j + 1]:
                last = j + 1
                if acc >= self.settings.leaf_chunk_tokens:
                    return last
        if last is None:
            return None
        if last >= self.settings.leaf_min_messages or (over and last > 0):
            return last
        return None

    def _condense(self, outcome: Outcome) -> None:
        fanout = self.settings.condense_fanout
        while self.total(outcome.items) > self.budget.target_tokens:
            items = outcome.items
            s = self._split(items)
            group = self._group(items[:s], fanout)
            if group is None:
                return
            start, end = group
            new = self._condensed(items[start:end], outcome)
            if new is None:
                outcome.notes.append(
                    f"{end - start} summaries could not be condensed shorter than they are"
                )
                return
            outcome.items = [*items[:start], new, *items[end:]]
            outcome.condensed += 1

    @staticmethod
    def _group(summaries: Sequence[Item], fanout: int) -> tuple[int, int] | None:
        """The run to condense: ``fanout`` same-depth neighbours, shallowest and oldest first."""
        runs: list[tuple[int, int, int]] = []  # (depth, start, end)
        i = 0
        while i < len(summaries):
            j = i
            while j < len(summaries) and summaries[j].depth == summaries[i].depth:
                j += 1
            runs.append((summaries[i].depth, i, j))
            i = j
        full = [(d, st, en) for d, st, en in runs if en - st >= fanout]
        if full:
            _, start, _ = min(full)
            return start, start + fanout
        if len(summaries) >= 2:
            return 0, min(len(summaries), fanout)
        return None

    # -- one summary -------------------------------------------------------------------------

    def _leaf(self, chunk: Sequence[Item], outcome: Outcome) -> Item | None:
        sid = "sum_" + secrets.token_hex(6)
        ids = [int(it.ref) for it in chunk]
        source = sum(it.tokens for it in chunk)
        entries = [(message_ref(int(it.ref)), it.message or {}) for it in chunk]
        footer = expand_line(
            sid, "leaf", message_count=len(ids), first=min(ids), last=max(ids), children=0
        )
        target = min(self.budget.leaf_summary_tokens, max(64, source // 4))

        def model_input(limit_tokens: int) -> str:
            part = max(400, min(4_000, (limit_tokens * 3) // max(1, len(entries))))
            return f"<conversation>\n{transcript(entries, self.fmt, part)}\n</conversation>"

        def deterministic(limit: int) -> str:
            header = f"Extract of {len(ids)} messages (generated locally, no model):"
            return fit_lines(header, extract_lines(entries, self.fmt), limit, self.count)

        return self._write(
            chunk,
            outcome,
            sid=sid,
            kind="leaf",
            depth=0,
            source=source,
            target=target,
            model_input=model_input,
            deterministic=deterministic,
            footer=footer,
            message_ids=tuple(ids),
            messages=len(ids),
        )

    def _condensed(self, group: Sequence[Item], outcome: Outcome) -> Item | None:
        sid = "sum_" + secrets.token_hex(6)
        kids = [it.summary for it in group if it.summary is not None]
        source = sum(it.tokens for it in group)
        depth = max(k.depth for k in kids) + 1
        messages = sum(k.descendant_messages for k in kids)
        firsts = [k.first_message_id for k in kids if k.first_message_id is not None]
        lasts = [k.last_message_id for k in kids if k.last_message_id is not None]
        footer = expand_line(
            sid,
            "condensed",
            message_count=messages,
            first=min(firsts, default=None),
            last=max(lasts, default=None),
            children=len(kids),
        )
        target = min(self.budget.condensed_summary_tokens, max(64, source // 2))

        def model_input(limit_tokens: int) -> str:
            part = max(400, (limit_tokens * 3) // max(1, len(kids)))
            body = "\n\n".join(
                f"[{k.id}, depth {k.depth}, {k.descendant_messages} messages]\n"
                + clip(strip_expand_line(k.content), part)
                for k in kids
            )
            return f"<summaries>\n{body}\n</summaries>"

        def deterministic(limit: int) -> str:
            share = max(80, (limit * 3) // max(1, len(kids)))
            lines = [f"[{k.id}] " + one_line(strip_expand_line(k.content), share) for k in kids]
            header = f"Condensed extract of {len(kids)} summaries (generated locally, no model):"
            return fit_lines(header, lines, limit, self.count)

        return self._write(
            group,
            outcome,
            sid=sid,
            kind="condensed",
            depth=depth,
            source=source,
            target=target,
            model_input=model_input,
            deterministic=deterministic,
            footer=footer,
            child_ids=tuple(k.id for k in kids),
        )

    def _write(
        self,
        replaced: Sequence[Item],
        outcome: Outcome,
        *,
        sid: str,
        kind: Literal["leaf", "condensed"],
        depth: int,
        source: int,
        target: int,
        model_input: Callable[[int], str],
        deterministic: Callable[[int], str],
        footer: str,
        message_ids: tuple[int, ...] = (),
        child_ids: tuple[str, ...] = (),
        messages: int = 0,
    ) -> Item | None:
        """Write one summary of ``replaced`` (escalating) and store it; ``None`` if nothing
        shorter than the input could be written."""
        result = self.summariser.write(
            source_tokens=source,
            target=target,
            model_input=model_input,
            deterministic=deterministic,
            footer=footer,
            condensed=kind == "condensed",
            section=self.section_tokens,
            messages=messages,
        )
        if result is None:
            return None
        summary = NewSummary(
            id=sid,
            depth=depth,
            kind=kind,
            mode=result.mode,
            content=result.content,
            tokens=result.tokens,
            source_tokens=source,
            message_ids=message_ids,
            child_ids=child_ids,
            provider=result.provider,
        )
        return self._store(summary, replaced, outcome, result.fallback, result.provider)

    def _store(
        self,
        summary: NewSummary,
        replaced: Sequence[Item],
        outcome: Outcome,
        fallback: bool,
        provider: str | None,
    ) -> Item:
        items = outcome.items
        first = next(i for i, it in enumerate(items) if it is replaced[0])
        keys = [it.key for it in items[:first]]
        keys.append(("summary", summary.id))
        keys += [it.key for it in items[first + len(replaced) :]]
        self.store.add_summary(self.conversation_id, summary, keys)
        stored = self.store.summary(summary.id)
        assert stored is not None  # just written in the same connection
        outcome.fallback = outcome.fallback or fallback
        if provider:
            outcome.providers.add(provider)
        return Item(
            kind="summary",
            ref=summary.id,
            tokens=self.count(summary_section(stored)),
            summary=stored,
        )
