"""Consistency checks of a store (``ctxengine lcm doctor``), the same on both backends.

Messages waiting for the full-text index are normal on both backends (ingest leaves them for
:meth:`~ctxengine_lcm.store.Store.catch_up_index`), so the doctor first catches up, notes how
many were pending, and then checks:

- what the backend checks of itself (:meth:`~ctxengine_lcm.store.Store.integrity_problems`): on
  SQLite its ``integrity_check`` and ``foreign_key_check``, each FTS5 index against its table
  and the message watermark; on PostgreSQL the extensions, indexes, immutability triggers and
  foreign keys the layout needs, that no reference points at a missing row, and that every
  message is searchable or queued and its searchable copy matches it;
- every summary's lineage is complete: ordered links numbered from 0 without gaps, a leaf links
  only messages of its own conversation, a condensed summary links only shallower summaries,
  and the recorded descendant counts match the links;
- a leaf summary links its messages in increasing id order, and its recorded first and last
  message ids are those of its first and last link;
- the active context of every conversation refers only to its own messages and summaries, and
  expanded (summaries replaced by the messages they cover) gives strictly increasing message
  ids: nothing twice, nothing out of order.
"""

from __future__ import annotations

import itertools

import attrs

from ctxengine_lcm.store import Connection, Store, StoreError


@attrs.frozen
class Checkup:
    """What the doctor found.

    :ivar problems: every inconsistency, one sentence each (empty when the store is healthy).
    :ivar notes: facts worth reporting that are not problems (messages indexed on the way).
    """

    problems: list[str]
    notes: list[str]


def examine(store: Store) -> Checkup:
    """Bring the full-text index up to date, then check the whole store."""
    notes: list[str] = []
    problems: list[str] = []
    if store.deferred_index:
        try:
            pending = store.unindexed_messages()
            store.catch_up_index()
        except StoreError as exc:
            problems.append(f"cannot bring the full-text index of messages up to date: {exc}")
        else:
            notes.append(
                f"{pending} message(s) were waiting for the full-text index and are now indexed"
            )
    notes += store.health_notes()
    problems += check_store(store, catch_up=False)
    return Checkup(problems=problems, notes=notes)


def check_store(store: Store, *, catch_up: bool = True) -> list[str]:
    """Every problem found, one sentence each (empty when the store is healthy).

    :param catch_up: index pending messages first (they are not a problem); with ``False`` a
        pending message shows up as an index that does not match its table.
    """
    if catch_up:
        return examine(store).problems
    problems = store.integrity_problems()
    with store.reading() as conn:
        problems += _check_lineage(conn)
        problems += _check_context(conn)
    return problems


def _check_lineage(conn: Connection) -> list[str]:
    problems: list[str] = []
    summaries = {
        sid: (conv, depth, kind, dm, ds)
        for sid, conv, depth, kind, dm, ds in conn.execute(
            "SELECT id, conversation_id, depth, kind, descendant_messages, descendant_summaries"
            " FROM summaries"
        )
    }
    bounds: dict[str, tuple[int | None, int | None]] = {
        sid: (first, last)
        for sid, first, last in conn.execute(
            "SELECT id, first_message_id, last_message_id FROM summaries"
        )
    }
    links: dict[str, list[tuple[int, int | None, str | None]]] = {}
    for sid, ordinal, mid, cid in conn.execute(
        "SELECT summary_id, ordinal, message_id, child_id FROM summary_links"
        " ORDER BY summary_id, ordinal"
    ):
        links.setdefault(sid, []).append((ordinal, mid, cid))
    message_conv = dict(conn.execute("SELECT id, conversation_id FROM messages").fetchall())
    totals: dict[str, tuple[int, int]] = {}

    def descendants(sid: str, trail: frozenset[str]) -> tuple[int, int]:
        if sid in totals:
            return totals[sid]
        if sid in trail:
            problems.append(f"summary {sid} is its own descendant")
            return 0, 0
        messages = summaries_below = 0
        for _, mid, cid in links.get(sid, []):
            if mid is not None:
                messages += 1
            elif cid is not None:
                sub = descendants(cid, trail | {sid})
                messages += sub[0]
                summaries_below += 1 + sub[1]
        totals[sid] = (messages, summaries_below)
        return totals[sid]

    for sid, (conv, depth, kind, dm, ds) in summaries.items():
        own = links.get(sid, [])
        if not own:
            problems.append(f"summary {sid} covers nothing (no links)")
            continue
        if [o for o, _, _ in own] != list(range(len(own))):
            problems.append(f"summary {sid} has gaps in its link order")
        for _, mid, cid in own:
            if kind == "leaf":
                if mid is None:
                    problems.append(f"leaf summary {sid} links a summary ({cid})")
                elif message_conv.get(mid) != conv:
                    problems.append(f"leaf summary {sid} links msg_{mid} of another conversation")
            elif cid is None:
                problems.append(f"condensed summary {sid} links a message (msg_{mid})")
            else:
                child = summaries.get(cid)
                if child is None:
                    problems.append(f"summary {sid} links unknown summary {cid}")
                elif child[0] != conv or child[1] >= depth:
                    problems.append(f"summary {sid} (depth {depth}) links {cid} (depth {child[1]})")
        if kind == "leaf":
            mids = [mid for _, mid, _ in own if mid is not None]
            if any(a >= b for a, b in itertools.pairwise(mids)):
                problems.append(f"leaf summary {sid} links its messages out of order")
            if mids and bounds[sid] != (mids[0], mids[-1]):
                first, last = bounds[sid]
                problems.append(
                    f"leaf summary {sid} records messages {first}..{last}, its links run "
                    f"{mids[0]}..{mids[-1]}"
                )
        if descendants(sid, frozenset()) != (dm, ds):
            problems.append(
                f"summary {sid} records {dm} messages / {ds} summaries below it, its links "
                f"give {totals[sid][0]} / {totals[sid][1]}"
            )
    return problems


def _check_context(conn: Connection) -> list[str]:
    problems: list[str] = []
    rows = conn.execute(
        "SELECT c.conversation_id, c.ordinal, c.message_id, c.summary_id,"
        " m.conversation_id, s.conversation_id FROM context_items c"
        " LEFT JOIN messages m ON m.id = c.message_id"
        " LEFT JOIN summaries s ON s.id = c.summary_id ORDER BY c.conversation_id, c.ordinal"
    ).fetchall()
    links: dict[str, list[tuple[int | None, str | None]]] = {}
    for sid, mid, cid in conn.execute(
        "SELECT summary_id, message_id, child_id FROM summary_links ORDER BY summary_id, ordinal"
    ):
        links.setdefault(sid, []).append((mid, cid))

    def covered(sid: str, trail: frozenset[str]) -> list[int]:
        found: list[int] = []
        for mid, cid in links.get(sid, []):
            if mid is not None:
                found.append(mid)
            elif cid is not None and cid not in trail:  # a cycle is reported by the lineage
                found += covered(cid, trail | {sid})
        return found

    expected: dict[int, int] = {}
    expanded: dict[int, list[tuple[int, str]]] = {}
    for conv, ordinal, mid, sid, m_conv, s_conv in rows:
        if ordinal != expected.get(conv, 0):
            problems.append(f"conversation {conv}: active context order has a gap at {ordinal}")
        expected[conv] = ordinal + 1
        owner = m_conv if mid is not None else s_conv
        if owner != conv:
            ref = f"msg_{mid}" if mid is not None else sid
            problems.append(f"conversation {conv}: active context holds {ref} of another one")
        ref = f"msg_{mid}" if mid is not None else str(sid)
        ids = [mid] if mid is not None else covered(str(sid), frozenset())
        expanded.setdefault(conv, []).extend((m, ref) for m in ids)
    for conv, seq in expanded.items():
        for (a, ref_a), (b, ref_b) in itertools.pairwise(seq):
            if a >= b:
                what = "twice" if a == b else "out of order"
                problems.append(
                    f"conversation {conv}: the active context expands to msg_{b} {what} "
                    f"(msg_{a} via {ref_a}, then msg_{b} via {ref_b})"
                )
                break
    return problems
