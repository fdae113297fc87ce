"""Coordination backends: many processes serving the same sessions behave like one.

The multi-process tests start real worker processes (``coordination_worker.py``) on the
``file`` backend and on a throwaway PostgreSQL server (``postgres_server``), and compare what they
do with what one process does.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxengine
from ctxengine import ConfigError, SessionBusyError, SessionState
from ctxengine.testing import samples
from ctxengine_fleet import FileCoordinator, FileLock, file_lock
from ctxengine_fleet.postgres_backend import PostgresCoordinator
from ctxengine_fleet.testing import schema_url, throwaway_postgres

WORKER = Path(__file__).resolve().parent / "coordination_worker.py"
TIMEOUT_S = 120.0

_schemas = itertools.count()


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[str]:
    with throwaway_postgres() as url:
        yield url


def backend_config(backend: str, tmp_path: Path, server: str | None) -> dict[str, Any]:
    if backend == "file":
        return {"backend": "file", "path": str(tmp_path / "coordination")}
    assert server is not None
    return {
        "backend": "postgresql",
        "database_url": schema_url(server, f"coord_{os.getpid()}_{next(_schemas)}"),
    }


@pytest.fixture(params=["file", "postgresql"])
def coordination(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The ``coordination`` section of a shared backend (each test a fresh folder or schema)."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgresql" else None
    return backend_config(request.param, tmp_path, server)


class Worker:
    """One worker process (see ``coordination_worker.py``)."""

    def __init__(self, options: dict[str, Any]) -> None:
        env = {**os.environ, "CTXENGINE_CONFIG": ""}
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def wait_ready(self) -> None:
        assert "ready" in self.read()

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(TIMEOUT_S)
        assert result and result[0], f"worker {self.proc.pid} gave no answer"
        answer: dict[str, Any] = json.loads(result[0])
        return answer

    def ask(self, **command: Any) -> dict[str, Any]:
        self.send(**command)
        return self.read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def start(workers: list[Worker], count: int, options: dict[str, Any]) -> list[Worker]:
    new = [Worker(options) for _ in range(count)]
    workers.extend(new)
    for worker in new:
        worker.wait_ready()
    return new


# -- the gateway safety net from 8 processes ------------------------------------------------


def test_gateway_hygiene_from_8_processes_compacts_exactly_once(
    coordination: dict[str, Any], tmp_path: Path, workers: list[Worker]
) -> None:
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    config = {
        "model": {"name": "claude-sonnet-4-6", "context_length": 32_000},
        "engines": {"compressor": {"protect_last_n": 4}},
        "coordination": coordination,
    }
    options = {"config": config, "rendezvous": str(rendezvous), "expect_busy": 7}
    pool = start(workers, 8, options)
    _, history = samples.conversation("openai", turns=12)
    for worker in pool:  # all at once: each is answered only when the compaction has run
        worker.send(op="hygiene", session="chat-1", messages=history, last_prompt_tokens=32_000)
    reports = [worker.read() for worker in pool]
    compacted = [r for r in reports if r["compacted"]]
    busy = [r for r in reports if not r["compacted"]]
    assert len(compacted) == 1, reports
    assert compacted[0]["messages"] < len(history)
    assert len(list(rendezvous.glob("holder-*"))) == 1
    assert len(busy) == 7
    for report in busy:
        assert report["unchanged"] is True
        assert report["notice"] == (
            "another worker is already compacting this session; history unchanged"
        )


# -- a session alternating between processes ------------------------------------------------

TURNS = 36
FAILING_TURN = 20
"""The summary provider is down on this turn: the compaction aborts and a cooldown starts."""


def turn_config(coordination: dict[str, Any] | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model": {"name": "claude-sonnet-4-6", "context_length": 24_000},
        "auxiliary": {"compression": {"abort_on_failure": True}},
    }
    if coordination is not None:
        config["coordination"] = coordination
    return config


def play(pool: list[Worker]) -> list[dict[str, Any]]:
    """The same 36 turns of one session, turn ``t`` sent to ``pool[t % len(pool)]``, the host
    keeping what each answer gave back; returns every answer."""
    system, messages = samples.conversation("openai", turns=60)
    del system
    history: list[dict[str, Any]] = [messages[0]]
    answers = []
    for turn in range(TURNS):
        history = history + messages[1 + 3 * turn : 4 + 3 * turn]
        answer = pool[turn % len(pool)].ask(
            op="turn",
            session="chat-7",
            messages=history,
            now=1_000.0 + 10.0 * turn,
            fail_summary=turn == FAILING_TURN,
            usage_factor=1.3,
        )
        history = answer["messages"]
        answers.append(answer)
    return answers


def decisions(answers: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(a["should"], a["status"], a["reason"], a["messages"], a["ratio"]) for a in answers]


@pytest.fixture(scope="module")
def one_process() -> Iterator[list[dict[str, Any]]]:
    """The turns played by a single process (the reference)."""
    reference: list[Worker] = []
    try:
        (single,) = start(reference, 1, {"config": turn_config(None)})
        yield play([single])
    finally:
        for worker in reference:
            worker.close()


def test_a_session_alternating_between_two_processes_decides_like_one(
    coordination: dict[str, Any], workers: list[Worker], one_process: list[dict[str, Any]]
) -> None:
    # The sequence exercises what state carries: compactions, the abort and its cooldown, the
    # calibration learnt from usage.
    statuses = [a["status"] for a in one_process]
    assert statuses.count("compacted") >= 5 and statuses[FAILING_TURN] == "aborted"
    assert one_process[FAILING_TURN + 1]["should"] is False  # cooling down
    pair = start(workers, 2, {"config": turn_config(coordination)})
    assert decisions(play(pair)) == decisions(one_process)


def test_without_a_shared_backend_two_processes_decide_differently(
    workers: list[Worker], one_process: list[dict[str, Any]]
) -> None:
    # The check above can fail: two processes that share nothing lose the cooldown, the
    # previous summary and the measured prompt size at every switch.
    pair = start(workers, 2, {"config": turn_config(None)})
    assert decisions(play(pair)) != decisions(one_process)


# -- in one process: the pieces ---------------------------------------------------------------


def test_file_locks_exclude_threads_and_name_their_bytes(tmp_path: Path) -> None:
    path = tmp_path / "locks"
    first, second = FileLock(path, "a"), FileLock(path, "a")
    assert first.acquire(blocking=False)
    assert not second.acquire(blocking=False)
    assert not second.acquire(timeout=0.1)
    with file_lock(path, "b") as other:
        assert other  # another name is another lock
    first.release()
    assert second.acquire(blocking=False)
    second.release()
    with file_lock(tmp_path / "." / "locks", "a") as again:  # another spelling, same file
        assert again


def test_a_file_lock_excludes_another_process(tmp_path: Path) -> None:
    path = tmp_path / "locks"
    code = (
        "import sys; from ctxengine_fleet import FileLock; "
        f"lock = FileLock({str(path)!r}, 'x'); print(lock.acquire(blocking=False))"
    )
    with file_lock(path, "x") as held:
        assert held
        other = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        assert other.stdout.strip() == "False", other.stderr
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert other.stdout.strip() == "True", other.stderr


def two_kernels(coordination: dict[str, Any]) -> tuple[ctxengine.Kernel, ctxengine.Kernel]:
    config = {
        "auxiliary": {"compression": {"provider": "extractive"}},
        "coordination": coordination,
    }
    return ctxengine.load(config), ctxengine.load(config)


COUNTER = SessionState(
    "test.counter",
    lambda: {"calls": 0},
    dump=lambda value, now: dict(value),
    load=lambda data, now: dict(data),
)


def test_declared_state_moves_between_kernels_and_the_rest_stays(
    coordination: dict[str, Any],
) -> None:
    a, b = two_kernels(coordination)
    try:
        for kernel in (a, b, a, a, b):
            session = kernel.session("s")
            with session.call_lock:
                session.ctx.session_state(COUNTER)["calls"] += 1
                local = session.ctx.plugin_state("test.local", lambda: {"calls": 0})
                local["calls"] += 1
        with b.session("s").call_lock:
            assert b.session("s").ctx.session_state(COUNTER) == {"calls": 5}
            assert b.session("s").ctx.state["test.local"] == {"calls": 2}
        # Usage and calibration are the kernel's own session state.
        history: list[dict[str, Any]] = [{"role": "user", "content": "hello there"}]
        a.session("s").prepare({"messages": history})
        a.session("s").update_usage({"input_tokens": 30, "output_tokens": 5})
        assert b.session("s").prompt_tokens_if_measured() == (30, True)
        assert b.session("s").ctx.tokens.ratio == a.session("s").ctx.tokens.ratio != 1.0
        assert b.session("s").cache_stats.responses == 1
        # The measured request too: the other worker adds only what came after it.
        longer = [*history, {"role": "assistant", "content": "hi, what shall we build today?"}]
        size = b.session("s").prompt(longer)
        assert size.measured and size.value > 30
        assert size.value == a.session("s").prompt(longer).value
        assert b.session("s").prompt([{"role": "user", "content": "another"}]).measured is False
        # A server compaction's usage (nested) arrives whole.
        a.session("s").update_usage(
            {
                "input_tokens": 40,
                "output_tokens": 5,
                "iterations": [{"type": "compaction", "input_tokens": 900, "output_tokens": 60}],
            }
        )
        assert b.session("s").prompt_tokens_if_measured() == (40, True)
        compacted = b.session("s").ctx.last_usage
        assert compacted is not None and compacted.compaction is not None
        assert compacted == a.session("s").ctx.last_usage
        assert b.session("s").cache_stats.usage == a.session("s").cache_stats.usage
        # A reset in one worker is a reset everywhere.
        b.session("s").reset()
        with a.session("s").call_lock:
            assert a.session("s").ctx.session_state(COUNTER) == {"calls": 0}
    finally:
        a.close()
        b.close()


def test_a_cooldown_keeps_its_deadline_in_another_worker(tmp_path: Path) -> None:
    now = [5_000.0]
    config = {
        "auxiliary": {"compression": {"provider": "extractive"}},
        "coordination": {"backend": "file", "path": str(tmp_path / "c")},
    }
    wall = lambda: now[0] + 1.7e9  # noqa: E731  (the hosts agree on the time of day)
    a = ctxengine.load(config, clock=lambda: now[0], wall_clock=wall)
    # Another host: its monotonic clock started elsewhere.
    b = ctxengine.load(config, clock=lambda: now[0] + 1_000_000, wall_clock=wall)
    guard_spec = SessionState(
        "test.guard",
        ctxengine.CompactionGuard,
        dump=ctxengine.CompactionGuard.dump,
        load=ctxengine.CompactionGuard.restore,
    )
    with a.session("s").call_lock:
        a.session("s").ctx.session_state(guard_spec).start_cooldown(now[0], "down")
    now[0] += 20
    with b.session("s").call_lock:
        guard = b.session("s").ctx.session_state(guard_spec)
        clock_b = b.session("s").ctx.clock()
    # 60 s from the start, 20 s of which have passed on the shared (wall) timeline.
    assert guard.cooldown_until - clock_b == pytest.approx(40.0, abs=1e-6)
    assert guard.cooldown_reason == "down"
    a.close()
    b.close()


def test_the_measured_request_gaps_choose_the_same_ttls_in_another_worker(tmp_path: Path) -> None:
    # cache_ttl auto learns the gaps between a session's requests: a long gap seen by one worker
    # makes the other mark the system prompt for an hour too, as one process would.
    now = [1_000.0]
    config: dict[str, Any] = {
        "model": {"name": "claude-sonnet-4-6"},
        "prompt_caching": {"enabled": True, "cache_ttl": "auto"},
        "auxiliary": {"compression": {"provider": "extractive"}},
    }
    shared = {**config, "coordination": {"backend": "file", "path": str(tmp_path / "c")}}
    a, b = (ctxengine.load(shared, clock=lambda: now[0]) for _ in range(2))
    one = ctxengine.load(config, clock=lambda: now[0])
    system = "You are a careful assistant. " * 400

    def system_ttls(kernel: ctxengine.Kernel, turns: int) -> list[Any]:
        messages = [
            {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} " * 400}
            for k in range(turns)
        ]
        prepared = kernel.session("s").prepare({"system": system, "messages": messages})
        return [block.get("cache_control", {}).get("ttl") for block in prepared["system"]]

    try:
        for kernel, at, turns in ((a, 0, 1), (a, 400, 3), (b, 800, 5), (b, 1_200, 7)):
            now[0] = 1_000.0 + at
            assert system_ttls(kernel, turns) == system_ttls(one, turns), at
        assert system_ttls(b, 9) == ["1h"]
    finally:
        for kernel in (a, b, one):
            kernel.close()


def test_a_session_call_waits_for_another_workers_then_reports_busy(tmp_path: Path) -> None:
    config = {
        "auxiliary": {"compression": {"provider": "extractive"}},
        "coordination": {"backend": "file", "path": str(tmp_path / "c"), "lock_timeout_s": 0.2},
    }
    a, b = ctxengine.load(config), ctxengine.load(config)
    try:
        with a.session("s").call_lock:
            with pytest.raises(SessionBusyError, match=r"coordination\.lock_timeout_s"):
                b.session("s").should_compress([{"role": "user", "content": "hi"}])
            # Another session is not held up.
            assert b.session("t").should_compress([{"role": "user", "content": "hi"}]) is False
        assert b.session("s").should_compress([{"role": "user", "content": "hi"}]) is False
    finally:
        a.close()
        b.close()


def test_saved_state_that_cannot_be_read_starts_afresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "ctxengine")
    config = {"coordination": {"backend": "file", "path": str(tmp_path / "c")}}
    a, b = ctxengine.load(config), ctxengine.load(config)
    broken = SessionState(
        "test.counter", lambda: {"calls": 0}, dump=lambda v, now: v, load=_refuse, version=1
    )
    newer = SessionState(
        "test.counter", lambda: {"calls": 0}, dump=lambda v, now: v, load=_refuse, version=2
    )
    try:
        with a.session("s").call_lock:
            a.session("s").ctx.session_state(COUNTER)["calls"] = 3
        with b.session("s").call_lock:
            assert b.session("s").ctx.session_state(broken) == {"calls": 0}
        assert "could not be read (ValueError: no)" in caplog.text
        with a.session("s").call_lock:
            a.session("s").ctx.session_state(COUNTER)["calls"] = 4
        with b.session("s").call_lock:
            assert b.session("s").ctx.session_state(newer) == {"calls": 0}
        assert "has version 1, this plugin reads 2" in caplog.text
    finally:
        a.close()
        b.close()


def _refuse(data: Any, now: float) -> Any:
    raise ValueError("no")


def test_a_damaged_document_is_a_clear_error(tmp_path: Path) -> None:
    coordinator = FileCoordinator(tmp_path / "c")
    lock = coordinator.lock("session:s")
    document = coordinator.document("session:s", lock)
    assert document.load() is None
    document.save({"a": 1})
    assert document.load() is None  # unchanged since this object wrote it
    other = coordinator.document("session:s", lock)
    assert other.load() == {"a": 1}
    (saved,) = (tmp_path / "c" / "state").glob("*.json")
    saved.write_text("{not json")
    with pytest.raises(ctxengine.CoordinationError, match="is damaged"):
        other.load()


def test_the_postgresql_documents_and_locks(postgres_server: str) -> None:
    url = schema_url(postgres_server, f"coord_unit_{os.getpid()}")
    first, second = PostgresCoordinator(url), PostgresCoordinator(url)
    try:
        lock_a, lock_b = first.lock("n"), second.lock("n")
        assert lock_a.acquire(blocking=False)
        assert not lock_b.acquire(blocking=False)
        assert not lock_b.acquire(timeout=0.1)
        doc_a = first.document("n", lock_a)
        assert doc_a is not None and doc_a.load() is None
        doc_a.save({"x": [1, 2]})
        lock_a.release()
        assert lock_b.acquire(timeout=5)
        doc_b = second.document("n", lock_b)
        assert doc_b is not None and doc_b.load() == {"x": [1, 2]}
        assert doc_b.load() is None
        lock_b.release()
        with pytest.raises(RuntimeError, match="without holding its lock"):
            doc_b.load()
        assert "schema coord_unit" in first.describe()
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"backend": "postgresql"}, "coordination.database_url = null: must be set when"),
        (
            {"backend": "file", "database_url": "postgresql://h/db"},
            "is read by coordination.backend: postgresql only (it is file)",
        ),
        (
            {"backend": "postgresql", "database_url": "mysql://h/db"},
            "must be a postgresql:// (or postgres://) URL",
        ),
        (
            {"backend": "postgresql", "database_url": "postgresql://h/db", "path": "/tmp/x"},
            "is read by coordination.backend: file only (it is postgresql)",
        ),
        (
            {"backend": "redis"},
            "coordination.backend = 'redis': no plugin provides this backend; available: "
            "process, file, postgresql. The file and postgresql backends come with "
            "ctxengine-fleet: pip install 'ctxengine[fleet]'",
        ),
        (
            {"lock_timeout": 3},
            "coordination.lock_timeout: unknown key; did you mean 'lock_timeout_s'?",
        ),
    ],
)
def test_bad_coordination_settings_are_named(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ctxengine.load({"coordination": section})
    assert message in str(info.value)


def test_the_postgresql_backend_without_a_server_says_where(tmp_path: Path) -> None:
    url = f"postgresql://nobody@/none?host={tmp_path}&connect_timeout=1"
    with pytest.raises(ctxengine.CoordinationError, match=r"coordination backend postgresql \("):
        ctxengine.load({"coordination": {"backend": "postgresql", "database_url": url}})


def test_the_package_is_imported_only_for_its_backends(tmp_path: Path) -> None:
    # With the kernel's own backend the plugin is not even imported, and its keys are a plugin's
    # that is not selected (reported as unused, like any such key).
    file_backend = {"backend": "file", "path": str(tmp_path)}
    imported = "any(m.startswith('ctxengine_fleet') for m in sys.modules)"
    code = (
        "import sys, ctxengine; k = ctxengine.load({'coordination': {'path': 'x'}}); "
        f"print({imported}, [u.key for u in k.loaded.unused]); "
        f"k = ctxengine.load({{'coordination': {file_backend!r}}}); "
        f"print({imported}, k.coordinator.describe())"
    )
    env = {**os.environ, "CTXENGINE_CONFIG": "", "CTXENGINE_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.stdout.splitlines() == [
        "False ['coordination.path']",
        f"True file ({tmp_path})",
    ], done.stderr


@pytest.mark.parametrize(
    "section",
    [
        # A wrong scheme, a key the backend does not read, a bad pool size beside a password in
        # the query: each is an error message that echoes the value, and none may echo the
        # password.
        {"backend": "postgresql", "database_url": "mysql://bob:hunter2@db/x"},
        {"backend": "file", "database_url": "postgresql://bob:hunter2@db/x"},
        {
            "backend": "postgresql",
            "database_url": "postgresql://db/x?password=hunter2&sslmode=x",
            "pool_size": 0,
        },
    ],
)
def test_config_errors_never_echo_a_password(section: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        ctxengine.load({"coordination": section})
    assert "hunter2" not in str(caught.value)
    assert "***" in str(caught.value) or "pool_size" in str(caught.value)


def test_the_report_hides_the_url_password_and_names_the_owner(tmp_path: Path) -> None:
    section = {"backend": "file", "path": str(tmp_path / "c")}
    with ctxengine.load({"coordination": section}) as kernel:
        rows = {row.key: row for row in kernel.loaded.rows()}
    assert rows["coordination.path"].owner == "coordination.file"
    assert rows["coordination.backend"].owner == "kernel"
    url = "postgres://ann:hunter2@db/y"
    with pytest.raises(ConfigError) as caught:  # read by postgresql only
        ctxengine.load({"coordination": {**section, "database_url": url}})
    assert "postgres://ann:***@db/y" in str(caught.value)
