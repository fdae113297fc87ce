"""``ctxengine compress`` and ``ctxengine replay``: conversation files through the engine.

``compress`` is real: it runs the configured engine once per conversation, under a session id
the user can look up afterwards (``ctxengine lcm status --session ID``), and says which id it
used. ``replay`` is a simulation: its kernels run sandboxed (:func:`ctxengine.load` with
``sandbox=``), so what engines store goes to a temporary folder (or ``--data-dir``), never to the
user's own stores.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxengine._cli.console import Console
from ctxengine._cli.errors import CommandError, UsageError
from ctxengine._cli.files import (
    ConversationFileError,
    ConversationRecord,
    read_conversations,
    write_conversations,
)
from ctxengine._cli.show import write_json
from ctxengine._config.core import LoadedConfig, load_config

if TYPE_CHECKING:
    from ctxengine._cli.replay import Gaps, Progress, Scenario, SummaryCalls
    from ctxengine._config.core import CacheTTL
    from ctxengine._kernel.kernel import Kernel


def _engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine", metavar="NAME", help="context engine to use (overrides context.engine)"
    )
    parser.add_argument("--model", metavar="NAME", help="main model (overrides model.name)")
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="FRACTION",
        help="compact at this fraction of the window: sets the selected engine's own trigger "
        "(compression.threshold for the compressor, engines.lcm.threshold for lcm)",
    )
    parser.add_argument(
        "--context-length",
        type=int,
        metavar="TOKENS",
        help="model window in tokens (overrides model.context_length)",
    )


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.engine:
        overrides["context.engine"] = args.engine
    if args.context_length is not None:
        overrides["model.context_length"] = args.context_length
    if args.model:
        overrides["model.name"] = args.model
    if getattr(args, "clearing", False):
        overrides["context_editing.clear_tool_uses"] = True
    return overrides


def _loaded(args: argparse.Namespace) -> LoadedConfig:
    return load_config(args.config, overrides=_overrides(args))


def _read(path: str) -> list[ConversationRecord]:
    try:
        return read_conversations(path)
    except ConversationFileError as exc:
        raise CommandError(str(exc)) from None


def _pick(
    records: list[ConversationRecord], session: int | None, path: str
) -> list[ConversationRecord]:
    if session is None:
        return records
    if not 0 <= session < len(records):
        raise CommandError(
            f"{path} holds {len(records)} conversation(s); --session must be 0..{len(records) - 1}"
        )
    return [records[session]]


def session_ids(records: Sequence[ConversationRecord], chosen: str | None) -> list[str]:
    """The session id each record is compacted under: ``chosen`` (one record only), else the
    record's own id; a repeated id gets ``#2``, ``#3``, ... so two records never share engine
    state."""
    if chosen is not None:
        return [chosen] * len(records)
    seen: Counter[str] = Counter()
    ids = []
    for record in records:
        seen[record.id] += 1
        ids.append(record.id if seen[record.id] == 1 else f"{record.id}#{seen[record.id]}")
    return ids


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
    _engine_options(parser)
    parser.add_argument(
        "--focus", metavar="TOPIC", help="topic the summary should keep in most detail"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_compress(args: argparse.Namespace, console: Console) -> int:
    """Compact each conversation of a file with the configured engine and report."""
    from ctxengine._cli.report import compress_json, write_compress_report
    from ctxengine._kernel.kernel import load

    records = _pick(_read(args.file), args.session, args.file)
    if args.id is not None and len(records) != 1:
        raise UsageError(
            f"compress: --id names one session, but {args.file} holds {len(records)} "
            "conversations; choose one with --session N"
        )
    written = []
    results = []
    with load(_loaded(args), trigger=args.threshold) as kernel:
        if not args.json:
            for line in kernel.status_lines():
                console.line(line)
        for record, session_id in zip(records, session_ids(records, args.id), strict=True):
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


# -- replay ------------------------------------------------------------------------------------

TTLS: Mapping[str, CacheTTL] = {"5m": "5m", "1h": "1h", "auto": "auto"}
SUMMARIES: Mapping[str, SummaryCalls] = {"fresh": "fresh", "cache-aware": "cache-aware"}


def configure_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help=FILE_HELP + " (one or more files)")
    parser.add_argument(
        "--session", type=int, metavar="N", help="only the N-th conversation of each file"
    )
    _engine_options(parser)
    parser.add_argument(
        "--gap",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="simulated seconds between turns, against the cache lifetime (default 30)",
    )
    parser.add_argument(
        "--gaps",
        metavar="LIST",
        help="time between turns instead of --gap, comma-separated, one replay each: short "
        "(30 s), long (20 min), mixed (30 s in the agent loop, 20 min before a person's "
        "message), mixed:P (a share P of long gaps), recorded (the messages' timestamps) or "
        "seconds",
    )
    parser.add_argument(
        "--strategy",
        metavar="LIST",
        help="cache strategies to compare, comma-separated (e.g. system_and_3,tool_turns)",
    )
    parser.add_argument(
        "--ttl", metavar="LIST", help="TTL policies to compare: 5m, 1h, auto (comma-separated)"
    )
    parser.add_argument(
        "--summaries",
        metavar="LIST",
        help="price the summary calls of the main model: fresh (the bounded summariser prompt), "
        "cache-aware (the agent's cached request plus the instruction), comma-separated",
    )
    parser.add_argument(
        "--clearing",
        action="store_true",
        help="send Anthropic's tool-result clearing (context_editing.clear_tool_uses) and price "
        "what the server clears",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--turns", action="store_true", help="also print every turn")
    parser.add_argument(
        "--plot",
        action="append",
        metavar="OUT",
        help="write a chart: .html (interactive, self-contained), .png, .svg or .pdf; "
        "may be given more than once",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="keep what engines store during the replay (lcm's database) in DIR; by default a "
        "temporary folder is used and deleted, so real stores are never touched",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr (default: when stderr is a terminal and not --json)",
    )


def _list(text: str | None, flag: str, allowed: Sequence[str] | None = None) -> list[str]:
    """A comma-separated option value, each item once and in order.

    :raises UsageError: for a list without items, or an item not in ``allowed`` (when given).
    """
    if text is None:
        return []
    items = list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not items:
        raise UsageError(f"replay: {flag} needs at least one value")
    for item in items:
        if allowed is not None and item not in allowed:
            raise UsageError(f"replay: {flag} {item!r}: expected one of {', '.join(allowed)}")
    return items


def _gap_list(args: argparse.Namespace) -> list[Gaps]:
    from ctxengine._cli.replay import Gaps

    try:
        return [Gaps.parse(text) for text in _list(args.gaps, "--gaps")] or [
            Gaps.parse(str(args.gap))
        ]
    except ValueError as exc:
        raise UsageError(f"replay: {exc}") from None


def _scenarios(args: argparse.Namespace) -> tuple[Scenario, ...]:
    from ctxengine._cli.replay import scenario_set

    return scenario_set(
        strategies=_list(args.strategy, "--strategy"),
        ttls=[TTLS[t] for t in _list(args.ttl, "--ttl", tuple(TTLS))],
        summaries=[SUMMARIES[s] for s in _list(args.summaries, "--summaries", tuple(SUMMARIES))],
    )


def _check_strategies(kernel: Kernel, scenarios: Sequence[Scenario]) -> None:
    """Every strategy a scenario names resolves (else its requests would go out unmarked)."""
    from ctxengine._kernel.kernel import not_found_message

    for name in dict.fromkeys(s.strategy for s in scenarios if s.strategy is not None):
        entry, tried = kernel.catalog.resolve(name, "cache_strategy")
        if entry is None:
            detail = not_found_message(name, "cache_strategy", kernel.catalog, tried)
            raise UsageError(f"replay: --strategy {name}: {detail}")


def _progress(
    show: bool, number: int, total_records: int, record: ConversationRecord, last: str
) -> Progress:
    def progress(label: str, done: int, total: int) -> None:
        if show and (done == total or done % 10 == 0):
            end = "\n" if done == total and label == last else ""
            sys.stderr.write(
                f"\rreplaying {number}/{total_records} {record.id}: {label:<10} "
                f"turn {done}/{total}{end}"
            )
            sys.stderr.flush()

    return progress


def run_replay(args: argparse.Namespace, console: Console) -> int:
    """Replay sessions turn by turn under every scenario and compare tokens and cost."""
    from ctxengine._cli.charts import ChartPathError, check_chart_path, write_chart
    from ctxengine._cli.replay import replay
    from ctxengine._cli.report import replay_json, write_replay_report, write_replay_totals
    from ctxengine._kernel.kernel import load

    charts = [Path(p) for p in args.plot or ()]
    for chart in charts:  # before minutes of replaying, not after
        try:
            check_chart_path(chart)
        except ChartPathError as exc:
            raise UsageError(f"replay: {exc}") from None
        except ImportError as exc:
            raise CommandError(str(exc)) from None
    gap_list = _gap_list(args)
    scenarios = _scenarios(args)
    loaded = _loaded(args)
    records = [record for path in args.files for record in _pick(_read(path), args.session, path)]
    for record in records:
        for gaps in gap_list:
            try:
                gaps.times(record)  # recorded gaps need timestamps: say so before replaying
            except ValueError as exc:
                raise CommandError(str(exc)) from None
    show_progress = args.progress or (not args.json and sys.stderr.isatty())
    with contextlib.ExitStack() as stack:
        if args.data_dir:
            sandbox = Path(args.data_dir).expanduser()
            try:
                sandbox.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CommandError(f"cannot create --data-dir {sandbox}: {exc}") from None
        else:
            sandbox = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxengine-")))
        # Loading once first reports configuration problems before any replay starts.
        with load(loaded, trigger=args.threshold, sandbox=sandbox) as kernel:
            _check_strategies(kernel, scenarios)
            if not args.json:
                for line in kernel.status_lines():
                    console.line(line)
        priced = [s for s in dict.fromkeys(s.summaries for s in scenarios) if s != "configured"]
        if priced and not args.json:
            console.line(
                f"📝 Replay: summary calls priced as the main model's ({', '.join(priced)}); "
                "each answer fills its budget"
            )
        reports = [
            replay(
                record,
                loaded.config,
                gaps=gaps,
                scenarios=scenarios,
                trigger=args.threshold,
                sandbox=sandbox,
                # Replays sharing the sandbox never share an engine's session.
                session=session if len(gap_list) == 1 else f"{session}@{gaps.name}",
                progress=_progress(show_progress, number, len(records), record, scenarios[-1].name),
            )
            for number, (record, session) in enumerate(
                zip(records, session_ids(records, None), strict=True), 1
            )
            for gaps in gap_list
        ]
    if args.json:
        write_json(replay_json(reports), console)
    else:
        for report in reports:
            write_replay_report(report, console, turns=args.turns)
        write_replay_totals(reports, console)
    for chart in charts:
        try:
            write_chart(reports, chart)
        except OSError as exc:
            raise CommandError(f"cannot write {chart}: {exc}") from None
        if not args.json:
            console.line(f"\nchart written to {chart}")
    if args.data_dir and not args.json:
        console.line(f"\nwhat the engines stored during the replay is in {args.data_dir}")
    return 0
