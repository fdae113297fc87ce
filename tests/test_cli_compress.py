"""`ctxengine compress`: input shapes, errors, flags and the session ids it stores under."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import pytest

from ctxengine import ConversationFileError, read_conversations
from ctxengine._kernel.kernel import EngineNotFoundWarning
from ctxengine._messages.validate import validate
from ctxengine.testing import samples
from ctxengine_cli.main import main
from tests.plugin_fixtures import write_directory_plugin

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sessions" / "claude_code_spotter.anthropic.jsonl"
SMALL = ["--context-length", "16000"]


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


# -- reading files -------------------------------------------------------------------------


def test_reads_a_json_list(openai_list: Path) -> None:
    [record] = read_conversations(openai_list)
    assert record.shape == "list" and record.format == "openai"


def test_reads_a_json_object_with_messages(anthropic_object: Path) -> None:
    [record] = read_conversations(anthropic_object)
    assert record.shape == "object" and record.format == "anthropic"
    assert record.id == "demo"
    assert record.system == samples.SYSTEM_PROMPT


def test_reads_jsonl(jsonl: Path) -> None:
    records = read_conversations(jsonl)
    assert [(r.id, r.format, r.shape) for r in records] == [
        ("one", "openai", "jsonl"),
        ("two", "anthropic", "jsonl"),
    ]


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConversationFileError) as raised:
        read_conversations(missing)
    assert (
        str(raised.value)
        == f"cannot read {missing}: [Errno 2] No such file or directory: '{missing}'"
    )


def test_bad_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        '[\n  {"role": "user", "content": "hi"},\n  {"role": "assistant" "content": 1}\n]'
    )
    with pytest.raises(ConversationFileError) as raised:
        read_conversations(path)
    assert str(raised.value) == f"{path}:3:24: invalid JSON: Expecting ',' delimiter"


def test_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    path.write_text(f"{good}\n{good}\n{{broken\n")
    with pytest.raises(ConversationFileError) as raised:
        read_conversations(path)
    assert str(raised.value).startswith(f"{path}:3:2: invalid JSON: ")


def test_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"conversation": []}))
    with pytest.raises(ConversationFileError) as raised:
        read_conversations(path)
    assert str(raised.value) == (
        f"{path}: not a conversation (an object with conversation); expected a JSON list of "
        "messages, a JSON object with a 'messages' list, or JSONL with one conversation per line"
    )


def test_malformed_messages_are_named(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([{"content": "no role"}]))
    with pytest.raises(ConversationFileError) as raised:
        read_conversations(path)
    assert str(raised.value).startswith(f"{path}: messages[0]")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("\n")
    with pytest.raises(ConversationFileError, match="the file is empty"):
        read_conversations(path)


def test_cli_reports_file_errors_with_exit_code_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "odd.json"
    path.write_text("42")
    code, _ = run("compress", str(path))
    assert code == 1
    assert capsys.readouterr().err.startswith(f"ctxengine: {path}: not a conversation (int)")


# -- compress --------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["openai_list", "anthropic_object", "jsonl"])
def test_compress_each_shape_and_write_it_back(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source: Path = request.getfixturevalue(fixture)
    out = tmp_path / ("out" + source.suffix)
    code, output = run("compress", str(source), *SMALL, "--out", str(out))
    assert code == 0
    assert ": compacted (compressor)" in output
    assert "  tokens:   " in output and "messages: " in output
    before, after = read_conversations(source), read_conversations(out)
    assert [r.shape for r in after] == [r.shape for r in before]
    for old, new in zip(before, after, strict=True):
        assert new.format == old.format
        assert len(new.messages) < len(old.messages)
        assert not validate(new.messages, new.format, system=new.system)


def test_compress_flags_override_the_config(openai_list: Path) -> None:
    # The CLI says it once, in the status lines, not again as a Python warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineNotFoundWarning)
        code, output = run("compress", str(openai_list), "--engine", "nosuch", *SMALL)
    assert code == 0
    assert "⚠️  context engine 'nosuch' was not found" in output


def test_compress_a_short_conversation_is_a_noop(tmp_path: Path) -> None:
    path = tmp_path / "short.json"
    path.write_text(json.dumps(samples.short_conversation("openai")[1]))
    code, output = run("compress", str(path))
    assert code == 0
    assert ": noop (compressor)" in output


def test_compress_out_to_an_unwritable_path(
    openai_list: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing-dir" / "out.json"
    code, _ = run("compress", str(openai_list), *SMALL, "--out", str(target))
    assert code == 1
    assert capsys.readouterr().err.startswith(f"ctxengine: cannot write {target}: [Errno 2]")


def test_compress_gives_each_record_its_own_session(tmp_path: Path) -> None:
    line = json.dumps({"id": "same", "messages": samples.openai_conversation()})
    source = tmp_path / "twice.jsonl"
    source.write_text(f"{line}\n{line}\n")
    out = tmp_path / "out.jsonl"
    code, _ = run("compress", str(source), *SMALL, "--out", str(out))
    assert code == 0
    first, second = read_conversations(out)
    assert first.messages == second.messages


def test_threshold_is_validated_like_the_engines_key(
    openai_list: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run("compress", str(openai_list), "--engine", "lcm", "--threshold", "1.5")
    assert code == 2
    assert capsys.readouterr().err == (
        "ctxengine: config error in override: engines.lcm.threshold = 1.5: must be a number "
        "> 0.0 and <= 1.0\n"
    )


def test_threshold_for_an_engine_without_a_trigger_is_refused(
    openai_list: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_directory_plugin(
        isolated_home / "plugins" / "context_engine",
        "plain",
        """
        from ctxengine import hookimpl

        CTXENGINE_KIND = "engine"

        @hookimpl
        def should_compress(ctx):
            return False
        """,
    )
    code, _ = run("compress", str(openai_list), "--engine", "plain", "--threshold", "0.4")
    assert code == 2
    assert capsys.readouterr().err == (
        "ctxengine: config error in override: trigger = 0.4: cannot be applied: engine 'plain' "
        "declares no trigger setting (SettingsSpec.trigger); set one of its own keys instead\n"
    )


def test_compress_stores_under_the_id_it_reports(
    anthropic_object: Path, jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Once: stored as 'demo#0', so `ctxengine lcm status --session demo` found nothing.
    code, output = run("compress", str(anthropic_object), "--engine", "lcm", *SMALL)
    assert code == 0
    assert "  session:  demo\n" in output
    assert run("lcm", "status", "--session", "demo")[0] == 0
    code, output = run("compress", str(anthropic_object), "--engine", "lcm", "--id", "chat-42")
    assert code == 0 and "  session:  chat-42\n" in output
    assert run("lcm", "status", "--session", "chat-42")[0] == 0
    capsys.readouterr()
    code, _ = run("compress", str(jsonl), "--id", "chat-42")
    assert code == 2
    assert capsys.readouterr().err == (
        f"ctxengine: compress: --id names one session, but {jsonl} holds 2 conversations; "
        "choose one with --session N\n"
    )


def test_repeated_ids_get_their_own_sessions(tmp_path: Path) -> None:
    line = json.dumps({"id": "same", "messages": samples.openai_conversation()})
    source = tmp_path / "twice.jsonl"
    source.write_text(f"{line}\n{line}\n")
    code, output = run("compress", str(source), "--json", *SMALL)
    assert code == 0
    ids = [c["session_id"] for c in json.loads(output)["conversations"]]
    assert ids == ["same", "same#2"]
