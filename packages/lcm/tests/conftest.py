"""Shared fixtures: kernels with the lcm engine registered, on a temporary store.

Every test that asks for ``store_target`` (directly or through ``make_kernel``) runs twice: on a
SQLite file and on PostgreSQL, in a schema of its own on one throwaway server started for the
whole run (``postgres_server``). A test about one backend only says so with
``@pytest.mark.sqlite_only`` / ``@pytest.mark.postgres_only``.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxengine
import ctxengine_lcm
from ctxengine import Kernel, register_engine
from ctxengine_lcm.backends import open_store
from ctxengine_lcm.store import Store
from ctxengine_lcm.testing import lcm_config, schema_url, throwaway_postgres

KernelFactory = Callable[..., Kernel]
StoreTarget = Path | str
"""A SQLite file or a ``postgresql://`` URL."""

BACKENDS = ("sqlite", "postgresql")

_schemas = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server private to this test run (started on first use)."""
    with throwaway_postgres() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A URL whose tables go to a new, empty schema of the test server."""
    return schema_url(postgres_server, f"test_{os.getpid()}_{next(_schemas)}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: run the test on the SQLite store only")
    config.addinivalue_line("markers", "postgres_only: run the test on the PostgreSQL store only")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``backend`` (what ``store_target`` and ``make_kernel`` build on) is each backend."""
    if "backend" not in metafunc.fixturenames:
        return
    own = metafunc.definition.iter_markers("parametrize")
    if any("backend" in str(mark.args[0]) for mark in own):
        return  # the test names its backends itself
    marks = {mark.name for mark in metafunc.definition.iter_markers()}
    if "sqlite_only" in marks:
        backends: tuple[str, ...] = ("sqlite",)
    elif "postgres_only" in marks:
        backends = ("postgresql",)
    else:
        backends = BACKENDS
    metafunc.parametrize("backend", backends)


@pytest.fixture
def store_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreTarget:
    """Where this test's store lives on its backend (nothing is created yet)."""
    if backend == "sqlite":
        return tmp_path / "lcm.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def open_target(store_target: StoreTarget) -> Iterator[Callable[[], Store]]:
    """Opens (more) stores on ``store_target``; each is closed after the test."""
    opened: list[Store] = []

    def make() -> Store:
        store = open_store(store_target)
        opened.append(store)
        return store

    try:
        yield make
    finally:
        for store in opened:
            store.close()


@pytest.fixture
def make_kernel(store_target: StoreTarget, tmp_path: Path) -> Iterator[KernelFactory]:
    """Builds kernels on ``store_target`` (keyword options go to ``engines.lcm``)."""
    kernels: list[Kernel] = []
    registration = register_engine("lcm", ctxengine_lcm)

    def make(
        *, main_summarizer: Any = None, context_length: int = 16_000, **options: Any
    ) -> Kernel:
        env = {**os.environ, "CTXENGINE_HOME": str(tmp_path / "home")}
        env.pop("CTXENGINE_CONFIG", None)
        sleeps: list[float] = []
        kernel = ctxengine.load(
            lcm_config(store_target, context_length=context_length, **options),
            env=env,
            main_summarizer=main_summarizer,
            sleep=sleeps.append,  # the failure policy's pauses are recorded, never waited
        )
        kernel.sleeps = sleeps  # type: ignore[attr-defined]
        kernels.append(kernel)
        return kernel

    try:
        yield make
    finally:
        for kernel in kernels:
            kernel.close()
        registration.close()


@pytest.fixture
def raw_sql(store_target: StoreTarget) -> Callable[[str], None]:
    """Runs SQL statements on ``store_target`` directly, past the store (to damage it)."""

    def run(sql: str) -> None:
        if isinstance(store_target, Path):
            conn = sqlite3.connect(store_target)
            try:
                conn.executescript(sql)
                conn.commit()
            finally:
                conn.close()
            return
        import psycopg

        with psycopg.connect(store_target, autocommit=True) as pg:
            pg.execute(sql.encode())

    return run
