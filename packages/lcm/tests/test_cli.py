"""``ctxengine lcm status|doctor|grep`` run through the command registry."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ctxengine_lcm
from ctxengine import CommandRegistry
from ctxengine.testing import samples


def _run(argv: list[str]) -> int:
    registry = CommandRegistry()
    ctxengine_lcm.register_commands(commands=registry.for_owner("lcm"))
    (command,) = list(registry)
    assert command.name == "lcm" and command.provider == "lcm"
    parser = argparse.ArgumentParser(prog="ctxengine lcm")
    command.configure(parser)
    return command.run(parser.parse_args(argv))


@pytest.fixture
def store_path(make_kernel: Any, store_target: Path | str) -> str:
    """A compacted store (a SQLite path or a PostgreSQL URL, as ``--db`` takes either)."""
    session = make_kernel().session("cli")
    _, messages = samples.conversation("openai")
    assert session.compress(messages, force=True).status == "compacted"
    return str(store_target)


def test_status(store_path: str, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--db", store_path, "status"]) == 0
    out = capsys.readouterr().out
    if backend == "sqlite":
        # compress catches the index up before it returns
        assert "full-text:      FTS5 (0 messages not yet indexed)" in out
    else:
        assert "full-text:      PostgreSQL text search" in out
    assert "session cli:" in out
    assert "summaries:" in out and "depth 0:" in out


@pytest.mark.sqlite_only
def test_doctor_passes_then_finds_a_broken_index(
    store_path: str, raw_sql: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--db", store_path, "doctor"]) == 0
    assert "passes every check" in capsys.readouterr().out
    raw_sql("INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', 1, 'x')")
    assert _run(["--db", store_path, "doctor"]) == 1
    assert "full-text index messages_fts" in capsys.readouterr().out


@pytest.mark.postgres_only
def test_doctor_passes_then_finds_a_dropped_index_and_a_disabled_guard(
    store_path: str, raw_sql: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--db", store_path, "doctor"]) == 0
    assert "passes every check" in capsys.readouterr().out
    raw_sql(
        "DROP INDEX message_search_trgm; ALTER TABLE summaries DISABLE TRIGGER summaries_no_update"
    )
    assert _run(["--db", store_path, "doctor"]) == 1
    out = capsys.readouterr().out
    assert "problem: index message_search_trgm on message_search is missing" in out
    assert (
        "problem: summaries can be changed: trigger summaries_no_update (update) is disabled" in out
    )
    assert "2 problem(s)" in out


@pytest.mark.sqlite_only
def test_doctor_notes_messages_waiting_for_the_index(
    store_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxengine_lcm.ingest import prepare
    from ctxengine_lcm.store_sqlite import SqliteStore

    store = SqliteStore(store_path)
    try:
        msgs = [{"role": "user", "content": "late"}, {"role": "assistant", "content": "noted"}]
        rows = [
            prepare(msgs, k, "openai", count=lambda m: 3, session_key="x", large_output_tokens=99)[
                0
            ]
            for k in range(2)
        ]
        store.append(store.conversation_id("cli"), rows)
    finally:
        store.close()
    assert _run(["--db", store_path, "doctor"]) == 0
    out = capsys.readouterr().out
    assert "note: 2 message(s) were waiting for the full-text index and are now indexed" in out
    assert "passes every check" in out


def test_doctor_finds_incomplete_lineage(
    store_path: str, raw_sql: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    raw_sql(
        "INSERT INTO summaries (id, conversation_id, depth, kind, mode, content, tokens,"
        " source_tokens, descendant_messages, descendant_summaries, created_at)"
        " VALUES ('sum_orphan00000', 1, 0, 'leaf', 'normal', 'x', 1, 2, 3, 0, 0)"
    )
    assert _run(["--db", store_path, "doctor"]) == 1
    assert "summary sum_orphan00000 covers nothing (no links)" in capsys.readouterr().out


def test_grep(store_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--db", store_path, "grep", '"test_mod0"', "--session", "cli"]) == 0
    out = capsys.readouterr().out
    assert "msg_" in out and "(in sum_" in out
    assert _run(["--db", store_path, "grep", "(a+)+$", "--mode", "regex"]) == 2
    assert "repeats a group" in capsys.readouterr().err


@pytest.mark.sqlite_only
def test_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--db", str(tmp_path / "none.db"), "status"]) == 1
    assert "no lcm store at" in capsys.readouterr().err


@pytest.mark.postgres_only
def test_missing_store_in_an_empty_database(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--db", postgres_url, "status"]) == 1
    err = capsys.readouterr().err
    assert "error: no lcm store in postgresql://postgres@/postgres" in err
    assert "it is created by the first compaction" in err
