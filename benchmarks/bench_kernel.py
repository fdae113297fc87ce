"""Kernel per-request cost for every way a host hands the history over.

One request = ``session.update_usage`` (the previous response's usage) +
``session.should_compress`` + ``session.prepare`` (the ``system_and_3`` cache strategy). Every
bundled session with at least 100 messages is replayed: a session serves its turns up to the last
``TURNS`` untimed, then serves those turns one after the other as an agent loop does, each timed
on its own; a turn's figure is its fastest over the rounds, a session's the mean over its
turns. Arrival modes:

- ``same_list``: the host appends each turn's messages to one list object;
- ``new_list``: a new list of the same message dicts every turn;
- ``new_dicts``: new dicts with new strings every turn (a history rebuilt from a framework's own
  objects, reloaded from a database, received over HTTP), built before the timer starts;
- ``fresh_session``: every request is the first of a new session (a restarted worker, a
  per-request web handler) on new dicts: ``kernel.session`` + ``should_compress`` + ``prepare``
  + ``update_usage``, with the kernel loaded and tiktoken's encoding in memory.

Each is a ratio to ``copy.deepcopy`` of the same turns' histories, timed the same way in the same
run, interleaved with the modes. The ``*_same_request_again`` figures time the first three modes
the way the earlier version of this benchmark did: a session that served the whole session sends
its last request again (nothing new to walk, everything hot in the CPU's caches). The
model's window is set per session so the prompt of the last turn lies just below 80 % of the
compaction threshold: no compaction is due, and no turn is further from the threshold than the
targets allow.

Run: ``python benchmarks/bench_kernel.py``. Prints ``name<TAB>value<TAB>target`` lines; exits
non-zero only on a crash.
"""

from __future__ import annotations

import copy
import itertools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

import ctxengine
from ctxengine._accounting.tokens import TokenCounter

if not __package__:  # run as a script (nox -s bench): make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchSession, Steps, interleaved_min, line, long_sessions, repeat

ROUNDS = 7
TURNS = 8
"""Turns timed back to back per round (the last ones of each session)."""
TARGETS = {
    "same_list": 0.03,
    "new_list": 0.05,
    "new_dicts": 0.4,
    "fresh_session": 1.0,
}
AGAIN = ("same_list", "new_list", "new_dicts")
"""Modes also timed on the same request sent again (the steady state of the earlier benchmark)."""
MODEL = "claude-sonnet-4-6"


def turn_starts(messages: list[dict[str, Any]]) -> list[int]:
    """Where each request's new messages begin: an assistant reply after a non-assistant one."""
    return [
        i
        for i in range(1, len(messages))
        if messages[i].get("role") == "assistant" and messages[i - 1].get("role") != "assistant"
    ]


def usage_for(prompt_tokens: int) -> dict[str, int]:
    """An Anthropic usage report for a request of ``prompt_tokens``, mostly cache reads."""
    written = min(1_000, prompt_tokens // 4)
    uncached = min(1_000, prompt_tokens // 4)
    return {
        "input_tokens": uncached,
        "cache_read_input_tokens": prompt_tokens - written - uncached,
        "cache_creation_input_tokens": written,
        "output_tokens": 300,
    }


def deepcopy_of(history: list[dict[str, Any]]) -> Callable[[], object]:
    return lambda: copy.deepcopy(history)


@attrs.frozen
class Workload:
    """One bundled session set up for replaying: its turns, a kernel whose window puts the last
    prompt just below 80 % of the compressor's threshold (0.5 x window), and each request's
    usage as the provider would report it (after that request)."""

    messages: list[dict[str, Any]]
    system: Any
    ends: list[int]
    """Where each request's history ends: request k sends ``messages[:ends[k]]``."""
    kernel: ctxengine.Kernel
    usage: dict[int, dict[str, int]]

    @classmethod
    def of(cls, session_data: BenchSession, reference: TokenCounter) -> Workload:
        messages, system = session_data.messages, session_data.system
        ends = [*turn_starts(messages), len(messages)]
        full = reference.count(messages, system)
        kernel = ctxengine.load(
            {
                "auxiliary": {"compression": {"provider": "extractive"}},
                "model": {"name": MODEL, "context_length": math.ceil(full / 0.8 / 0.5) + 1},
            }
        )
        usage = {end: usage_for(reference.count(messages[:end], system)) for end in ends}
        return cls(messages, system, ends, kernel, usage)

    def request(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """The request of ``history``, with the session's system prompt."""
        out: dict[str, Any] = {"model": MODEL, "messages": history}
        if self.system is not None:
            out["system"] = self.system
        return out


def measure(session_data: BenchSession, reference: TokenCounter) -> dict[str, float]:
    """The four ratios for one bundled session."""
    work = Workload.of(session_data, reference)
    messages, system, ends, kernel, usage = (
        work.messages,
        work.system,
        work.ends,
        work.kernel,
        work.usage,
    )
    request = work.request
    warmup, timed = ends[-TURNS - 2 : -TURNS], ends[-TURNS:]
    again = [len(messages)] * TURNS  # the last request, sent TURNS more times
    ids = itertools.count()
    opened: list[str] = []

    def new_session() -> ctxengine.Session:
        for old in opened:
            kernel.close_session(old)
        opened.clear()
        opened.append(f"bench-{next(ids)}")
        return kernel.session(opened[-1])

    def replay(history_at: Callable[[int], list[dict[str, Any]]], repeated: bool) -> Steps:
        """A session that served the warm-up turns, and the timed turns as steps (or, when
        ``repeated``, one that served every turn, and the last request again as the steps).

        ``history_at(end)`` is the host handing over ``messages[:end]`` its way."""
        session = new_session()

        def turn(end: int) -> Callable[[], object]:
            def run() -> None:
                history = history_at(end)
                session.should_compress(history, system)
                session.prepare(request(history))
                session.update_usage(usage[end])

            return run

        for end in ends if repeated else warmup:
            turn(end)()
        return [turn(end) for end in (again if repeated else timed)]

    def same_list(repeated: bool) -> Steps:
        grown: list[dict[str, Any]] = []

        def history_at(end: int) -> list[dict[str, Any]]:
            grown.extend(messages[len(grown) : end])  # the same list object, appended in place
            return grown

        return replay(history_at, repeated)

    def new_list(repeated: bool) -> Steps:
        return replay(lambda end: list(messages[:end]), repeated)

    def new_dicts(repeated: bool) -> Steps:
        # Built before the timer starts: the reload is the host's cost, not ctxengine's. One
        # list per step, as each request of a gateway reloads its history anew.
        order = [*ends, *again] if repeated else [*warmup, *timed]
        built = iter([session_data.fresh_messages()[:end] for end in order])
        return replay(lambda end: next(built), repeated)

    def fresh_session() -> Steps:
        def first_request(end: int) -> Callable[[], object]:
            history = session_data.fresh_messages()[:end]
            name = f"bench-fresh-{next(ids)}"
            opened.append(name)

            def run() -> None:
                session = kernel.session(name)
                session.should_compress(history, system)
                session.prepare(request(history))
                session.update_usage(usage[end])

            return run

        return [first_request(end) for end in timed]

    best = interleaved_min(
        {
            # The baseline: a stateless deep copy of each timed turn's history.
            "deepcopy": repeat(*(deepcopy_of(messages[:end]) for end in timed)),
            "deepcopy_again": repeat(*(deepcopy_of(messages) for _ in again)),
            "same_list": lambda: same_list(False),
            "new_list": lambda: new_list(False),
            "new_dicts": lambda: new_dicts(False),
            "fresh_session": fresh_session,
            "same_list_again": lambda: same_list(True),
            "new_list_again": lambda: new_list(True),
            "new_dicts_again": lambda: new_dicts(True),
        },
        ROUNDS,
    )
    kernel.close()
    ratios = {mode: best[mode] / best["deepcopy"] for mode in TARGETS}
    ratios |= {f"{mode}_again": best[f"{mode}_again"] / best["deepcopy_again"] for mode in AGAIN}
    return ratios | {"deepcopy_ms": best["deepcopy"] * 1e3}


def main() -> None:
    sessions = long_sessions()
    reference = TokenCounter()
    results = []
    for session_data in sessions:
        ratios = measure(session_data, reference)
        results.append(ratios)
        figures = ", ".join(f"{mode} {ratios[mode]:.3f}x" for mode in TARGETS)
        print(
            f"session\t{session_data.name}\t{len(session_data.messages)} messages, "
            f"deepcopy {ratios['deepcopy_ms']:.2f} ms; {figures}"
        )
    for mode, target in TARGETS.items():
        values = [r[mode] for r in results]
        print(line(f"kernel_{mode}_vs_deepcopy", values, f"target<={target:g}x", len(values)))
    for mode in AGAIN:
        values = [r[f"{mode}_again"] for r in results]
        wanted = f"target<={TARGETS[mode]:g}x"
        print(line(f"kernel_{mode}_same_request_again_vs_deepcopy", values, wanted, len(values)))


if __name__ == "__main__":
    main()
