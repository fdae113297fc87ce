"""``ctxengine lcm status|doctor|grep``: look into a store from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxengine import PluginCommands
    from ctxengine_lcm.store import Store


def register(commands: PluginCommands) -> None:
    commands.add(
        "lcm",
        "inspect the lossless engine's store: status, doctor, grep",
        configure,
        run,
    )


def _db_option(parser: argparse.ArgumentParser, *, default: str | None) -> None:
    # On `lcm` and on each of its commands (`lcm status --db X` reads like `lcm --db X status`);
    # only `lcm` sets the default, so a value given on either survives.
    parser.add_argument(
        "--db",
        metavar="PATH_OR_URL",
        help="store file or postgresql:// URL (default: engines.lcm.database_url, else "
        "engines.lcm.db_path, from the config; else $CTXENGINE_HOME/lcm/lcm.db)",
        default=default,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    _db_option(parser, default=None)
    sub = parser.add_subparsers(dest="lcm_command", metavar="{status,doctor,grep}")
    sub.required = True
    status = sub.add_parser(
        "status", help="what the store holds", description="What the store holds, per session."
    )
    status.add_argument("--session", metavar="ID", help="only this session")
    status.add_argument("--json", action="store_true", help="print the report as JSON")
    _db_option(status, default=argparse.SUPPRESS)
    doctor = sub.add_parser(
        "doctor",
        help="check full-text indexes, lineage and the active contexts",
        description="Index pending messages, then check that the full-text indexes match their "
        "tables, that every summary's lineage is complete and every active context is valid.",
    )
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    _db_option(doctor, default=argparse.SUPPRESS)
    grep = sub.add_parser(
        "grep",
        help="search stored messages, summaries and outputs",
        description="Search the store like the lcm_grep tool does; newest hits first.",
    )
    grep.add_argument("pattern", help="what to look for (FTS5 syntax in full_text mode)")
    grep.add_argument("--session", metavar="ID", help="only this session (default: every one)")
    grep.add_argument(
        "--mode",
        choices=["full_text", "regex", "literal"],
        default="full_text",
        help="full_text (the default), regex or literal",
    )
    grep.add_argument(
        "--scope",
        choices=["messages", "summaries", "outputs", "all"],
        default="all",
        help="what to search (default: all)",
    )
    grep.add_argument("--limit", type=int, default=50, help="most hits to show (default 50)")
    grep.add_argument("--json", action="store_true", help="print the hits as JSON")
    _db_option(grep, default=argparse.SUPPRESS)


def _target(args: argparse.Namespace) -> tuple[str | Path, int]:
    """The store ``--db`` or the configuration names, and the pool size to open it with."""
    from ctxengine_lcm.urls import is_database_url

    if args.db:
        return (args.db if is_database_url(args.db) else Path(args.db).expanduser()), 2
    from ctxengine import ctxengine_home, load_config
    from ctxengine_lcm.settings import settings_for

    settings = settings_for(load_config(getattr(args, "config", None)).config, ctxengine_home())
    if settings.database_url is not None:
        return settings.database_url, settings.database_pool_size
    return settings.path, 1


def _open(args: argparse.Namespace) -> Store | None:
    from ctxengine_lcm.backends import open_store
    from ctxengine_lcm.store import StoreError

    target, pool_size = _target(args)
    try:
        return open_store(target, pool_size=pool_size, create=False)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    store = _open(args)
    if store is None:
        return 1
    try:
        command = args.lcm_command
        if command == "status":
            return _status(store, args.session, as_json=args.json)
        if command == "doctor":
            return _doctor(store, as_json=args.json)
        return _grep(store, args)
    finally:
        store.close()


def _status(store: Store, session: str | None, *, as_json: bool = False) -> int:
    conversation = None
    if session is not None:
        conversation = store.find_conversation(session)
        if conversation is None:
            print(f"no session {session!r} in {store.location}", file=sys.stderr)
            return 1
    stats = store.stats(conversation)
    sessions = [] if session is not None else store.conversations()
    if as_json:
        document = {
            "store": str(store.location),
            "dialect": store.dialect,
            "session": session,
            **stats,
            "sessions": [{"session_id": name, "messages": count} for _, name, count in sessions],
        }
        print(json.dumps(document, ensure_ascii=False, indent=1, default=str))
        return 0
    print(f"store:          {store.location}")
    if store.dialect == "postgresql":
        print("full-text:      PostgreSQL text search (every message indexed as stored)")
    elif stats["fts"]:
        # Not an error: ingest leaves messages for the next search, compaction or doctor.
        print(f"full-text:      FTS5 ({stats['fts_pending']} messages not yet indexed)")
    else:
        print("full-text:      LIKE (SQLite without FTS5)")
    print(f"conversations:  {stats['conversations']}")
    print(f"messages:       {stats['messages']} ({stats['message_tokens']} tokens)")
    depths = ", ".join(f"depth {d}: {n}" for d, n in stats["summaries_by_depth"].items())
    print(f"summaries:      {sum(stats['summaries_by_depth'].values())} ({depths or 'none'})")
    print(f"stored outputs: {stats['outputs']}")
    print(f"context items:  {stats['context_items']}")
    for _, name, count in sessions:
        print(f"  session {name}: {count} messages")
    return 0


def _doctor(store: Store, *, as_json: bool = False) -> int:
    from ctxengine_lcm.doctor import examine

    checkup = examine(store)
    problems = checkup.problems
    if as_json:
        document = {"store": str(store.location), "notes": checkup.notes, "problems": problems}
        print(json.dumps(document, ensure_ascii=False, indent=1))
        return 1 if problems else 0
    for note in checkup.notes:
        print(f"note: {note}")
    if not problems:
        print(f"ok: {store.location} passes every check (full-text indexes, lineage, contexts)")
        return 0
    for problem in problems:
        print(f"problem: {problem}")
    print(f"{len(problems)} problem(s) in {store.location}")
    return 1


def _grep(store: Store, args: argparse.Namespace) -> int:
    from ctxengine import ToolError
    from ctxengine_lcm.search import Searcher

    conversation = None
    if args.session is not None:
        conversation = store.find_conversation(args.session)
        if conversation is None:
            print(f"no session {args.session!r} in {store.location}", file=sys.stderr)
            return 1
    try:
        hits = Searcher(store, conversation).search(
            args.pattern, mode=args.mode, scope=args.scope, limit=args.limit
        )
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([h.as_dict() for h in hits], ensure_ascii=False, indent=2))
        return 0
    for hit in hits:
        where = f" (in {hit.covered_by})" if hit.covered_by else ""
        print(f"{hit.id}{where}: {hit.snippet}")
    print(f"{len(hits)} hit(s)")
    return 0
