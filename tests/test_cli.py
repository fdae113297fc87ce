"""The CLI skeleton: `ctxengine engines`, `ctxengine config`, plugin commands, errors."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ctxengine
from ctxengine._config.core import load_config
from ctxengine.testing import samples
from ctxengine_cli.main import _plugin_commands, build_parser, main
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
    config.write_text("engines:\n  compressor:\n    threshold: 0.6\n  lcm:\n    threshold: 0.7\n")
    code, output = run("config")
    assert code == 0
    assert output.splitlines()[0] == f"# config file: {config}"
    lines = {line.split()[0]: line for line in output.splitlines()[1:] if line.strip()}
    assert lines["engines.compressor.threshold"].split() == [
        "engines.compressor.threshold",
        "0.6",
        "#",
        f"{config};",
        "compressor",
    ]
    assert lines["engines.compressor.target_ratio"].split()[-2:] == ["default;", "compressor"]
    assert lines["gateways.hygiene.threshold"].split()[-2:] == ["default;", "hygiene"]
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
    assert lines["engines.compressor.threshold"].endswith(
        "no selected plugin reads engines.compressor"
    )


def test_config_lists_former_key_paths(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = isolated_home / "config.yaml"
    config.write_text("compression:\n  threshold: 0.6\n  enabled: true\n")
    with pytest.warns(DeprecationWarning, match="compression.threshold"):
        code, output = run("config")
    assert code == 0
    assert "# deprecated: compression.threshold is now engines.compressor.threshold" in output
    lines = {line.split()[0]: line for line in output.splitlines()[1:] if line.strip()}
    assert lines["engines.compressor.threshold"].split()[1] == "0.6"
    assert lines["engines.compressor.threshold"].endswith(
        "compressor; given as compression.threshold, a deprecated name"
    )
    assert lines["context.compaction"].endswith("given as compression.enabled, a deprecated name")
    # Another engine selected: the compressor's former path is nobody's key, listed as unused.
    monkeypatch.setenv("CTXENGINE_ENGINE", "lcm")
    code, output = run("config")
    lines = {line.split()[0]: line for line in output.splitlines()[1:] if line.strip()}
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
    # What the command prints goes where the CLI writes (here main's out=), like a built-in's.
    code, output = run("hello", "--name", "ctx")
    captured = capsys.readouterr()
    assert code == 0
    assert output == "hello ctx\n"
    assert captured.out == ""
    assert "plugin 'badcmd' failed to register commands: RuntimeError: cannot register" in (
        captured.err
    )


def test_console_script_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxengine", "engines"], capture_output=True, text=True, check=True
    )
    assert "compressor" in out.stdout


# -- first contact: the basics a Python user expects of a command line -----------------------


def cli(*argv: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """The real ``ctxengine`` process (stdout as bytes, so encodings can be checked)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxengine", *argv],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **env},
        check=False,
    )


def conversation_file(tmp_path: Path) -> Path:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(samples.openai_conversation()))
    return path


def test_version() -> None:
    assert run("--version") == (0, f"ctxengine {ctxengine.__version__}\n")
    done = cli("--version")
    assert (done.returncode, done.stdout.decode()) == (0, f"ctxengine {ctxengine.__version__}\n")


def test_global_options_go_before_or_after_the_command(isolated_home: Path, tmp_path: Path) -> None:
    config = tmp_path / "elsewhere.yaml"
    store = tmp_path / "stores" / "mine.db"
    config.write_text(f"model:\n  name: claude-haiku-4-5\nengines:\n  lcm:\n    db_path: {store}\n")
    before = run("--config", str(config), "config")
    after = run("config", "--config", str(config))
    assert before == after
    assert before[1].splitlines()[0] == f"# config file: {config}"
    # A plugin's nested sub-command takes them too (lcm reads db_path from this config).
    for argv in (
        ("lcm", "status", "--config", str(config)),
        ("lcm", "--config", str(config), "status"),
        ("--config", str(config), "lcm", "status"),
    ):
        done = cli(*argv, CTXENGINE_HOME=str(isolated_home))
        assert done.returncode == 1, argv
        assert done.stderr.decode() == (
            f"error: no lcm store at {store} (it is created by the first compaction)\n"
        )


def _every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:  # argparse has no public way to list sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                assert choice.help, f"{parser.prog} {choice.dest}: sub-command without help"
            for child in dict.fromkeys(action.choices.values()):
                found += _every_parser(child)
    return found


def test_every_command_and_option_has_help() -> None:
    registry, notes = _plugin_commands(load_config())
    assert notes == []
    parser, _ = build_parser(registry)
    parsers = _every_parser(parser)
    progs = {p.prog for p in parsers}
    assert {"ctxengine compress", "ctxengine replay", "ctxengine lcm grep"} <= progs
    missing = [
        f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
        for p in parsers
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()
    ]
    assert missing == []
    assert all(p.description for p in parsers if p is not parser and " " in p.prog)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["compress"],
            "ctxengine: compress: the following arguments are required: FILE "
            "(see 'ctxengine compress --help')",
        ),
        (
            ["replay", "x.json", "--gap", "soon"],
            "ctxengine: replay: argument --gap: invalid float value: 'soon' "
            "(see 'ctxengine replay --help')",
        ),
        (
            ["replay", "x.json", "--plot", "chart.txt"],
            "ctxengine: replay: --plot chart.txt: the file name must end in one of .html, .htm, "
            ".png, .svg, .pdf",
        ),
        (["nosuch"], "ctxengine: argument COMMAND: invalid choice: 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = run(*argv)
    err = capsys.readouterr().err
    assert code == 2 and output == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(message)


def test_a_bad_plot_name_is_refused_before_the_replay_runs(tmp_path: Path) -> None:
    # Once: the whole replay ran, then matplotlib raised a ValueError traceback.
    done = cli("replay", str(conversation_file(tmp_path)), "--plot", str(tmp_path / "x.txt"))
    assert done.returncode == 2
    assert done.stdout == b""  # nothing was replayed
    assert done.stderr.decode().splitlines() == [
        f"ctxengine: replay: --plot {tmp_path / 'x.txt'}: the file name must end in one of "
        ".html, .htm, .png, .svg, .pdf"
    ]
    missing = tmp_path / "nofolder" / "x.png"
    done = cli("replay", str(conversation_file(tmp_path)), "--plot", str(missing))
    assert done.returncode == 2
    assert f"the folder {missing.parent} does not exist" in done.stderr.decode()


@pytest.mark.parametrize("command", ["compress", "replay"])
def test_an_unknown_engine_under_strict_is_a_one_line_error(
    command: str, isolated_home: Path, tmp_path: Path
) -> None:
    (isolated_home / "config.yaml").write_text("context:\n  engine: nosuch\n  strict: true\n")
    done = cli(command, str(conversation_file(tmp_path)), CTXENGINE_HOME=str(isolated_home))
    err = done.stderr.decode()
    assert done.returncode == 2
    assert "Traceback" not in err
    assert err.startswith("ctxengine: context engine 'nosuch' was not found.")
    assert err.rstrip().endswith(
        "(context.strict is true, so there is no fallback to the built-in 'compressor')"
    )
    assert len(err.splitlines()) == 1
    verbose = cli(
        command, "-v", str(conversation_file(tmp_path)), CTXENGINE_HOME=str(isolated_home)
    )
    assert verbose.returncode == 2
    assert "Traceback (most recent call last)" in verbose.stderr.decode()


def test_engines_says_how_each_extension_is_chosen(isolated_home: Path) -> None:
    # replay only adds a command, which works without context.extensions; the coordination
    # backends are chosen by coordination.backend, never by context.extensions.
    _, output = run("engines")
    table = rows(output)
    assert table["replay"][-1] == "available (its commands need no opt-in)"
    assert table["coordination.file"][-1] == "available (coordination.backend selects it)"
    (isolated_home / "config.yaml").write_text("coordination:\n  backend: file\n")
    _, output = run("engines")
    assert rows(output)["coordination.file"][-1] == "selected"
    assert rows(output)["coordination.postgresql"][-1] == (
        "available (coordination.backend selects it)"
    )


def test_engines_says_what_happens_to_an_unknown_engine(isolated_home: Path) -> None:
    config = isolated_home / "config.yaml"
    config.write_text("context:\n  engine: nosuch\n")
    _, output = run("engines")
    assert rows(output)["compressor"][-1] == "selected (fallback for 'nosuch')"
    assert (
        "warning: context.engine = 'nosuch' does not resolve to a loadable engine; the built-in "
        "'compressor' engine is used instead (context.strict is false)."
    ) in output

    config.write_text("context:\n  engine: nosuch\n  strict: true\n")
    _, output = run("engines")
    # Under strict nothing is used: the compressor is only available, and loading fails.
    assert rows(output)["compressor"][-1] == "available"
    assert (
        "warning: context.engine = 'nosuch' does not resolve to a loadable engine; "
        "context.strict is true, so ctxengine.load(), `ctxengine compress` and `ctxengine replay` "
        "fail with EngineNotFoundError."
    ) in output
    document = json.loads(run("engines", "--json")[1])
    assert document["engine"]["used"] is None and document["engine"]["strict"] is True
    assert document["engine"]["problem"].startswith("context engine 'nosuch' was not found")


def test_engines_and_config_print_json(isolated_home: Path) -> None:
    (isolated_home / "config.yaml").write_text("compression:\n  threshold: 0.6\n")
    code, output = run("engines", "--json")
    assert code == 0
    plugins = {p["name"]: p for p in json.loads(output)["plugins"]}
    assert plugins["compressor"]["status"] == "selected"
    assert plugins["lcm"]["distribution"] == "ctxengine-lcm" and plugins["lcm"]["error"] is None

    code, output = run("config", "--json")
    assert code == 0
    document = json.loads(output)
    assert document["config_file"] == str(isolated_home / "config.yaml")
    assert document["engine_trigger"] == "engines.compressor.threshold"
    keys = {k["key"]: k for k in document["keys"]}
    assert keys["engines.compressor.threshold"] == {
        "key": "engines.compressor.threshold",
        "value": 0.6,
        "source": str(isolated_home / "config.yaml"),
        "owner": "compressor",
        "status": "ok",
        "note": "given as compression.threshold, a deprecated name",
    }

    code, output = run("config", "--reference", "--json")
    assert code == 0
    reference = {k["key"]: k for k in json.loads(output)}
    assert reference["engines.lcm.threshold"]["owner"] == "lcm"
    assert reference["context.engine"]["default"] == "compressor"


def test_compress_prints_json(tmp_path: Path) -> None:
    code, output = run(
        "compress", str(conversation_file(tmp_path)), "--json", "--context-length", "16000"
    )
    assert code == 0
    document = json.loads(output)
    assert document["engine"] == "compressor" and document["out"] is None
    [result] = document["conversations"]
    assert result["session_id"] == "conversation-0"
    assert result["status"] == "compacted" and result["tokens_after"] < result["tokens_before"]


@pytest.mark.parametrize(
    "env",
    [{"PYTHONIOENCODING": "cp1252"}, {"PYTHONIOENCODING": "ascii"}, {"NO_COLOR": "1"}],
    ids=["cp1252", "ascii", "NO_COLOR"],
)
def test_plain_output_when_emoji_cannot_be_shown_or_are_not_wanted(
    env: dict[str, str], isolated_home: Path, tmp_path: Path
) -> None:
    # Once: UnicodeEncodeError on the first status line under cp1252.
    (isolated_home / "config.yaml").write_text("context:\n  engine: nosuch\n")
    done = cli(
        "compress", str(conversation_file(tmp_path)), CTXENGINE_HOME=str(isolated_home), **env
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode(env.get("PYTHONIOENCODING", "utf-8"))
    lines = text.splitlines()
    assert lines[0] == "Context engine: compressor (builtin)"
    assert lines[1].startswith("Prompt caching: ENABLED")
    assert any(line.startswith("warning: context engine 'nosuch' was not found") for line in lines)
    assert not any(ord(c) > 0x2000 for c in text)  # no emoji anywhere
    replay = cli("replay", str(conversation_file(tmp_path)), "--turns", **env)
    assert replay.returncode == 0, replay.stderr
    assert "Cache: " in replay.stdout.decode(env.get("PYTHONIOENCODING", "utf-8"))


def test_the_plain_flag_and_utf8_output(tmp_path: Path) -> None:
    assert cli("compress", str(conversation_file(tmp_path))).stdout.startswith(
        "🧠 Context engine:".encode()
    )
    assert cli("compress", "--plain", str(conversation_file(tmp_path))).stdout.startswith(
        b"Context engine:"
    )


def test_trace_lines_show_without_verbose_and_verbose_dumps_no_messages(
    isolated_home: Path, tmp_path: Path
) -> None:
    from ctxengine_fakeapi import FakeAPI

    path = conversation_file(tmp_path)
    quiet = cli("compress", str(path))
    assert "ctxengine.trace" not in quiet.stderr.decode()
    traced = cli("compress", str(path), CTXENGINE_TRACE="1")
    err = traced.stderr.decode()
    assert "INFO ctxengine.trace: hook compress(ctx=<session 'conversation-0'>, " in err
    assert "INFO ctxengine.trace: hook compress done in " in err
    assert "DEBUG" not in err

    # -v: ctxengine's own debug and info lines, not the HTTP libraries' request dumps (once,
    # the whole conversation was logged by the anthropic SDK and httpx at DEBUG).
    (isolated_home / "config.yaml").write_text("engines:\n  lcm:\n    threshold: 0.7\n")
    marker = samples.openai_conversation()[1]["content"][:40]
    with FakeAPI() as api:
        verbose = cli(
            "-v",
            "compress",
            str(path),
            CTXENGINE_HOME=str(isolated_home),
            CTXENGINE_SUMMARY_PROVIDER="anthropic",
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=api.base_url,
        )
        assert api.requests, "the summary went to the fake API"
    err = verbose.stderr.decode()
    assert verbose.returncode == 0, err
    assert "INFO ctxengine: config: engines.lcm.threshold is not read by any selected plugin" in err
    assert "DEBUG anthropic" not in err
    assert "DEBUG httpx" not in err and "DEBUG httpcore" not in err
    assert marker not in err


def test_a_broken_config_shows_its_error_not_invalid_choice(
    isolated_home: Path, tmp_path: Path
) -> None:
    # A command from a plugin in context.plugin_dirs, and a broken key elsewhere in the file.
    plugins = tmp_path / "my-plugins"
    write_directory_plugin(
        plugins,
        "mycmd",
        """
        from ctxengine import hookimpl

        CTXENGINE_KIND = "extension"

        @hookimpl
        def register_commands(commands):
            commands.add("mycmd", "my command", lambda parser: None, lambda args: 0)
        """,
    )
    config = isolated_home / "config.yaml"
    config.write_text(f"context:\n  plugin_dirs: [{plugins}]\n")
    assert cli("mycmd", CTXENGINE_HOME=str(isolated_home)).returncode == 0
    config.write_text(f"context:\n  plugin_dirs: [{plugins}]\nmodel:\n  context_length: lots\n")
    for argv in (["mycmd"], ["lcm", "status"], ["engines"]):
        done = cli(*argv, CTXENGINE_HOME=str(isolated_home))
        err = done.stderr.decode()
        assert done.returncode == 2, argv
        assert "invalid choice" not in err
        assert err == (
            f"ctxengine: config error in {config}: model.context_length = 'lots': must be an "
            "integer >= 1024 or null\n"
        )


def test_an_error_at_run_time_is_one_line_with_exit_code_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake_distribution(
        tmp_path / "site",
        monkeypatch,
        dist="crash-cmd",
        version="1.0",
        entry_points={"crashy": "crash_cmd"},
        modules={
            "crash_cmd": """
                from ctxengine import hookimpl

                def _run(args):
                    raise RuntimeError("the disk is full")

                @hookimpl
                def register_commands(commands):
                    commands.add("crash", "always fails", lambda parser: None, _run)
            """
        },
    )
    code, _ = run("crash")
    err = capsys.readouterr().err
    assert code == 1
    assert err == "ctxengine: RuntimeError: the disk is full (-v shows where)\n"
    code, _ = run("crash", "-v")
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert err.endswith("ctxengine: RuntimeError: the disk is full\n")
