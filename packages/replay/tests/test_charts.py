"""Replay charts: the interactive HTML report in a real headless Chromium, and PNGs that stay
readable whatever the number of sessions."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxengine import Config, read_conversations
from ctxengine.testing import samples
from ctxengine.testing.transcripts import transcript_files
from ctxengine_cli.main import main
from ctxengine_replay.browser import Browser, find_chromium
from ctxengine_replay.charts import DPI, HEIGHT_IN, WIDTH_IN, write_chart
from ctxengine_replay.replay import replay
from ctxengine_replay.scenarios import SCENARIOS

SCENARIO_NAMES = [s.name for s in SCENARIOS]
CHARTS = ("tokens", "cost", "cumulative")


@pytest.fixture(scope="module")
def every_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One replay of every bundled session (83 of them), as JSON, an HTML page and a PNG."""
    folder = tmp_path_factory.mktemp("every-session")
    html, png = folder / "all.html", folder / "all.png"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CTXENGINE_HOME", str(folder / "home"))
        patch.setenv("CTXENGINE_CONFIG", "")
        out = io.StringIO()
        files = [str(p) for p in transcript_files()]
        code = main(["replay", *files, "--json", "--plot", str(html), "--plot", str(png)], out)
    assert code == 0
    yield {"json": json.loads(out.getvalue()), "html": html, "png": png}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = Browser(find_chromium())
    yield chromium
    chromium.close()


def test_the_png_of_every_bundled_session_is_a_readable_summary(
    every_session: dict[str, Any],
) -> None:
    import matplotlib.image

    assert len(every_session["json"]["sessions"]) == 83
    height, width = matplotlib.image.imread(str(every_session["png"])).shape[:2]
    # One fixed-size summary, not one panel per session (once 1210 x 59345 px).
    assert (width, height) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
    assert height <= 2000


def _paths(browser: Browser, chart: str) -> list[str]:
    value = browser.evaluate(
        f"[...document.querySelectorAll('[data-chart={chart}] path.series')]"
        ".map(p => p.dataset.scenario)"
    )
    assert isinstance(value, list)
    return value


def test_the_html_report_opens_offline_in_chromium_and_shows_every_scenario(
    every_session: dict[str, Any], browser: Browser
) -> None:
    browser.call("Network.enable")
    browser.open(every_session["html"])
    sessions = every_session["json"]["sessions"]
    assert browser.evaluate("document.body.dataset.ready") == "true"
    assert browser.errors == []
    # Self-contained: the page itself is the only thing loaded.
    requests = [e["request"]["url"] for e in browser.events("Network.requestWillBeSent")]
    assert requests == [every_session["html"].resolve().as_uri()]

    # The picker lists every session; every chart draws every scenario.
    options = browser.evaluate(
        "[...document.querySelectorAll('#session-picker option')].map(o => o.textContent)"
    )
    assert len(options) == len(sessions)
    assert options[0].startswith(f"1. {sessions[0]['session_id']} (")
    for chart in CHARTS:
        assert _paths(browser, chart) == SCENARIO_NAMES
    rows = browser.evaluate(
        "[...document.querySelectorAll('#session-table tr')].slice(1).map(r => r.cells[0]"
        ".textContent)"
    )
    assert rows == [s.label for s in SCENARIOS]
    totals = browser.evaluate(
        "[...document.querySelectorAll('#totals-table tr')].slice(1).map(r => r.cells[4]"
        ".textContent)"
    )
    expected = every_session["json"]["totals"]
    assert totals == [f"${expected[name]['input_cost_usd']:.2f}" for name in SCENARIO_NAMES]

    # Picking another session redraws it: a long Claude Code session with compactions.
    pick = max(range(len(sessions)), key=lambda i: sessions[i]["messages"])
    chosen = sessions[pick]
    before = browser.evaluate(
        "document.querySelector('[data-chart=tokens] path').getAttribute('d')"
    )
    browser.evaluate(
        f"(() => {{ const s = document.getElementById('session-picker'); s.value = '{pick}';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    info = browser.evaluate("document.getElementById('session-info').textContent")
    assert info.startswith(f"{chosen['session_id']}: {chosen['format']}, {chosen['messages']} ")
    after = browser.evaluate("document.querySelector('[data-chart=tokens] path').getAttribute('d')")
    assert after != before
    turns = len(chosen["scenarios"]["none"]["turns"])
    assert after.count("L") == turns - 1  # one point per turn
    events = browser.evaluate("document.querySelectorAll('[data-chart=tokens] line.event').length")
    compactions = sum(s["compactions"] for s in chosen["scenarios"].values())
    assert events == compactions > 0

    # Turn ticks are whole numbers, in order.
    ticks = browser.evaluate(
        "[...document.querySelectorAll('[data-chart=tokens] .turn-tick')].map(t => t.textContent)"
    )
    assert [int(t) for t in ticks] == sorted({int(t) for t in ticks}) and ticks[0] == "1"

    # The legend hides and shows a scenario in every chart.
    toggle = (
        "(() => {{ const b = document.querySelector('#legend input[data-scenario=caching]');"
        " b.checked = {0}; b.dispatchEvent(new Event('change')); }})()"
    )
    browser.evaluate(toggle.format("false"))
    for chart in CHARTS:
        assert _paths(browser, chart) == [n for n in SCENARIO_NAMES if n != "caching"]
    browser.evaluate(toggle.format("true"))
    assert _paths(browser, "tokens") == SCENARIO_NAMES

    # Hovering a turn shows each scenario's value at that turn.
    tooltip = browser.evaluate(
        "(() => { const svg = document.querySelector('[data-chart=tokens]');"
        " const r = svg.getBoundingClientRect();"
        " svg.dispatchEvent(new MouseEvent('mousemove', {clientX: r.right - 1,"
        " clientY: r.top + 40, bubbles: true}));"
        " return svg.parentNode.querySelector('.tooltip').innerText; })()"
    )
    lines = tooltip.splitlines()
    assert lines[0] == f"turn {turns}"
    assert [line.split(":")[0] for line in lines[1:] if " tokens" in line] == [
        s.label for s in SCENARIOS
    ]
    assert browser.errors == []


def test_a_short_session_gets_whole_turn_ticks(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from ctxengine_replay import charts

    path = tmp_path / "short.json"
    path.write_text(json.dumps(samples.openai_conversation(turns=3)))
    [record] = read_conversations(path)
    report = replay(record, Config())
    assert 2 <= len(report.baseline.turns) <= 5  # few turns: where fractional ticks showed
    fig = plt.figure()
    charts._one_session(fig, report)
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    plt.close(fig)
    write_chart([report], tmp_path / "short.png")
    assert (tmp_path / "short.png").stat().st_size > 10_000


# -- the scenario set: strategies, TTL policies, priced summary calls, gap distributions -------

SET_ARGS = (
    "--strategy",
    "system_and_3,tool_turns",
    "--summaries",
    "fresh,cache-aware",
    "--gaps",
    "short,mixed",
    "--context-length",
    "16000",
)


@pytest.fixture(scope="module")
def scenario_set_replay(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two sessions, each replayed with two gap distributions under the scenario set."""
    folder = tmp_path_factory.mktemp("scenario-set")
    source = folder / "two.jsonl"
    lines = [
        json.dumps({"id": "first", "messages": samples.openai_conversation()}),
        json.dumps({"id": "second", "messages": samples.openai_conversation(turns=10)}),
    ]
    source.write_text("\n".join(lines) + "\n")
    html, png, one = folder / "set.html", folder / "set.png", folder / "one.png"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CTXENGINE_HOME", str(folder / "home"))
        patch.setenv("CTXENGINE_CONFIG", "")
        out = io.StringIO()
        argv = ["replay", str(source), "--json", "--plot", str(html), "--plot", str(png)]
        assert main([*argv, *SET_ARGS], out) == 0
        single = ["replay", str(source), "--session", "0", "--plot", str(one), *SET_ARGS[:4]]
        assert main([*single, "--context-length", "16000"], io.StringIO()) == 0
    return {"json": json.loads(out.getvalue()), "html": html, "png": png, "one": one}


def test_the_pngs_of_a_scenario_set_keep_their_size(scenario_set_replay: dict[str, Any]) -> None:
    import matplotlib.image

    for key in ("png", "one"):
        height, width = matplotlib.image.imread(str(scenario_set_replay[key])).shape[:2]
        assert (width, height) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))


def test_the_html_report_shows_the_scenario_set(
    scenario_set_replay: dict[str, Any], browser: Browser
) -> None:
    document = scenario_set_replay["json"]
    sessions = document["sessions"]
    assert [(s["session_id"], s["gaps"]) for s in sessions] == [
        ("first", "short"),
        ("first", "mixed"),
        ("second", "short"),
        ("second", "mixed"),
    ]
    names = list(sessions[0]["scenarios"])
    assert "both:tool_turns,cache-aware" in names and "compaction:fresh" in names
    browser.open(scenario_set_replay["html"])
    assert browser.evaluate("document.body.dataset.ready") == "true"
    assert browser.errors == []
    assert browser.evaluate("document.title") == "ctxengine replay: 2 sessions"
    for chart in CHARTS:
        assert _paths(browser, chart) == names
    labels = [s["label"] for s in sessions[0]["scenarios"].values()]
    rows = browser.evaluate(
        "[...document.querySelectorAll('#session-table tr')].slice(1).map(r => r.cells[0]"
        ".textContent)"
    )
    assert rows == labels
    # Where the money goes: each scenario's parts add up to its total cost.
    parts = browser.evaluate(
        "[...document.querySelectorAll('[data-chart=money] rect.segment')]"
        ".map(r => [r.dataset.scenario, r.dataset.part])"
    )
    assert {scenario for scenario, _ in parts} == set(names)
    aware = sessions[0]["scenarios"]["both:tool_turns,cache-aware"]
    assert aware["summary_calls"] >= 1
    assert ["both:tool_turns,cache-aware", "summary_calls"] in parts
    # The totals are kept apart per gap distribution, each against its own baseline.
    totals = browser.evaluate(
        "[...document.querySelectorAll('#totals-table tr')].slice(1).map(r => r.cells[0]"
        ".textContent)"
    )
    assert totals == [f"{label}, {gaps} gaps" for gaps in ("short", "mixed") for label in labels]
    assert set(document["totals"]) == {f"{n}@{g}" for g in ("short", "mixed") for n in names}
    assert document["totals"]["none@mixed"]["sessions"] == 2
    options = browser.evaluate(
        "[...document.querySelectorAll('#session-picker option')].map(o => o.textContent)"
    )
    assert options[1].startswith("2. first (mixed gaps, ")
    assert browser.errors == []
