"""The floor the in-place-edit check sets under the kernel's per-request cost.

Every request checks the history against the snapshots of the messages the session saw (an edit
made in place since must change the counts and the markers, see
:mod:`ctxengine._messages.memo`): ``MessageMemo.resolve``, one comparison of the list with those
snapshots, plus a description of each message that is new. This script times that part *inside*
the real requests of :mod:`benchmarks.bench_kernel`: the same sessions, windows and turns, each
turn (``update_usage`` + ``should_compress`` + ``prepare``) timed on its own, interleaved with a
deep copy of the same history, fastest of ``ROUNDS`` rounds per turn. The session's memo is
wrapped so that each turn also reports how long ``resolve`` took in it and, of that, how long
describing the new messages took; the rest of ``resolve`` is the comparison. Timed there, the
check runs with the CPU caches as the rest of the request leaves them, as in an agent loop (a
loop that resolves the same list again and again keeps its snapshots hot and shows less).

Figures per mode (``same_list``: one list appended in place; ``new_list``: a new list of the
same dicts every turn), as ratios to ``copy.deepcopy`` of the same turns' histories, medians
over the sessions:

- ``*_resolve``: all of ``resolve`` in the turn;
- ``*_compare``: ``resolve`` without the description of new messages: the edit check itself;
- ``*_turn``: the whole turn (the figure ``bench_kernel`` reports), for scale.

Run: ``python benchmarks/bench_edit_check.py``; with ``--cpu`` every timer (the deep copies
too) reads the thread's CPU time (``time.thread_time``) instead of the wall clock, which other
processes on a loaded machine disturb far less (each reading costs about a microsecond, which
lands on the description of new messages and the turn). Prints ``name<TAB>value<TAB>note``
lines; exits non-zero only on a crash.
"""

from __future__ import annotations

import gc
import itertools
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxengine._accounting.tokens import TokenCounter

if not __package__:  # run as a script (nox -s bench): make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_kernel import ROUNDS, TURNS, Workload, deepcopy_of
from benchmarks.harness import BenchSession, line, long_sessions

MODES = ("same_list", "new_list")
CLOCK: Callable[[], float] = time.thread_time if "--cpu" in sys.argv[1:] else time.perf_counter
PARTS = ("turn", "resolve", "compare")


class _Timed:
    """Wraps one session memo's ``resolve`` and ``_entry`` to add up their time in a turn."""

    def __init__(self, memo: Any) -> None:
        self.resolve = 0.0
        self.entries = 0.0
        resolve, entry = memo.resolve, memo._entry

        def timed_resolve(messages: Any) -> Any:
            start = CLOCK()
            try:
                return resolve(messages)
            finally:
                self.resolve += CLOCK() - start

        def timed_entry(*args: Any, **kwargs: Any) -> Any:
            start = CLOCK()
            try:
                return entry(*args, **kwargs)
            finally:
                self.entries += CLOCK() - start

        memo.resolve, memo._entry = timed_resolve, timed_entry

    def reset(self) -> None:
        self.resolve = self.entries = 0.0


def _timed(step: Callable[[], object]) -> float:
    """How long ``step()`` takes, the garbage collector off (as ``harness.interleaved_min``)."""
    gc.disable()
    try:
        start = CLOCK()
        step()
        return CLOCK() - start
    finally:
        gc.enable()


def measure(session_data: BenchSession, reference: TokenCounter) -> dict[str, float]:
    """``{mode_part: ratio to deepcopy}`` for one bundled session."""
    work = Workload.of(session_data, reference)
    warmup, timed = work.ends[-TURNS - 2 : -TURNS], work.ends[-TURNS:]
    ids = itertools.count()

    def replay(mode: str) -> tuple[_Timed, list[Callable[[], object]]]:
        name = f"edit-check-{next(ids)}"
        session = work.kernel.session(name)
        grown: list[dict[str, Any]] = []

        def history_at(end: int) -> list[dict[str, Any]]:
            if mode == "new_list":
                return list(work.messages[:end])
            grown.extend(work.messages[len(grown) : end])
            return grown

        def turn(end: int) -> Callable[[], object]:
            def run() -> None:
                history = history_at(end)
                session.should_compress(history, work.system)
                session.prepare(work.request(history))
                session.update_usage(work.usage[end])

            return run

        for end in warmup:
            turn(end)()
        timer = _Timed(session.ctx.tokens.memo)
        return timer, [turn(end) for end in timed]

    best = {f"{mode}_{part}": [math.inf] * TURNS for mode in MODES for part in PARTS}
    best["deepcopy"] = [math.inf] * TURNS
    copies = [deepcopy_of(work.messages[:end]) for end in timed]
    for _ in range(ROUNDS):
        for index, baseline in enumerate(copies):  # interleaved with the modes
            gc.collect()
            best["deepcopy"][index] = min(best["deepcopy"][index], _timed(baseline))
        for mode in MODES:
            timer, steps = replay(mode)
            gc.collect()
            for index, step in enumerate(steps):
                timer.reset()
                parts = {
                    "turn": _timed(step),
                    "resolve": timer.resolve,
                    "compare": timer.resolve - timer.entries,
                }
                for part, value in parts.items():
                    key = f"{mode}_{part}"
                    best[key][index] = min(best[key][index], value)
    work.kernel.close()
    deepcopy = statistics.fmean(best.pop("deepcopy"))
    return {key: statistics.fmean(times) / deepcopy for key, times in best.items()} | {
        "deepcopy_ms": deepcopy * 1e3
    }


def main() -> None:
    reference = TokenCounter()
    results = []
    for session_data in long_sessions():
        ratios = measure(session_data, reference)
        results.append(ratios)
        figures = ", ".join(
            f"{key} {value:.4f}x" for key, value in ratios.items() if key != "deepcopy_ms"
        )
        print(
            f"session\t{session_data.name}\t{len(session_data.messages)} messages, "
            f"deepcopy {ratios['deepcopy_ms']:.2f} ms; {figures}"
        )
    for mode in MODES:
        for part in PARTS:
            values = [r[f"{mode}_{part}"] for r in results]
            note = {
                "turn": "the whole request, for scale",
                "resolve": "comparison + new messages",
                "compare": "the edit check alone: its floor",
            }[part]
            print(line(f"kernel_{mode}_{part}_vs_deepcopy", values, note, len(values)))


if __name__ == "__main__":
    main()
