"""``ctxengine replay``: recorded sessions turn by turn, compaction and caching against neither.

A replay is a simulation: its kernels run sandboxed (:func:`ctxengine.load` with ``sandbox=``), so
what engines store goes to a temporary folder (or ``--data-dir``), never to the user's own stores.
The command prints to stdout, which the ``ctxengine`` CLI routes through its console (``--plain``,
``NO_COLOR``); it fails with :class:`ctxengine.UsageError` (exit code 2) or
:class:`ctxengine.CommandError` (exit code 1).

Nothing here imports the kernel or the replay itself until the command runs, so ``ctxengine
--help`` stays cheap.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxengine import CommandError, UsageError, engine_options, engine_overrides

if TYPE_CHECKING:
    from ctxengine import CacheTTL, ConversationRecord, LoadedConfig, PluginCommands
    from ctxengine_replay.results import Progress
    from ctxengine_replay.scenarios import Gaps, Scenario, SummaryCalls

HELP = "replay sessions turn by turn: compaction and caching vs neither"
DESCRIPTION = (
    "Replay recorded sessions as the agent lived them through the selected engine and cache "
    "strategy, against a simulated provider cache, and compare tokens and cost: no compaction "
    "and no caching, caching only, compaction only, both, and with --strategy, --ttl and "
    "--summaries one 'both' per strategy, TTL policy and way of pricing the summary calls; "
    "--gaps replays each session once per gap distribution. The tables and charts show where "
    "the money goes (cache reads, writes, uncached input, summary calls, output). Runs "
    "sandboxed: what engines store goes to a temporary folder (or --data-dir), never to your "
    "real stores."
)
FILE_HELP = (
    "conversation file: a JSON list of messages, a JSON object with 'messages' (and 'system', "
    "'id'), or JSONL with one conversation per line; OpenAI or Anthropic format"
)
NO_MARKERS = "; requests are sent without cache markers"
"""How a kernel's notice about a cache strategy that does not resolve ends."""


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = engine_overrides(args)
    if args.clearing:
        overrides["context_editing.clear_tool_uses"] = True
    return overrides


TTLS: Mapping[str, CacheTTL] = {"5m": "5m", "1h": "1h", "auto": "auto"}
SUMMARIES: Mapping[str, SummaryCalls] = {"fresh": "fresh", "cache-aware": "cache-aware"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.add_argument("files", nargs="+", metavar="FILE", help=FILE_HELP + " (one or more files)")
    parser.add_argument(
        "--session", type=int, metavar="N", help="only the N-th conversation of each file"
    )
    engine_options(parser)
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
    from ctxengine_replay.scenarios import Gaps

    try:
        return [Gaps.parse(text) for text in _list(args.gaps, "--gaps")] or [
            Gaps.parse(str(args.gap))
        ]
    except ValueError as exc:
        raise UsageError(f"replay: {exc}") from None


def _scenarios(args: argparse.Namespace) -> tuple[Scenario, ...]:
    from ctxengine_replay.scenarios import scenario_set

    return scenario_set(
        strategies=_list(args.strategy, "--strategy"),
        ttls=[TTLS[t] for t in _list(args.ttl, "--ttl", tuple(TTLS))],
        summaries=[SUMMARIES[s] for s in _list(args.summaries, "--summaries", tuple(SUMMARIES))],
    )


def _check_strategies(loaded: LoadedConfig, scenarios: Sequence[Scenario], sandbox: Path) -> None:
    """Every strategy a scenario names resolves (else its requests would go out unmarked): a
    kernel loaded with it says so in its notices."""
    import attrs

    from ctxengine import load

    config = loaded.config
    for name in dict.fromkeys(s.strategy for s in scenarios if s.strategy is not None):
        caching = attrs.evolve(config.prompt_caching, enabled=True, strategy=name)
        with load(attrs.evolve(config, prompt_caching=caching), sandbox=sandbox) as kernel:
            detail = next((n for n in kernel.notices if n.endswith(NO_MARKERS)), None)
        if detail is not None:
            raise UsageError(f"replay: --strategy {name}: {detail.removesuffix(NO_MARKERS)}")


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


def _sandbox(stack: contextlib.ExitStack[Any], data_dir: str | None) -> Path:
    """Where the replay's engines keep what they store: ``--data-dir`` (created), else a
    temporary folder that lives as long as ``stack``."""
    if not data_dir:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxengine-")))
    sandbox = Path(data_dir).expanduser()
    try:
        sandbox.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create --data-dir {sandbox}: {exc}") from None
    return sandbox


def run(args: argparse.Namespace) -> int:
    """Replay sessions turn by turn under every scenario and compare tokens and cost."""
    from ctxengine import ConversationRecord, load, load_config, read_conversations
    from ctxengine_replay.charts import ChartPathError, check_chart_path, write_chart
    from ctxengine_replay.replay import replay
    from ctxengine_replay.report import replay_json, write_replay_report, write_replay_totals

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
    loaded = load_config(args.config, overrides=_overrides(args))
    records = [record for path in args.files for record in read_conversations(path, args.session)]
    for record in records:
        for gaps in gap_list:
            try:
                gaps.times(record)  # recorded gaps need timestamps: say so before replaying
            except ValueError as exc:
                raise CommandError(str(exc)) from None
    show_progress = args.progress or (not args.json and sys.stderr.isatty())
    with contextlib.ExitStack() as stack:
        sandbox = _sandbox(stack, args.data_dir)
        # Loading once first reports configuration problems before any replay starts.
        with load(loaded, trigger=args.threshold, sandbox=sandbox) as kernel:
            status = kernel.status_lines()
        _check_strategies(loaded, scenarios, sandbox)
        if not args.json:
            for line in status:
                print(line)
        priced = [s for s in dict.fromkeys(s.summaries for s in scenarios) if s != "configured"]
        if priced and not args.json:
            print(
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
                zip(records, ConversationRecord.session_ids(records), strict=True), 1
            )
            for gaps in gap_list
        ]
    if args.json:
        print(json.dumps(replay_json(reports), indent=1, ensure_ascii=False))
    else:
        for report in reports:
            write_replay_report(report, sys.stdout, turns=args.turns)
        write_replay_totals(reports, sys.stdout)
    for chart in charts:
        try:
            write_chart(reports, chart)
        except OSError as exc:
            raise CommandError(f"cannot write {chart}: {exc}") from None
        if not args.json:
            print(f"\nchart written to {chart}")
    if args.data_dir and not args.json:
        print(f"\nwhat the engines stored during the replay is in {args.data_dir}")
    return 0


def register(commands: PluginCommands) -> None:
    """Add ``ctxengine replay``."""
    commands.add("replay", HELP, configure, run)
