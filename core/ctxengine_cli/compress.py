"""``ctxengine compress``: a conversation file through the configured engine.

It runs the engine once per conversation, under a session id the user can look up afterwards
(``ctxengine lcm status --session ID``), and says which id it used.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ctxengine import (
    CommandError,
    ConversationRecord,
    LoadedConfig,
    UsageError,
    engine_options,
    engine_overrides,
    load_config,
    read_conversations,
)
from ctxengine_cli.console import Console, Writer
from ctxengine_cli.files import write_conversations
from ctxengine_cli.show import write_json

if TYPE_CHECKING:
    from ctxengine import CompressResult


def _loaded(args: argparse.Namespace) -> LoadedConfig:
    return load_config(args.config, overrides=engine_overrides(args))


# -- compress ----------------------------------------------------------------------------------

FILE_HELP = (
    "conversation file: a JSON list of messages, a JSON object with 'messages' (and 'system', "
    "'id'), or JSONL with one conversation per line; OpenAI or Anthropic format"
)


def configure_compress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help=FILE_HELP)
    parser.add_argument(
        "--out", metavar="PATH", help="write the compacted conversation(s) here, same shape"
    )
    parser.add_argument(
        "--session", type=int, metavar="N", help="only the N-th conversation of FILE (from 0)"
    )
    parser.add_argument(
        "--id",
        metavar="SESSION_ID",
        help="session id to compact under (default: the conversation's 'id', else "
        "conversation-N); engines that store sessions (lcm) file it under this id",
    )
    engine_options(parser)
    parser.add_argument(
        "--focus", metavar="TOPIC", help="topic the summary should keep in most detail"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def compress_json(label: str, session_id: str, result: CompressResult) -> dict[str, Any]:
    """One ``compress`` result for ``--json`` (everything but the messages themselves)."""
    return {
        "conversation": label,
        "session_id": session_id,
        "status": result.status,
        "engine": result.engine,
        "reason": result.reason,
        "messages_before": result.messages_before,
        "messages_after": result.messages_after,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "summary_by": result.provider,
        "fallback_used": result.fallback_used,
        "duration_s": round(result.duration_s, 4),
        "summary": result.summary,
    }


def write_compress_report(label: str, session_id: str, result: CompressResult, out: Writer) -> None:
    """Human-readable report of one ``compress`` call, naming the session id it ran under (the
    id to look the conversation up by, e.g. ``ctxengine lcm status --session ID``)."""
    out.write(f"{label}: {result.status} ({result.engine})\n")
    out.write(f"  session:  {session_id}\n")
    out.write(f"  reason:   {result.reason}\n")
    out.write(
        f"  messages: {result.messages_before} -> {result.messages_after}"
        f" ({result.messages_dropped} dropped from the prompt)\n"
    )
    saved = result.tokens_before - result.tokens_after
    share = saved / result.tokens_before if result.tokens_before else 0.0
    out.write(
        f"  tokens:   {result.tokens_before:,} -> {result.tokens_after:,} ({share:.0%} smaller)\n"
    )
    if result.provider or result.summary:
        fallback = " (fallback: local digest)" if result.fallback_used else ""
        out.write(f"  summary by: {result.provider or 'n/a'}{fallback}\n")
    out.write(f"  took:     {result.duration_s * 1000:.0f} ms\n")
    if result.summary:
        lines = result.summary.strip().splitlines()
        out.write("  summary (first lines):\n")
        for line in lines[:12]:
            out.write(f"    {line[:160]}\n")
        if len(lines) > 12:
            out.write(f"    ... ({len(lines) - 12} more lines)\n")


def run_compress(args: argparse.Namespace, console: Console) -> int:
    """Compact each conversation of a file with the configured engine and report."""
    from ctxengine import load

    records = read_conversations(args.file, args.session)
    if args.id is not None and len(records) != 1:
        raise UsageError(
            f"compress: --id names one session, but {args.file} holds {len(records)} "
            "conversations; choose one with --session N"
        )
    # --id names the one record's session; without it, each record runs under its own id.
    ids = [args.id] if args.id is not None else ConversationRecord.session_ids(records)
    written = []
    results = []
    with load(_loaded(args), trigger=args.threshold) as kernel:
        if not args.json:
            for line in kernel.status_lines():
                console.line(line)
        for record, session_id in zip(records, ids, strict=True):
            result = kernel.session(session_id).compress(
                record.messages, record.system, force=True, focus=args.focus, format=record.format
            )
            label = f"{record.id} ({record.format})"
            if args.json:
                results.append(compress_json(label, session_id, result))
            else:
                write_compress_report(label, session_id, result, console)
            written.append((record, result.messages, result.system))
        engine, notices = kernel.engine, list(kernel.notices)
    if args.out:
        try:
            write_conversations(args.out, written)
        except OSError as exc:
            raise CommandError(f"cannot write {args.out}: {exc}") from None
    if args.json:
        document = {"engine": engine, "notices": notices, "conversations": results}
        write_json({**document, "out": args.out}, console)
    elif args.out:
        console.line(f"wrote {len(written)} conversation(s) to {args.out}")
    return 0
