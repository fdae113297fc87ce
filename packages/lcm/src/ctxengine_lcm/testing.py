"""Helpers for testing code that runs on the lcm engine (no network, a temporary store, and
when wanted a throwaway PostgreSQL server: :func:`throwaway_postgres` and :func:`schema_url`
come from :mod:`ctxengine_fleet.testing`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxengine_fleet.testing import EMBEDDED_POSTGRES_HINT, schema_url, throwaway_postgres
from ctxengine_lcm.urls import is_database_url

__all__ = [
    "EMBEDDED_POSTGRES_HINT",
    "lcm_config",
    "lcm_kernel",
    "schema_url",
    "store_options",
    "throwaway_postgres",
]

if TYPE_CHECKING:
    from ctxengine import Kernel


def store_options(store: Path | str) -> dict[str, Any]:
    """The ``engines.lcm`` keys that select ``store``: a SQLite file or a ``postgresql://`` URL."""
    if is_database_url(store):
        return {"database_url": str(store)}
    return {"db_path": str(store)}


def lcm_config(
    store: Path | str, *, context_length: int = 16_000, **options: Any
) -> dict[str, Any]:
    """A kernel configuration selecting ``lcm`` on ``store`` with the extractive provider.

    ``store`` is a SQLite file or a ``postgresql://`` URL. Keyword options go to
    ``engines.lcm`` (e.g. ``fresh_tail_count=4``).
    """
    return {
        "context": {"engine": "lcm", "strict": True},
        "model": {"name": "claude-sonnet-4-6", "context_length": context_length},
        "auxiliary": {"compression": {"provider": "extractive"}},
        "engines": {"lcm": {**store_options(store), **options}},
    }


@contextmanager
def lcm_kernel(
    db_path: Path, *, context_length: int = 8000, caching: bool | str = True, **options: Any
) -> Iterator[Kernel]:
    """A kernel on the lcm engine for tests of code built on ctxengine (wrappers, adapters).

    The engine is registered at run time (no installed metadata needed) and unregistered on
    exit, when the kernel is closed too. The default window of 8,000 tokens reaches lcm's
    threshold in a few turns; ``caching`` is ``prompt_caching.enabled``; keyword options go to
    ``engines.lcm``. Configuration comes only from the arguments (``CTXENGINE_HOME`` is the
    store's folder).
    """
    import ctxengine
    import ctxengine_lcm
    from ctxengine import register_engine

    registration = register_engine("lcm", ctxengine_lcm)
    config = lcm_config(db_path, context_length=context_length, **options)
    config["prompt_caching"] = {"enabled": caching}
    kernel = ctxengine.load(config, env={"CTXENGINE_HOME": str(db_path.parent / "home")})
    try:
        yield kernel
    finally:
        kernel.close()
        registration.close()
