"""What the benchmarks share: the bundled sessions they run on, timing, and how figures print.

Every figure is a ratio to a baseline timed in the same run, interleaved with it (one call of
each per round, so both see the same machine load) and taken as the minimum over the rounds
(the round least disturbed by other processes). Figures over several sessions are medians, with
the lowest and highest session shown beside them. Nothing here judges a figure: the scripts
print targets for people to read, and exit non-zero only when something crashes.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ctxengine import Format
from ctxengine.testing.transcripts import transcript_files

MIN_MESSAGES = 100
"""The sessions measured: every bundled session with at least this many messages."""


@attrs.frozen
class BenchSession:
    """One bundled session: where it comes from, its format, system prompt and messages."""

    name: str
    format: Format
    system: Any
    messages: list[dict[str, Any]]

    def fresh_messages(self) -> list[dict[str, Any]]:
        """New dicts with new strings, equal to :attr:`messages` (as a database or HTTP gives)."""
        loaded: list[dict[str, Any]] = json.loads(json.dumps(self.messages))
        return loaded


def long_sessions(min_messages: int = MIN_MESSAGES) -> list[BenchSession]:
    """Every bundled session with at least ``min_messages`` messages, in file order."""
    found: list[BenchSession] = []
    for path in transcript_files():
        fmt: Format = "anthropic" if path.name.endswith(".anthropic.jsonl") else "openai"
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                if len(row["messages"]) >= min_messages:
                    source = path.name.split(".")[0]
                    name = f"{source}:{str(row['id']).split('/')[-1][:8]}[{fmt}]"
                    found.append(BenchSession(name, fmt, row.get("system"), row["messages"]))
    return found


Steps = list[Callable[[], object]]
"""Calls to time one by one, in order (each may rely on the state the previous ones left)."""

Setup = Callable[[], Steps]
"""Prepares one round of timed calls (untimed) and returns them."""


def interleaved_min(
    setups: dict[str, Setup], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """For each setup, the mean over its steps of each step's fastest time in ``rounds`` rounds
    (:func:`fastest_steps`)."""
    fastest = fastest_steps(setups, rounds, clock)
    return {name: statistics.fmean(times) for name, times in fastest.items()}


def fastest_steps(
    setups: dict[str, Setup], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """For each setup, each step's fastest time in ``rounds`` rounds, in step order; every setup
    runs once per round, one after the other. ``clock`` reads the time: wall clock by default,
    ``time.thread_time`` for the CPU time of the calls (which other processes on a loaded
    machine disturb far less).

    Each step is timed on its own, so a step another process interrupted costs that step one
    round, not the whole figure. The garbage collector runs after each setup and is off while a
    step is timed: the figure is the work of the calls themselves, not a collection of whatever
    the process allocated before them (which would land on baseline and measured calls alike, at
    random).
    """
    best: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, setup in setups.items():
            steps = setup()
            gc.collect()
            times = best.setdefault(name, [float("inf")] * len(steps))
            for index, step in enumerate(steps):
                gc.disable()
                try:
                    start = clock()
                    step()
                    elapsed = clock() - start
                finally:
                    gc.enable()
                times[index] = min(times[index], elapsed)
    return best


def repeat(*runs: Callable[[], object]) -> Setup:
    """A setup with nothing to prepare: the same steps every round."""
    return lambda: list(runs)


def spread(values: Sequence[float], unit: str = "x") -> str:
    """``median (min-max)`` of ratios or figures in ``unit``, e.g. ``0.021x (0.015-0.030x)``."""
    return f"{statistics.median(values):.3f}{unit} ({min(values):.3f}-{max(values):.3f}{unit})"


def line(name: str, values: Sequence[float], target: str, sessions: int, unit: str = "x") -> str:
    """One tab-separated result line: name, median with the range, target, sessions."""
    figure = spread(values, unit)
    return f"{name}\t{figure}\t{target}\tmedian of {sessions} sessions (lowest-highest)"
