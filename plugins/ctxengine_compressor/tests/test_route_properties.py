"""Property-based tests over generated conversations in both formats and over every bundled
session: every compaction -- the first and up to three more as the conversation grows -- is valid
on the strictest route (the strict profile of ``validate``), mutates nothing and drops nothing
without a summary in its place (:mod:`.hostile` states the contract and builds the conversations).

Two runs of the same property:

- hypothesis explores recipes (and shrinks a failing one to a short conversation) for a hundred
  examples per format, in this process;
- the seeded run compacts 10,000 conversations per format, and every bundled session with every
  ``protect_first_n`` 0-5 and ``protect_last_n`` 1-6, in worker processes (one per core, at most
  two): the same recipes on every machine, each failure named with the recipe that replays it.

Both use the extractive provider (a twentieth of the conversations a scripted summary model with
a small window, for the map-then-merge path), small windows and random settings. The counts are
attached as junit properties and printed in the terminal summary ("route properties").
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine import CompressResult, Format, Message
from ctxengine.testing import samples
from ctxengine_compressor.assemble import SUMMARY_PREFIX

from .helpers import make_ctx, run
from .hostile import ROUNDS, Tally, check_round, compact_rounds

COUNTS = "route properties"
"""The junit property holding a run's counts; ``conftest.py`` prints them after the run."""
FORMATS: tuple[Format, ...] = ("openai", "anthropic")
GENERATED = 10_000
"""Conversations per format in the seeded run."""
BATCH = 1_250
HYPOTHESIS_EXAMPLES = 100
HYPOTHESIS_TALLIES = {fmt: Tally() for fmt in FORMATS}

PROPERTIES = settings(
    max_examples=HYPOTHESIS_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
RECIPES = st.binary(min_size=16, max_size=400)


@PROPERTIES
@given(RECIPES)
def test_hypothesis_openai_conversations_compact_validly(data: bytes) -> None:
    assert compact_rounds(data, "openai", HYPOTHESIS_TALLIES["openai"]) == []


@PROPERTIES
@given(RECIPES)
def test_hypothesis_anthropic_conversations_compact_validly(data: bytes) -> None:
    assert compact_rounds(data, "anthropic", HYPOTHESIS_TALLIES["anthropic"]) == []


def test_the_hypothesis_runs_are_counted(record_property: Any) -> None:
    for fmt, tally in HYPOTHESIS_TALLIES.items():
        if tally.conversations:  # the hypothesis tests ran before, in this process
            record_property(COUNTS, f"hypothesis, {fmt}: {tally.line()}")
            assert tally.conversations >= HYPOTHESIS_EXAMPLES
            assert tally.failures == 0, tally.examples


def test_the_seeded_run_and_every_bundled_session(record_property: Any) -> None:
    # By module name, so that the worker processes find the functions they are handed.
    shared = importlib.import_module("ctxengine_compressor.tests.hostile")
    workers = min(2, os.cpu_count() or 1)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        bundled = [pool.submit(shared.bundled_run, part, 4) for part in range(4)]
        generated: dict[Format, list[Future[Any]]] = {
            fmt: [
                pool.submit(shared.generated_run, fmt, first, BATCH)
                for first in range(0, GENERATED, BATCH)
            ]
            for fmt in FORMATS
        }
        totals = {fmt: shared.Tally() for fmt in FORMATS}
        for fmt, futures in generated.items():
            for future in futures:
                totals[fmt].add(future.result())
        sessions, checked = shared.Tally(), 0
        for future in bundled:
            tally, settings_checked = future.result()
            sessions.add(tally)
            checked += settings_checked
    for fmt, tally in totals.items():
        record_property(COUNTS, f"seeded, {fmt}: {tally.line()}")
    record_property(
        COUNTS, f"bundled sessions, {checked:,} session x setting chains: {sessions.line()}"
    )
    for tally in (*totals.values(), sessions):
        assert tally.failures == 0, tally.examples
    for tally in totals.values():
        assert tally.conversations == GENERATED
        # Most conversations compact, and many of them four times as they grow.
        assert tally.by_compactions[0] < GENERATED // 2
        assert tally.by_compactions[ROUNDS] > GENERATED // 4
        assert tally.hostile_inputs > GENERATED // 10
    count = len(shared.bundled_sessions())
    assert checked == sessions.conversations == 36 * count
    # Each session fills its window, so compacts, except where the head and tail settings
    # protect all of a short one.
    assert sessions.by_compactions[0] < checked // 10
    assert sessions.compactions >= count


# -- the checker finds what it must (else the runs above could not fail) -------------------------


def _compacted(first_n: int = 2) -> tuple[list[Message], CompressResult]:
    messages = samples.openai_conversation(turns=16)
    result = run(make_ctx(None, protect_first_n=first_n, protect_last_n=3), messages, "openai")
    assert result.compacted, result.reason
    assert check_round(messages, "openai", None, result, None) == []
    return messages, result


def _with(result: CompressResult, messages: list[Message]) -> CompressResult:
    return attrs.evolve(result, conversation=result.conversation.with_messages(messages))


def test_the_checker_reports_a_lost_tail_message() -> None:
    messages, result = _compacted()
    lossy = _with(result, [*result.messages[:-2], result.messages[-1]])
    wrong = check_round(messages, "openai", None, lossy, None)
    assert any("the tail changed" in w for w in wrong), wrong


def test_the_checker_reports_an_assistant_first_output() -> None:
    messages, result = _compacted(first_n=0)
    at = next(i for i, m in enumerate(result.messages) if SUMMARY_PREFIX in str(m["content"]))
    assert at == 1  # right after the system prompt
    out = list(result.messages)
    out[at] = {**out[at], "role": "assistant"}
    wrong = check_round(messages, "openai", None, _with(result, out), None)
    assert any(w.startswith("invalid output") and "first-role" in w for w in wrong), wrong


def test_the_checker_reports_a_mutated_input_and_a_missing_summary() -> None:
    messages, result = _compacted()
    snapshot = json.dumps([None, messages], default=str)
    messages[-1] = {**messages[-1], "content": "changed"}
    without = [m for m in result.messages if SUMMARY_PREFIX not in str(m["content"])]
    wrong = check_round(messages, "openai", None, _with(result, without), snapshot)
    assert "mutated input" in wrong and "compacted without a summary" in wrong


def test_the_tally_counts_each_kind_of_failure() -> None:
    tally = Tally()
    tally.count(["invalid output: x", "mutated input", "head message 2 stands for no input"], "a")
    tally.count(["the prompt grew"], "b")
    assert (tally.invalid_outputs, tally.mutated_inputs, tally.lost_without_summary) == (1, 1, 1)
    assert tally.other_failures == 1 and tally.failures == 4 and len(tally.examples) == 2
    other = Tally(conversations=3, by_compactions=[1, 0, 0, 0, 2])
    tally.add(other)
    assert tally.conversations == 3 and tally.by_compactions == [1, 0, 0, 0, 2]
    assert tally.failures == 4
