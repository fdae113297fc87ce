"""Compressor benchmark: ``session.compress()`` with the local digest (``extractive`` provider)
on every bundled session with at least 100 messages, as a ratio to ``json.dumps`` of the same
message list, timed in the same run.

- ``cold``: a fresh session of a loaded kernel (tiktoken's encoding in memory) compresses the
  conversation: nothing about it is known yet, so what the compaction needs is counted now (the
  kept tail, the head, the result) and the summarised middle is only estimated;
- ``warm``: the session has counted the conversation before (its memo holds every message's
  count, as after a decision that had to count exactly or an earlier compaction attempt).

Both are forced compactions of the whole session with the default model window, so they do the
full work: boundaries, digest, ledger, assembly, sanitizer and the count of the result.

Each figure is taken twice, in separate interleaved runs: on the wall clock (``compress_*``) and
on the CPU time of the calls (``compress_*_cpu``, ``time.thread_time``), which other processes on
a loaded machine disturb far less.

Run: ``python benchmarks/bench_compressor.py``. Prints ``name<TAB>value<TAB>target`` lines;
exits non-zero only when something crashes, never on a missed target.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import ctxengine

if not __package__:  # run as a script (nox -s bench): make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchSession, interleaved_min, line, long_sessions, repeat

ROUNDS = 9
TARGETS = {"cold": 5.0, "warm": 3.0}
CLOCKS: dict[str, Callable[[], float]] = {"": time.perf_counter, "_cpu": time.thread_time}
"""Each figure's clocks, by the suffix of its name: wall clock, and the CPU time of the calls."""


def measure(kernel: ctxengine.Kernel, data: BenchSession) -> tuple[dict[str, float], str]:
    """(ratios by mode and clock suffix, a line describing the compaction) for one session."""
    messages, system = data.messages, data.system
    ids = itertools.count()
    opened: list[str] = []

    def session() -> ctxengine.Session:
        for old in opened:
            kernel.close_session(old)
        opened.clear()
        opened.append(f"bench-{next(ids)}")
        return kernel.session(opened[-1])

    def compress(target: ctxengine.Session) -> Callable[[], object]:
        return lambda: target.compress(messages, system, force=True, format=data.format)

    def cold() -> list[Callable[[], object]]:
        return [compress(session())]

    def warm() -> list[Callable[[], object]]:
        target = session()
        target.ctx.tokens.count(messages, system)
        return [compress(target)]

    result = session().compress(messages, system, force=True, format=data.format)
    setups = {"dumps": repeat(lambda: json.dumps(messages)), "cold": cold, "warm": warm}
    ratios: dict[str, float] = {}
    for suffix, clock in CLOCKS.items():
        best = interleaved_min(setups, ROUNDS, clock)
        ratios.update({mode + suffix: best[mode] / best["dumps"] for mode in TARGETS})
    for old in opened:
        kernel.close_session(old)
    described = (
        f"{result.status}: ~{result.tokens_before:,} -> {result.tokens_after:,} tokens, "
        f"{result.messages_before} -> {result.messages_after} messages"
    )
    return ratios, described


def main() -> None:
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6"},
            "auxiliary": {"compression": {"provider": "extractive"}},
        }
    )
    sessions = long_sessions()
    results = []
    for data in sessions:
        ratios, described = measure(kernel, data)
        results.append(ratios)
        print(
            f"session\t{data.name}\t{len(data.messages)} messages ({described}); "
            f"cold {ratios['cold']:.2f}x, warm {ratios['warm']:.2f}x; CPU time: cold "
            f"{ratios['cold_cpu']:.2f}x, warm {ratios['warm_cpu']:.2f}x"
        )
    for suffix in CLOCKS:
        for mode, target in TARGETS.items():
            values = [r[mode + suffix] for r in results]
            name = f"compress_{mode}{suffix}_vs_json_dumps"
            print(line(name, values, f"target<={target:g}x", len(values)))


if __name__ == "__main__":
    main()
