"""The prompt-cache simulator behind `ctxengine replay`, on hand-built requests."""

from __future__ import annotations

from typing import Any

import pytest

from ctxengine import TokenCounter, cost_of, lookup_model
from ctxengine_fakeapi.cachesim import PromptCacheSimulator

SYSTEM = "You are a meticulous assistant. " * 200  # over the 1,024-token minimum


def marked(text: str, ttl: str | None = None) -> list[dict[str, Any]]:
    marker: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        marker["ttl"] = ttl
    return [{"type": "text", "text": text, "cache_control": marker}]


def turn_messages(n: int) -> list[dict[str, Any]]:
    """``n`` alternating messages, each a few hundred tokens."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i}: " + f"details about step {i}. " * 40,
        }
        for i in range(n)
    ]


def request(
    messages: list[dict[str, Any]], system: str = SYSTEM, ttl: str | None = None
) -> dict[str, Any]:
    """A request marked like system_and_3: the system prompt and the last three messages."""
    out = [dict(m) for m in messages]
    for m in out[-3:]:
        m["content"] = marked(m["content"], ttl) if isinstance(m["content"], str) else m["content"]
    return {"system": marked(system, ttl), "messages": out}


def with_text_block(req: dict[str, Any], text: str) -> dict[str, Any]:
    """``req`` with one more text block at the end of its last (user) message: the shape of a
    cache-aware summary request, the agent's request plus the instruction."""
    messages = list(req["messages"])
    last = messages[-1]
    messages[-1] = {**last, "content": [*last["content"], {"type": "text", "text": text}]}
    return {**req, "messages": messages}


@pytest.fixture
def sim() -> PromptCacheSimulator:
    return PromptCacheSimulator(TokenCounter(), min_cacheable_tokens=1024)


def test_a_stable_prefix_hits(sim: PromptCacheSimulator) -> None:
    messages = turn_messages(6)
    first = sim.send(request(messages), now=0)
    assert first.cache_read_tokens == 0
    assert first.cache_write_5m_tokens == first.prompt_tokens
    second = sim.send(request([*messages, *turn_messages(8)[6:]]), now=30)
    assert second.cache_read_tokens == first.prompt_tokens
    assert second.cache_write_5m_tokens == second.prompt_tokens - first.prompt_tokens
    assert second.input_tokens == 0


def test_a_changed_system_prompt_misses_everything(sim: PromptCacheSimulator) -> None:
    messages = turn_messages(6)
    sim.send(request(messages), now=0)
    changed = sim.send(request(messages, system=SYSTEM + "Today is Tuesday."), now=30)
    assert changed.cache_read_tokens == 0
    assert changed.cache_write_5m_tokens == changed.prompt_tokens


def test_compaction_breaks_the_cache_once_and_the_rolling_window_recovers(
    sim: PromptCacheSimulator,
) -> None:
    history = turn_messages(12)
    for n, size in enumerate(range(6, 13, 2)):
        sim.send(request(history[:size]), now=n * 30)
    # Compaction: the middle is replaced by a summary; the system prompt stays byte-stable.
    summary = {"role": "user", "content": "Summary of earlier turns: " + "fact. " * 200}
    compacted = [summary, {"role": "assistant", "content": "Understood."}, *history[-2:]]
    after = sim.send(request(compacted), now=150)
    system_tokens = TokenCounter().count_system(marked(SYSTEM))
    # Only the system prompt survives in the cache: the break is paid once.
    assert after.cache_read_tokens == system_tokens
    grown = [*compacted, *turn_messages(16)[12:14]]
    next_turn = sim.send(request(grown), now=180)
    assert next_turn.cache_read_tokens == after.prompt_tokens  # recovered on the next turn
    final = sim.send(request([*grown, *turn_messages(16)[14:16]]), now=210)
    assert final.cache_read_tokens == next_turn.prompt_tokens


def test_a_gap_longer_than_the_ttl_misses(sim: PromptCacheSimulator) -> None:
    messages = turn_messages(6)
    sim.send(request(messages), now=0)
    assert sim.send(request(messages), now=299).cache_read_tokens > 0  # within 5 minutes
    late = sim.send(request(messages), now=299 + 301)
    assert late.cache_read_tokens == 0


def test_one_hour_ttl_survives_a_long_gap(sim: PromptCacheSimulator) -> None:
    messages = turn_messages(6)
    first = sim.send(request(messages, ttl="1h"), now=0)
    assert first.cache_write_1h_tokens == first.prompt_tokens
    assert first.cache_write_5m_tokens == 0
    later = sim.send(request(messages, ttl="1h"), now=1800)
    assert later.cache_read_tokens == first.prompt_tokens


def test_one_hour_writes_cost_more_than_five_minute_writes(sim: PromptCacheSimulator) -> None:
    model = lookup_model("claude-sonnet-4-6")
    messages = turn_messages(6)
    five = sim.send(request(messages), now=0)
    other = PromptCacheSimulator(TokenCounter(), min_cacheable_tokens=1024)
    hour = other.send(request(messages, ttl="1h"), now=0)
    assert five.prompt_tokens == hour.prompt_tokens
    five_cost, hour_cost = cost_of(five, model), cost_of(hour, model)
    assert five_cost.cache_write_5m_cost == pytest.approx(
        five.prompt_tokens * model.input_price * 1.25 / 1e6
    )
    assert hour_cost.cache_write_1h_cost == pytest.approx(
        hour.prompt_tokens * model.input_price * 2.0 / 1e6
    )
    assert hour_cost.total > five_cost.total


def test_prefixes_below_the_minimum_are_not_cached() -> None:
    sim = PromptCacheSimulator(TokenCounter(), min_cacheable_tokens=100_000)
    messages = turn_messages(6)
    sim.send(request(messages), now=0)
    again = sim.send(request(messages), now=10)
    assert again.cache_read_tokens == 0
    assert again.cache_write_tokens == 0
    assert again.input_tokens == again.prompt_tokens


def test_markers_and_string_forms_do_not_change_the_prefix(sim: PromptCacheSimulator) -> None:
    messages = turn_messages(8)
    sim.send(request(messages[:6]), now=0)
    # Messages marked in the first request are plain strings now; the prefix is the same.
    second = sim.send(request(messages), now=30)
    assert second.cache_read_tokens > 0


def test_blocks_after_a_marked_block_read_the_prefix_cached_up_to_it(
    sim: PromptCacheSimulator,
) -> None:
    # A cache-aware summary call: the agent's request with one more block after the marked one
    # of its last message. The API caches per block, so the prefix up to the marked block is
    # read and only the appended block is new; nothing is written (no breakpoint after it).
    agent = request(turn_messages(7))
    first = sim.send(agent, now=0)
    summary = with_text_block(agent, "Write a hand-off summary. " * 20)
    usage = sim.send(summary, now=30)
    assert usage.cache_read_tokens == first.prompt_tokens
    assert usage.cache_write_tokens == 0
    assert 0 < usage.input_tokens == usage.prompt_tokens - first.prompt_tokens
    # The instruction turned into a marked block of its own would be written, once.
    marked_last = {
        **summary,
        "messages": [
            *summary["messages"][:-1],
            {
                **summary["messages"][-1],
                "content": [
                    *summary["messages"][-1]["content"][:-1],
                    *marked(summary["messages"][-1]["content"][-1]["text"]),
                ],
            },
        ],
    }
    again = sim.send(marked_last, now=60)
    assert again.cache_read_tokens == first.prompt_tokens
    assert again.cache_write_5m_tokens == usage.input_tokens


def test_a_marker_inside_the_system_prompt_caches_the_part_before_it(
    sim: PromptCacheSimulator,
) -> None:
    # tool_turns marks the stable part of a list system prompt: when only its last block
    # changes, the part up to the inner marker is still read.
    stable = {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}

    def with_system(changing: str) -> dict[str, Any]:
        system = [stable, *marked(f"Today is {changing}. " * 30)]
        return {"system": system, "messages": request(turn_messages(3))["messages"]}

    first = sim.send(with_system("Monday"), now=0)
    assert first.cache_write_5m_tokens == first.prompt_tokens  # both breakpoints, written once
    second = sim.send(with_system("Tuesday"), now=30)
    stable_tokens = TokenCounter().count_system([stable])
    assert second.cache_read_tokens == stable_tokens
    assert second.cache_write_5m_tokens == second.prompt_tokens - second.cache_read_tokens
