"""`ctxengine replay`: errors, JSON schema, tables, charts and sandboxed stores."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from ctxengine import read_conversations
from ctxengine.testing import samples
from ctxengine_cli.main import main

ROOT = Path(__file__).resolve().parents[3]  # the repository: its examples/sessions
EXAMPLE = ROOT / "examples" / "sessions" / "claude_code_spotter.anthropic.jsonl"
SMALL = ["--context-length", "16000"]


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


# -- replay ----------------------------------------------------------------------------------

SCENARIO_KEYS = {
    "scenario",
    "label",
    "caching",
    "compaction",
    "strategy",
    "ttl",
    "summaries",
    "summary_calls",
    "breakdown_usd",
    "compactions",
    "prompt_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "input_cost_usd",
    "turns",
    "engine",
    "clearing",
    "fallbacks",
    "compaction_cost_usd",
    "cleared_tokens",
}
TURN_KEYS = {
    "turn",
    "index",
    "messages_sent",
    "prompt_tokens",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
    "cost",
    "uncached_cost",
    "compaction",
    "seconds",
    "read_cost",
    "write_cost",
    "summary_prompt_tokens",
    "summary_cache_read_tokens",
    "summary_input_cost",
    "summary_output_cost",
    "cleared_tokens",
}


def test_replay_json_schema(jsonl: Path) -> None:
    code, output = run("replay", str(jsonl), "--json", *SMALL)
    assert code == 0
    data = json.loads(output)
    assert set(data) == {"version", "sessions", "totals", "comparison_totals"}
    assert data["version"] == 1
    assert data["comparison_totals"] == {}
    assert set(data["totals"]) == {"none", "caching", "compaction", "both"}
    assert [s["session_id"] for s in data["sessions"]] == ["one", "two"]
    for session in data["sessions"]:
        assert set(session) == {
            "session_id",
            "format",
            "model",
            "engine",
            "trigger",
            "messages",
            "gap_seconds",
            "gaps",
            "savings_vs_none",
            "scenarios",
            "comparisons",
        }
        assert session["comparisons"] == {}
        assert set(session["scenarios"]) == {"none", "caching", "compaction", "both"}
        for scenario in session["scenarios"].values():
            assert set(scenario) == SCENARIO_KEYS
            assert scenario["turns"] and set(scenario["turns"][0]) == TURN_KEYS
        none, both = session["scenarios"]["none"], session["scenarios"]["both"]
        assert none["compactions"] == 0 and none["cache_read_tokens"] == 0
        assert both["compactions"] >= 1
        assert both["cost_usd"] < none["cost_usd"]


@pytest.mark.parametrize("fixture", ["jsonl", "openai_list"])
def test_replay_native_compares_server_and_local_compaction(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(fixture)
    code, output = run("replay", str(path), "--engine", "native", "--clearing", *SMALL)
    assert code == 0, output
    assert "compaction + caching + server clearing" in output
    assert "local and server-side context management on this session (with caching):" in output
    for label in (
        "local compaction (compressor)",
        "server compaction (native)",
        "server clearing (no compaction)",
        "caching only (no clearing)",
    ):
        assert label in output
    sessions = len(read_conversations(path))
    total_note = f"context management on all {sessions} sessions (with caching):"
    assert (total_note in output) == (sessions > 1)
    code, output = run("replay", str(path), "--engine", "native", "--json", *SMALL)
    data = json.loads(output)
    for session in data["sessions"]:
        server = session["comparisons"]["server compaction"]
        local = session["comparisons"]["local compaction"]
        assert server["engine"] == "native" and local["engine"] == "compressor"
        assert server["compactions"] >= 1 and server["fallbacks"] == 0
        # The server's compaction iterations are priced as the turn's summary call.
        assert server["compaction_cost_usd"] > 0
        assert server["summary_calls"] == server["compactions"]
        assert server["breakdown_usd"]["summary_calls"] == server["compaction_cost_usd"]
        assert local["compaction_cost_usd"] == 0
        assert server["input_cost_usd"] < session["scenarios"]["none"]["input_cost_usd"]
    # The totals are the sums over the sessions, the saving against all of their baselines.
    totals = data["comparison_totals"]
    assert set(totals) == {"local compaction", "server compaction"}
    for name, total in totals.items():
        each = [s["comparisons"][name] for s in data["sessions"]]
        for key in ("prompt_tokens", "compactions", "fallbacks", "cleared_tokens"):
            assert total[key] == sum(e[key] for e in each)
        # Each figure is rounded to 6 decimals.
        summed = sum(e["input_cost_usd"] for e in each)
        assert total["input_cost_usd"] == pytest.approx(summed, abs=1e-5)
        baseline = sum(s["scenarios"]["none"]["input_cost_usd"] for s in data["sessions"])
        saved = 1 - total["input_cost_usd"] / baseline
        assert total["input_cost_saved_vs_none"] == pytest.approx(saved, abs=1e-4)
        assert "turns" not in total


def test_replay_table_and_turns(openai_list: Path) -> None:
    code, output = run("replay", str(openai_list), "--turns", *SMALL)
    assert code == 0
    assert "no compaction, no caching" in output and "compaction + caching" in output
    assert "per turn (compaction + caching vs baseline):" in output
    assert "compacted: " in output
    assert "💾 Cache: " in output and "% hit, " in output


@pytest.mark.parametrize("suffix", [".png", ".svg", ".html"])
def test_replay_chart_is_written(openai_list: Path, tmp_path: Path, suffix: str) -> None:
    chart = tmp_path / f"chart{suffix}"
    code, output = run("replay", str(openai_list), "--plot", str(chart), *SMALL)
    assert code == 0
    assert f"chart written to {chart}" in output
    data = chart.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        import matplotlib.image

        height, width = matplotlib.image.imread(str(chart)).shape[:2]
        assert (width, height) == (1210, 990)
    elif suffix == ".svg":
        assert b"<svg" in data[:2000]
    else:
        page = data.decode("utf-8")
        assert page.startswith("<!doctype html>")
        # Self-contained: no script, style or image is fetched from anywhere.
        assert "src=" not in page and "href=" not in page and "@import" not in page
        assert '<script type="application/json" id="replay-data">' in page


def test_replay_session_index_out_of_range(jsonl: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("replay", str(jsonl), "--session", "5")
    assert code == 1
    assert f"{jsonl} holds 2 conversation(s); --session must be 0..1" in capsys.readouterr().err


def _replay_json(path: Path, *extra: str) -> dict[str, Any]:
    code, output = run("replay", str(path), "--json", *extra)
    assert code == 0
    return json.loads(output)  # type: ignore[no-any-return]


def test_bundled_session_caching_saves_at_least_70_percent() -> None:
    data = _replay_json(EXAMPLE)
    [session] = data["sessions"]
    assert session["savings_vs_none"]["caching"]["input_cost"] >= 0.70
    assert session["savings_vs_none"]["both"]["input_cost"] >= 0.70


def test_replay_chart_without_matplotlib_says_how_to_install(
    openai_list: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    code, _ = run("replay", str(openai_list), "--plot", str(tmp_path / "c.png"), *SMALL)
    assert code == 1
    assert capsys.readouterr().err == (
        "ctxengine: plotting needs matplotlib: pip install 'ctxengine[plot]'\n"
    )


# -- --threshold sets the selected engine's own trigger -------------------------------------


def _first_compaction(document: dict[str, Any]) -> int:
    [session] = document["sessions"]
    turns = session["scenarios"]["compaction"]["turns"]
    turn: int = next(t["turn"] for t in turns if (t["compaction"] or "").startswith("compacted"))
    return turn


def test_threshold_sets_the_lcm_trigger_not_compression_threshold(openai_list: Path) -> None:
    # Once: --threshold set compression.threshold, which only the compressor reads, so lcm
    # compacted at its own 0.75 whatever the flag said.
    early = _replay_json(openai_list, "--engine", "lcm", "--threshold", "0.3", *SMALL)
    late = _replay_json(openai_list, "--engine", "lcm", "--threshold", "0.8", *SMALL)
    assert early["sessions"][0]["engine"] == "lcm"
    assert early["sessions"][0]["trigger"] == {"key": "engines.lcm.threshold", "value": 0.3}
    assert late["sessions"][0]["trigger"] == {"key": "engines.lcm.threshold", "value": 0.8}
    assert _first_compaction(early) < _first_compaction(late)
    default = _replay_json(openai_list, *SMALL)
    assert default["sessions"][0]["trigger"] == {
        "key": "engines.compressor.threshold",
        "value": 0.5,
    }
    set_ = _replay_json(openai_list, "--threshold", "0.3", *SMALL)
    assert set_["sessions"][0]["trigger"] == {"key": "engines.compressor.threshold", "value": 0.3}


# -- replay never touches real stores; compress stores under the id it names -----------------


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_replay_never_writes_to_the_real_lcm_store(
    openai_list: Path, isolated_home: Path, tmp_path: Path
) -> None:
    # A real store with one session in it, at the default place and at a configured one.
    assert run("compress", str(openai_list), "--engine", "lcm", "--id", "real", *SMALL)[0] == 0
    real_default = isolated_home / "lcm" / "lcm.db"
    assert real_default.is_file()
    configured = tmp_path / "configured" / "lcm.db"
    before = _digest(isolated_home)
    # Once: each replay added its simulated sessions to ~/.ctxengine/lcm/lcm.db.
    _replay_json(openai_list, "--engine", "lcm", *SMALL)
    assert _digest(isolated_home) == before
    (isolated_home / "config.yaml").write_text(
        f"context:\n  engine: lcm\nengines:\n  lcm:\n    db_path: {configured}\n"
    )
    before = _digest(isolated_home)
    _replay_json(openai_list, *SMALL)
    assert _digest(isolated_home) == before
    assert not configured.parent.exists()


def test_replay_keeps_its_stores_in_data_dir_when_asked(
    openai_list: Path, isolated_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "kept"
    code, output = run(
        "replay", str(openai_list), "--engine", "lcm", "--data-dir", str(kept), *SMALL
    )
    assert code == 0
    assert f"what the engines stored during the replay is in {kept}" in output
    assert not (isolated_home / "lcm").exists()
    code, output = run("lcm", "status", "--db", str(kept / "lcm" / "lcm.db"), "--json")
    assert code == 0
    sessions = {s["session_id"] for s in json.loads(output)["sessions"]}
    assert sessions == {"replay:conversation-0:compaction", "replay:conversation-0:both"}


def test_replay_compares_strategies_ttls_and_summary_calls(jsonl: Path) -> None:
    code, output = run(
        "replay",
        str(jsonl),
        "--json",
        "--session",
        "1",
        "--strategy",
        "system_and_3,tool_turns",
        "--ttl",
        "auto",
        "--summaries",
        "fresh,cache-aware",
        "--gaps",
        "mixed,45",
        *SMALL,
    )
    assert code == 0
    data = json.loads(output)
    assert [s["gaps"] for s in data["sessions"]] == ["mixed", "45s"]
    assert data["sessions"][1]["gap_seconds"] == 45.0
    scenarios = data["sessions"][0]["scenarios"]
    names = set(scenarios)
    assert {
        "both:system_and_3,ttl=auto,fresh",
        "both:system_and_3,ttl=auto,cache-aware",
        "both:tool_turns,ttl=auto,fresh",
        "both:tool_turns,ttl=auto,cache-aware",
        "compaction:fresh",
    } <= names
    fresh = scenarios["both:system_and_3,ttl=auto,fresh"]
    aware = scenarios["both:system_and_3,ttl=auto,cache-aware"]
    assert fresh["strategy"] == "system_and_3" and fresh["ttl"] == "auto"
    assert scenarios["both:tool_turns,ttl=auto,fresh"]["strategy"] == "tool_turns"
    assert fresh["summary_calls"] >= 1 and aware["summary_calls"] >= 1
    # A cache-aware summary reads the agent's cached prefix; a fresh one pays every token.
    assert any(t["summary_cache_read_tokens"] for t in aware["turns"])
    assert not any(t["summary_cache_read_tokens"] for t in fresh["turns"])
    assert aware["breakdown_usd"]["summary_calls"] < fresh["breakdown_usd"]["summary_calls"]
    for scenario in scenarios.values():
        parts = scenario["breakdown_usd"]
        assert abs(sum(parts.values()) - scenario["cost_usd"]) < 1e-5
    # mixed: a person's new message comes 20 minutes after the previous request.
    seconds = [t["seconds"] for t in scenarios["none"]["turns"]]
    gaps = {round(b - a) for a, b in itertools.pairwise(seconds)}
    assert gaps == {30, 1200}


def test_replay_table_shows_where_the_money_goes(openai_list: Path) -> None:
    code, output = run("replay", str(openai_list), "--summaries", "cache-aware", *SMALL)
    assert code == 0
    header = next(line for line in output.splitlines() if line.startswith("scenario"))
    for column in ("cache reads", "cache writes", "uncached input", "summary calls", "output"):
        assert column in header
    assert "compaction + caching, cache-aware summaries" in output
    assert (
        "📝 Replay: summary calls priced as the main model's (cache-aware); each answer fills "
        "its budget\n"
    ) in output


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--gaps", "often"], 2, "replay: gaps 'often': expected short, long, mixed, recorded"),
        (["--gaps", "mixed:2"], 2, "mixed:P takes a share P from 0 to 1"),
        (["--gaps", ","], 2, "replay: --gaps needs at least one value"),
        (["--ttl", "2h"], 2, "replay: --ttl '2h': expected one of 5m, 1h, auto"),
        (
            ["--summaries", "cheap"],
            2,
            "replay: --summaries 'cheap': expected one of fresh, cache-aware",
        ),
        (["--strategy", "nope"], 2, "replay: --strategy nope: cache strategy 'nope' was not"),
        (["--gaps", "recorded"], 1, "has no timestamp"),
    ],
)
def test_replay_flag_errors(
    openai_list: Path,
    argv: list[str],
    code: int,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Usage errors exit with 2, a recording without timestamps with 1; one line, no replay.
    assert run("replay", str(openai_list), *argv, *SMALL) == (code, "")
    err = capsys.readouterr().err
    assert err.startswith("ctxengine: ") and err.count("\n") == 1
    assert message in err


def test_recorded_gaps_come_from_the_timestamps(tmp_path: Path) -> None:
    messages = samples.openai_conversation(turns=6)
    start = 1_700_000_000
    stamped = [{**m, "timestamp": start + 40 * i} for i, m in enumerate(messages)]
    path = tmp_path / "stamped.json"
    path.write_text(json.dumps(stamped))
    code, output = run("replay", str(path), "--json", "--gaps", "recorded", *SMALL)
    assert code == 0, output
    turns = json.loads(output)["sessions"][0]["scenarios"]["none"]["turns"]
    assert turns[0]["seconds"] == 0.0
    assert all(t["seconds"] % 40 == 0 for t in turns)


def test_replays_sharing_a_data_dir_never_share_an_engine_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two records with one id, each replayed under two gap distributions: four lcm sessions per
    # compacting scenario, never one session fed by two replays.
    line = json.dumps({"id": "same", "messages": samples.openai_conversation()})
    source = tmp_path / "twice.jsonl"
    source.write_text(f"{line}\n{line}\n")
    kept = tmp_path / "kept"
    argv = ["--engine", "lcm", "--gaps", "short,long", "--data-dir", str(kept), "--json"]
    assert run("replay", str(source), *argv, *SMALL)[0] == 0
    code, output = run("lcm", "status", "--db", str(kept / "lcm" / "lcm.db"), "--json")
    assert code == 0
    sessions = {s["session_id"] for s in json.loads(output)["sessions"]}
    assert sessions == {
        f"replay:{record}@{gaps}:{scenario}"
        for record in ("same", "same#2")
        for gaps in ("short", "long")
        for scenario in ("compaction", "both")
    }


def test_replay_says_which_engine_and_trigger_ran_each_scenario_set(openai_list: Path) -> None:
    data = _replay_json(
        openai_list, "--engine", "lcm", "--threshold", "0.4", "--strategy", "tool_turns", *SMALL
    )
    [session] = data["sessions"]
    assert session["engine"] == "lcm"
    assert session["trigger"] == {"key": "engines.lcm.threshold", "value": 0.4}
    assert session["scenarios"]["both:tool_turns"]["strategy"] == "tool_turns"
    assert session["scenarios"]["both"]["strategy"] == "system_and_3"
    assert session["scenarios"]["compaction"]["strategy"] is None
