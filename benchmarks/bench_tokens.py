"""Token counting benchmark: the exact count after one new message vs a full recount, and the
cost of ``import ctxengine``.

Run: ``python benchmarks/bench_tokens.py``. Prints one tab-separated line per figure
(``name<TAB>value<TAB>target``). Exits non-zero only when something crashes, never on a missed
target: the figures are for people to read, and timings vary between machines.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxengine._accounting.tokens import TokenCounter, get_encoding
from ctxengine._messages.read import message_text
from ctxengine.testing.transcripts import TRANSCRIPTS

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 7


def largest_session(fmt: str) -> tuple[str, list[dict[str, Any]]]:
    """(id, messages) of the largest session in the Claude Code transcripts of format ``fmt``."""
    path = TRANSCRIPTS / f"claude_code_spotter.{fmt}.jsonl"
    with path.open() as handle:
        rows = [json.loads(line) for line in handle]
    best = max(rows, key=lambda row: len(json.dumps(row["messages"])))
    return str(best["id"]), best["messages"]


def best_of(repeats: int, setup: Callable[[], Any], run: Callable[[Any], object]) -> float:
    """Minimum wall time of ``run(setup())`` over ``repeats`` runs; setup is not timed."""
    times = []
    for _ in range(repeats):
        state = setup()
        start = time.perf_counter()
        run(state)
        times.append(time.perf_counter() - start)
    return min(times)


def novel(msg: dict[str, Any]) -> dict[str, Any]:
    """A user message with ``msg``'s text reversed: as long, but content the counter never saw."""
    return {"role": "user", "content": message_text(msg)[::-1]}


def bench_counting(fmt: str) -> None:
    session_id, messages = largest_session(fmt)
    get_encoding("o200k_base")  # load once, outside every timing
    # The appended message is new content the size of a median message of the same session: a
    # typical turn (a copy of an existing message would be found by content and cost nothing).
    # One the size of the largest message (a ~78k-character tool output) is reported separately.
    by_size = sorted(messages, key=lambda m: len(json.dumps(m)))
    typical = novel(by_size[len(by_size) // 2])
    largest = novel(by_size[-1])

    full = best_of(REPEATS, lambda: None, lambda _: TokenCounter().count(messages))

    def warmed(extra: dict[str, Any]) -> Callable[[], tuple[TokenCounter, list[dict[str, Any]]]]:
        def setup() -> tuple[TokenCounter, list[dict[str, Any]]]:
            counter = TokenCounter()
            counter.count(messages)
            return counter, [*messages, copy.deepcopy(extra)]

        return setup

    def count_grown(state: tuple[TokenCounter, list[dict[str, Any]]]) -> int:
        counter, grown = state
        return counter.count(grown)

    incremental = best_of(REPEATS, warmed(typical), count_grown)
    incremental_large = best_of(REPEATS, warmed(largest), count_grown)
    tokens = TokenCounter().count(messages)

    print(f"session\t{fmt}:{session_id}\t{len(messages)} messages, {tokens:,} tokens (o200k)")
    print(f"full_recount_ms\t{full * 1000:.2f}")
    print(f"incremental_count_ms\t{incremental * 1000:.3f}")
    print(f"incremental_vs_full_recount\t{incremental / full * 100:.2f}%\ttarget<=2%")
    print(
        f"incremental_largest_message_vs_full_recount\t{incremental_large / full * 100:.2f}%"
        "\t(info: appending the session's largest message)"
    )


def _run_python(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def bench_import() -> None:
    baseline = min(_run_python("pass") for _ in range(REPEATS))
    with_import = min(_run_python("import ctxengine") for _ in range(REPEATS))
    print(f"import_ctxengine_ms\t{(with_import - baseline) * 1000:.1f}\ttarget<=150ms")
    probe = (
        "import sys, ctxengine\n"
        "print(','.join(m for m in ('anthropic', 'openai', 'tiktoken') if m in sys.modules))"
    )
    heavy = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout.strip()
    print(f"heavy_modules_after_import\t{heavy or 'none'}\texpected none")


def main() -> int:
    for fmt in ("openai", "anthropic"):
        bench_counting(fmt)
    bench_import()
    return 0


if __name__ == "__main__":
    sys.exit(main())
