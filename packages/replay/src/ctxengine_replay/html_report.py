"""The interactive replay report: one self-contained HTML file.

Everything is inside the file: the data as JSON, the script (``report.js``, beside this module)
and the styles; charts are SVG drawn by the script. It opens from disk in any current browser
without a network or a server. It shows, for the session chosen in a picker, the totals of
every scenario, where each scenario's money goes (cache reads, writes, uncached input, summary
calls, output) and three per-turn charts (prompt tokens, cost, cumulative cost; a turn's cost
includes the summary call made before it) with a legend to hide scenarios and a tooltip per
turn; with several sessions, the totals across them too (per gap distribution when the sessions
were replayed with several).

The embedded document is :func:`report_data`; its shape is ``version`` 1 (described there).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxengine import __version__
from ctxengine_replay.report import BREAKDOWN_COLOURS, BREAKDOWN_LABELS, PALETTE, gaps_text
from ctxengine_replay.results import ReplayReport, ScenarioResult, totals

_HERE = Path(__file__).parent


def _scenario(result: ScenarioResult, report: ReplayReport) -> dict[str, Any]:
    return {
        "name": result.name,
        "label": result.scenario.label,
        "caching": result.caching,
        "compaction": result.compaction,
        "strategy": result.strategy,
        "ttl": result.ttl,
        "summaries": result.scenario.summaries,
        "compactions": result.compactions,
        "summary_calls": result.summary_calls,
        "requests": len(result.turns),
        "prompt_tokens": result.prompt_tokens,
        "cache_read_tokens": result.cache_read_tokens,
        "cache_write_tokens": result.cache_write_tokens,
        "input_cost": result.input_cost,
        "cost": result.cost,
        "input_saved": None if result is report.baseline else report.savings(result.name),
        "breakdown": result.breakdown(),
        # Columns rather than one object per turn: a third of the size for long sessions.
        "prompt": [t.prompt_tokens for t in result.turns],
        "turn_cost": [round(t.total_cost, 8) for t in result.turns],
        "cache_read": [t.cache_read_tokens for t in result.turns],
        "events": {str(t.turn): t.compaction for t in result.turns if t.compaction},
    }


def report_data(reports: Sequence[ReplayReport]) -> dict[str, Any]:
    """The document the page renders.

    ``{"version": 1, "generator", "palette": [colour per scenario index], "breakdown": [{"key",
    "label", "colour"}], "totals": [{"name", "label", "gaps", "sessions", "prompt_tokens",
    "input_cost", "cost", "compactions", "input_saved", "breakdown": {key: USD}}], "sessions":
    [{"id", "format", "model", "engine", "trigger_key", "trigger", "messages", "gap_seconds",
    "gaps", "gaps_text", "scenarios": [{"name", "label", "caching", "compaction", "strategy",
    "ttl", "summaries", "compactions", "summary_calls", "requests", "prompt_tokens",
    "cache_read_tokens", "cache_write_tokens", "input_cost", "cost", "input_saved",
    "breakdown": {key: USD}, "prompt": [per turn], "turn_cost": [per turn, summary call
    included], "cache_read": [per turn], "events": {turn: compaction status and reason}}]}]}``.
    """
    return {
        "version": 1,
        "generator": f"ctxengine {__version__}",
        "palette": list(PALETTE),
        "breakdown": [
            {"key": key, "label": label, "colour": BREAKDOWN_COLOURS[key]}
            for key, label in BREAKDOWN_LABELS.items()
        ],
        "totals": [
            {
                "name": t.name,
                "label": t.label,
                "gaps": t.gaps,
                "sessions": t.sessions,
                "prompt_tokens": t.prompt_tokens,
                "input_cost": t.input_cost,
                "cost": t.cost,
                "compactions": t.compactions,
                "input_saved": t.input_saved,
                "breakdown": dict(t.breakdown),
            }
            for t in totals(reports)
        ],
        "sessions": [
            {
                "id": r.session_id,
                "format": r.format,
                "model": r.model,
                "engine": r.engine,
                "trigger_key": r.trigger_key,
                "trigger": r.trigger,
                "messages": r.messages,
                "gap_seconds": r.gap_seconds,
                "gaps": r.gaps,
                "gaps_text": gaps_text(r),
                "scenarios": [_scenario(result, r) for result in r.scenarios.values()],
            }
            for r in reports
        ],
    }


def _script_safe(text: str) -> str:
    """Text that cannot end the ``<script>`` element it sits in."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def html_report(reports: Sequence[ReplayReport]) -> str:
    """The whole page for ``reports`` (at least one)."""
    if not reports:
        raise ValueError("an HTML report needs at least one replayed session")
    template = (_HERE / "report.html").read_text(encoding="utf-8")
    script = (_HERE / "report.js").read_text(encoding="utf-8")
    data = json.dumps(report_data(reports), ensure_ascii=False, separators=(",", ":"))
    sessions = len(reports) // len({r.gaps for r in reports})  # one report per session and gaps
    title = (
        f"ctxengine replay: {reports[0].session_id}"
        if sessions == 1
        else f"ctxengine replay: {sessions} sessions"
    )
    parts = {
        "TITLE": html.escape(title),
        "DATA": _script_safe(data),
        "SCRIPT": _script_safe(script),
    }
    # One pass, so a placeholder spelled inside the data is never expanded.
    return re.sub(r"\{\{(TITLE|DATA|SCRIPT)\}\}", lambda m: parts[m.group(1)], template)
