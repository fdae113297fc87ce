"""Benchmarks of the lossless engine: ingest rate and full-text grep latency.

Messages come from the real transcripts (cycled, each copy tagged so texts differ) until
100,000 are stored. Ingest is measured the way ``compress`` ingests: messages already counted
by the session's token counter (the kernel counts them before the engine runs), then hashed,
described and committed in batches of 100 per transaction. Ingest does not full-text index
messages (``catch_up_index`` does, later, in large batches); that one-time cost is timed on
its own after each ingest and reported beside it, along with the rate of both together. Grep is
``lcm_grep``'s full-text search over the whole (caught-up) store, one distinctive word per query.

Prints (tab-separated)::

    lcm_ingest_rate              N msg/s    target>=10000   (median of --runs ingests)
    lcm_ingest_rate_detail       best run and CPU-time rate (the machine may be shared)
    lcm_fts_catch_up_rate        N msg/s    (median; indexing the messages ingest stored)
    lcm_ingest_plus_catch_up     N msg/s    (median; ingest and indexing together)
    lcm_grep_fts_median          N ms       target<=20

Run: ``python packages/lcm/benchmarks/bench_lcm.py [--messages 100000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxengine._accounting.tokens import TokenCounter
from ctxengine.testing.transcripts import TRANSCRIPTS
from ctxengine_lcm.ingest import prepare
from ctxengine_lcm.search import Searcher
from ctxengine_lcm.store import NewMessage, Store
from ctxengine_lcm.store_sqlite import SqliteStore

BATCH = 100


def corpus(total: int) -> list[dict[str, Any]]:
    base: list[dict[str, Any]] = []
    for path in sorted(TRANSCRIPTS.glob("*.openai.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                base += [m for m in json.loads(line)["messages"] if m.get("role") != "system"]
    if not base:
        sys.exit(f"no transcripts found under {TRANSCRIPTS}")
    out: list[dict[str, Any]] = []
    copy = 0
    while len(out) < total:
        for msg in base:
            if len(out) == total:
                break
            tagged = dict(msg)
            content = tagged.get("content")
            if isinstance(content, str) or content is None:
                tagged["content"] = f"{content or ''} [copy {copy}]"
            out.append(tagged)
        copy += 1
    return out


def ingest(store: Store, conv: int, messages: list[dict[str, Any]], counter: TokenCounter) -> None:
    """Prepare and append ``messages`` the way ``compress`` does, ``BATCH`` per transaction."""
    for start in range(0, len(messages), BATCH):
        rows: list[NewMessage] = []
        outputs = []
        for k in range(start, min(start + BATCH, len(messages))):
            row, outs, _ = prepare(
                messages,
                k,
                "openai",
                count=counter.count_message,
                session_key="bench",
                large_output_tokens=25_000,
            )
            outputs += [(len(rows), o) for o in outs]
            rows.append(row)
        store.append(conv, rows, outputs=outputs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="ingest runs, each into a new store")
    args = parser.parse_args()

    messages = corpus(args.messages)
    counter = TokenCounter()
    counter.count(messages)  # done by the kernel before compress; not part of ingest
    rates: list[float] = []
    cpu_rates: list[float] = []
    catch_up_rates: list[float] = []
    combined_rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            store = SqliteStore(Path(tmp) / f"lcm{run}.db")
            conv = store.conversation_id("bench")
            started, cpu_started = time.perf_counter(), time.process_time()
            ingest(store, conv, messages, counter)
            ingested = time.perf_counter()
            rates.append(len(messages) / (ingested - started))
            cpu_rates.append(len(messages) / (time.process_time() - cpu_started))
            indexed = store.catch_up_index()
            if indexed != len(messages):
                sys.exit(f"catch-up indexed {indexed} messages, expected {len(messages)}")
            done = time.perf_counter()
            catch_up_rates.append(len(messages) / (done - ingested))
            combined_rates.append(len(messages) / (done - started))
            if run < args.runs - 1:
                store.close()

        rng = random.Random(7)
        stored = store.messages(conv)
        words: list[str] = []
        while len(words) < args.queries:
            text = rng.choice(stored).text
            candidates = re.findall(r"[A-Za-z]{8,}", text)
            if candidates:
                words.append(rng.choice(candidates))
        searcher = Searcher(store, conv)
        timings = []
        for word in words:
            t0 = time.perf_counter()
            searcher.search(word, mode="full_text", scope="messages", limit=50)
            timings.append((time.perf_counter() - t0) * 1000)
        store.close()
    # Wall-clock median is the figure; the best run and the CPU-time rate show how much of a
    # slow run was a busy machine rather than the code.
    print(f"lcm_ingest_rate\t{statistics.median(rates):.0f} msg/s\ttarget>=10000")
    print(
        f"lcm_ingest_rate_detail\tbest {max(rates):.0f} msg/s, CPU-time median "
        f"{statistics.median(cpu_rates):.0f} msg/s over {args.runs} runs"
    )
    print(f"lcm_fts_catch_up_rate\t{statistics.median(catch_up_rates):.0f} msg/s")
    print(f"lcm_ingest_plus_catch_up\t{statistics.median(combined_rates):.0f} msg/s")
    print(f"lcm_grep_fts_median\t{statistics.median(timings):.2f} ms\ttarget<=20")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
