"""Re-sent histories are matched by the message ids they stand for, so nothing is stored twice."""

from __future__ import annotations

from typing import Any

from ctxengine.testing import samples
from ctxengine_lcm.doctor import check_store
from ctxengine_lcm.engine import get_state
from ctxengine_lcm.render import BLOCK_HEADER


def _lcm(session: Any) -> Any:
    lcm = get_state(session.ctx).session
    assert lcm is not None
    return lcm


def _turn(i: int) -> list[dict[str, Any]]:
    words = 350
    return [
        {"role": "user", "content": f"user {i} " + " ".join(f"u{i}_{j}" for j in range(words))},
        {
            "role": "assistant",
            "content": f"reply {i} " + " ".join(f"a{i}_{j}" for j in range(words)),
        },
    ]


def test_an_older_summary_block_is_recognised_after_its_summaries_were_condensed(
    make_kernel: Any,
) -> None:
    kernel = make_kernel(
        context_length=8000,
        fresh_tail_count=2,
        leaf_min_messages=1,
        leaf_chunk_tokens=300,
        condense_fanout=2,
    )
    session = kernel.session("older-block")
    distinct: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    held = list(distinct)
    for i in range(6):
        distinct += _turn(i)
        held += _turn(i)
    result = session.compress(held, force=True)
    assert result.status == "compacted", result.reason
    lcm = _lcm(session)
    held = list(result.messages)
    condensed_past_a_held_block = False
    for rnd in range(2, 8):
        new = _turn(10 + rnd)
        distinct += new
        held += new
        block_before = held[1]["content"]
        result = session.compress(held, force=True)
        assert result.status == "compacted", result.reason
        # Every message the host ever sent is stored exactly once; the old block is not a
        # message of the conversation.
        assert lcm.store.message_count(lcm.conversation_id) == len(distinct), rnd
        stored = [m.content for m in lcm.store.messages(lcm.conversation_id)]
        assert not any(BLOCK_HEADER in text for text in stored)
        if result.messages[1]["content"] != block_before:
            condensed_past_a_held_block = True
        if rnd != 5:
            held = list(result.messages)  # in round 5 the host keeps its older block
    assert condensed_past_a_held_block
    assert check_store(lcm.store) == []


def test_a_shrunken_history_then_the_full_one_stores_only_the_new_message(
    make_kernel: Any,
) -> None:
    for fmt in ("openai", "anthropic"):
        session = make_kernel(fresh_tail_count=4).session(f"shrink-{fmt}")
        system, messages = samples.conversation(fmt)
        first = session.compress(messages, system, force=True)
        assert first.status == "compacted", first.reason
        lcm = _lcm(session)
        count = lcm.store.message_count(lcm.conversation_id)
        session.compress(messages[:5], system, force=True)
        assert lcm.store.message_count(lcm.conversation_id) == count
        grown = [*messages, {"role": "user", "content": "next"}]
        again = session.compress(grown, system, force=True)
        assert lcm.store.message_count(lcm.conversation_id) == count + 1, fmt
        assert again.messages[-1] == grown[-1]
        # And the same full history once more stores nothing.
        session.compress(grown, system, force=True)
        assert lcm.store.message_count(lcm.conversation_id) == count + 1, fmt
        assert check_store(lcm.store) == []
