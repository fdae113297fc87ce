"""Rendering CLI reports: compaction results, replay tables, JSON and charts."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ctxengine._accounting.cache_stats import cache_line
from ctxengine._cli.replay import SCENARIOS, ReplayReport
from ctxengine._plugin.results import CompressResult

SCENARIO_LABELS = {
    "none": "no compaction, no caching",
    "caching": "caching only",
    "compaction": "compaction only",
    "both": "compaction + caching",
}


def _table(rows: Sequence[Sequence[str]], out: TextIO, right: Sequence[bool] | None = None) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = right or [False] * len(widths)
    for row in rows:
        cells = [
            cell.rjust(width) if align else cell.ljust(width)
            for cell, width, align in zip(row, widths, right, strict=True)
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def write_compress_report(label: str, result: CompressResult, out: TextIO) -> None:
    """Human-readable report of one ``compress`` call."""
    out.write(f"{label}: {result.status} ({result.engine})\n")
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


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.1 else f"${value:,.4f}"


def write_replay_report(report: ReplayReport, out: TextIO, *, turns: bool) -> None:
    """Totals per scenario (and optionally every turn) as aligned text tables."""
    out.write(
        f"\nsession {report.session_id} ({report.format}, {report.messages} messages, "
        f"model {report.model}, engine {report.engine}, {report.gap_seconds:g}s between turns)\n"
    )
    rows = [
        (
            "scenario",
            "requests",
            "prompt tokens",
            "cache read",
            "cache write",
            "compactions",
            "input cost",
            "total cost",
            "input saved",
        ),
    ]
    for name, result in report.scenarios.items():
        saved = "-" if name == "none" else f"{report.savings(name):.1%}"
        rows.append(
            (
                SCENARIO_LABELS[name],
                str(len(result.turns)),
                f"{result.prompt_tokens:,}",
                f"{result.cache_read_tokens:,}",
                f"{result.cache_write_tokens:,}",
                str(result.compactions),
                _money(result.input_cost),
                _money(result.cost),
                saved,
            )
        )
    _table(rows, out, right=[False, *([True] * 8)])
    if not turns:
        return
    best = report.scenarios.get("both") or next(iter(report.scenarios.values()))
    base = report.scenarios["none"]
    out.write(f"\nper turn ({SCENARIO_LABELS[best.scenario]} vs baseline):\n")
    turn_rows: list[tuple[str, ...]] = [
        ("turn", "baseline tokens", "tokens", "cost", "cache", "event")
    ]
    for mine, theirs in zip(best.turns, base.turns, strict=True):
        turn_rows.append(
            (
                str(mine.turn),
                f"{theirs.prompt_tokens:,}",
                f"{mine.prompt_tokens:,}",
                _money(mine.cost),
                cache_line(mine.usage) if best.caching else "",
                (mine.compaction or "")[:70],
            )
        )
    _table(turn_rows, out, right=[True, True, True, True, False, False])


def replay_json(reports: Sequence[ReplayReport]) -> dict[str, Any]:
    """The ``--json`` document: every session, and totals per scenario."""
    totals: dict[str, dict[str, float]] = {}
    for report in reports:
        for name, result in report.scenarios.items():
            entry = totals.setdefault(
                name, {"prompt_tokens": 0, "input_cost_usd": 0.0, "cost_usd": 0.0, "compactions": 0}
            )
            entry["prompt_tokens"] += result.prompt_tokens
            entry["input_cost_usd"] += result.input_cost
            entry["cost_usd"] += result.cost
            entry["compactions"] += result.compactions
    for entry in totals.values():
        entry["input_cost_usd"] = round(entry["input_cost_usd"], 6)
        entry["cost_usd"] = round(entry["cost_usd"], 6)
    return {
        "version": 1,
        "sessions": [report.to_json() for report in reports],
        "totals": totals,
    }


def plot_replay(reports: Sequence[ReplayReport], path: Path) -> None:
    """A chart of prompt tokens and cumulative cost per turn, per scenario.

    ``.png`` writes the image; ``.html`` writes a page embedding it with the totals table.

    :raises ImportError: with the install line when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'ctxengine[plot]'") from exc

    colours = {"none": "#7f7f7f", "caching": "#1f77b4", "compaction": "#ff7f0e", "both": "#2ca02c"}
    fig, axes = plt.subplots(2 * len(reports), 1, figsize=(11, 6.5 * len(reports)), squeeze=False)
    for n, report in enumerate(reports):
        tokens_ax, cost_ax = axes[2 * n][0], axes[2 * n + 1][0]
        for name in SCENARIOS:
            result = report.scenarios.get(name)
            if result is None:
                continue
            xs = [t.turn for t in result.turns]
            # Caching does not change prompt sizes: dashed lines keep both of a pair visible.
            tokens_ax.plot(
                xs,
                [t.prompt_tokens for t in result.turns],
                label=SCENARIO_LABELS[name],
                color=colours[name],
                linewidth=2.6 if name in ("none", "compaction") else 1.4,
                linestyle="-" if name in ("none", "compaction") else "--",
            )
            running, cumulative = 0.0, []
            for t in result.turns:
                running += t.cost
                cumulative.append(running)
            cost_ax.plot(xs, cumulative, label=SCENARIO_LABELS[name], color=colours[name])
        both = report.scenarios.get("both")
        if both is not None:
            tokens_ax.fill_between(
                [t.turn for t in both.turns],
                [t.cache_read_tokens for t in both.turns],
                color=colours["both"],
                alpha=0.15,
                label="cache reads (compaction + caching)",
            )
            label: str | None = "compaction"
            for t in both.turns:
                if t.compaction and t.compaction.startswith("compacted"):
                    tokens_ax.axvline(
                        t.turn, color="#d62728", linestyle="--", linewidth=0.8, label=label
                    )
                    label = None  # one legend entry for all compaction lines
        tokens_ax.set_title(f"{report.session_id}: prompt tokens per request")
        tokens_ax.set_xlabel("turn (assistant response)")
        tokens_ax.set_ylabel("prompt tokens")
        tokens_ax.legend(loc="upper left", fontsize=8)
        tokens_ax.grid(alpha=0.3)
        cost_ax.set_title(f"{report.session_id}: cumulative cost ({report.model})")
        cost_ax.set_xlabel("turn (assistant response)")
        cost_ax.set_ylabel("USD")
        cost_ax.legend(loc="upper left", fontsize=8)
        cost_ax.grid(alpha=0.3)
    fig.tight_layout()
    if path.suffix.lower() in (".html", ".htm"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        text = io.StringIO()
        for report in reports:
            write_replay_report(report, text, turns=False)
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        path.write_text(
            "<!doctype html><meta charset='utf-8'><title>ctxengine replay</title>"
            "<h1>ctxengine replay</h1>"
            f"<pre>{html.escape(text.getvalue())}</pre>"
            f"<img alt='prompt tokens and cost per turn' src='data:image/png;base64,{image}'>",
            encoding="utf-8",
        )
        return
    fig.savefig(path, dpi=110)
    plt.close(fig)
