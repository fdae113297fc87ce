"""One session's lossless engine: ingest, compaction and rendering over the shared store.

How a re-sent conversation is matched (so nothing is stored twice). A prefix of the incoming
messages is recognised by the stored message ids it stands for, walking with "the last matched
id" and requiring strictly increasing ids:

- a summary block this engine rendered (found by its hash in ``rendered_blocks``, current or
  older, e.g. one whose summaries were condensed since) stands for the messages its summaries
  cover;
- a raw message matches a stored message of this conversation at the expected next position:
  the one that follows the last match in the active context if it has the same content hash (or
  the hash of its described form, when a large output was stored aside), else the first later
  stored message with either hash (a shrunken history sent in full again, an abandoned branch).

The first message that matches nothing ends the walk: it and everything after it are new and
are appended to the store after the conversation's last message. The active context becomes the
current context's items while they stand for the same ids as the matched prefix, then the matched
pieces (block summaries, stored messages), then the new messages. Leading system messages are
stored once (pinned) and are always passed through as given.

A history with nothing new whose matched prefix ends before the active context does is *stale*
(another process, or an older copy, sending an earlier state of the session): it is refused.
Nothing is stored, no summary is written and the active context does not move backwards; the
compaction answers ``noop`` saying so. A history that goes back and then adds messages of its own
is a branch, not a rewind, and is stored as described above.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ctxengine import CompactionGuard, CompressResult, Conversation, Message, SessionState
from ctxengine_lcm.compaction import Compactor, budget_for
from ctxengine_lcm.ingest import canonical, message_hash, prepare
from ctxengine_lcm.render import Item, Rendered, render, summary_section
from ctxengine_lcm.settings import ENGINE_NAME, LcmSettings
from ctxengine_lcm.store import (
    ContextItem,
    NewMessage,
    NewOutput,
    Store,
    StoredMessage,
)
from ctxengine_lcm.summarise import Summariser, SummaryAborted

if TYPE_CHECKING:
    from ctxengine import EngineContext

LOCK_WAIT_SECONDS = 30.0
"""A compress call waits this long for a running compaction of the same session to finish."""


@attrs.frozen
class StaleHistory:
    """An incoming history that is an older prefix of the stored session.

    :ivar sent_until: the last stored message id the incoming history stands for (0: none).
    :ivar stored_until: the last message id of the stored active context.
    """

    sent_until: int
    stored_until: int


@attrs.define
class IngestResult:
    """The active context after ingest: its items, the leading system messages, what was new.

    :ivar stale: set when the history was refused as older than the store's (nothing written).
    """

    items: list[Item]
    leading: list[Message]
    new_messages: int
    stale: StaleHistory | None = None


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
        matched, consumed, last_id, stored_until = self._walk(body, hashes, stored_ctx, count)
        if consumed == len(body) and last_id < stored_until:
            # An older state of the session: refuse it before anything is written.
            return IngestResult(matched, leading, 0, StaleHistory(last_id, stored_until))

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
        # Without new rows the context refs are exactly the matched items' keys.
        changed = bool(rows) or [it.key for it in matched] != [tuple(x) for x in stored_ctx]
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
    ) -> tuple[list[Item], int, int, int]:
        """Match a prefix of ``body`` to stored messages: ``(context items, messages consumed,
        the last stored id matched (0: none), the last stored id of the active context)``.

        Each incoming piece stands for stored message ids: a rendered summary block (current or
        older) for the messages its summaries cover, a raw message for the stored message it
        repeats. The pieces must stand for strictly increasing ids, so the matched prefix is one
        path through the stored conversation. The items returned keep the current context
        where it stands for the same messages and use the incoming pieces after that.
        """
        conv = self.conversation_id
        expansion = [
            self.store.covered_message_ids(str(ref)) if kind == "summary" else [int(ref)]
            for kind, ref in stored_ctx
        ]
        flat = [mid for ids in expansion for mid in ids]
        successor = dict(zip([0, *flat], flat, strict=False))
        digests = self.store.digests(conv, flat)
        # Each piece: the context item it becomes, the ids it stands for, its body index.
        pieces: list[tuple[ContextItem, list[int], int | None]] = []
        prev_id, prev_seq = 0, -1
        i = 0
        while i < len(body):
            block = self.store.block(conv, hashes[i])
            if block is not None:
                block_hashes, block_items = block
                covers = [self.store.covered_message_ids(str(ref)) for _, ref in block_items]
                ids = [mid for part in covers for mid in part]
                if (
                    list(hashes[i : i + len(block_hashes)]) == block_hashes
                    and ids
                    and all(a < b for a, b in zip([prev_id, *ids], ids, strict=False))
                ):
                    last = self.store.digests(conv, [ids[-1]]).get(ids[-1])
                    if last is not None:
                        pieces.extend(
                            (("summary", ref), part, None)
                            for (_, ref), part in zip(block_items, covers, strict=True)
                        )
                        prev_id, prev_seq = ids[-1], last[0]
                        i += len(block_hashes)
                        continue
            found: int | None = None
            expected = successor.get(prev_id)
            if expected is not None and expected in digests:
                _, content_hash, rendered_hash = digests[expected]
                if hashes[i] in (content_hash, rendered_hash):
                    found = expected
            if found is None:
                found = self.store.next_matching(conv, prev_seq, hashes[i])
            if found is None:
                break
            if found not in digests:
                digests.update(self.store.digests(conv, [found]))
            pieces.append((("message", found), [found], i))
            prev_id, prev_seq = found, digests[found][0]
            i += 1
        items = self._items(pieces, stored_ctx, expansion, body, hashes, count)
        return items, i, prev_id, flat[-1] if flat else 0

    def _items(
        self,
        pieces: Sequence[tuple[ContextItem, list[int], int | None]],
        stored_ctx: Sequence[ContextItem],
        expansion: Sequence[list[int]],
        body: Sequence[Message],
        hashes: Sequence[str],
        count: Any,
    ) -> list[Item]:
        """Context items for the matched ids: the current context's while it fits, then pieces."""
        ids = [mid for _, part, _ in pieces for mid in part]
        source = {part[0]: at for _, part, at in pieces if at is not None}
        keys: list[ContextItem] = []
        pos = 0
        for key, part in zip(stored_ctx, expansion, strict=True):
            if not part or ids[pos : pos + len(part)] != part:
                break
            keys.append(key)
            pos += len(part)
        start = 0
        for key, part, _ in pieces:
            if start >= pos:
                keys.append(key)
            elif start + len(part) > pos:
                # The current context split this piece (a summary): its rest goes in raw.
                keys.extend(("message", mid) for mid in part[pos - start :])
            start += len(part)
        wanted = [int(ref) for kind, ref in keys if kind == "message"]
        rows = {m.id: m for m in self.store.messages(self.conversation_id, wanted)}
        items: list[Item] = []
        for kind, ref in keys:
            if kind == "summary":
                items.append(self._summary_item(str(ref)))
                continue
            row = rows[int(ref)]
            at = source.get(row.id)
            if at is not None:
                items.append(self._message_item(row, body[at], hashes[at], count))
            else:
                msg = row_rendered(row)
                items.append(Item(kind="message", ref=row.id, tokens=int(count(msg)), message=msg))
        return items

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
        self,
        ctx: EngineContext,
        conversation: Conversation,
        force: bool,
        focus: str | None,
        *,
        stage: str = "agent",
        message_budget: int | None = None,
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

        with self.store.session_lock(self.session_id, wait=LOCK_WAIT_SECONDS) as acquired:
            if not acquired:
                return unchanged(
                    "noop",
                    f"another compaction of this session held its lock for over "
                    f"{LOCK_WAIT_SECONDS:g} s; nothing was stored (the new messages are stored "
                    "by the next compress call)",
                )
            budget = budget_for(ctx, self.settings)
            ingest = self.ingest(conversation, ctx, budget.large_output_tokens)
            if ingest.stale is not None:
                return unchanged("noop", _stale_reason(ingest.stale, len(conversation.messages)))
            count_text = ctx.tokens.count_text
            for item in ingest.items:
                if item.kind == "summary" and item.summary is not None:
                    item.tokens = count_text(summary_section(item.summary))
            fixed = ctx.tokens.count(ingest.leading, conversation.system)
            unusable: str | None = None
            try:
                provider = ctx.summarizer()
            except Exception as exc:  # an unusable provider: the deterministic extract
                ctx.log.warning("lcm: summary provider unavailable: %s", exc)
                provider, unusable = None, f"summary provider unavailable ({exc})"
            summariser = Summariser(
                provider,
                count_text,
                abort_on_failure=ctx.config.auxiliary.compression.abort_on_failure,
                focus=focus,
                force=force and stage == "agent",
            )
            if unusable is not None:
                summariser.notes.append(unusable)
            settings = self.settings
            if message_budget is not None:
                # The summary block (and its acknowledgement) and the system messages take
                # their places; the fresh tail gets what is left.
                room = message_budget - len(ingest.leading) - 2
                settings = attrs.evolve(
                    settings, fresh_tail_count=max(1, min(settings.fresh_tail_count, room))
                )
            compactor = Compactor(
                store=self.store,
                conversation_id=self.conversation_id,
                settings=settings,
                budget=budget,
                fmt=conversation.format,
                summariser=summariser,
                count=count_text,
                fixed_tokens=fixed,
            )
            try:
                outcome = compactor.run(ingest.items)
            except SummaryAborted as exc:
                get_guard(ctx).start_cooldown(ctx.clock(), str(exc))
                self.store.catch_up_index(conversation_id=self.conversation_id)
                aborted = unchanged(
                    "aborted",
                    f"{exc}; abort_on_summary_failure is on, so nothing was compacted "
                    f"(the {ingest.new_messages} new messages are stored)",
                )
                return attrs.evolve(aborted, calls=tuple(summariser.calls))
            if summariser.abort_kind is not None:
                reason = f"summary provider failed ({summariser.abort_kind})"
                get_guard(ctx).start_cooldown(ctx.clock(), reason)
            rendered = render(outcome.items, ingest.leading)
            if rendered.block:
                self.store.add_block(
                    self.conversation_id,
                    [canonical(m)[1] for m in rendered.block],
                    rendered.block_items,
                )
            # Ingest left the new messages out of the full-text index; index them now, in one
            # batch, so the store is searchable by index when compress returns.
            self.store.catch_up_index(conversation_id=self.conversation_id)
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
        return attrs.evolve(result, calls=tuple(summariser.calls))

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


def _stale_reason(stale: StaleHistory, sent: int) -> str:
    until = f"msg_{stale.sent_until}" if stale.sent_until else "no stored message"
    return (
        f"stale history refused: the {sent} messages sent stand for the stored session only up "
        f"to {until}, older than its active context (up to msg_{stale.stored_until}); another "
        "writer is ahead of this one. Nothing was stored, no summary was rewritten and the "
        "active context was not moved back; send the current history (or new messages) instead"
    )


def row_rendered(row: StoredMessage) -> Message:
    import json

    value: Message = json.loads(row.rendered or row.content)
    return value


# -- per-session state --------------------------------------------------------------------------


@attrs.define
class LcmState:
    """What the engine keeps in ``ctx.state["lcm"]``: this process's handle on the store (never
    saved; reopened where it is missing)."""

    session: LcmSession | None = None


GUARD: SessionState[CompactionGuard] = SessionState(
    f"{ENGINE_NAME}.guard", CompactionGuard, dump=CompactionGuard.dump, load=CompactionGuard.restore
)
"""The session's cooldown and anti-thrash guard, saved between calls on a shared coordination
backend (everything else lcm knows about a session is in its store)."""


def get_state(ctx: EngineContext) -> LcmState:
    return ctx.plugin_state(ENGINE_NAME, LcmState)


def get_guard(ctx: EngineContext) -> CompactionGuard:
    """This session's guard: in memory, saved by another worker, or new."""
    return ctx.session_state(GUARD)


def record_saving(ctx: EngineContext, before: int, after: int) -> None:
    """Feed one compaction's saving to the session's anti-thrash guard."""
    get_guard(ctx).record_saving((before - after) / before if before > 0 else 0.0)
