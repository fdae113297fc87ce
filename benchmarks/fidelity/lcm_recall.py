"""Does lcm find what the prompt lost? Facts no longer in the prompt, searched and expanded.

Each session is replayed through the ``lcm`` engine at a small window (compacting whenever the
engine asks to). Afterwards, every fact of the session (:mod:`benchmarks.fidelity.facts`) whose
message a summary now covers and that the final prompt no longer holds is "lost from the
prompt". For a seeded sample of them, ``lcm_grep`` in literal mode must return a hit in a
message holding the fact as the agent wrote it, and ``lcm_expand`` of the summary covering that
hit must return the original message unchanged.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from benchmarks.fidelity.facts import Fact, Haystack, contains, message_plain_text
from benchmarks.fidelity.harness import Session

import ctxengine
from ctxengine import Kernel
from ctxengine_lcm.engine import get_state
from ctxengine_lcm.ingest import message_hash
from ctxengine_lcm.testing import lcm_config

__all__ = ["RecallReport", "measure_recall"]

WINDOW = 32_000


@attrs.frozen
class RecallReport:
    """How many sampled lost facts lcm found (``found``) and expanded verbatim (``expanded``),
    out of ``sampled`` (drawn from ``lost`` lost facts over ``sessions`` sessions)."""

    sessions: int
    lost: int
    sampled: int
    found: int
    expanded: int
    misses: tuple[str, ...] = ()


def _key(session: Session) -> str:
    """The lcm session id: a session's name is shared by its two format copies."""
    return f"{session.name}/{session.fmt}"


def _replay(kernel: Kernel, session: Session) -> list[dict[str, Any]]:
    """Feed ``session`` turn by turn, compacting when the engine says so; the final prompt."""
    live = kernel.session(_key(session))
    history: list[dict[str, Any]] = []
    for index, msg in enumerate(session.messages):
        history.append(msg)
        last = index + 1 == len(session.messages)
        if not last and session.messages[index + 1].get("role") != "assistant":
            continue
        if live.should_compress(history, session.system):
            result = live.compress(history, session.system)
            if result.status == "compacted":
                history = list(result.messages)
    final = live.compress(history, session.system, force=True)
    return list(final.messages)


def _lost(session: Session, kernel: Kernel, prompt: Sequence[dict[str, Any]]) -> list[Fact]:
    lcm = get_state(kernel.session(_key(session)).ctx).session
    assert lcm is not None
    ids = {row.content_hash: row.id for row in lcm.store.messages(lcm.conversation_id)}
    text = Haystack.of("\n".join(message_plain_text(m, session.fmt) for m in prompt))
    lost = []
    for fact in session.facts(len(session.messages)):
        mid = ids.get(message_hash(session.messages[fact.home]))
        if mid is None or not lcm.store.covering_summaries(mid):
            continue
        if not contains(text, fact):
            lost.append(fact)
    return lost


def _check(kernel: Kernel, session: Session, fact: Fact) -> tuple[bool, bool]:
    """(found by lcm_grep literal, expanded verbatim) for one lost fact."""
    live = kernel.session(_key(session))
    tools = {entry.tool.name: entry.tool.handler for entry in live.tools()}
    lcm = get_state(live.ctx).session
    assert lcm is not None
    by_id = {}
    originals = {message_hash(m): m for m in session.messages}
    for row in lcm.store.messages(lcm.conversation_id):
        if row.content_hash in originals:
            by_id[row.id] = originals[row.content_hash]
    found = tools["lcm_grep"]({"pattern": fact.raw, "mode": "literal", "limit": 50})
    hits = [
        h
        for h in found["hits"]
        if h["message_id"] in by_id and fact.raw in _raw(by_id[h["message_id"]], session)
    ]
    if not hits:
        return False, False
    for hit in hits:
        covering = hit["covered_by"]
        if not covering:
            continue
        offset: int | None = 0
        while offset is not None:
            page = tools["lcm_expand"](
                {"summary_id": covering, "offset": offset, "max_tokens": 50_000}
            )
            for entry in page["messages"]:
                if (
                    int(entry["id"][4:]) == hit["message_id"]
                    and entry.get("message") == by_id[hit["message_id"]]
                ):
                    return True, True
            offset = page["next_offset"]
    return True, False


def _raw(msg: dict[str, Any], session: Session) -> str:
    return message_plain_text(msg, session.fmt)


def measure_recall(
    sessions: Sequence[Session], *, sample: int = 300, seed: int = 12
) -> RecallReport:
    """Replay ``sessions`` through lcm and check a sample of ``sample`` lost facts."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="ctxengine-fidelity-") as tmp:
        env = {**os.environ, "CTXENGINE_HOME": str(Path(tmp) / "home")}
        env.pop("CTXENGINE_CONFIG", None)
        kernel = ctxengine.load(lcm_config(Path(tmp) / "lcm.db", context_length=WINDOW), env=env)
        try:
            pool: list[tuple[Session, Fact]] = []
            for session in sessions:
                prompt = _replay(kernel, session)
                pool.extend((session, fact) for fact in _lost(session, kernel, prompt))
            chosen = rng.sample(pool, min(sample, len(pool)))
            found = expanded = 0
            misses: list[str] = []
            for session, fact in chosen:
                hit, verbatim = _check(kernel, session, fact)
                found += hit
                expanded += verbatim
                if not verbatim:
                    misses.append(
                        f"{session.name}: {fact.kind} {fact.raw[:80]!r} "
                        f"({'not expanded' if hit else 'not found'})"
                    )
            return RecallReport(
                len(sessions), len(pool), len(chosen), found, expanded, tuple(misses)
            )
        finally:
            kernel.close()
