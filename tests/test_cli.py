"""The CLI skeleton: `ctxengine engines`, `ctxengine config`, plugin commands, errors."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from ctxengine._cli.main import main
from tests.plugin_fixtures import install_fake_distribution, write_directory_plugin


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def rows(output: str) -> dict[str, list[str]]:
    """``ctxengine engines`` rows by plugin name (last one wins), split on runs of spaces."""
    table: dict[str, list[str]] = {}
    for line in output.splitlines()[1:]:
        if not line.strip() or line.startswith("warning"):
            continue
        cells = [cell for cell in line.split("  ") if cell.strip()]
        table[cells[0].strip()] = [cell.strip() for cell in cells]
    return table


def test_engines_lists_builtins_and_lcm() -> None:
    code, output = run("engines")
    assert code == 0
    assert output.splitlines()[0].split() == ["NAME", "KIND", "SOURCE", "FROM", "STATUS"]
    table = rows(output)
    assert table["compressor"][1:] == ["engine", "builtin", "ctxengine==0.1.0", "selected"]
    assert table["system_and_3"][1:3] == ["cache_strategy", "builtin"]
    assert table["lcm"][1:3] == ["engine", "registry"]
    assert table["lcm"][3].startswith("ctxengine-lcm==")


def test_engines_shows_directory_plugins_and_load_errors(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_directory_plugin(
        isolated_home / "plugins" / "context_engine", "mine", "CTXENGINE_KIND = 'engine'\n"
    )
    install_fake_distribution(
        tmp_path / "site",
        monkeypatch,
        dist="broken-engine",
        version="0.0.1",
        entry_points={"broken": "broken_engine"},
        modules={"broken_engine": "raise RuntimeError('boom at import')\n"},
    )
    code, output = run("engines")
    assert code == 0
    table = rows(output)
    assert table["mine"][1:3] == ["engine", "directory"]
    assert table["broken"][1:] == [
        "engine",
        "registry",
        "broken-engine==0.0.1",
        "error: RuntimeError: boom at import",
    ]
    assert table["compressor"][-1] == "selected"


def test_engines_warns_when_the_selected_engine_does_not_resolve(isolated_home: Path) -> None:
    (isolated_home / "config.yaml").write_text("context:\n  engine: nosuch\n")
    _, output = run("engines")
    assert "warning: context.engine = 'nosuch' does not resolve to a loadable engine" in output


def test_config_shows_values_sources_and_owners(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = isolated_home / "config.yaml"
    config.write_text("compression:\n  threshold: 0.6\nengines:\n  lcm:\n    threshold: 0.7\n")
    code, output = run("config")
    assert code == 0
    assert output.splitlines()[0] == f"# config file: {config}"
    lines = {line.split()[0]: line for line in output.splitlines()[1:] if line.strip()}
    assert lines["compression.threshold"].split() == [
        "compression.threshold",
        "0.6",
        "#",
        f"{config};",
        "compressor",
    ]
    assert lines["compression.target_ratio"].split()[-2:] == ["default;", "compressor"]
    assert lines["compression.hygiene_threshold"].split()[-2:] == ["default;", "hygiene"]
    assert lines["context.engine"].split()[-2:] == ["default;", "kernel"]
    # lcm is not selected: its section is listed as unused, never validated or an error.
    assert "# unused (no selected plugin reads these keys):" in output
    assert lines["engines.lcm.threshold"].endswith("no selected plugin reads engines.lcm")

    monkeypatch.setenv("CTXENGINE_ENGINE", "lcm")
    code, output = run("config")
    assert code == 0
    lines = {line.split()[0]: line for line in output.splitlines()[1:] if line.strip()}
    assert lines["context.engine"].split()[-3:] == ["env", "CTXENGINE_ENGINE;", "kernel"]
    assert lines["engines.lcm.threshold"].split()[-2:] == [f"{config};", "lcm"]
    assert lines["engines.lcm.fresh_tail_count"].split()[-2:] == ["default;", "lcm"]
    assert lines["compression.threshold"].endswith("no selected plugin reads compression.threshold")


def test_config_typo_in_the_selected_engines_section_fails(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated_home / "config.yaml").write_text("engines:\n  lcm:\n    threshhold: 0.9\n")
    code, _ = run("config")
    assert code == 0  # lcm not selected: unused, not an error
    capsys.readouterr()
    monkeypatch.setenv("CTXENGINE_ENGINE", "lcm")
    code, _ = run("config")
    assert code == 2
    err = capsys.readouterr().err
    assert "engines.lcm.threshhold: unknown key; did you mean 'threshold'?" in err


def test_config_error_is_reported_with_exit_code_2(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated_home / "config.yaml").write_text("compression:\n  threshold: 3\n")
    code, _ = run("config")
    assert code == 2
    err = capsys.readouterr().err
    assert "compression.threshold = 3" in err


def test_no_command_prints_help_and_exits_2() -> None:
    code, output = run()
    assert code == 2
    assert "engines" in output and "config" in output


def test_register_commands_adds_plugin_commands_and_isolates_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake_distribution(
        tmp_path / "site",
        monkeypatch,
        dist="cmd-engine",
        version="1.0",
        entry_points={"cmdy": "cmd_engine", "badcmd": "bad_cmd_engine"},
        modules={
            "cmd_engine": """
                from ctxengine import hookimpl

                def _configure(parser):
                    parser.add_argument("--name", default="world")

                def _run(args):
                    print(f"hello {args.name}")
                    return 0

                @hookimpl
                def register_commands(commands):
                    commands.add("hello", "say hello", _configure, _run)
            """,
            "bad_cmd_engine": """
                from ctxengine import hookimpl

                @hookimpl
                def register_commands(commands):
                    raise RuntimeError("cannot register")
            """,
        },
    )
    code, _ = run("hello", "--name", "ctx")
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out == "hello ctx\n"
    assert "plugin 'badcmd' failed to register commands: RuntimeError: cannot register" in (
        captured.err
    )


def test_console_script_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxengine", "engines"], capture_output=True, text=True, check=True
    )
    assert "compressor" in out.stdout
