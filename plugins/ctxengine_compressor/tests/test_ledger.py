"""The critical-context ledger: extraction in both formats, missing_from, bounded rendering."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from ctxengine import Format
from ctxengine_compressor.ledger import (
    COMMAND_CHARS,
    Ledger,
    build_ledger,
    fit_units,
    ledger_units,
    missing_from,
    render_ledger,
    shorten_command,
)
from ctxengine_compressor.ledger.fit import _render_units, _sections_size

Message = dict[str, Any]


def _oa_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def openai_conversation() -> list[Message]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in lib/app/parser.ex please"},
        {
            "role": "assistant",
            "content": "Running the tests and reading the parser.",
            "tool_calls": [
                _oa_call("c1", "Bash", command="mix test test/app/parser_test.exs"),
                _oa_call("c2", "Read", file_path="/repo/lib/app/parser.ex"),
                _oa_call("c3", "Bash", command="git status\necho second line"),
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Exit code 2\n"
            "** (CompileError) lib/app/parser.ex:12: undefined function x/0\n"
            "1 test, 1 failure",
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "     1→defmodule App.Parser do\n     2→  def parse(x), do: {:error, x}\n",
        },
        {"role": "tool", "tool_call_id": "c3", "content": "On branch main\nnothing to commit"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Config lives in ~/.config/app/app.toml too."}],
            "tool_calls": [
                _oa_call("c4", "Edit", file_path="/repo/lib/app/parser.ex", old_string="a"),
                _oa_call("c5", "Bash", command="mix test test/app/parser_test.exs"),
            ],
        },
        {"role": "tool", "tool_call_id": "c4", "content": "The file was updated."},
        {"role": "tool", "tool_call_id": "c5", "content": "Exit code 0\n1 test, 0 failures"},
        {"role": "user", "content": "Great. Now run the linter, never push to main."},
    ]


def anthropic_conversation() -> list[Message]:
    def use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}

    def result(call_id: str, text: str, is_error: bool = False) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if is_error:
            block["is_error"] = True
        return block

    return [
        {"role": "user", "content": "Fix the failing test in lib/app/parser.ex please"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look at /secret/thoughts.txt", "signature": "s"},
                {"type": "text", "text": "Running the tests and reading the parser."},
                use("c1", "Bash", command="mix test test/app/parser_test.exs"),
                use("c2", "Read", file_path="/repo/lib/app/parser.ex"),
                use("c3", "Bash", command="git status\necho second line"),
            ],
        },
        {
            "role": "user",
            "content": [
                result(
                    "c1",
                    "Exit code 2\n** (CompileError) lib/app/parser.ex:12: undefined function "
                    "x/0\n1 test, 1 failure",
                    is_error=True,
                ),
                result(
                    "c2", "     1→defmodule App.Parser do\n     2→  def parse(x), do: {:error, x}\n"
                ),
                result("c3", "On branch main\nnothing to commit"),
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Config lives in ~/.config/app/app.toml too."},
                use("c4", "Edit", file_path="/repo/lib/app/parser.ex", old_string="a"),
                use("c5", "Bash", command="mix test test/app/parser_test.exs"),
            ],
        },
        {
            "role": "user",
            "content": [
                result("c4", "The file was updated."),
                result("c5", "Exit code 0\n1 test, 0 failures"),
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Both pass."}],
        },
        {"role": "user", "content": "Great. Now run the linter, never push to main."},
    ]


@pytest.mark.parametrize(
    ("fmt", "factory"), [("openai", openai_conversation), ("anthropic", anthropic_conversation)]
)
def test_extraction_in_both_formats(fmt: Format, factory: Any) -> None:
    messages = factory()
    before = copy.deepcopy(messages)
    ledger = build_ledger(messages, fmt)
    assert messages == before, "build_ledger must not mutate its input"

    assert ledger.paths == (
        "lib/app/parser.ex",
        "test/app/parser_test.exs",
        "/repo/lib/app/parser.ex",
        "~/.config/app/app.toml",
    )
    # What was done to each path, the strongest action seen.
    assert ledger.actions == ("mentioned", "mentioned", "edited", "mentioned")
    # Commands: first line only, de-duplicated; the repeated command keeps its latest exit code
    # and the history of every code its runs reported.
    assert ledger.commands == ("mix test test/app/parser_test.exs", "git status")
    assert ledger.exit_codes == (0, None)
    assert ledger.exit_history == ((2, 0), ())
    assert ledger.exit_code("mix test test/app/parser_test.exs") == 0
    assert ledger.exit_code("not run") is None
    # Error lines from the failing run; the code listing's {:error, x} and "0 failures" are not.
    assert ledger.errors == (
        "** (CompileError) lib/app/parser.ex:12: undefined function x/0",
        "1 test, 1 failure",
    )
    # Each with the command that produced it; the later passing run resolved them.
    assert ledger.error_sources == ("mix test test/app/parser_test.exs",) * 2
    assert ledger.resolved == (True, True)
    assert ledger.asks == (
        "Fix the failing test in lib/app/parser.ex please",
        "Great. Now run the linter, never push to main.",
    )
    assert ledger.tools == (("Bash", 3), ("Read", 1), ("Edit", 1))
    # Reasoning is not mined for paths.
    assert "/secret/thoughts.txt" not in ledger.paths


def test_both_formats_give_the_same_ledger() -> None:
    assert build_ledger(openai_conversation(), "openai") == build_ledger(
        anthropic_conversation(), "anthropic"
    )


def test_reused_call_ids_map_results_in_order() -> None:
    """tau-bench style: the same id for two different calls in two turns."""
    messages: list[Message] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_oa_call("x", "bash", command="a")]},
        {"role": "tool", "tool_call_id": "x", "content": "[exit code 3]"},
        {"role": "assistant", "content": None, "tool_calls": [_oa_call("x", "bash", command="b")]},
        {"role": "tool", "tool_call_id": "x", "content": "returncode: 0"},
    ]
    ledger = build_ledger(messages, "openai")
    assert ledger.commands == ("a", "b")
    assert ledger.exit_codes == (3, 0)


def test_parallel_calls_and_shell_tool_names() -> None:
    messages: list[Message] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _oa_call("1", "execute_bash", command="make -C build"),
                _oa_call("2", "str_replace_editor", command="view", path="/ws/src/main.c"),
                _oa_call("3", "run_terminal_cmd", command="./configure --prefix=/opt/x"),
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "[Command finished with exit code 2]"},
        {"role": "tool", "tool_call_id": "2", "content": "ERROR:\nInvalid `path` parameter."},
        {"role": "tool", "tool_call_id": "3", "content": "ok"},
    ]
    ledger = build_ledger(messages, "openai")
    # str_replace_editor's "command" is an editor verb, not a shell command.
    assert ledger.commands == ("make -C build", "./configure --prefix=/opt/x")
    assert ledger.exit_codes == (2, None)
    assert ledger.paths == ("/ws/src/main.c", "/opt/x")
    assert ledger.errors == ("ERROR: Invalid `path` parameter.",)


def test_secrets_are_redacted_on_entry() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "use password=hunter2 for the db"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_oa_call("1", "Bash", command="psql postgres://app:s3cret@db/prod")],
        },
    ]
    ledger = build_ledger(messages, "openai")
    assert ledger.commands == ("psql postgres://app:[REDACTED:password]@db/prod",)
    assert ledger.asks == ("use password=[REDACTED:password] for the db",)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # The exception line says what went wrong; the header only that something did.
        ("Traceback (most recent call last):\n  File x\nValueError: bad", ["ValueError: bad"]),
        (
            "Traceback (most recent call last):\n  File x\nKeyboardInterrupt",
            ["Traceback (most recent call last):"],
        ),
        ("make: *** [Makefile:12: build] Error 2", ["make: *** [Makefile:12: build] Error 2"]),
        ("bash: tree: command not found", ["bash: tree: command not found"]),
        (
            "ls: cannot access 'x': No such file or directory",
            ["ls: cannot access 'x': No such file or directory"],
        ),
        (
            "ModuleNotFoundError: No module named 'yaml'",
            ["ModuleNotFoundError: No module named 'yaml'"],
        ),
        (
            "CMake Error at CMakeLists.txt:27 (find_package):",
            ["CMake Error at CMakeLists.txt:27 (find_package):"],
        ),
        # pytest: the framing rules go, the source line a traceback quotes is not an error.
        (
            "    raise KeyError('x')\nE   KeyError: 'x'\n===== 1 failed, 3 passed in 0.1s =====",
            ["E KeyError: 'x'", "1 failed, 3 passed in 0.1s"],
        ),
        (
            "src/a.rs:3: error[E0308]: mismatched types",
            ["src/a.rs:3: error[E0308]: mismatched types"],
        ),
        ("fatal: not a git repository", ["fatal: not a git repository"]),
        ("14:02 [error] boom", ["14:02 [error] boom"]),
        (
            "FAILED tests/test_x.py::test_y - assert 1 == 2",
            ["FAILED tests/test_x.py::test_y - assert 1 == 2"],
        ),
        ("Total errors: 0, Skipped: 0", []),
        ("12 tests, 0 failures", []),
        ("case f() do\n  {:error, reason} -> reason\n  error -> error\nend", []),
        ('assert body["error"] =~ "required"', []),
        ("-rw-r--r-- 1 root root 6744 Apr 30 08:32 error.c", []),
        ("We need better error handling here.", []),
        # Upper case, and non-ASCII text (whose lower-cased copy may not keep positions).
        ("PANIC: kernel stack overflow", ["PANIC: kernel stack overflow"]),
        ("Straße İstanbul\nERROR: ünïcode path /tmp/ß", ["ERROR: ünïcode path /tmp/ß"]),
        ("İİİ FATAL: disk full", ["İİİ FATAL: disk full"]),
        ("ErRoR: mixed case is no error word", []),
    ],
)
def test_error_lines(output: str, expected: list[str]) -> None:
    messages: list[Message] = [
        {"role": "assistant", "content": None, "tool_calls": [_oa_call("1", "Bash", command="x")]},
        {"role": "tool", "tool_call_id": "1", "content": output},
    ]
    assert list(build_ledger(messages, "openai").errors) == expected


def test_content_tool_results_count_only_when_they_report_failure() -> None:
    messages: list[Message] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _oa_call("1", "Read", file_path="/a/b.py"),
                _oa_call("2", "Read", file_path="/a/c.py"),
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "raise ValueError('x')\nfailed = True"},
        {
            "role": "tool",
            "tool_call_id": "2",
            "content": "<tool_use_error>File does not exist.</tool_use_error>",
        },
    ]
    assert build_ledger(messages, "openai").errors == (
        "<tool_use_error>File does not exist.</tool_use_error>",
    )


def test_path_tokens_skip_urls_and_code_references() -> None:
    text = (
        "See https://example.com/a/b.html and Mod.fun/2, s/foo/bar/g, and/or 1/2; "
        "edit `lib/x/y.ex:12` and /etc/app/conf.d then 2>/dev/null"
    )
    ledger = build_ledger([{"role": "user", "content": text}], "openai")
    assert ledger.paths == ("lib/x/y.ex", "/etc/app/conf.d")


def test_shorten_command() -> None:
    assert shorten_command("  git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\"  ") == (
        "git commit -m \"$(cat <<'EOF'"
    )
    long = "echo " + "x" * 500
    assert shorten_command(long) == long[:COMMAND_CHARS]


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(
        ValueError, match="unknown message format 'gemini'; allowed: 'openai' or 'anthropic'"
    ):
        build_ledger([], "gemini")  # type: ignore[arg-type]


def test_exit_codes_must_match_commands() -> None:
    with pytest.raises(ValueError, match="exit_codes has 0 entries but there are 1 commands"):
        Ledger(commands=("ls",))


def test_missing_from() -> None:
    ledger = build_ledger(openai_conversation(), "openai")
    summary = "Edited /repo/lib/app/parser.ex after `git status`; ValueError gone. Bash used."
    missing = missing_from(ledger, summary)
    assert "/repo/lib/app/parser.ex" not in missing.paths
    # A path only inside a longer one is not the path the agent used.
    assert missing.paths == (
        "lib/app/parser.ex",
        "test/app/parser_test.exs",
        "~/.config/app/app.toml",
    )
    assert missing.commands == ("mix test test/app/parser_test.exs",)
    assert missing.exit_codes == (0,)
    # A command that failed counts as present only with its exit code on the same line.
    ran = "- `mix test test/app/parser_test.exs` passed"
    assert missing_from(ledger, ran).commands[0] == "mix test test/app/parser_test.exs"
    ran = "- `mix test test/app/parser_test.exs` -> exit 2, 0"
    assert "mix test test/app/parser_test.exs" not in missing_from(ledger, ran).commands
    assert missing.tools == (("Read", 1),)  # "Edited" mentions Edit
    assert missing_from(ledger, render_ledger(ledger, 10_000)).paths == ()


def test_render_ledger_sections_and_exit_codes() -> None:
    text = render_ledger(build_ledger(openai_conversation(), "openai"), 2_000)
    assert text.splitlines()[0] == "### User asks"
    assert "- Fix the failing test in lib/app/parser.ex please" in text
    # Files grouped by what was done to them.
    assert "- edited: `/repo/lib/app/parser.ex`\n" in text
    # Paths an ask or a command already quotes get no line of their own.
    assert "- mentioned: `~/.config/app/app.toml`\n" in text
    assert "`lib/app/parser.ex`" not in text and "`test/app/parser_test.exs`" not in text
    # Every exit code a command reported, the failing run first.
    assert "- `mix test test/app/parser_test.exs` -> exit 2, 0" in text
    assert "- `git status`\n" in text
    # Errors under the command that produced them, marked when a later run fixed them.
    assert (
        "### Errors\n- after `mix test test/app/parser_test.exs`:\n"
        "  - ** (CompileError) lib/app/parser.ex:12: undefined function x/0 (resolved)"
    ) in text
    assert render_ledger(Ledger(), 100) == ""


def _big_ledger() -> Ledger:
    return Ledger(
        paths=(
            *(f"/repo/src/module_{i}/file_{i}.py" for i in range(300)),
            "/repo/migrations/0042_add_index.py",
        ),
        actions=(*(("read", "listed")[i % 2] for i in range(300)), "edited"),
        commands=tuple(f"pytest tests/test_{i}.py -k case_{i}" for i in range(200)),
        exit_codes=tuple(1 if i == 3 else 0 for i in range(200)),
        errors=tuple(f"E   AssertionError: case {i} failed" for i in range(100)),
        error_sources=tuple(f"pytest tests/test_{i}.py -k case_{i}" for i in range(100)),
        resolved=tuple(i != 3 for i in range(100)),
        asks=("Add the index, and never touch the 0041 migration.",),
    )


def test_render_ledger_is_bounded_and_says_what_it_dropped() -> None:
    ledger = _big_ledger()
    for max_tokens in (30, 100, 500, 2_000):
        text = render_ledger(ledger, max_tokens)
        assert len(text) <= 4 * max_tokens
    text = render_ledger(ledger, 2_000)
    # Omissions are counted per section and kind, never silent.
    assert re.search(r"- … \d+ read-only paths, 150 listed paths omitted for space", text)
    assert re.search(r"- … \d+ older successful commands omitted for space", text)
    assert re.search(r"- … 99 resolved errors omitted for space", text)
    dropped = sum(int(n) for n in re.findall(r"(\d+) [a-z -]+(?:,|omitted)", text))
    shown = sum(text.count(f"module_{i}/") for i in range(300)) + text.count("-k case_")
    assert dropped + shown >= 300 + 200 + 99


def test_budget_keeps_what_the_agent_needs_and_drops_listed_paths_first() -> None:
    """The edited migration, the unresolved error with its failing command and the user's
    constraint stay; listed-only paths go before read ones, resolved errors before passing
    commands, oldest first."""
    text = render_ledger(_big_ledger(), 1_000)
    assert "/repo/migrations/0042_add_index.py" in text
    assert "- Add the index, and never touch the 0041 migration." in text
    assert (
        "- `pytest tests/test_3.py -k case_3` -> exit 1\n  - E   AssertionError: case 3 failed"
        in text
    )
    assert "case 2 failed" not in text  # resolved
    assert "/repo/src/module_299/file_299.py" not in text  # listed only
    assert "/repo/src/module_298/file_298.py" in text  # read: kept over listed ones
    assert "/repo/src/module_0/file_0.py" not in text  # oldest read path goes first
    assert "pytest tests/test_199.py -k case_199" in text  # newest passing command kept
    assert "pytest tests/test_4.py -k case_4`" not in text


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_render_rejects_bad_budget(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_tokens must be a positive integer, got"):
        render_ledger(Ledger(), bad)


def test_fit_units_keeps_the_fewest_drops_that_fit() -> None:
    units = ledger_units(_big_ledger())
    full = _sections_size(_render_units(units, [True] * len(units)))
    for max_chars in (0, 200, 2_000, full // 2, full - 1, full):
        lines, kept = fit_units(units, max_chars)
        size = sum(len(line) + 1 for section in lines.values() for line in section)
        assert size <= max_chars
        if lines and kept.count(False):
            # One drop fewer (in drop order) would not fit.
            order = sorted(range(len(units)), key=lambda i: (units[i].rank, units[i].age, i))
            fewer = [True] * len(units)
            for i in order[: kept.count(False) - 1]:
                fewer[i] = False
            assert _sections_size(_render_units(units, fewer)) > max_chars
