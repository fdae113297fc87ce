"""Rendering replay reports as text tables and JSON.

Charts are in :mod:`ctxengine_replay.charts` (PNG) and :mod:`ctxengine_replay.html_report` (the
interactive page). Every renderer takes whatever scenarios a report holds, in its order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxengine import cache_line
from ctxengine_replay.results import BREAKDOWN_KEYS, ReplayReport, all_sessions, by_gaps, totals
from ctxengine_replay.scenarios import COMPARISONS

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    Writer = SupportsWrite[str]

PALETTE = (
    "#7f7f7f",
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
)
"""Scenario colours in report order (the baseline first, in grey), for every chart."""

BREAKDOWN_LABELS = dict(
    zip(
        BREAKDOWN_KEYS,
        ("cache reads", "cache writes", "uncached input", "summary calls", "output"),
        strict=True,
    )
)
"""Where the money goes, in the order of the breakdown columns and bars."""
BREAKDOWN_COLOURS = dict(
    zip(BREAKDOWN_KEYS, ("#1f77b4", "#ff7f0e", "#7f7f7f", "#9467bd", "#2ca02c"), strict=True)
)


def colour(index: int) -> str:
    """The colour of the ``index``-th scenario of a report."""
    return PALETTE[index % len(PALETTE)]


def _table(rows: Sequence[Sequence[str]], out: Writer, right: Sequence[bool] | None = None) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = right or [False] * len(widths)
    for row in rows:
        cells = [
            cell.rjust(width) if align else cell.ljust(width)
            for cell, width, align in zip(row, widths, right, strict=True)
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def money(value: float) -> str:
    """Dollars with cents, or four decimals below ten cents."""
    return f"${value:,.2f}" if value >= 0.1 else f"${value:,.4f}"


def gaps_text(report: ReplayReport) -> str:
    """How a report says its time between turns: ``30s between turns``, ``mixed gaps between
    turns``."""
    if report.gap_seconds is not None:
        return f"{report.gap_seconds:g}s between turns"
    return f"{report.gaps} gaps between turns"


def write_replay_report(report: ReplayReport, out: Writer, *, turns: bool) -> None:
    """Totals per scenario (and optionally every turn) as aligned text tables."""
    trigger = (
        f", compacts at {report.trigger:g} of the window ({report.trigger_key})"
        if report.trigger_key is not None and report.trigger is not None
        else ""
    )
    out.write(
        f"\nsession {report.session_id} ({report.format}, {report.messages} messages, "
        f"model {report.model}, engine {report.engine}{trigger}, {gaps_text(report)})\n"
    )
    rows = [
        (
            "scenario",
            "requests",
            "prompt tokens",
            "cache read",
            "cache write",
            "compactions",
            *BREAKDOWN_LABELS.values(),
            "input cost",
            "total cost",
            "input saved",
        ),
    ]
    base = report.baseline
    for name, result in report.scenarios.items():
        saved = "-" if result is base else f"{report.savings(name):.1%}"
        label = result.scenario.label + (" + server clearing" if result.clearing else "")
        rows.append(
            (
                label,
                str(len(result.turns)),
                f"{result.prompt_tokens:,}",
                f"{result.cache_read_tokens:,}",
                f"{result.cache_write_tokens:,}",
                str(result.compactions),
                *(money(value) for value in result.breakdown().values()),
                money(result.input_cost),
                money(result.cost),
                saved,
            )
        )
    _table(rows, out, right=[False, *([True] * (len(rows[0]) - 1))])
    write_comparison_note(report, out)
    if not turns:
        return
    # The last scenario is the configuration as written, or the last variant asked for.
    best = list(report.scenarios.values())[-1]
    out.write(f"\nper turn ({best.scenario.label} vs baseline):\n")
    turn_rows: list[tuple[str, ...]] = [
        ("turn", "baseline tokens", "tokens", "cost", "cache", "event")
    ]
    for mine, theirs in zip(best.turns, base.turns, strict=True):
        turn_rows.append(
            (
                str(mine.turn),
                f"{theirs.prompt_tokens:,}",
                f"{mine.prompt_tokens:,}",
                money(mine.total_cost),
                cache_line(mine.usage) if best.caching else "",
                (mine.compaction or "")[:70],
            )
        )
    _table(turn_rows, out, right=[True, True, True, True, False, False])


COMPARISON_LABELS = {scenario.name: scenario.label for scenario in COMPARISONS}


def write_comparison_note(
    report: ReplayReport, out: Writer, *, where: str = "this session"
) -> None:
    """The closing note when the native engine or context editing ran: local compaction, server
    compaction and server clearing side by side (caching as configured in each) on ``where``."""
    if not report.comparisons:
        return
    out.write(f"\nlocal and server-side context management on {where} (with caching):\n")
    rows = [
        (
            "run",
            "prompt tokens",
            "compactions",
            "cleared tokens",
            "compaction cost",
            "input cost",
            "total cost",
            "input saved",
        )
    ]
    for name, result in report.comparisons.items():
        compactions = str(result.compactions)
        if result.fallbacks:
            compactions += f" ({result.fallbacks} fell back)"
        rows.append(
            (
                COMPARISON_LABELS.get(name, name),
                f"{result.prompt_tokens:,}",
                compactions,
                f"{result.cleared_tokens:,}",
                money(result.compaction_cost),
                money(result.input_cost),
                money(result.cost),
                f"{report.saved(result):.1%}",
            )
        )
    _table(rows, out, right=[False, *([True] * 7)])
    out.write(
        "  prompt tokens: what the model read over every request, after the server's clearing\n"
        "  compaction cost: what the compactions cost themselves (the server's compaction\n"
        "  iterations; the local compressor's summaries here are local digests, no model call);\n"
        "  their prompts are in the input cost, all of it in the total cost\n"
    )


def write_replay_totals(reports: Sequence[ReplayReport], out: Writer) -> None:
    """After the reports of several sessions: the comparison note over all of them, one per gap
    distribution (nothing for one session, or when no comparison ran)."""
    groups = by_gaps(reports)
    for gaps, group in groups.items():
        if len(group) < 2:
            continue
        total = all_sessions(group)
        where = total.session_id + (f", {gaps} gaps" if len(groups) > 1 else "")
        write_comparison_note(total, out, where=where)


def replay_json(reports: Sequence[ReplayReport]) -> dict[str, Any]:
    """The ``--json`` document: every session, totals per scenario, and the comparisons over all
    sessions (``comparison_totals``, empty when no comparison ran); both keyed ``name@gaps`` when
    the sessions were replayed with several gap distributions."""
    groups = by_gaps(reports)
    comparison_totals: dict[str, Any] = {}
    for gaps, group in groups.items():
        for name, entry in all_sessions(group).to_json()["comparisons"].items():
            del entry["turns"]
            comparison_totals[name if len(groups) == 1 else f"{name}@{gaps}"] = entry
    return {
        "version": 1,
        "sessions": [report.to_json() for report in reports],
        "totals": {
            total.name: {
                "sessions": total.sessions,
                "prompt_tokens": total.prompt_tokens,
                "input_cost_usd": round(total.input_cost, 6),
                "cost_usd": round(total.cost, 6),
                "compactions": total.compactions,
                "breakdown_usd": {key: round(v, 6) for key, v in total.breakdown.items()},
            }
            for total in totals(reports)
        },
        "comparison_totals": comparison_totals,
    }
