"""The ledger across agents' conventions, and the concrete losses it must not repeat: tau-bench
reservation ids, exit codes in other formats, an edited file dropped for budget."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.fidelity.styles import STYLES, codex, mini_swe_agent, openhands, tau_bench

from ctxengine import Format
from ctxengine_compressor.digest import build_digest
from ctxengine_compressor.ledger import (
    Ledger,
    build_ledger,
    merge_ledgers,
    missing_from,
    parse_ledger,
    render_ledger,
)
from ctxengine_compressor.template import split_summary

Message = dict[str, Any]


def test_tau_bench_reservation_ids_survive_the_digest() -> None:
    """Regression: the ledger kept ``get_reservation_details ×7`` but none of the reservation
    ids the agent passed; now every id given and passed back is listed with its argument."""
    messages = tau_bench()
    ledger = build_ledger(messages, "openai")
    assert dict(zip(ledger.identifiers, ledger.identifier_keys, strict=True)) == {
        "mia_li_3668": "user_id",
        "4BMN53": "reservation_id",
        "ZFA04Y": "reservation_id",
        "HAT069": "flights",
        "credit_card_4421486": "payment_id",
    }
    text = build_digest(messages[1:8], "openai", max_tokens=2_000)
    for token in ledger.identifiers:
        assert token in text
    assert "- ids passed as reservation_id: 4BMN53" in text
    # The tool's failure, under the call that produced it.
    assert (
        "- after `update_reservation_flights`:\n  - Error: not enough seats on flight HAT069"
        in text
    )


@pytest.mark.parametrize(
    "output",
    [
        "E   assert 1 == 2\nFAILED tests/test_a.py::test_x\n[The command completed with exit code "
        "1.]",
        "E   assert 1 == 2\nFAILED tests/test_a.py::test_x\n[Command finished with exit code 1]",
        "E   assert 1 == 2\nFAILED tests/test_a.py::test_x\nExit code: 1\nWall time: 2 s",
        "Process exited with code 1\nOutput:\nE   assert 1 == 2\nFAILED tests/test_a.py::test_x",
        json.dumps(
            {
                "output": "E   assert 1 == 2\nFAILED tests/test_a.py::test_x\n",
                "metadata": {"exit_code": 1},
            }
        ),
        "E   assert 1 == 2\nFAILED tests/test_a.py::test_x\nreturncode: 1",
        "E   assert 1 == 2\nFAILED tests/test_a.py::test_x\nexit status 1",
    ],
)
def test_exit_codes_in_every_format_reach_blocked(output: str) -> None:
    """Regression: a failing pytest run whose output gave its return code in another agent's
    format landed in neither Blocked nor the critical context."""
    messages: list[Message] = [
        {"role": "user", "content": "run the tests"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {
                        "name": "execute_bash",
                        "arguments": json.dumps({"command": "pytest -q"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": output},
    ]
    ledger = build_ledger(messages, "openai")
    assert ledger.exit_codes == (1,)
    blocked = split_summary(build_digest(messages, "openai", max_tokens=2_000))["### Blocked"]
    assert blocked[0] == "- `pytest -q` -> exit 1"
    assert "  - FAILED tests/test_a.py::test_x" in blocked


def test_mini_swe_agent_text_actions_and_observations() -> None:
    ledger = build_ledger(mini_swe_agent(), "openai")
    assert "python -m pytest tests/test_importer.py -q" in ledger.commands
    i = ledger.commands.index("python -m pytest tests/test_importer.py -q")
    assert ledger.history(i) == (1, 0)  # failed, then passed: <returncode> read both times
    assert ledger.asks == (
        "<pr_description>Fix issue #772: the importer drops rows.</pr_description>",
    )
    assert ledger.action(ledger.paths.index("src/importer.py")) == "edited"  # sed -i
    assert ledger.resolved == (True,)
    assert "row_17" in ledger.identifiers


def test_codex_argv_json_outputs_and_apply_patch() -> None:
    ledger = build_ledger(codex(), "openai")
    assert ledger.commands == (
        'rg -n "def main" src',
        "pytest -q",
        "gh run view 58213 --log | tail -3",
    )
    assert ledger.exit_history == ((0,), (1,), (0,))
    assert ledger.errors[0] == 'E AssertionError: assert "b" == "a"'
    assert dict(zip(ledger.paths, ledger.actions, strict=True)) == {
        "src/app.py": "edited",
        "tests/test_app.py": "created",
    }
    assert ledger.identifiers == ("58213",)


def test_openhands_paths_and_errors() -> None:
    ledger = build_ledger(openhands(), "openai")
    assert dict(zip(ledger.paths, ledger.actions, strict=True)) == {
        "/workspace/app/config.py": "read",
        "/workspace/app/fix.h": "created",
    }
    assert ledger.errors == (
        "main.c:12:5: error: unknown type name 'size'",
        "make: *** [Makefile:7: build] Error 2",
    )
    assert ledger.error_sources == ("make build", "make build")


def _many_reads_and_one_migration() -> list[Message]:
    messages: list[Message] = [{"role": "user", "content": "Add the index in a new migration."}]
    for i in range(60):
        name = "Edit" if i == 5 else "Read"
        path = (
            "/app/priv/repo/migrations/20260212155510_add_index.exs"
            if i == 5
            else f"/app/lib/app/module_{i}/part_{i}.ex"
        )
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps({"file_path": path})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    return messages


def test_an_edited_file_is_not_dropped_for_budget() -> None:
    """Regression: an edited migration file went in "36 earlier files omitted" while less
    important lines stayed. Read-only paths go first, and the note counts them."""
    messages = _many_reads_and_one_migration()
    text = build_digest(messages, "openai", max_tokens=600)
    assert len(text) <= 2_400
    files = split_summary(text)["## Relevant Files"]
    assert "- edited: `/app/priv/repo/migrations/20260212155510_add_index.exs`" in files
    note = next(line for line in files if line.startswith("- …"))
    kept = sum(line.count("`/app/lib/") for line in files)
    assert note.startswith(f"- … {59 - kept} read-only paths omitted for space")
    assert "`/app/lib/app/module_59/part_59.ex`" in text  # the newest reads stay longest


def test_a_summary_ledger_reads_back_and_merges() -> None:
    messages = openhands()
    first = build_digest(messages, "openai", max_tokens=2_000)
    parsed = parse_ledger(first, asks_in=("Goal",)).ledger
    original = build_ledger(messages, "openai")
    assert set(parsed.paths) == set(original.paths)
    assert dict(zip(parsed.paths, parsed.actions, strict=True))["/workspace/app/fix.h"] == "created"
    assert set(parsed.commands) == set(original.commands)
    assert parsed.exit_code("make build") == 2
    assert set(parsed.errors) == set(original.errors)
    assert set(parsed.error_sources) == {"make build"}
    assert parsed.asks == original.asks
    # A later run that passes resolves the carried errors.
    later = Ledger(commands=("make build",), exit_codes=(0,))
    merged = merge_ledgers(parsed, later)
    assert merged.exit_history[merged.commands.index("make build")] == (2, 0)
    assert all(merged.resolved)


def test_missing_from_then_render_completes_a_lossy_summary() -> None:
    """What a model left out is rendered so that the summary then holds every item."""
    ledger = build_ledger(tau_bench(), "openai")
    model = "## Goal\n- change reservation ZFA04Y\n## Critical Context\n- Error seen."
    missing = missing_from(ledger, model)
    assert "ZFA04Y" not in missing.identifiers
    final = model + "\n" + render_ledger(missing, 2_000)
    left = missing_from(ledger, final)
    assert not (left.paths or left.commands or left.errors or left.asks or left.identifiers)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_digest_holds_every_ledger_item_when_there_is_room(style: str) -> None:
    fmt: Format
    fmt, factory = STYLES[style]  # type: ignore[assignment]
    messages = factory()
    ledger = build_ledger(messages, fmt)
    missing = missing_from(ledger, build_digest(messages, fmt, max_tokens=4_000))
    assert not (
        missing.paths or missing.commands or missing.errors or missing.asks or missing.identifiers
    )
