"""The fidelity benchmark's fact rules (benchmarks/fidelity/facts.py, docs/fidelity.md) on small
hand-written conversations of each agent style, and the presence check."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.fidelity.facts import (
    Fact,
    Haystack,
    contains,
    exit_status,
    extract_facts,
    read_conversation,
)

from ctxengine.messages import validate

from .styles import STYLES, Message, mini_swe_agent, tau_bench


def _facts(style: str) -> dict[tuple[str, str], Fact]:
    fmt, factory = STYLES[style]
    return {(f.kind, f.key): f for f in extract_facts(factory(), fmt)}  # type: ignore[arg-type]


def _keys(style: str, kind: str) -> list[str]:
    return [key for k, key in _facts(style) if k == kind]


def test_claude_code_facts() -> None:
    facts = _facts("claude_code")
    assert facts[("path", "/repo/lib/parser.py")].action == "edited"  # read, then edited
    assert _keys("claude_code", "command") == [
        'pytest tests/test_parser.py -q -k "empty"',
        "git log --oneline -1",
    ]
    error = facts[("error", "E ValueError: empty section at line 3")]
    assert error.resolved_at == 6  # the same command passed later
    exit_fact = facts[("error", 'exit 1: pytest tests/test_parser.py -q -k "empty"')]
    assert exit_fact.status == 1 and exit_fact.probe == 'pytest tests/test_parser.py -q -k "empty"'
    # The hash a tool printed and the assistant repeated; the ticket the user gave.
    assert set(_keys("claude_code", "identifier")) == {"a1b2c3d", "PROJ-4821"}
    # The file listing of the Read result is content, not an error.
    assert not any("raise ValueError" in key for key in _keys("claude_code", "error"))


def test_openhands_facts() -> None:
    facts = _facts("openhands")
    assert facts[("path", "/workspace/app/config.py")].action == "read"
    assert facts[("path", "/workspace/app/fix.h")].action == "created"
    assert facts[("error", "exit 2: make build")].status == 2
    assert ("error", "main.c:12:5: error: unknown type name 'size'") in facts
    assert ("error", "make: *** [Makefile:7: build] Error 2") in facts
    assert _keys("openhands", "identifier") == ["8731"]  # the port from the ask, used in curl


def test_mini_swe_agent_observations_are_outputs_not_asks() -> None:
    facts = _facts("mini_swe_agent")
    assert _keys("mini_swe_agent", "ask") == [
        "<pr_description>Fix issue #772: the importer drops rows.</pr_description>"
    ]
    assert "python -m pytest tests/test_importer.py -q" in _keys("mini_swe_agent", "command")
    assert facts[("error", "exit 1: python -m pytest tests/test_importer.py -q")].resolved_at == 9
    assert facts[("path", "src/importer.py")].action == "edited"  # sed -i
    assert _keys("mini_swe_agent", "identifier") == ["row_17"]
    steps = read_conversation(mini_swe_agent(), "openai")
    assert [s.role for s in steps[2:4]] == ["assistant", "observation"]
    assert steps[3].outputs[0].call is steps[2].calls[0]


def test_swe_agent_facts() -> None:
    facts = _facts("swe_agent")
    assert ("error", "TypeError: split() got an unexpected keyword argument 'dash'") in facts
    assert facts[("path", "/testbed/src/tokens.py")].action == "edited"
    assert _keys("swe_agent", "command") == ["python /testbed/reproduce.py"]


def test_codex_argv_json_outputs_and_patches() -> None:
    facts = _facts("codex")
    # The script of ["bash", "-lc", script], not the argv joined.
    assert _keys("codex", "command") == [
        'rg -n "def main" src',
        "pytest -q",
        "gh run view 58213 --log | tail -3",
    ]
    assert facts[("error", "exit 1: pytest -q")].status == 1
    assert ("error", 'E AssertionError: assert "b" == "a"') in facts  # a line of the JSON output
    assert facts[("path", "src/app.py")].action == "edited"
    assert facts[("path", "tests/test_app.py")].action == "created"
    assert _keys("codex", "identifier") == ["58213"]


def test_tau_bench_ids_given_then_passed_back() -> None:
    ids = set(_keys("tau_bench", "identifier"))
    assert ids == {"mia_li_3668", "ZFA04Y", "4BMN53", "HAT069", "credit_card_4421486"}
    facts = _facts("tau_bench")
    assert facts[("identifier", "4BMN53")].home == 3  # given by the user-details result
    assert ("error", "Error: not enough seats on flight HAT069") in facts
    assert len(_keys("tau_bench", "ask")) == 2


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("Exit code 2\nboom", 2),
        ("out\n[The command completed with exit code 1.]\n[Current working directory: /x]", 1),
        ("[Command finished with exit code 0]", 0),
        ("<returncode>127</returncode>\n<output>\n</output>", 127),
        ('{"output": "x", "metadata": {"exit_code": 3}}', 3),
        ("Process exited with code 1\nOutput:\n", 1),
        ("Exit code: 4\nWall time: 1 seconds", 4),
        ("error: exit status 1", 1),
        ("returncode=5", 5),
        ("command terminated with exit code 137", 137),
        ("all good", None),
    ],
)
def test_exit_status_formats(text: str, status: int | None) -> None:
    assert exit_status(text) == status


def test_presence_needs_whole_tokens_and_exit_codes_on_the_command_line() -> None:
    path = Fact("path", "lib/a.ex", "lib/a.ex", 0)
    assert not contains(Haystack.of("see /repo/lib/a.ex"), path)
    assert contains(Haystack.of("edited `lib/a.ex`."), path)
    ident = Fact("identifier", "1234", "1234", 0)
    assert not contains(Haystack.of("port 12345"), ident)
    assert contains(Haystack.of("port 1234, then"), ident)
    failed = Fact("error", "exit 1: make", "make", 0, status=1)
    assert contains(Haystack.of("- `make` -> exit 2, 1"), failed)
    assert not contains(Haystack.of("- `make`\n- exit 1"), failed)
    ask = Fact("ask", "fix  the\nbug", "fix  the\nbug", 0)
    assert contains(Haystack.of("- fix the bug"), ask)  # whitespace collapsed


def test_a_reused_call_id_maps_each_result_to_its_call() -> None:
    steps = read_conversation(tau_bench(), "openai")
    outputs = [o for s in steps for o in s.outputs]
    assert [o.call.name for o in outputs if o.call] == [
        "get_user_details",
        "get_reservation_details",
        "update_reservation_flights",
    ]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_is_valid_and_has_every_kind_it_should(style: str) -> None:
    fmt, factory = STYLES[style]
    messages: list[Message] = factory()
    assert validate(messages, fmt) == []  # type: ignore[arg-type]
    kinds = {f.kind for f in extract_facts(messages, fmt)}  # type: ignore[arg-type]
    expected = {"ask", "error"} | ({"identifier"} if style != "swe_agent" else set())
    assert expected <= kinds


def test_facts_do_not_depend_on_the_ledger() -> None:
    """The rules are the benchmark's own: its module never imports the ledger or the digest."""
    import benchmarks.fidelity.facts as facts_module

    source = Path(facts_module.__file__).read_text(encoding="utf-8")
    assert "ctxengine.ledger" not in source.replace("``ctxengine.ledger``", "")
    assert "import ctxengine.digest" not in source and "from ctxengine.digest" not in source
