"""The unseen sessions and the independent fact rules (docs/fidelity.md, "Unseen sessions")."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.fidelity.facts import Fact, Haystack
from benchmarks.fidelity.facts_independent import extract, present
from benchmarks.fidelity.unseen import HALVES, split, unseen_sessions

from ctxengine import Message


def test_the_sessions_are_the_same_bytes_every_time() -> None:
    first, second = unseen_sessions(), unseen_sessions()
    assert [s.name for s in first] == [s.name for s in second]
    assert json.dumps([s.messages for s in first]) == json.dumps([s.messages for s in second])
    assert len(first) == 18
    assert {s.fmt for s in first if s.style == "claude_code"} == {"anthropic", "openai"}


def test_each_half_has_every_style_and_the_halves_partition_the_sessions() -> None:
    sessions = unseen_sessions()
    halves = split(sessions)
    assert tuple(halves) == HALVES
    names = [s.name for half in halves.values() for s in half]
    assert sorted(names) == sorted(s.name for s in sessions)
    styles = {s.style for s in sessions}
    for half in halves.values():
        assert {s.style for s in half} == styles
    assert split(sessions) == halves


def test_every_session_has_facts_of_every_kind_it_can_have() -> None:
    for session in unseen_sessions():
        kinds = {f.kind for f in extract(session.messages, session.fmt)}
        if session.style == "tau_bench":  # no files, no shell
            assert kinds == {"ask", "identifier", "error"}, session.name
        else:
            assert kinds == {"path", "command", "error", "ask", "identifier"}, session.name


def _facts(messages: list[Message], fmt: Any = "openai") -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fact in extract(messages, fmt):
        out.setdefault(fact.kind, set()).add(fact.key)
    return out


def test_text_actions_and_their_observations() -> None:
    messages: list[Message] = [
        {
            "role": "user",
            "content": "Fix TICKET-42 please.\n(Open file: n/a)\n(Current directory: /r)\nbash-$",
        },
        {
            "role": "assistant",
            "content": "DISCUSSION\nRun it.\n\n```\ncd /r/src && pytest tests/test_a.py\n```",
        },
        {
            "role": "user",
            "content": "Traceback (most recent call last):\n"
            "  File \"/r/src/a.py\", line 3, in run\n    go()\nKeyError: 'x'\n"
            "(Open file: n/a)\n(Current directory: /r)\nbash-$",
        },
        {
            "role": "assistant",
            "content": "TICKET-42 fails in run.\n\nsrc/a.py\n```python\n"
            "<<<<<<< SEARCH\ngo()\n=======\ngo(1)\n>>>>>>> REPLACE\n```",
        },
    ]
    facts = _facts(messages)
    assert facts["command"] == {"cd /r/src && pytest tests/test_a.py"}
    assert {"/r/src", "tests/test_a.py", "src/a.py"} <= facts["path"]
    assert facts["error"] == {'File "/r/src/a.py", line 3, in run', "KeyError: 'x'"}
    assert facts["ask"] == {"Fix TICKET-42 please."}
    assert facts["identifier"] == {"TICKET-42"}


def test_codex_json_outputs_and_anthropic_tool_results() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "shell",
            "arguments": json.dumps(
                {"command": ["bash", "-lc", "go test ./internal/q/"], "workdir": "/w"}
            ),
        },
    }
    output = json.dumps({"output": "--- FAIL: TestQ (0.01s)\nFAIL", "metadata": {"exit_code": 1}})
    facts = _facts(
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": output},
        ]
    )
    assert facts["command"] == {"go test ./internal/q/"}
    assert facts["error"] == {"--- FAIL: TestQ (0.01s)"}
    anthropic: list[Message] = [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Edit",
                    "input": {"file_path": "/h/x.ts", "old_string": "a", "new_string": "b"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "ok"}],
                }
            ],
        },
    ]
    assert _facts(anthropic, "anthropic")["path"] == {"/h/x.ts"}


def test_presence_needs_whole_tokens() -> None:
    path = Fact("path", "src/a.py", "src/a.py", 0)
    ident = Fact("identifier", "fx-1a2b3c4d", "fx-1a2b3c4d", 0)
    assert present(Haystack.of("edited `src/a.py`, and ./src/a.py"), path)
    assert not present(Haystack.of("edited /r/src/a.py"), path)
    assert present(Haystack.of("case fx-1a2b3c4d failed"), ident)
    assert not present(Haystack.of("case fx-1a2b3c4d0 failed"), ident)
