"""Charts of a replay: where ``--plot`` goes, and the matplotlib images.

- ``.html``: the interactive page (:mod:`ctxengine_replay.html_report`, no matplotlib needed);
- ``.png``, ``.svg``, ``.pdf``: an image of fixed size whatever the number of sessions. One
  session gets its per-turn story (prompt tokens and cumulative cost per turn) and where each
  scenario's money goes (cache reads, writes, uncached input, summary calls, output); several
  get a summary across sessions (where the money goes per scenario in total, and each session's
  savings against its size), since one panel per session stops being readable after a handful.
  Sessions replayed with several gap distributions are summed per distribution.

:func:`check_chart_path` runs before the replay, so a wrong name or a missing matplotlib is
reported at once instead of after minutes of replaying.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxengine_replay.report import BREAKDOWN_COLOURS, BREAKDOWN_LABELS, colour, gaps_text, money
from ctxengine_replay.results import ReplayReport, ScenarioResult, totals

if TYPE_CHECKING:
    from matplotlib.axes import Axes

HTML_SUFFIXES = (".html", ".htm")
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")
PLOT_INSTALL = "plotting needs matplotlib: pip install 'ctxengine[plot]'"

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

MANY_SCENARIOS = 5
"""Above this many scenarios, the per-turn panels name them in one legend only."""

WIDTH_IN, HEIGHT_IN, DPI = 11.0, 9.0, 110
"""Every image is 1210 x 990 px (at DPI), whatever it shows."""


class ChartPathError(ValueError):
    """``--plot`` names a file that cannot be written as a chart."""


def check_chart_path(path: Path) -> None:
    """Fail early for a suffix no renderer handles, a folder that does not exist, or an image
    format without matplotlib.

    :raises ChartPathError: naming the path and what is allowed.
    :raises ImportError: with the install line when an image needs matplotlib.
    """
    suffix = path.suffix.lower()
    allowed = ", ".join((*HTML_SUFFIXES, *IMAGE_SUFFIXES))
    if suffix not in HTML_SUFFIXES + IMAGE_SUFFIXES:
        raise ChartPathError(f"--plot {path}: the file name must end in one of {allowed}")
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise ChartPathError(f"--plot {path}: the folder {folder} does not exist")
    if suffix in IMAGE_SUFFIXES:
        _pyplot()


def write_chart(reports: Sequence[ReplayReport], path: Path) -> None:
    """Write the chart ``path``'s suffix asks for (see the module docstring).

    :raises ChartPathError, ImportError: as :func:`check_chart_path`.
    :raises OSError: when the file cannot be written.
    """
    check_chart_path(path)
    if path.suffix.lower() in HTML_SUFFIXES:
        from ctxengine_replay.html_report import html_report

        path.write_text(html_report(reports), encoding="utf-8")
        return
    plt = _pyplot()
    fig = plt.figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    try:
        if len(reports) == 1:
            _one_session(fig, reports[0])
        else:
            _many_sessions(fig, reports)
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(PLOT_INSTALL) from exc
    return plt


def _integer_turns(ax: Axes) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _one_session(fig: Any, report: ReplayReport) -> None:
    tokens_ax, cost_ax, money_ax = fig.subplots(3, 1, gridspec_kw={"height_ratios": [1, 1, 1.1]})
    results = list(report.scenarios.values())
    # Many scenarios are named once, in the cost panel, so the legends leave the lines visible.
    many = len(results) > MANY_SCENARIOS
    for index, result in enumerate(results):
        xs = [t.turn for t in result.turns]
        # Caching does not change prompt sizes: dashed lines keep both of a pair visible.
        tokens_ax.plot(
            xs,
            [t.prompt_tokens for t in result.turns],
            label="_nolegend_" if many else result.scenario.label,
            color=colour(index),
            linewidth=1.4 if result.scenario.caching else 2.6,
            linestyle="--" if result.scenario.caching else "-",
        )
        cost_ax.plot(xs, _cumulative(result), label=result.scenario.label, color=colour(index))
    last = results[-1]
    if last.caching:
        tokens_ax.fill_between(
            [t.turn for t in last.turns],
            [t.cache_read_tokens for t in last.turns],
            color=colour(len(results) - 1),
            alpha=0.15,
            label=f"cache reads ({last.scenario.label})",
        )
    label: str | None = "compaction"
    for t in last.turns:
        if t.compaction and t.compaction.startswith("compacted"):
            tokens_ax.axvline(t.turn, color="#d62728", linestyle="--", linewidth=0.8, label=label)
            label = None  # one legend entry for all compaction lines
    tokens_ax.set_title(
        f"{report.session_id}: prompt tokens per request ({report.engine}, {gaps_text(report)})"
    )
    tokens_ax.set_ylabel("prompt tokens")
    cost_ax.set_title(
        f"{report.session_id}: cumulative cost, summary calls included ({report.model})"
    )
    cost_ax.set_ylabel("USD")
    for ax in (tokens_ax, cost_ax):
        ax.set_xlabel("turn (assistant response)")
        _integer_turns(ax)
        ax.grid(alpha=0.3)
    tokens_ax.legend(loc="best" if many else "upper left", fontsize=7)
    cost_ax.legend(loc="upper left", fontsize=7, ncol=2 if many else 1)
    _where_the_money_goes(
        money_ax,
        [r.scenario.label for r in results],
        [r.breakdown() for r in results],
        f"{report.session_id}: where the money goes",
    )
    fig.tight_layout()


def _where_the_money_goes(
    ax: Axes, labels: Sequence[str], parts: Sequence[Mapping[str, float]], title: str
) -> None:
    """Stacked bars, one per scenario in report order: each part of its cost, the total on top
    (upright bars, so every x tick of the image stays a whole number)."""
    positions = list(range(len(labels)))
    bottoms = [0.0] * len(labels)
    for key, name in BREAKDOWN_LABELS.items():
        values = [p[key] for p in parts]
        ax.bar(positions, values, 0.6, bottom=bottoms, color=BREAKDOWN_COLOURS[key], label=name)
        bottoms = [bottom + value for bottom, value in zip(bottoms, values, strict=True)]
    for position, total in zip(positions, bottoms, strict=True):
        ax.text(position, total, money(total), ha="center", va="bottom", fontsize=7)
    width = max(12, 150 // max(1, len(labels)))
    ax.set_xticks(positions, [textwrap.fill(label, width) for label in labels], fontsize=7)
    ax.set_ylabel("USD")
    ax.set_title(title)
    ax.margins(y=0.35)  # room for the totals and the legend above the bars
    ax.legend(loc="upper right", fontsize=7, ncol=len(BREAKDOWN_LABELS))
    ax.grid(axis="y", alpha=0.3)


def _cumulative(result: ScenarioResult) -> list[float]:
    running, values = 0.0, []
    for turn in result.turns:
        running += turn.total_cost
        values.append(running)
    return values


def _many_sessions(fig: Any, reports: Sequence[ReplayReport]) -> None:
    totals_ax, savings_ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1, 1.3]})
    sums = totals(reports)
    labels = [
        s.label if s.input_saved is None else f"{s.label} ({s.input_saved:.0%} input saved)"
        for s in sums
    ]
    _where_the_money_goes(
        totals_ax,
        labels,
        [s.breakdown for s in sums],
        f"{sums[0].sessions} session{'' if sums[0].sessions == 1 else 's'}: where the money goes "
        "per scenario, in total",
    )

    for index, s in enumerate(sums):
        if s.input_saved is None:
            continue  # a baseline
        name = s.scenario.name
        points = sorted(
            (r.baseline.prompt_tokens, r.savings(name) * 100)
            for r in reports
            if name in r.scenarios and s.gaps in (None, r.gaps)
        )
        # Hollow markers of different shapes: scenarios that save the same stay visible.
        savings_ax.scatter(
            [p[0] for p in points],
            [p[1] for p in points],
            marker=MARKERS[index % len(MARKERS)],
            s=36,
            facecolors="none",
            edgecolors=colour(index),
            linewidths=1.2,
            label=s.label,
        )
    savings_ax.set_xscale("log")
    savings_ax.axhline(0, color="#333333", linewidth=0.8)
    savings_ax.set_xlabel("session size: prompt tokens sent without compaction or caching (log)")
    savings_ax.set_ylabel("input cost saved vs baseline (%)")
    savings_ax.set_title("each session's saving against its size (details: --plot report.html)")
    savings_ax.legend(loc="lower right", fontsize=7, ncol=2 if len(sums) > MANY_SCENARIOS else 1)
    savings_ax.grid(alpha=0.3)
    fig.tight_layout()
