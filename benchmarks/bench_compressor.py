"""Compressor benchmark: ``session.compress()`` with the local digest (``extractive`` provider)
on every bundled session with at least 100 messages, as a ratio to ``json.dumps`` of the same
message list, timed in the same run.

- ``cold``: a fresh session of a loaded kernel (tiktoken's encoding in memory) compresses the
  conversation: nothing about it is known yet, so what the compaction needs is counted now (the
  kept tail, the head, the result) and the summarised middle is only estimated;
- ``warm``: the session has counted the conversation before (its memo holds every message's
  count, as after a decision that had to count exactly or an earlier compaction attempt).

Both are forced compactions of the whole session with the default model window (200K), so they
do the full work: boundaries, digest, ledger, assembly, sanitizer and the count of the result.
Each is timed twice, in separate interleaved runs: on the wall clock (``compress_*``) and on the
CPU time of the calls (``compress_*_cpu``, ``time.thread_time``), which other processes on a
loaded machine disturb far less.

Further figures, on the CPU time only:

- ``compress_{cold,warm}_cpu_{64k,32k,16k,8k}``: the same with a model window of 64K, 32K, 16K
  and 8K tokens (a smaller tail kept verbatim, a larger middle summarised);
- ``compress_{second,third}_{cold,warm}_cpu``: compactions in a row. One session compacts the
  conversation without its last six turns (a turn: an assistant message and what answers it,
  up to the next assistant message), then the result with the next three turns appended, then
  that result with the last three turns appended; the second and third compactions are timed
  (each against ``json.dumps`` of its own input). ``cold``: the appended turns are new to the
  session (it knows only the result it returned); ``warm``: the session counted each input
  before compacting it.

``compress_{cold,warm}_cpu[_WINDOW]_ms`` give the same compactions' CPU time in milliseconds,
the median over the sessions, against the aim that a local compaction costs at most 1 % of a
summary call: :data:`AIM_MS`.

Run: ``python benchmarks/bench_compressor.py``. Prints ``name<TAB>value<TAB>target`` lines;
exits non-zero only when something crashes, never on a missed target.
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import ctxengine

if not __package__:  # run as a script (nox -s bench): make the repository importable
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import (
    BenchSession,
    Steps,
    fastest_steps,
    interleaved_min,
    line,
    long_sessions,
    repeat,
)

ROUNDS = 9
EXTRA_ROUNDS = 5
"""Rounds of the further figures (CPU time only, which needs fewer to settle): keeps the script
to a few minutes on two cores."""
TARGETS = {"cold": 5.0, "warm": 3.0}
CLOCKS: dict[str, Callable[[], float]] = {"": time.perf_counter, "_cpu": time.thread_time}
"""Each figure's clocks, by the suffix of its name: wall clock, and the CPU time of the calls."""
WINDOWS = {"64k": 65_536, "32k": 32_768, "16k": 16_384, "8k": 8_192}
"""The smaller model windows measured, by the suffix of their figures' names."""
AIM_MS = 100.0
"""1 % of a summary call of 10 s (one request that reads tens of thousands of tokens and writes a
few thousand; such calls take seconds to tens of seconds)."""
CHAIN_TURNS = 3
"""Turns appended before each later compaction of a chain."""
Messages = list[dict[str, Any]]


class Sessions:
    """Opens sessions of one kernel under fresh ids and closes them again, so a benchmark's
    memory holds only the sessions of the round being timed."""

    def __init__(self, kernel: ctxengine.Kernel) -> None:
        self.kernel = kernel
        self._ids = itertools.count()
        self._open: list[str] = []

    def new(self) -> ctxengine.Session:
        """A fresh session; every session opened before is closed."""
        self.close()
        self._open.append(f"bench-{next(self._ids)}")
        return self.kernel.session(self._open[-1])

    def close(self) -> None:
        for old in self._open:
            self.kernel.close_session(old)
        self._open.clear()


def one_compaction(
    sessions: Sessions, data: BenchSession, rounds: int, clocks: dict[str, Callable[[], float]]
) -> dict[str, float]:
    """Ratios by mode (``cold``, ``warm``) and clock suffix: one forced compaction of the whole
    session, against ``json.dumps`` of its messages."""
    messages, system = data.messages, data.system

    def compress(target: ctxengine.Session) -> Callable[[], object]:
        return lambda: target.compress(messages, system, force=True, format=data.format)

    def cold() -> Steps:
        return [compress(sessions.new())]

    def warm() -> Steps:
        target = sessions.new()
        target.ctx.tokens.count(messages, system)
        return [compress(target)]

    setups = {"dumps": repeat(lambda: json.dumps(messages)), "cold": cold, "warm": warm}
    ratios: dict[str, float] = {}
    for suffix, clock in clocks.items():
        best = interleaved_min(setups, rounds, clock)
        ratios.update({mode + suffix: best[mode] / best["dumps"] for mode in TARGETS})
        ratios.update({f"{mode}{suffix}_ms": best[mode] * 1000 for mode in TARGETS})
    sessions.close()
    return ratios


def measure(kernel: ctxengine.Kernel, data: BenchSession) -> tuple[dict[str, float], str]:
    """(ratios by mode and clock suffix, a line describing the compaction) for one session: the
    figures of the default window."""
    sessions = Sessions(kernel)
    result = sessions.new().compress(data.messages, data.system, force=True, format=data.format)
    ratios = one_compaction(sessions, data, ROUNDS, CLOCKS)
    described = (
        f"{result.status}: ~{result.tokens_before:,} -> {result.tokens_after:,} tokens, "
        f"{result.messages_before} -> {result.messages_after} messages"
    )
    return ratios, described


def turn_starts(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Where each turn starts: every assistant message that does not follow another one (so a
    cut there never separates a tool call from its results)."""
    return [
        index
        for index in range(1, len(messages))
        if messages[index]["role"] == "assistant" and messages[index - 1]["role"] != "assistant"
    ]


def chain_parts(data: BenchSession) -> list[Messages]:
    """The session cut into what each compaction of a chain adds: all but the last
    2 x :data:`CHAIN_TURNS` turns, then :data:`CHAIN_TURNS` turns, then the rest."""
    starts = turn_starts(data.messages)
    if len(starts) < 2 * CHAIN_TURNS + 1:
        raise SystemExit(f"{data.name}: too few turns for a chain of compactions")
    cuts = [0, starts[-2 * CHAIN_TURNS], starts[-CHAIN_TURNS], len(data.messages)]
    return [data.messages[start:end] for start, end in itertools.pairwise(cuts)]


def chain(
    target: ctxengine.Session, data: BenchSession, parts: Sequence[Messages], count_first: bool
) -> Steps:
    """The steps of one chain on ``target``: each compaction (preceded by a count of its input
    when ``count_first``) continues from the result of the one before."""
    done: list[ctxengine.CompressResult] = []
    steps: Steps = []

    def conversation(index: int) -> tuple[Messages, Any]:
        if not done:
            return parts[0], data.system
        previous = done[-1]
        return [*previous.messages, *parts[index]], previous.conversation.system

    def count(index: int) -> None:
        target.ctx.tokens.count(*conversation(index))

    def compress(index: int) -> None:
        messages, system = conversation(index)
        done.append(target.compress(messages, system, force=True, format=data.format))

    for index in range(len(parts)):
        if count_first:
            steps.append(functools.partial(count, index))
        steps.append(functools.partial(compress, index))
    return steps


def chain_inputs(sessions: Sessions, data: BenchSession, parts: Sequence[Messages]) -> list[Any]:
    """The messages each compaction of the chain is given (for their ``json.dumps``)."""
    target = sessions.new()
    inputs: list[Any] = [parts[0]]
    result = target.compress(parts[0], data.system, force=True, format=data.format)
    for part in parts[1:]:
        inputs.append([*result.messages, *part])
        result = target.compress(
            inputs[-1], result.conversation.system, force=True, format=data.format
        )
    sessions.close()
    return inputs


def compactions_in_a_row(sessions: Sessions, data: BenchSession) -> dict[str, float]:
    """CPU-time ratios of the second and third compaction of a chain (``second_cold``, ...)
    to ``json.dumps`` of each one's input."""
    parts = chain_parts(data)
    inputs = chain_inputs(sessions, data, parts)
    setups = {
        "dumps": repeat(*(functools.partial(json.dumps, value) for value in inputs)),
        "cold": lambda: chain(sessions.new(), data, parts, count_first=False),
        "warm": lambda: chain(sessions.new(), data, parts, count_first=True),
    }
    best = fastest_steps(setups, EXTRA_ROUNDS, time.thread_time)
    sessions.close()
    # The steps of the warm chain alternate a count and a compaction.
    positions = {"cold": (1, 2), "warm": (3, 5)}
    ratios = {}
    for mode, (second, third) in positions.items():
        ratios[f"second_{mode}"] = best[mode][second] / best["dumps"][1]
        ratios[f"third_{mode}"] = best[mode][third] / best["dumps"][2]
    return ratios


def main() -> None:
    def kernel(window: int | None) -> ctxengine.Kernel:
        model: dict[str, Any] = {"name": "claude-sonnet-4-6"}
        if window is not None:
            model["context_length"] = window
        return ctxengine.load(
            {"model": model, "auxiliary": {"compression": {"provider": "extractive"}}}
        )

    default = kernel(None)
    smaller = {suffix: Sessions(kernel(window)) for suffix, window in WINDOWS.items()}
    results: list[dict[str, float]] = []
    for data in long_sessions():
        ratios, described = measure(default, data)
        cpu = {"": time.thread_time}
        for suffix, sessions in smaller.items():
            window = one_compaction(sessions, data, EXTRA_ROUNDS, cpu)
            ratios.update({f"{mode}_cpu_{suffix}": window[mode] for mode in TARGETS})
            ratios.update({f"{mode}_cpu_{suffix}_ms": window[f"{mode}_ms"] for mode in TARGETS})
        in_a_row = compactions_in_a_row(Sessions(default), data)
        ratios.update({f"{name}_cpu": value for name, value in in_a_row.items()})
        results.append(ratios)
        print(
            f"session\t{data.name}\t{len(data.messages)} messages ({described}); "
            f"cold {ratios['cold']:.2f}x, warm {ratios['warm']:.2f}x; CPU time: "
            + ", ".join(
                f"{name.replace('_cpu', '')} {value:.2f}x"
                for name, value in ratios.items()
                if "_cpu" in name and not name.endswith("_ms")
            )
        )
    names = [
        *(f"{mode}{suffix}" for suffix in CLOCKS for mode in TARGETS),
        *(f"{mode}_cpu_{suffix}" for suffix in WINDOWS for mode in TARGETS),
        *(f"{which}_{mode}_cpu" for which in ("second", "third") for mode in TARGETS),
    ]
    for name in names:
        values = [r[name] for r in results]
        target = next(limit for mode, limit in TARGETS.items() if mode in name)
        print(line(f"compress_{name}_vs_json_dumps", values, f"target<={target:g}x", len(values)))
    windows = ["", *(f"_{suffix}" for suffix in WINDOWS)]
    for name in (f"{mode}_cpu{window}_ms" for window in windows for mode in TARGETS):
        values = [r[name] for r in results]
        print(line(f"compress_{name}", values, f"aim<={AIM_MS:g}ms", len(values), "ms"))


if __name__ == "__main__":
    main()
