"""Kernel per-request overhead: what an agent loop pays ctxengine on every request.

One request of an agent loop = ``session.update_usage`` (the last response's usage) +
``session.should_compress`` + ``session.prepare`` (the ``system_and_3`` cache strategy), on the
largest real session, with the session already warm (it saw the conversation up to the previous
turn, as in a live loop). Reported as a ratio to ``copy.deepcopy`` of the same message list,
measured in the same run (target <= 5 %).

Run: ``python benchmarks/bench_kernel.py``. Prints ``name<TAB>value<TAB>target`` lines; exits
non-zero only on a crash.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxengine
from ctxengine.testing.transcripts import TRANSCRIPTS

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 15


def largest(fmt: str) -> dict[str, Any]:
    path = TRANSCRIPTS / f"claude_code_spotter.{fmt}.jsonl"
    best = max(path.read_text(encoding="utf-8").splitlines(), key=len)
    return dict(json.loads(best))


def best_of(run: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(kernel: ctxengine.Kernel, fmt: str) -> None:
    """Print the per-request overhead for the largest session of ``fmt``."""
    row = largest(fmt)
    messages: list[dict[str, Any]] = row["messages"]
    system = row.get("system")
    session = kernel.session(f"bench-{fmt}")
    usage = {
        "input_tokens": 1_200,
        "cache_read_input_tokens": 90_000,
        "cache_creation_input_tokens": 800,
        "output_tokens": 300,
    }
    request: dict[str, Any] = {"model": "claude-sonnet-4-6", "messages": messages}
    if system is not None:
        request["system"] = system

    def per_request() -> None:
        session.update_usage(usage)
        session.should_compress(messages, system)
        session.prepare(request)

    per_request()  # warm: the session has counted this conversation before
    overhead = best_of(per_request)
    deepcopy = best_of(lambda: copy.deepcopy(messages), repeats=7)
    print(
        f"kernel_per_request_vs_deepcopy[{fmt}, {len(messages)} msgs]\t"
        f"{overhead / deepcopy:.2%} ({overhead * 1e3:.2f} ms vs {deepcopy * 1e3:.1f} ms)\t"
        "target<=5%"
    )


def main() -> None:
    kernel = ctxengine.load(
        {
            "auxiliary": {"compression": {"provider": "extractive"}},
            "model": {"name": "claude-sonnet-4-6"},
        }
    )
    for fmt in ("anthropic", "openai"):
        measure(kernel, fmt)


if __name__ == "__main__":
    main()
