"""Replaying the long real sessions through repeated compactions with a small window.

Checks, for every session in both formats: each compaction's output passes the strict validator
and fits the threshold; afterwards every message ever ingested is in the store; and for 200
random distinctive strings of compacted messages, lcm_grep finds the message and lcm_expand of
the covering summary returns it unchanged (recall must be 100 %).
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from ctxengine import rough_conversation_tokens
from ctxengine.messages import tool_calls, tool_results, validate, visible_text
from ctxengine.testing.transcripts import load_sessions
from ctxengine_lcm.engine import get_state
from ctxengine_lcm.ingest import message_hash, written_arguments

WINDOW = 32_000
THRESHOLD = int(0.75 * WINDOW)
TOKEN = re.compile(r"[^\W_]+")
ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def _parts(msg: dict[str, Any], fmt: str) -> list[str]:
    """Texts that are indexed as one piece (a phrase never spans two of them)."""
    parts = [visible_text(msg)]
    parts += [r.text for r in tool_results(msg, fmt)]  # type: ignore[arg-type]
    # Tool-call arguments are indexed as the agent wrote them (decoded), not as JSON text.
    parts += [written_arguments(c.arguments) or c.arguments for c in tool_calls(msg, fmt)]  # type: ignore[arg-type]
    return [p for p in parts if p]


def _grams(text: str) -> set[str]:
    """Every run of four ASCII words (16+ letters in all), lower-cased, as FTS5 sees them."""
    tokens = [t.lower() for t in TOKEN.findall(text)]
    ascii_ok = [t.isascii() and ASCII_WORD.fullmatch(t) is not None for t in tokens]
    return {
        " ".join(tokens[k : k + 4])
        for k in range(len(tokens) - 3)
        if all(ascii_ok[k : k + 4]) and sum(len(t) for t in tokens[k : k + 4]) >= 16
    }


def _replay(
    kernel: Any, session_id: str, messages: list[dict[str, Any]], system: Any, fmt: str
) -> int:
    session = kernel.session(session_id)
    history: list[dict[str, Any]] = []
    compactions = 0
    for i, msg in enumerate(messages):
        history.append(msg)
        at_request = i + 1 == len(messages) or messages[i + 1].get("role") == "assistant"
        if not at_request or not session.should_compress(history, system):
            continue
        result = session.compress(history, system)
        assert result.status in ("compacted", "noop"), result.reason
        if result.status != "compacted":
            continue
        compactions += 1
        problems = validate(result.messages, fmt, system=system)  # type: ignore[arg-type]
        assert not problems, [p.message for p in problems]
        assert result.tokens_after <= THRESHOLD, result.reason
        assert result.tokens_after < result.tokens_before
        history = list(result.messages)
    # One last call stores the messages that arrived after the last compaction.
    final = session.compress(history, system, force=True)
    assert final.status in ("compacted", "noop"), final.reason
    return compactions


@pytest.mark.parametrize(
    ("backend", "name", "fmt"),
    [
        ("sqlite", "claude_code_spotter.openai.jsonl", "openai"),
        ("sqlite", "claude_code_spotter.anthropic.jsonl", "anthropic"),
        # The message format is the kernel's concern, not the store's: one replay on PostgreSQL
        # covers its side (and keeps the suite's run time down).
        ("postgresql", "claude_code_spotter.openai.jsonl", "openai"),
    ],
)
def test_replay_is_lossless_and_recall_is_total(make_kernel: Any, name: str, fmt: str) -> None:
    kernel = make_kernel(context_length=WINDOW)
    rng = random.Random(20240611)
    long_sessions = [
        s for s in load_sessions(name) if rough_conversation_tokens(s["messages"]) > WINDOW
    ]
    assert len(long_sessions) >= 5
    candidates: list[tuple[str, str, dict[str, Any]]] = []  # (session, phrase, message)
    for entry in long_sessions:
        sid = entry["id"]
        messages = entry["messages"]
        system = entry.get("system") if fmt == "anthropic" else None
        assert _replay(kernel, sid, messages, system, fmt) >= 1

        lcm = get_state(kernel.session(sid).ctx).session
        assert lcm is not None
        rows = lcm.store.messages(lcm.conversation_id)
        stored = {row.content_hash for row in rows}
        # Every message ever ingested is still there, verbatim.
        assert {message_hash(m) for m in messages} <= stored
        by_hash = {message_hash(m): m for m in messages}
        for row in rows:
            assert row.message() == by_hash.get(row.content_hash, row.message())

        # Distinctive phrases from messages that a summary now covers.
        counts: dict[str, int] = {}
        per_message: list[tuple[dict[str, Any], set[str]]] = []
        for msg in messages:
            grams: set[str] = set()
            for part in _parts(msg, fmt):
                grams |= _grams(part)
            for g in grams:
                counts[g] = counts.get(g, 0) + 1
            per_message.append((msg, grams))
        id_of = {row.content_hash: row.id for row in rows}
        for msg, grams in per_message:
            mid = id_of.get(message_hash(msg))
            if mid is None or not lcm.store.covering_summaries(mid):
                continue
            unique = sorted(g for g in grams if counts.get(g) == 1)
            if unique:
                candidates.append((sid, rng.choice(unique), msg))

    assert len(candidates) >= 200
    for sid, phrase, original in rng.sample(candidates, 200):
        tools = {entry.tool.name: entry.tool.handler for entry in kernel.session(sid).tools()}
        found = tools["lcm_grep"]({"pattern": f'"{phrase}"', "limit": 50})
        target = message_hash(original)
        lcm = get_state(kernel.session(sid).ctx).session
        assert lcm is not None
        ids = {r.id for r in lcm.store.messages(lcm.conversation_id) if r.content_hash == target}
        hits = [h for h in found["hits"] if h["message_id"] in ids]
        assert hits, f"lcm_grep missed {phrase!r} in {sid}"
        covering = hits[0]["covered_by"]
        assert covering and covering.startswith("sum_")
        offset: int | None = 0
        expanded: list[dict[str, Any]] = []
        while offset is not None:
            page = tools["lcm_expand"](
                {"summary_id": covering, "offset": offset, "max_tokens": 50_000}
            )
            expanded += page["messages"]
            offset = page["next_offset"]
        matches = [e for e in expanded if int(e["id"][4:]) in ids]
        assert matches, f"lcm_expand({covering}) lacks the message holding {phrase!r}"
        assert matches[0]["message"] == original
