"""Kernel time per request on the largest bundled session, for every way a host hands the
history over.

One request = ``session.update_usage`` (the previous response's usage) +
``session.should_compress`` + ``session.prepare`` (the ``system_and_3`` cache strategy). The
largest bundled session is replayed: a session serves its turns up to the last ``TURNS``
untimed, then serves those turns one after the other as an agent loop does, each timed on its
own; a turn's figure is its fastest over the rounds, the mode's figure the mean over its turns.
Arrival modes:

- ``same_list``: the host appends each turn's messages to one list object;
- ``new_list``: a new list of the same message dicts every turn;
- ``new_dicts``: new dicts with new strings every turn (a history rebuilt from a framework's own
  objects, reloaded from a database, received over HTTP), built before the timer starts;
- ``fresh_session``: every request is the first of a new session (a restarted worker, a
  per-request web handler) on new dicts: ``kernel.session`` + ``should_compress`` + ``prepare``
  + ``update_usage``, with the kernel loaded and tiktoken's encoding in memory.

Each mode is reported in microseconds per request (budget: at most ``BUDGET_US``) and as a ratio
to ``copy.deepcopy`` of the same turns' histories, timed the same way in the same run,
interleaved with the modes (budget for ``new_dicts``: at most ``NEW_DICTS_BUDGET`` x). The
model's window is set so the prompt of the last turn lies just below 80 % of the compaction
threshold: no compaction is due.

Run: ``python benchmarks/bench_kernel.py``. Prints ``name<TAB>value<TAB>budget`` lines; exits
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

from benchmarks.harness import BenchSession, Steps, interleaved_min, long_sessions, repeat

ROUNDS = 7
TURNS = 8
"""Turns timed back to back per round (the last ones of each session)."""
MODES = ("same_list", "new_list", "new_dicts", "fresh_session")
BUDGET_US = 1_000
"""Kernel time per request, in every mode."""
NEW_DICTS_BUDGET = 0.4
"""Kernel time per request with new dicts, as a ratio to ``copy.deepcopy`` of the history."""
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
    """Seconds per request of each mode and of ``deepcopy`` on one bundled session."""
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
    ids = itertools.count()
    opened: list[str] = []

    def new_session() -> ctxengine.Session:
        for old in opened:
            kernel.close_session(old)
        opened.clear()
        opened.append(f"bench-{next(ids)}")
        return kernel.session(opened[-1])

    def replay(history_at: Callable[[int], list[dict[str, Any]]]) -> Steps:
        """A session that served the warm-up turns, and the timed turns as steps.

        ``history_at(end)`` is the host handing over ``messages[:end]`` its way."""
        session = new_session()

        def turn(end: int) -> Callable[[], object]:
            def run() -> None:
                history = history_at(end)
                session.should_compress(history, system)
                session.prepare(request(history))
                session.update_usage(usage[end])

            return run

        for end in warmup:
            turn(end)()
        return [turn(end) for end in timed]

    def same_list() -> Steps:
        grown: list[dict[str, Any]] = []

        def history_at(end: int) -> list[dict[str, Any]]:
            grown.extend(messages[len(grown) : end])  # the same list object, appended in place
            return grown

        return replay(history_at)

    def new_list() -> Steps:
        return replay(lambda end: list(messages[:end]))

    def new_dicts() -> Steps:
        # Built before the timer starts: the reload is the host's cost, not ctxengine's. One
        # list per step, as each request of a gateway reloads its history anew.
        built = iter([session_data.fresh_messages()[:end] for end in [*warmup, *timed]])
        return replay(lambda end: next(built))

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
            "same_list": same_list,
            "new_list": new_list,
            "new_dicts": new_dicts,
            "fresh_session": fresh_session,
        },
        ROUNDS,
    )
    kernel.close()
    return best


def main() -> None:
    largest = max(long_sessions(), key=lambda found: len(found.messages))
    best = measure(largest, TokenCounter())
    deepcopy = best["deepcopy"]
    print(
        f"session\t{largest.name}\t{len(largest.messages)} messages, "
        f"deepcopy {deepcopy * 1e6:.0f} µs per request"
    )
    for mode in MODES:
        ratio = best[mode] / deepcopy
        budget = f"budget<={BUDGET_US} µs"
        if mode == "new_dicts":
            budget += f", <={NEW_DICTS_BUDGET:g}x deepcopy"
        print(f"kernel_{mode}\t{best[mode] * 1e6:.0f} µs ({ratio:.3f}x deepcopy)\t{budget}")


if __name__ == "__main__":
    main()
