"""Cache economics on every bundled session, by replay: the figures of docs/builtins/caching.md.

Run: ``python -m benchmarks.cache_economics [--json OUT]`` (a few minutes). For each session of
``tests/data/transcripts`` (both formats) it replays, with the default configuration (Claude
Sonnet 4.6, the compressor, prompt caching on):

- the baseline (no compaction, no caching) and compaction + caching with the main model's
  summary calls priced both ways: a fresh summariser prompt and cache-aware (30 s gaps);
- compaction + caching with each strategy (``system_and_3``, ``tool_turns``; 30 s gaps);
- compaction + caching with each TTL policy (5m, 1h, auto) under short (30 s), long (20 min)
  and mixed gaps (30 s inside the agent loop, 20 minutes before each message from the person);
- the summary calls both ways under mixed gaps (a compaction after a long pause finds the agent's
  prefix expired, and the cache-aware call gives way to the fresh prompt);

and prints, per file and for the long Claude Code sessions (250 messages or more): the summary
calls' input cost both ways (30 s and mixed gaps), the input-cost saving against the baseline
with the summary calls included, auto TTL against the better fixed TTL (the worst session and
the total), and the two strategies side by side. Exits non-zero only when something crashes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxengine import ConversationRecord, read_conversations
from ctxengine._config.core import Config
from ctxengine.testing.transcripts import transcript_files
from ctxengine_replay.replay import replay_scenario
from ctxengine_replay.scenarios import BASELINE, Gaps, Scenario

LONG_SESSION_MESSAGES = 250


def variant(name: str, **changes: Any) -> Scenario:
    fields = {
        "label": name,
        "caching": True,
        "compaction": True,
        **changes,
    }
    return Scenario(name, **fields)


AT_30S: tuple[Scenario, ...] = (
    BASELINE,
    variant("fresh", summaries="fresh"),
    variant("cache-aware", summaries="cache-aware"),
    variant("system_and_3", strategy="system_and_3"),
    variant("tool_turns", strategy="tool_turns"),
)
SUMMARY_SCENARIOS = tuple(s for s in AT_30S if s.summaries != "configured")
TTL_SCENARIOS = tuple(variant(f"ttl={ttl}", ttl=ttl) for ttl in ("5m", "1h", "auto"))
GAPS = ("short", "long", "mixed")


def sessions() -> Iterator[tuple[str, ConversationRecord]]:
    for path in transcript_files():
        for record in read_conversations(path):
            yield path.name, record


def measure(record: ConversationRecord, config: Config) -> dict[str, Any]:
    """Input cost (USD) per scenario and gap distribution, and the summary calls' input cost."""
    row: dict[str, Any] = {"messages": len(record.messages)}
    short = Gaps.parse("short")
    for scenario in AT_30S:
        result = replay_scenario(record, config, scenario, gaps=short)
        row[scenario.name] = result.input_cost
        if scenario.summaries != "configured":
            row[f"{scenario.name}:summary_input"] = result.summary_input_cost
            row[f"{scenario.name}:summary_calls"] = result.summary_calls
    for gaps in GAPS:
        for scenario in TTL_SCENARIOS:
            result = replay_scenario(record, config, scenario, gaps=Gaps.parse(gaps))
            row[f"{gaps}:{scenario.name}"] = result.input_cost
    # Summary calls after a person's pause: the agent's prefix may have expired by then.
    for scenario in SUMMARY_SCENARIOS:
        result = replay_scenario(record, config, scenario, gaps=Gaps.parse("mixed"))
        row[f"mixed:{scenario.name}:summary_input"] = result.summary_input_cost
    return row


def pct(value: float) -> str:
    return f"{value:+.2%}" if value < 0 else f"{value:.2%}"


def report(rows: dict[str, dict[str, dict[str, Any]]], out: Any) -> None:
    groups: dict[str, list[dict[str, Any]]] = {}
    for name, sessions_ in rows.items():
        groups[name] = list(sessions_.values())
        if name.startswith("claude_code_spotter"):
            long = [r for r in sessions_.values() if r["messages"] >= LONG_SESSION_MESSAGES]
            groups[f"{name} (long sessions)"] = long
    everything = [r for rs in rows.values() for r in rs.values()]
    groups["every bundled session"] = everything

    out.write("summary calls' input cost, fresh prompt vs cache-aware (30 s gaps)\n")
    for name, group in groups.items():
        fresh = sum(r["fresh:summary_input"] for r in group)
        aware = sum(r["cache-aware:summary_input"] for r in group)
        calls = sum(r["fresh:summary_calls"] for r in group)
        fall = 1 - aware / fresh if fresh else 0.0
        out.write(f"  {name}: {calls} calls, ${fresh:.4f} -> ${aware:.4f} ({fall:.1%} less)\n")

    out.write(
        "\nthe same on mixed gaps (a compaction after a person's pause may find the cache cold)\n"
    )
    for name, group in groups.items():
        fresh = sum(r["mixed:fresh:summary_input"] for r in group)
        aware = sum(r["mixed:cache-aware:summary_input"] for r in group)
        fall = 1 - aware / fresh if fresh else 0.0
        out.write(f"  {name}: ${fresh:.4f} -> ${aware:.4f} ({fall:.1%} less)\n")

    out.write("\ninput cost saved against no compaction, no caching (summary calls included)\n")
    for name, group in groups.items():
        base = sum(r["none"] for r in group)
        for scenario in ("fresh", "cache-aware"):
            cost = sum(r[scenario] for r in group)
            out.write(f"  {name}, {scenario}: {1 - cost / base:.2%}\n")
        if name.endswith("(long sessions)"):
            worst = min(1 - r["cache-aware"] / r["none"] for r in group)
            out.write(f"  {name}, cache-aware, worst session: {worst:.2%}\n")

    out.write("\ncache_ttl auto against the better of 5m and 1h (input cost; + is worse)\n")
    for gaps in GAPS:
        for name, group in groups.items():
            auto = sum(r[f"{gaps}:ttl=auto"] for r in group)
            five = sum(r[f"{gaps}:ttl=5m"] for r in group)
            hour = sum(r[f"{gaps}:ttl=1h"] for r in group)
            each = [
                r[f"{gaps}:ttl=auto"] / min(r[f"{gaps}:ttl=5m"], r[f"{gaps}:ttl=1h"]) - 1
                for r in group
            ]
            out.write(
                f"  {gaps}, {name}: 5m ${five:.2f}, 1h ${hour:.2f}, auto ${auto:.2f} "
                f"({pct(auto / min(five, hour) - 1)}); per session worst {pct(max(each))}, "
                f"best {pct(min(each))}\n"
            )

    out.write("\ntool_turns against system_and_3 (compaction + caching, 30 s gaps, input cost)\n")
    for name, group in groups.items():
        base = sum(r["none"] for r in group)
        old = sum(r["system_and_3"] for r in group)
        new = sum(r["tool_turns"] for r in group)
        out.write(
            f"  {name}: system_and_3 ${old:.2f} ({1 - old / base:.2%} saved), "
            f"tool_turns ${new:.2f} ({1 - new / base:.2%} saved), {pct(new / old - 1)}\n"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", metavar="OUT", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    config = Config()
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for number, (name, record) in enumerate(sessions(), 1):
        rows.setdefault(name, {})[f"{number}:{record.id}"] = measure(record, config)
        sys.stderr.write(f"\r{number} sessions replayed")
        sys.stderr.flush()
    sys.stderr.write("\n")
    report(rows, sys.stdout)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
