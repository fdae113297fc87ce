"""One session's lossless engine: ingest, compaction and rendering over the shared store.

How a re-sent conversation is matched (so nothing is stored twice). The incoming messages are
walked against the stored active context, item by item:

- the summary block this engine rendered earlier (found by its hash in ``rendered_blocks``)
  stands for the summaries it showed;
- a raw message matches the context's message at that position by content hash (or by the hash
  of its described form, when a large output was stored aside);
- a run of raw messages matches a summary item when it is exactly the run that summary covers
  (the host re-sent the full history instead of the compacted one).

The first message that matches nothing ends the walk: it and everything after it are new and
are appended to the store after the conversation's last message; the active context becomes the
matched items plus the new messages. Leading system messages are stored once (pinned) and are
always passed through as given.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ctxengine.conversation import Conversation, Message
from ctxengine.results import CompressResult
from ctxengine_lcm.compaction import Compactor, budget_for
from ctxengine_lcm.ingest import canonical, message_hash, prepare
from ctxengine_lcm.locking import session_lock
from ctxengine_lcm.render import Item, Rendered, render, summary_section
from ctxengine_lcm.settings import ENGINE_NAME, LcmSettings
from ctxengine_lcm.store import (
    ContextItem,
    NewMessage,
    NewOutput,
    Store,
    StoredMessage,
    catch_up_index,
)
from ctxengine_lcm.summarise import Summariser, SummaryAborted

if TYPE_CHECKING:
    from ctxengine.context import EngineContext

COOLDOWN_SECONDS = 60.0
"""Automatic compaction pauses this long after an aborted compaction."""

LOCK_WAIT_SECONDS = 30.0
"""A compress call waits this long for a running compaction of the same session to finish."""

THRASH_SAVING = 0.10
THRASH_RUN = 2


@attrs.define
class IngestResult:
    """The active context after ingest: its items, the leading system messages, what was new."""

    items: list[Item]
    leading: list[Message]
    new_messages: int


class LcmSession:
    """The engine bound to one session: a store connection and the conversation's row."""

    def __init__(self, store: Store, session_id: str, settings: LcmSettings) -> None:
        self.store = store
        self.session_id = session_id
        self.settings = settings
        self.conversation_id = store.conversation_id(session_id)

    def close(self) -> None:
        self.store.close()

    # -- ingest ------------------------------------------------------------------------------

    def ingest(
        self, conversation: Conversation, ctx: EngineContext, large_output_tokens: int
    ) -> IngestResult:
        """Store what is new in ``conversation`` and return the updated active context."""
        fmt = conversation.format
        msgs = conversation.messages
        count = ctx.tokens.count_message
        lead = 0
        if fmt == "openai":
            while lead < len(msgs) and msgs[lead].get("role") in ("system", "developer"):
                lead += 1
        leading = msgs[:lead]
        body = msgs[lead:]

        rows: list[NewMessage] = []
        outputs: list[tuple[int, NewOutput]] = []
        pinned = self.store.pinned_hashes(self.conversation_id)
        pins: list[Message] = list(leading)
        if conversation.system is not None:
            pins.append({"role": "system", "content": conversation.system})
        for k, msg in enumerate(pins):
            if message_hash(msg) not in pinned:
                row, _, _ = prepare(
                    pins,
                    k,
                    fmt,
                    count=count,
                    session_key=self.session_id,
                    large_output_tokens=large_output_tokens,
                    pinned=True,
                )
                rows.append(row)
                pinned.add(row.content_hash)

        hashes = [message_hash(m) for m in body]
        stored_ctx = self.store.context(self.conversation_id)
        matched, consumed, p = self._walk(body, hashes, stored_ctx, count)

        new_items: list[Item] = []
        context_refs: list[ContextItem | int] = [it.key for it in matched]
        for j in range(consumed, len(body)):
            row, outs, in_context = prepare(
                body,
                j,
                fmt,
                count=count,
                session_key=self.session_id,
                large_output_tokens=large_output_tokens,
            )
            index = len(rows)
            rows.append(row)
            outputs.extend((index, o) for o in outs)
            context_refs.append(index)
            new_items.append(
                Item(kind="message", ref=-1, tokens=count(in_context), message=in_context)
            )
        changed = bool(rows) or p != len(stored_ctx)
        if changed:
            ids = self.store.append(
                self.conversation_id, rows, outputs=outputs, context=context_refs
            )
            first_new = len(rows) - len(new_items)
            for k, item in enumerate(new_items):
                item.ref = ids[first_new + k]
        return IngestResult([*matched, *new_items], leading, len(new_items))

    def _walk(
        self,
        body: Sequence[Message],
        hashes: Sequence[str],
        stored_ctx: Sequence[ContextItem],
        count: Any,
    ) -> tuple[list[Item], int, int]:
        """Match ``body`` against the stored context; ``(items, messages consumed, items used)``."""
        message_ids = [int(ref) for kind, ref in stored_ctx if kind == "message"]
        rows = {m.id: m for m in self.store.messages(self.conversation_id, message_ids)}
        matched: list[Item] = []
        i = p = 0
        while i < len(body) and p < len(stored_ctx):
            kind, ref = stored_ctx[p]
            if kind == "summary":
                block = self.store.block(self.conversation_id, hashes[i])
                if block is not None:
                    block_hashes, block_items = block
                    n_items = len(block_items)
                    if [tuple(x) for x in stored_ctx[p : p + n_items]] == [
                        tuple(x) for x in block_items
                    ] and list(hashes[i : i + len(block_hashes)]) == block_hashes:
                        matched.extend(self._summary_item(str(r)) for _, r in block_items)
                        p += n_items
                        i += len(block_hashes)
                        continue
                covered = self.store.covered_message_ids(str(ref))
                covered_rows = self.store.messages(self.conversation_id, covered)
                # Like a single message, each message of the run may come back in its
                # original or its described form (a large output stored aside).
                window = hashes[i : i + len(covered_rows)]
                if (
                    covered_rows
                    and len(window) == len(covered_rows)
                    and all(
                        h in (m.content_hash, m.rendered_hash)
                        for h, m in zip(window, covered_rows, strict=True)
                    )
                ):
                    matched.append(self._summary_item(str(ref)))
                    p += 1
                    i += len(covered_rows)
                    continue
                break
            row = rows.get(int(ref))
            if row is None or hashes[i] not in (row.content_hash, row.rendered_hash):
                break
            matched.append(self._message_item(row, body[i], hashes[i], count))
            p += 1
            i += 1
        return matched, i, p

    def _message_item(self, row: StoredMessage, incoming: Message, digest: str, count: Any) -> Item:
        msg = incoming
        if row.rendered is not None and digest == row.content_hash:
            msg = row_rendered(row)
        return Item(kind="message", ref=row.id, tokens=int(count(msg)), message=msg)

    def _summary_item(self, summary_id: str) -> Item:
        summary = self.store.summary(summary_id, self.conversation_id)
        if summary is None:  # the foreign keys make this impossible; fail loudly if not
            raise RuntimeError(f"lcm store: context refers to unknown summary {summary_id}")
        return Item(kind="summary", ref=summary_id, tokens=0, summary=summary)

    # -- compaction --------------------------------------------------------------------------

    def compress(
        self, ctx: EngineContext, conversation: Conversation, force: bool, focus: str | None
    ) -> CompressResult:
        """Ingest, compact and render; see :func:`ctxengine_lcm.compress`."""
        started = time.perf_counter()
        before = ctx.tokens.count(conversation.messages, conversation.system)

        def unchanged(status: Any, reason: str) -> CompressResult:
            return CompressResult.unchanged(
                status,
                reason,
                conversation,
                engine=ENGINE_NAME,
                tokens=before,
                duration_s=time.perf_counter() - started,
            )

        with session_lock(self.store.path, self.session_id, wait=LOCK_WAIT_SECONDS) as acquired:
            if not acquired:
                return unchanged(
                    "noop",
                    f"another compaction of this session held its lock for over "
                    f"{LOCK_WAIT_SECONDS:g} s; nothing was stored (the new messages are stored "
                    "by the next compress call)",
                )
            budget = budget_for(ctx, self.settings)
            ingest = self.ingest(conversation, ctx, budget.large_output_tokens)
            count_text = ctx.tokens.count_text
            for item in ingest.items:
                if item.kind == "summary" and item.summary is not None:
                    item.tokens = count_text(summary_section(item.summary))
            fixed = ctx.tokens.count(ingest.leading, conversation.system)
            summariser = Summariser(
                ctx.summarizer(),
                count_text,
                abort_on_failure=ctx.config.compression.abort_on_summary_failure,
                focus=focus,
            )
            compactor = Compactor(
                store=self.store,
                conversation_id=self.conversation_id,
                settings=self.settings,
                budget=budget,
                fmt=conversation.format,
                summariser=summariser,
                count=count_text,
                fixed_tokens=fixed,
            )
            try:
                outcome = compactor.run(ingest.items)
            except SummaryAborted as exc:
                state = get_state(ctx)
                state.cooldown_until = ctx.clock() + COOLDOWN_SECONDS
                state.cooldown_reason = str(exc)
                catch_up_index(self.store)
                return unchanged(
                    "aborted",
                    f"{exc}; abort_on_summary_failure is on, so nothing was compacted "
                    f"(the {ingest.new_messages} new messages are stored)",
                )
            if summariser.abort_kind is not None:
                state = get_state(ctx)
                state.cooldown_until = ctx.clock() + COOLDOWN_SECONDS
                state.cooldown_reason = f"summary provider failed ({summariser.abort_kind})"
            rendered = render(outcome.items, ingest.leading)
            if rendered.block:
                self.store.add_block(
                    self.conversation_id,
                    [canonical(m)[1] for m in rendered.block],
                    rendered.block_items,
                )
            # Ingest left the new messages out of the full-text index; index them now, in one
            # batch, so the store is searchable by index when compress returns.
            catch_up_index(self.store)
        after = ctx.tokens.count(rendered.messages, conversation.system)
        result = self._result(
            conversation=conversation,
            rendered=rendered,
            outcome=outcome,
            threshold=budget.threshold_tokens,
            window=budget.window,
            before=before,
            after=after,
            new_messages=ingest.new_messages,
            started=started,
        )
        record_saving(ctx, before, result.tokens_after)
        return result

    def _result(
        self,
        *,
        conversation: Conversation,
        rendered: Rendered,
        outcome: Any,
        threshold: int,
        window: int,
        before: int,
        after: int,
        new_messages: int,
        started: float,
    ) -> CompressResult:
        duration = time.perf_counter() - started
        stored = f"{new_messages} new messages stored"
        # Only tool outputs are stored aside; a huge user or assistant message stays whole in
        # the fresh tail, so the result can still be over the window. Say so plainly.
        over = (
            f"STILL OVER the {window}-token context window ({after} tokens; the fresh tail "
            f"holds {outcome.tail_tokens}): a message too large for the window stays whole, so "
            "the request will fail unless the host shortens or drops it"
            if after > window
            else None
        )
        if after >= before:
            if outcome.leaf or outcome.condensed:
                why = "the summaries did not make the prompt smaller"
            elif outcome.notes:
                why = "; ".join(outcome.notes)
            else:
                why = (
                    f"nothing to compact outside the protected fresh tail "
                    f"({outcome.tail_messages} messages, {outcome.tail_tokens} tokens)"
                )
            return CompressResult.unchanged(
                "noop",
                f"{why}; {stored}" + (f"; {over}" if over else ""),
                conversation,
                engine=ENGINE_NAME,
                tokens=before,
                duration_s=duration,
            )
        parts = [
            f"{outcome.leaf} leaf and {outcome.condensed} condensed summaries written",
            stored,
            f"prompt {before} -> {after} tokens",
        ]
        if over:
            parts.append(over)
        elif after > threshold:
            parts.append(
                f"still above the {threshold}-token threshold: the fresh tail holds "
                f"{outcome.tail_tokens} tokens"
            )
        parts += outcome.notes
        block = rendered.block[0]["content"] if rendered.block else None
        return CompressResult(
            status="compacted",
            reason="; ".join(parts),
            conversation=conversation.with_messages(rendered.messages),
            engine=ENGINE_NAME,
            tokens_before=before,
            tokens_after=after,
            messages_before=len(conversation.messages),
            messages_after=len(rendered.messages),
            summary=block if isinstance(block, str) else None,
            provider=", ".join(sorted(outcome.providers)) or None,
            fallback_used=outcome.fallback,
            duration_s=duration,
        )


def row_rendered(row: StoredMessage) -> Message:
    import json

    value: Message = json.loads(row.rendered or row.content)
    return value


# -- per-session state --------------------------------------------------------------------------


@attrs.define
class LcmState:
    """What the engine keeps in ``ctx.state["lcm"]``."""

    session: LcmSession | None = None
    cooldown_until: float = 0.0
    cooldown_reason: str = ""
    recent_savings: list[float] = attrs.field(factory=list)


def get_state(ctx: EngineContext) -> LcmState:
    state = ctx.state.get(ENGINE_NAME)
    if not isinstance(state, LcmState):
        state = LcmState()
        ctx.state[ENGINE_NAME] = state
    return state


def record_saving(ctx: EngineContext, before: int, after: int) -> None:
    state = get_state(ctx)
    saving = (before - after) / before if before > 0 else 0.0
    state.recent_savings = [*state.recent_savings[-(THRASH_RUN - 1) :], saving]


def is_thrashing(state: LcmState) -> bool:
    recent = state.recent_savings[-THRASH_RUN:]
    return len(recent) == THRASH_RUN and all(s < THRASH_SAVING for s in recent)
