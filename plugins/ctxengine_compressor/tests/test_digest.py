"""The local digest: template, label, determinism, carried summary, size bound, critical context."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from ctxengine import DIGEST_LABEL_PREFIX, EMPTY_SECTION, SUMMARY_HEADINGS, Format
from ctxengine.testing.transcripts import load_sessions
from ctxengine_compressor.digest import build_digest, min_digest_tokens
from ctxengine_compressor.ledger import build_ledger
from ctxengine_compressor.template import split_summary

from .test_ledger import anthropic_conversation, openai_conversation


def _sessions(fmt: str) -> list[dict[str, Any]]:
    rows = load_sessions(f"claude_code_spotter.{fmt}.jsonl")
    return [row for row in rows if row["metadata"]["kind"] == "main_session"]


def _heading_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def test_summary_headings_are_the_spec_template() -> None:
    assert SUMMARY_HEADINGS == (
        "## Goal",
        "## Constraints & Preferences",
        "## Progress",
        "### Done",
        "### In Progress",
        "### Blocked",
        "## Key Decisions",
        "## Relevant Files",
        "## Next Steps",
        "## Critical Context",
    )


@pytest.mark.parametrize(
    ("fmt", "factory"), [("openai", openai_conversation), ("anthropic", anthropic_conversation)]
)
def test_digest_content_in_both_formats(fmt: Format, factory: Any) -> None:
    messages = factory()
    before = copy.deepcopy(messages)
    text = build_digest(messages, fmt, max_tokens=2_000, reason="the summary model timed out")
    assert messages == before
    first = text.splitlines()[0]
    assert first.startswith(DIGEST_LABEL_PREFIX)
    assert "because the summary model timed out" in first
    assert _heading_lines(text) == list(SUMMARY_HEADINGS)

    sections = split_summary(text)
    assert sections["## Goal"][0] == "- Fix the failing test in lib/app/parser.ex please"
    assert sections["## Goal"][1] == "- Later: Great. Now run the linter, never push to main."
    # The sentence that states a rule, not the whole ask.
    assert sections["## Constraints & Preferences"] == ["- Now run the linter, never push to main."]
    done = sections["### Done"]
    assert done[0] == "- Tools called: Bash ×3, Read ×1, Edit ×1"
    # Every exit code the command's runs reported: it failed, then passed.
    assert "- `mix test test/app/parser_test.exs` -> exit 2, 0" in done
    assert "- `git status`" in done
    assert sections["### In Progress"][0].startswith("- Last assistant update: ")
    # Grouped by what was done; paths an ask or a command quotes are not listed again.
    assert sections["## Relevant Files"] == [
        "- edited: `/repo/lib/app/parser.ex`",
        "- mentioned: `~/.config/app/app.toml`",
    ]
    assert sections["## Critical Context"] == [
        "- after `mix test test/app/parser_test.exs`:",
        "  - ** (CompileError) lib/app/parser.ex:12: undefined function x/0 (resolved)",
        "  - 1 test, 1 failure (resolved)",
    ]
    assert sections["## Next Steps"] == ["- Pick up from the last user ask under Goal."]
    assert sections["## Key Decisions"] == [EMPTY_SECTION]


def test_failed_commands_are_blocked() -> None:
    messages = openai_conversation()[:4]  # the mix test run that exited 2
    sections = split_summary(build_digest(messages, "openai", max_tokens=2_000))
    # The failing command, with the error lines it printed under it.
    assert sections["### Blocked"] == [
        "- `mix test test/app/parser_test.exs` -> exit 2",
        "  - ** (CompileError) lib/app/parser.ex:12: undefined function x/0",
        "  - 1 test, 1 failure",
    ]


def test_empty_middle_still_has_the_template() -> None:
    text = build_digest([], "openai", max_tokens=1_000)
    assert _heading_lines(text) == list(SUMMARY_HEADINGS)
    assert "Built deterministically from 0 compacted messages" in text.splitlines()[0]
    assert "because no summary model was used" in text.splitlines()[0]


def test_deterministic() -> None:
    session = _sessions("openai")[0]["messages"]
    middle = session[3:-20]
    first = build_digest(middle, "openai", max_tokens=4_000, previous_summary="## Goal\n- x")
    again = build_digest(
        copy.deepcopy(middle), "openai", max_tokens=4_000, previous_summary="## Goal\n- x"
    )
    assert first == again


def test_previous_summary_is_carried_under_its_headings() -> None:
    previous = (
        "[Local digest: generated without a model because x.]\n\n"
        "## Goal\n- Ship the parser rewrite\n"
        "## Progress\n- tokenizer merged\n### Done\n- wrote docs/parser.md\n"
        "### In Progress\n- error recovery\n"
        "## Key Decisions\n- Use a Pratt parser, not a table\n"
        "## Notes\n- stray section\n"
        "## Critical Context\n- CI needs PYTHONHASHSEED=0\n"
    )
    text = build_digest(
        openai_conversation(), "openai", max_tokens=3_000, previous_summary=previous
    )
    assert text.count(DIGEST_LABEL_PREFIX) == 1  # the old label is not carried
    sections = split_summary(text)
    # The earlier digest's goal is the first ask; this span's asks come after it.
    assert sections["## Goal"][0] == "- Ship the parser rewrite"
    assert sections["## Goal"][1] == "- Later: Fix the failing test in lib/app/parser.ex please"
    assert sections["### Done"][1:3] == ["- tokenizer merged", "- wrote docs/parser.md"]
    assert sections["### In Progress"][0] == "- error recovery"
    # An unknown heading stays, as bold text, in the section it appeared in.
    assert sections["## Key Decisions"] == [
        "- Use a Pratt parser, not a table",
        "**Notes**",
        "- stray section",
    ]
    assert sections["## Critical Context"][0] == "- CI needs PYTHONHASHSEED=0"
    assert _heading_lines(text) == list(SUMMARY_HEADINGS)


def test_iterative_compaction_keeps_older_files() -> None:
    """Digest of part one, then a digest of part two that carries it: part one's files stay."""
    session = _sessions("anthropic")[0]["messages"]
    part_one, part_two = session[3:80], session[80:160]
    first = build_digest(part_one, "anthropic", max_tokens=12_000)
    second = build_digest(part_two, "anthropic", max_tokens=12_000, previous_summary=first)
    for path in build_ledger(part_one, "anthropic").paths:
        assert path in second
    for path in build_ledger(part_two, "anthropic").paths:
        assert path in second


def test_free_text_previous_summary_goes_to_critical_context() -> None:
    text = build_digest([], "openai", max_tokens=1_000, previous_summary="We fixed the parser.")
    assert split_summary(text)["## Critical Context"] == ["We fixed the parser."]


@pytest.mark.parametrize("max_tokens", [None, 300, 600, 1_500, 12_000])
def test_size_bound_on_a_long_session(max_tokens: int | None) -> None:
    middle = _sessions("openai")[3]["messages"][3:-20]
    budget = max_tokens or min_digest_tokens()
    previous = build_digest(middle[:100], "openai", max_tokens=12_000)
    text = build_digest(middle, "openai", max_tokens=budget, previous_summary=previous)
    assert len(text) <= 4 * budget
    assert _heading_lines(text) == list(SUMMARY_HEADINGS)
    assert text.startswith(DIGEST_LABEL_PREFIX)


def test_tight_budget_drops_old_items_and_says_so() -> None:
    middle = _sessions("openai")[3]["messages"][3:-20]
    ledger = build_ledger(middle, "openai")
    text = build_digest(middle, "openai", max_tokens=1_000)
    assert "mentioned paths" in text and "omitted for space" in text
    assert "older successful commands" in text
    # Files that were changed are the last paths to go.
    changed = [p for i, p in enumerate(ledger.paths) if ledger.action(i) in ("edited", "created")]
    assert changed and all(path in text for path in changed[-3:])


def test_too_small_budget_is_rejected() -> None:
    minimum = min_digest_tokens()
    with pytest.raises(ValueError, match=r"max_tokens=50 is too small .* at least (\d+)") as err:
        build_digest([], "openai", max_tokens=50)
    # The message names this call's minimum; min_digest_tokens holds for any message count.
    assert int(re.findall(r"at least (\d+)", str(err.value))[0]) <= minimum
    many = [{"role": "user", "content": f"ask {i}"} for i in range(1_000)]
    assert build_digest(many, "openai", max_tokens=minimum).startswith(DIGEST_LABEL_PREFIX)
    with pytest.raises(ValueError, match="max_tokens must be an integer, got '1000'"):
        build_digest([], "openai", max_tokens="1000")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown message format 'chat'; allowed: 'openai' or"):
        build_digest([], "chat", max_tokens=1_000, ledger=build_ledger([], "openai"))  # type: ignore[arg-type]


def test_secrets_are_redacted_everywhere() -> None:
    key = "sk-ant-api03-" + "Zq9" * 30
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"deploy with ANTHROPIC_API_KEY={key}"},
        {
            "role": "assistant",
            "content": f"Using token ghp_{'a1B2' * 9} now.",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {
                        "name": "Bash",
                        "arguments": json.dumps({"command": "mysql --password hunter2 -e 'x'"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "ERROR 1045: password=hunter2 denied"},
    ]
    text = build_digest(
        messages,
        "openai",
        max_tokens=2_000,
        previous_summary=f"## Critical Context\n- old key {key}",
        reason=f"auth failed for {key}",
    )
    assert key not in text
    assert "hunter2" not in text
    assert "a1B2a1B2" not in text
    assert "[REDACTED:" in text


def test_accepts_a_precomputed_ledger() -> None:
    messages = openai_conversation()
    ledger = build_ledger(messages, "openai")
    assert build_digest(messages, "openai", max_tokens=2_000, ledger=ledger) == build_digest(
        messages, "openai", max_tokens=2_000
    )


def test_critical_context_survives_in_long_sessions() -> None:
    """The share of ledger paths and commands quoted verbatim in a 12,000-token digest."""
    total = found = 0
    for fmt in ("openai", "anthropic"):
        for session in _sessions(fmt):
            messages = session["messages"]
            middle = messages[3 : len(messages) - 20]
            ledger = build_ledger(middle, fmt)
            digest = build_digest(middle, fmt, max_tokens=12_000)
            assert len(digest) <= 4 * 12_000
            items = ledger.paths + ledger.commands
            hits = sum(1 for item in items if item in digest)
            print(
                f"{fmt:9s} {session['id']}: {hits}/{len(items)} paths+commands "
                f"({hits / len(items):.1%}), digest {len(digest) // 4} tokens"
            )
            total += len(items)
            found += hits
    print(f"overall: {found}/{total} = {found / total:.2%}")
    assert total > 500
    assert found / total >= 0.95
