"""What only the PostgreSQL store has: its guards, layout versions, locks across processes, pool,
query translation, and its own doctor checks. (Everything both backends share runs on both in
the other test modules.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from ctxengine import ConfigError, ToolError
from ctxengine_fleet import postgres
from ctxengine_lcm.backends import open_store
from ctxengine_lcm.doctor import examine
from ctxengine_lcm.ingest import prepare
from ctxengine_lcm.search import Searcher
from ctxengine_lcm.search_postgres import postgres_regex, tsquery
from ctxengine_lcm.settings import parse_settings
from ctxengine_lcm.store import NewMessage, Store, StoreError
from ctxengine_lcm.store_postgres import FTS_CHARS, PostgresStore

CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _rows(texts: list[str], session: str = "s") -> list[NewMessage]:
    msgs = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": text}
        for k, text in enumerate(texts)
    ]
    return [
        prepare(msgs, k, "openai", count=lambda m: 5, session_key=session, large_output_tokens=99)[
            0
        ]
        for k in range(len(msgs))
    ]


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = open_store(postgres_url)
    assert isinstance(opened, PostgresStore)
    try:
        yield opened
    finally:
        opened.close()


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
    )


def _wait_for(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdout is not None
    got = proc.stdout.readline().strip()
    assert got == line, f"child said {got!r} (exit {proc.poll()})"


# -- guards and layout ----------------------------------------------------------------------------


def test_messages_are_append_only_and_references_are_enforced(store: PostgresStore) -> None:
    conv = store.conversation_id("s")
    store.append(conv, _rows(["hello", "hi"]), context=[0, 1])
    with store.reading() as conn:
        for sql, message in [
            ("UPDATE messages SET content = 'x'", "lcm store: messages are immutable"),
            ("DELETE FROM messages", "lcm store: messages are append-only"),
            ("TRUNCATE summary_links", "lcm store: summary_links are append-only"),
        ]:
            with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match=message):
                conn.execute(sql)
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("DELETE FROM context_items")  # allowed ...
            conn.execute("DELETE FROM conversations")  # ... but messages still refer to it
    assert store.message_count(conv) == 2


def test_a_store_of_another_layout_version_is_refused(postgres_url: str) -> None:
    open_store(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(
        StoreError, match=r"schema version 99, this ctxengine-lcm reads 4 \(and upgrades 3\)"
    ):
        open_store(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DELETE FROM meta")
    with pytest.raises(StoreError, match=r"schema version missing"):
        open_store(postgres_url)


def test_processes_opening_a_new_database_at_once_create_it_once(postgres_url: str) -> None:
    code = """
        import sys
        from ctxengine_lcm.backends import open_store
        sys.stdin.readline()  # start together
        store = open_store(sys.argv[1])
        print(store.conversation_id("shared"), flush=True)
    """
    children = [_child(code, postgres_url) for _ in range(4)]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    answers = {child.communicate(timeout=60)[0].strip() for child in children}
    assert all(child.returncode == 0 for child in children)
    assert answers == {"1"}  # one conversation row, whoever created the tables


def test_without_psycopg_the_error_gives_the_pip_line(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError) as excinfo:
        open_store(postgres_url)
    assert "needs psycopg 3 and psycopg_pool" in str(excinfo.value)
    assert "pip install 'ctxengine-lcm[postgres]'" in str(excinfo.value)


def test_an_unreachable_server_is_a_store_error_without_the_password(tmp_path: Any) -> None:
    url = f"postgresql://lcm:hunter2@/lcm?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StoreError) as excinfo:
        open_store(url)
    text = str(excinfo.value)
    assert text.startswith(f"cannot open the lcm store postgresql://lcm:***@/lcm?host={tmp_path}")
    assert "hunter2" not in text.split(": ", 1)[0]


def test_settings_select_postgres_by_url_and_name_bad_values() -> None:
    settings = parse_settings({"database_url": "postgresql://lcm@db/lcm", "database_pool_size": 3})
    assert settings.database_url == "postgresql://lcm@db/lcm"
    assert settings.database_pool_size == 3
    with pytest.raises(ConfigError) as excinfo:
        parse_settings({"database_url": "mysql://root:pw@db/x", "database_pool_size": 0})
    text = str(excinfo.value)
    # The URL is echoed so the user sees which one is wrong, its password is not.
    assert "engines.lcm.database_url = 'mysql://root:***@db/x': must be a postgresql://" in text
    assert ":pw@" not in text
    assert "engines.lcm.database_pool_size" in text
    with pytest.raises(ConfigError, match=r"engines.lcm.db_path .*must be null when"):
        parse_settings({"database_url": "postgresql:///lcm", "db_path": "/tmp/x.db"})


# -- locks, transactions, connections -------------------------------------------------------------

LOCK_HOLDER = """
    import sys
    from ctxengine_lcm.backends import open_store
    store = open_store(sys.argv[1])
    with store.session_lock("busy") as held:
        print("held" if held else "refused", flush=True)
        sys.stdin.readline()
    print("released", flush=True)
"""


def test_the_session_lock_excludes_other_processes_and_dies_with_its_holder(
    store: PostgresStore, postgres_url: str
) -> None:
    holder = _child(LOCK_HOLDER, postgres_url)
    try:
        _wait_for(holder, "held")
        with store.session_lock("busy") as held:
            assert not held
        with store.session_lock("busy", wait=0.2) as held:  # waits, then gives up
            assert not held
        with store.session_lock("other") as held:
            assert held  # other sessions are not affected
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        _wait_for(holder, "released")
        with store.session_lock("busy") as held:
            assert held
    finally:
        holder.kill()
        holder.wait()

    killed = _child(LOCK_HOLDER, postgres_url)
    _wait_for(killed, "held")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    with store.session_lock("busy", wait=10.0) as held:
        assert held  # the server released the dead holder's lock


def test_a_lock_waiter_gets_the_lock_when_the_other_process_lets_go(
    store: PostgresStore, postgres_url: str
) -> None:
    holder = _child(LOCK_HOLDER, postgres_url)
    try:
        _wait_for(holder, "held")

        def let_go() -> None:
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()

        threading.Timer(0.3, let_go).start()
        with store.session_lock("busy", wait=30.0) as held:
            assert held
            _wait_for(holder, "released")  # it had the lock until we got it
    finally:
        holder.kill()
        holder.wait()


KILLED_MID_SUMMARY = """
    import sys, time
    from ctxengine_lcm import store as store_module
    from ctxengine_lcm.backends import open_store
    from ctxengine_lcm.store import NewSummary

    store = open_store(sys.argv[1])
    conv = store.find_conversation("s")
    ids = [mid for kind, mid in store.context(conv)]
    real = store_module.Store._write_context

    def stalled(conn, conversation_id, items):
        real(conn, conversation_id, items)
        print("inside", flush=True)  # summary, links and the new context written, not committed
        time.sleep(60)

    store_module.Store._write_context = staticmethod(stalled)
    with store.session_lock("s") as held:
        summary = NewSummary(
            id="sum_0123456789ab", depth=0, kind="leaf", mode="deterministic",
            content="half written", tokens=3, source_tokens=10, message_ids=tuple(ids[:2]),
        )
        rest = [("message", i) for i in ids[2:]]
        store.add_summary(conv, summary, [("summary", summary.id), *rest])
"""


def test_a_worker_killed_inside_a_compaction_leaves_nothing_of_it(
    store: PostgresStore, postgres_url: str
) -> None:
    conv = store.conversation_id("s")
    ids = store.append(conv, _rows(["one", "two", "three", "four"]), context=[0, 1, 2, 3])
    child = _child(KILLED_MID_SUMMARY, postgres_url)
    _wait_for(child, "inside")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with store.session_lock("s", wait=10.0) as held:
        assert held
        assert store.summaries(conv) == []
        assert store.context(conv) == [("message", i) for i in ids]
    assert examine(store).problems == []


def _in_threads(work: Callable[[int], None], count: int) -> None:
    """Run ``work(0)`` ... ``work(count - 1)`` in threads at once; re-raise the first failure."""
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_writers_of_one_conversation_never_collide(store: PostgresStore) -> None:
    conv = store.conversation_id("s")

    def write(k: int) -> None:
        for batch in range(10):
            store.append(conv, _rows([f"writer {k} batch {batch} {j}" for j in range(5)]))

    _in_threads(write, 4)
    rows = store.messages(conv)
    assert [r.seq for r in rows] == list(range(200))
    assert [r.id for r in rows] == sorted(r.id for r in rows)  # ids follow seq


def test_stores_on_one_url_share_one_pool(postgres_url: str) -> None:
    first, second = open_store(postgres_url), open_store(postgres_url)
    assert isinstance(first, PostgresStore) and isinstance(second, PostgresStore)
    assert first._pool is second._pool
    first.close()
    assert second.conversation_id("still works") == 1
    second.close()
    with pytest.raises(StoreError, match="is closed"):
        second.message_count()
    third = open_store(postgres_url)
    try:
        assert third.message_count() == 0  # a new pool for a new holder
    finally:
        third.close()


def test_an_exhausted_pool_is_reported_as_such(postgres_url: str) -> None:
    store = open_store(postgres_url, pool_size=1)
    try:
        # The one connection is this thread's; a lock needs its own and cannot get it.
        with (
            store.one_connection(),
            pytest.raises(StoreError, match="database_pool_size"),
            store.session_lock("s"),
        ):
            pass
    finally:
        store.close()


# -- text the database cannot hold, text longer than the index --------------------------------


def test_nul_characters_are_kept_in_the_message_and_replaced_in_searchable_text(
    store: PostgresStore,
) -> None:
    conv = store.conversation_id("s")
    (mid,) = store.append(conv, _rows(["binary\x00junk marker"]))
    (row,) = store.messages(conv)
    assert json.loads(row.content)["content"] == "binary\x00junk marker"
    assert row.text == "binary\ufffdjunk marker"
    searcher = Searcher(store, conv, timeout=5.0)
    assert [h.id for h in searcher.search("marker")] == [f"msg_{mid}"]
    with pytest.raises(ToolError, match="NUL character"):
        searcher.search("a\x00b", mode="literal")


def test_a_text_longer_than_the_index_is_stored_and_found_by_literal_search(
    store: PostgresStore,
) -> None:
    conv = store.conversation_id("s")
    tail = "needle" + "q" * 10
    text = " ".join(f"w{k}" for k in range(FTS_CHARS // 3)) + " " + tail
    (mid,) = store.append(conv, _rows([text]))
    searcher = Searcher(store, conv, timeout=5.0)
    assert searcher.search(tail) == []  # past the indexed part
    assert [h.id for h in searcher.search(tail, mode="literal")] == [f"msg_{mid}"]
    assert [h.id for h in searcher.search("w12345")] == [f"msg_{mid}"]


# -- search ---------------------------------------------------------------------------------------


@pytest.fixture
def searched(store: PostgresStore) -> tuple[Searcher, list[int]]:
    conv = store.conversation_id("s")
    ids = store.append(
        conv,
        _rows(
            [
                "edit src/app.py then run the tests",  # 0
                "The Quick brown fox",  # 1
                "fox fox fox, nothing but foxes",  # 2
                "100% done_ok",  # 3
                "unrelated words entirely",  # 4
                "multi\nline text",  # 5
            ]
        ),
    )
    return Searcher(store, conv, timeout=5.0), ids


def _ids(hits: list[Any]) -> list[int]:
    return [h.message_id for h in hits]


def test_full_text_reads_punctuation_as_fts5_does(searched: tuple[Searcher, list[int]]) -> None:
    searcher, ids = searched
    assert _ids(searcher.search('"src app py"')) == [ids[0]]
    assert _ids(searcher.search('"src/app.py"')) == [ids[0]]
    assert _ids(searcher.search("app")) == [ids[0]]
    assert _ids(searcher.search("done")) == [ids[3]]  # done_ok is two words


def test_full_text_operators(searched: tuple[Searcher, list[int]]) -> None:
    searcher, ids = searched
    assert _ids(searcher.search("quick fox")) == [ids[1]]  # AND, case-insensitive
    assert set(_ids(searcher.search("quick OR unrelated"))) == {ids[1], ids[4]}
    assert _ids(searcher.search("fox NOT quick")) == [ids[2]]
    assert _ids(searcher.search("fo*")) == [ids[2], ids[1]]  # ranked: more matches first
    assert _ids(searcher.search("(quick OR nothing) AND fox")) == [ids[2], ids[1]]
    assert _ids(searcher.search('"brown fox" + ""')) == [ids[1]]
    assert "[Quick]" in searcher.search("quick")[0].snippet


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('"open', "unterminated string"),
        ("fox OR", "it ends where a word or phrase was expected"),
        ("(fox", "a '(' is not closed"),
        ("fox)", "syntax error near ')'"),
        ("a.b", "syntax error near '.'"),
        ("NEAR(a b)", "does not support"),
        ("text:fox", "does not support"),
        ("(" * 40 + "x" + ")" * 40, "nested deeper than 32"),
    ],
)
def test_bad_full_text_queries_are_tool_errors(
    searched: tuple[Searcher, list[int]], query: str, message: str
) -> None:
    searcher, _ = searched
    with pytest.raises(ToolError, match="full-text query") as excinfo:
        searcher.search(query)
    assert message in str(excinfo.value)


def test_literal_search_is_case_insensitive_and_takes_wildcards_literally(
    searched: tuple[Searcher, list[int]],
) -> None:
    searcher, ids = searched
    assert _ids(searcher.search("QUICK BROWN", mode="literal")) == [ids[1]]
    assert _ids(searcher.search("0% d", mode="literal")) == [ids[3]]
    assert searcher.search("1_0", mode="literal") == []  # _ is not a wildcard
    assert _ids(searcher.search("e_o", mode="literal")) == [ids[3]]


def test_regex_search_keeps_python_meanings(searched: tuple[Searcher, list[int]]) -> None:
    searcher, ids = searched
    assert _ids(searcher.search(r"\bfox\b", mode="regex")) == [ids[2], ids[1]]
    assert _ids(searcher.search(r"\bfoxes\b", mode="regex")) == [ids[2]]
    assert searcher.search("quick", mode="regex") == []  # case-sensitive by default
    assert _ids(searcher.search("(?i)quick", mode="regex")) == [ids[1]]
    assert searcher.search("multi.line", mode="regex") == []  # . stops at a newline
    assert _ids(searcher.search("(?s)multi.line", mode="regex")) == [ids[5]]
    assert _ids(searcher.search("(?m)^line", mode="regex")) == [ids[5]]
    assert _ids(searcher.search(r"(?P<n>\x41|1)00", mode="regex")) == [ids[3]]
    with pytest.raises(ToolError, match="rejected the pattern 'a\\*\\+'"):
        searcher.search("a*+", mode="regex")  # possessive: Python has it, PostgreSQL not


def test_a_search_of_one_conversation_reads_its_entries_of_the_indexes(
    searched: tuple[Searcher, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    searcher, _ = searched
    store = searcher.store
    assert isinstance(store, PostgresStore)
    queries: list[tuple[str, tuple[Any, ...]]] = []
    real = PostgresStore.bounded_rows

    def recording(self: PostgresStore, sql: str, params: Any, timeout_s: float) -> list[Any]:
        queries.append((sql, tuple(params)))
        return real(self, sql, params, timeout_s)

    monkeypatch.setattr(PostgresStore, "bounded_rows", recording)
    for mode in ("full_text", "literal", "regex"):
        searcher.search("foxes", mode=mode, scope="messages")
    assert len(queries) == 3
    for sql, params in queries:
        with store.transaction() as conn:
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {sql}", params))
        # The conversation is a condition of the GIN index scan (btree_gin), not a filter
        # applied to every match of the pattern in the whole store.
        conditions = [line for line in plan.splitlines() if "Index Cond:" in line]
        assert any("conversation_id = " in line for line in conditions), plan


def test_translations_into_postgres_syntax() -> None:
    assert postgres_regex(r"\bx\B[\b]") == r"(?p)\yx\Y[\b]"
    assert postgres_regex(r"(?im)\x41B") == r"(?ni)\u0041B"
    assert postgres_regex(r"(?sx)(?P<word>a)") == r"(?sx)(a)"
    assert postgres_regex(r"[]\b]") == r"(?p)[]\b]"
    query = tsquery('alpha "two words" NOT pre*')
    assert query.sql == (
        "(phraseto_tsquery('simple', ?) && (phraseto_tsquery('simple', ?)"
        " && !!to_tsquery('simple', ?)))"
    )
    assert query.params == ("alpha", "two words", "'pre':*")
    assert query.words == ("alpha", "two", "words")


# -- doctor ---------------------------------------------------------------------------------------


def test_doctor_finds_references_past_disabled_checks_and_a_lagging_sequence(
    store: PostgresStore, postgres_url: str
) -> None:
    conv = store.conversation_id("s")
    store.append(conv, _rows(["one", "two"]), context=[0, 1])
    assert examine(store).problems == []
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # skips foreign key checks
        conn.execute("INSERT INTO context_items VALUES (%s, 2, 999, NULL)", (conv,))
        conn.execute("SELECT setval('message_ids', 1)")
    problems = examine(store).problems
    assert "1 context_items row(s) refer to a missing row of messages (message_id = 999, ...)" in (
        problems
    )
    assert any(
        "the message id sequence is at 1, below the highest message id 2" in p for p in problems
    )


def test_doctor_notes_a_database_without_a_utf8_locale(postgres_server: str) -> None:
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute("CREATE DATABASE lcm_c_locale TEMPLATE template0 LOCALE 'C'")
    url = postgres_server.replace("/postgres?", "/lcm_c_locale?")
    store: Store = open_store(url)  # installs pg_trgm itself: the server's user may
    try:
        notes = examine(store).notes
        assert any("LC_CTYPE is C: full-text search" in n for n in notes), notes
    finally:
        store.close()


def test_lock_keys_are_stable_and_namespaced() -> None:
    assert postgres.lock_key("a", "s") == postgres.lock_key("a", "s")
    assert postgres.lock_key("a", "s") != postgres.lock_key("b", "s")
    assert -(2**63) <= postgres.lock_key("a", "\ud800") < 2**63


# -- messages indexed after ingest ---------------------------------------------------------------


def test_ingest_queues_messages_and_every_search_sees_them(store: PostgresStore) -> None:
    conv = store.conversation_id("s")
    other = store.conversation_id("t")
    store.append(conv, _rows(["a queued walrus", "another line"]))
    store.append(other, _rows(["the walrus elsewhere"], "t"))
    assert store.deferred_index is True
    assert store.unindexed_messages() == 3
    for mode in ("full_text", "literal", "regex"):
        hits = Searcher(store, conv, timeout=10.0).search("walrus", mode=mode, scope="messages")
        assert [hit.id for hit in hits] == ["msg_1"], mode
    # The own-conversation search indexed that conversation only; store-wide, the rest.
    assert store.unindexed_messages() == 1
    hits = Searcher(store, None, timeout=10.0).search("walrus", scope="messages")
    assert sorted(hit.id for hit in hits) == ["msg_1", "msg_3"]
    assert store.unindexed_messages() == 0
    assert store.catch_up_index() == 0
    with store.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM message_search").fetchone()[0] == 3


def test_a_queued_range_held_by_another_catch_up_is_waited_for(
    store: PostgresStore, postgres_url: str
) -> None:
    conv = store.conversation_id("s")
    (first,) = store.append(conv, _rows(["first"]))
    (second,) = store.append(conv, _rows(["second"]))
    # Another worker's catch-up holds the first range, not committed yet.
    with psycopg.connect(postgres_url) as other:
        other.execute(
            "SELECT 1 FROM index_queue WHERE conversation_id = %s AND first_id = %s FOR UPDATE",
            (conv, first),
        )
        # A store-wide catch-up of another worker skips the held range at first ...
        assert store._drain(10, None, skip_locked=True) == 1
        counted: list[int] = []
        waiter = threading.Thread(
            target=lambda: counted.append(store.catch_up_index(conversation_id=conv))
        )
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive()  # ... and this conversation's catch-up waits for it
        other.rollback()  # the other worker died: its range is back in the queue
        waiter.join(30)
    assert counted == [1]
    assert store.unindexed_messages() == 0
    hits = Searcher(store, conv, timeout=10.0).search("first OR second", scope="messages")
    assert sorted(hit.message_id or 0 for hit in hits) == [first, second]
    assert examine(store).problems == []


CATCH_UP_STALLED = """
    import sys
    from ctxengine_lcm.backends import open_store

    store = open_store(sys.argv[1])
    with store.one_connection(), store.reading() as conn:  # the catch-up runs on it too
        print(conn.execute("SELECT pg_backend_pid()").fetchone()[0], flush=True)
        store.catch_up_index()
"""


def test_a_worker_killed_inside_a_catch_up_leaves_its_ranges_queued(
    store: PostgresStore, postgres_url: str
) -> None:
    conv = store.conversation_id("s")
    ids = [mid for k in range(3) for mid in store.append(conv, _rows([f"text {k}", "more"]))]
    # This connection's uncommitted row for the last message stalls the child's catch-up
    # statement after it has taken the queue rows (the INSERT waits on the conflict).
    with psycopg.connect(postgres_url) as blocker:
        blocker.execute(
            "INSERT INTO message_search (id, conversation_id, role, pinned, tsv, text)"
            " SELECT id, conversation_id, role, pinned, ''::tsvector, text FROM messages"
            " WHERE id = %s",
            (ids[-1],),
        )
        child = _child(CATCH_UP_STALLED, postgres_url)
        assert child.stdout is not None
        backend = int(child.stdout.readline())
        with psycopg.connect(postgres_url, autocommit=True) as watch:
            for _ in range(300):
                waiting = watch.execute(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (backend,)
                ).fetchone()
                if waiting is not None and waiting[0] == "Lock":
                    break
                threading.Event().wait(0.05)
            else:
                pytest.fail("the child's catch-up never reached the stalled insert")
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            # The server ends the dead worker's statement (on its own once it notices the
            # socket is gone; here at once).
            watch.execute("SELECT pg_terminate_backend(%s, 10000)", (backend,))
        blocker.rollback()
    assert store.unindexed_messages() == 6  # nothing of the killed statement is left
    with store.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM message_search").fetchone()[0] == 0
    assert store.catch_up_index() == 6
    assert examine(store).problems == []


def test_concurrent_ingest_and_catch_ups_index_each_message_once(
    store: PostgresStore,
) -> None:
    def work(k: int) -> None:
        conv = store.conversation_id(f"w{k}")
        for batch in range(8):
            store.append(conv, _rows([f"worker{k} batch{batch} n{j}" for j in range(4)]))
            if batch % 2:
                store.catch_up_index(conversation_id=conv)
            if batch % 3 == 2:
                store.catch_up_index()  # store-wide: other workers' ranges too

    _in_threads(work, 4)
    store.catch_up_index()
    with store.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM message_search").fetchone()[0] == 128
    assert examine(store).problems == []
    for k in range(4):
        conv = store.find_conversation(f"w{k}")
        hits = Searcher(store, conv, timeout=10.0).search(f"worker{k}", limit=500)
        assert len(hits) == 32


def test_doctor_finds_a_message_neither_searchable_nor_queued(
    store: PostgresStore, postgres_url: str
) -> None:
    conv = store.conversation_id("s")
    store.append(conv, _rows(["one", "two"]))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DELETE FROM index_queue")  # the queue is not append-only; damage it
    problems = examine(store).problems
    assert problems == [
        "2 message(s) are neither searchable nor queued for the index (message id 1, ...): "
        "lcm_grep cannot find them"
    ]


def test_a_layout_3_store_is_upgraded_in_place(postgres_url: str) -> None:
    from ctxengine_lcm.store_postgres import _TSVECTOR

    store = open_store(postgres_url)
    conv = store.conversation_id("s")
    store.append(conv, _rows(["an archived walrus", "more"]))
    store.catch_up_index()
    store.close()
    # The layout before message_search: the tsvector and trigram index on messages.
    tsv = _TSVECTOR.replace("{column}", "text")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "DROP TABLE index_queue, message_search;"
            f" ALTER TABLE messages ADD COLUMN tsv TSVECTOR GENERATED ALWAYS AS ({tsv}) STORED;"
            " CREATE INDEX messages_fts ON messages USING gin (tsv);"
            " CREATE INDEX messages_trgm ON messages USING gin (text public.gin_trgm_ops);"
            " UPDATE meta SET value = '3' WHERE key = 'schema_version'"
        )
    upgraded = open_store(postgres_url)
    try:
        hits = Searcher(upgraded, conv, timeout=10.0).search("walrus", scope="messages")
        assert [hit.id for hit in hits] == ["msg_1"]
        assert examine(upgraded).problems == []
        with upgraded.reading() as conn:
            assert conn.execute("SELECT value FROM meta").fetchone()[0] == "4"
    finally:
        upgraded.close()
