"""Small hand-written conversations in the conventions of each agent style.

Each one holds the same kinds of facts: a user ask with an id, a read and an edited file, a
failing command with its exit status in the style's own format, the error line it printed, a
later passing run, and an id a tool returned that the assistant passes back.
"""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _assistant(text: str | None, *calls: dict[str, Any]) -> Message:
    msg: Message = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = list(calls)
    return msg


def _tool(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def claude_code() -> list[Message]:
    """Anthropic format: Bash, Read, Edit; ``Exit code 1`` on the first line of a failure."""

    def use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}

    def result(call_id: str, text: str, is_error: bool = False) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if is_error:
            block["is_error"] = True
        return block

    return [
        {"role": "user", "content": "Fix ticket PROJ-4821: the parser rejects empty sections."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading the parser first."},
                use("t1", "Read", file_path="/repo/lib/parser.py"),
                use("t2", "Bash", command='pytest tests/test_parser.py -q -k "empty"'),
            ],
        },
        {
            "role": "user",
            "content": [
                result("t1", "     1→def parse(text):\n     2→    raise ValueError('x')\n"),
                result(
                    "t2",
                    "Exit code 1\nE   ValueError: empty section at line 3\n1 failed in 0.1s",
                    is_error=True,
                ),
            ],
        },
        {
            "role": "assistant",
            "content": [
                use("t3", "Edit", file_path="/repo/lib/parser.py", old_string="a", new_string="b"),
                use("t4", "Bash", command="git log --oneline -1"),
            ],
        },
        {
            "role": "user",
            "content": [result("t3", "The file was updated."), result("t4", "a1b2c3d Fix parser")],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Commit a1b2c3d is the last one."},
                use("t5", "Bash", command='pytest tests/test_parser.py -q -k "empty"'),
            ],
        },
        {"role": "user", "content": [result("t5", "1 passed in 0.1s")]},
        {"role": "assistant", "content": [{"type": "text", "text": "Fixed PROJ-4821."}]},
    ]


def openhands() -> list[Message]:
    """execute_bash / str_replace_editor; ``[The command completed with exit code N.]``."""
    cwd = "\n[Current working directory: /workspace/app]"
    return [
        {"role": "system", "content": "You are OpenHands agent."},
        {"role": "user", "content": "Issue #318: the build fails on port 8731. Please fix it."},
        _assistant(
            "Viewing the config.",
            _call("o1", "str_replace_editor", command="view", path="/workspace/app/config.py"),
        ),
        _tool(
            "o1",
            "Here's the result of running `cat -n` on /workspace/app/config.py:\n     1\tPORT = "
            "8731\n",
        ),
        _assistant("Building.", _call("o2", "execute_bash", command="make build")),
        _tool(
            "o2",
            "gcc -c main.c\nmain.c:12:5: error: unknown type name 'size'\nmake: *** [Makefile:7: "
            "build] Error 2\n[The command completed with exit code 2.]" + cwd,
        ),
        _assistant(
            "Creating the fix.",
            _call(
                "o3",
                "str_replace_editor",
                command="create",
                path="/workspace/app/fix.h",
                file_text="#include <stddef.h>\n",
            ),
        ),
        _tool("o3", "File created successfully at: /workspace/app/fix.h"),
        _assistant(
            "Checking the server on 8731.",
            _call("o4", "execute_bash", command="curl -s localhost:8731/health"),
        ),
        _tool("o4", '{"ok": true}\n[The command completed with exit code 0.]' + cwd),
    ]


def mini_swe_agent() -> list[Message]:
    """No function tools: a fenced ``bash`` block per turn, ``<returncode>`` observations."""
    return [
        {
            "role": "system",
            "content": "You are a helpful assistant that can interact with a computer.",
        },
        {
            "role": "user",
            "content": "<pr_description>Fix issue #772: the importer drops rows.</pr_description>",
        },
        {
            "role": "assistant",
            "content": "THOUGHT: Look at the importer.\n\n```bash\nnl -ba src/importer.py | sed "
            "-n '1,40p'\n```",
        },
        {
            "role": "user",
            "content": "<returncode>0</returncode>\n<output>\n     1\tdef load(rows):\n</output>",
        },
        {
            "role": "assistant",
            "content": "THOUGHT: Run the tests.\n\n```bash\npython -m pytest "
            "tests/test_importer.py -q\n```",
        },
        {
            "role": "user",
            "content": "<returncode>1</returncode>\n<output>\nFAILED "
            "tests/test_importer.py::test_rows - KeyError: 'row_17'\n</output>",
        },
        {
            "role": "assistant",
            "content": "THOUGHT: Fix it.\n\n```bash\nsed -i 's/rows\\[1:\\]/rows/' "
            "src/importer.py\n```",
        },
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
        {
            "role": "assistant",
            "content": "THOUGHT: The failing row was row_17; rerun.\n\n```bash\npython -m pytest "
            "tests/test_importer.py -q\n```",
        },
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n3 passed\n</output>"},
    ]


def swe_agent() -> list[Message]:
    """bash / str_replace_editor / submit function tools; ``OBSERVATION:`` outputs."""
    return [
        {"role": "system", "content": "SETTING: You are an autonomous programmer."},
        {"role": "user", "content": "Fix issue #91 in /testbed: tokens with a dash are split."},
        _assistant("Reproducing.", _call("s1", "bash", command="python /testbed/reproduce.py")),
        _tool(
            "s1",
            'OBSERVATION:\nTraceback (most recent call last):\n  File "/testbed/reproduce.py", '
            "line 3, in <module>\nTypeError: split() got an unexpected keyword argument 'dash'",
        ),
        _assistant(
            "Editing.",
            _call(
                "s2",
                "str_replace_editor",
                command="str_replace",
                path="/testbed/src/tokens.py",
                old_str="a",
                new_str="b",
            ),
        ),
        _tool("s2", "OBSERVATION:\nThe file /testbed/src/tokens.py has been edited."),
        _assistant("Submitting.", _call("s3", "submit")),
        _tool("s3", "OBSERVATION:\ndiff --git a/src/tokens.py b/src/tokens.py"),
    ]


def codex() -> list[Message]:
    """``shell`` with an argv and JSON outputs; ``apply_patch``; ``exec_command``."""
    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n"
        "*** Add File: tests/test_app.py\n+def test(): pass\n*** End Patch"
    )
    return [
        {"role": "user", "content": "Make `pytest -q` pass; the failing job is run 58213."},
        _assistant(
            None,
            _call("x1", "shell", command=["bash", "-lc", 'rg -n "def main" src'], workdir="/repo"),
        ),
        _tool(
            "x1", json.dumps({"output": "src/app.py:3:def main():\n", "metadata": {"exit_code": 0}})
        ),
        _assistant(
            None, _call("x2", "shell", command=["bash", "-lc", "pytest -q"], workdir="/repo")
        ),
        _tool(
            "x2",
            json.dumps(
                {
                    "output": 'F\nE   AssertionError: assert "b" == "a"\n1 failed\n',
                    "metadata": {"exit_code": 1, "duration_seconds": 0.4},
                }
            ),
        ),
        _assistant(None, _call("x3", "shell", command=["apply_patch", patch], workdir="/repo")),
        _tool(
            "x3",
            json.dumps(
                {
                    "output": "Success. Updated the following files:\nM src/app.py\nA "
                    "tests/test_app.py\n",
                    "metadata": {"exit_code": 0},
                }
            ),
        ),
        _assistant(None, _call("x4", "exec_command", cmd="gh run view 58213 --log | tail -3")),
        _tool(
            "x4", "Chunk ID: 1\nWall time: 0.5 seconds\nProcess exited with code 0\nOutput:\nok\n"
        ),
    ]


def tau_bench() -> list[Message]:
    """Customer-service function tools: ids given by the user and tools, passed back."""
    return [
        {
            "role": "system",
            "content": "# Airline Agent Policy\nAsk for confirmation before changes.",
        },
        {"role": "user", "content": "Hi, I'm mia_li_3668 and I want to change reservation ZFA04Y."},
        _assistant(None, _call("call_1", "get_user_details", user_id="mia_li_3668")),
        _tool(
            "call_1",
            json.dumps(
                {
                    "reservations": ["ZFA04Y", "4BMN53"],
                    "payment_methods": {"credit_card_4421486": {}},
                }
            ),
        ),
        _assistant(None, _call("call_1", "get_reservation_details", reservation_id="4BMN53")),
        _tool(
            "call_1",
            json.dumps({"reservation_id": "4BMN53", "flights": [{"flight_number": "HAT069"}]}),
        ),
        _assistant(
            None,
            _call(
                "call_1",
                "update_reservation_flights",
                reservation_id="ZFA04Y",
                cabin="economy",
                flights=[{"flight_number": "HAT069", "date": "2024-05-20"}],
                payment_id="credit_card_4421486",
            ),
        ),
        _tool("call_1", "Error: not enough seats on flight HAT069"),
        _assistant("Flight HAT069 is full for ZFA04Y. Shall I try HAT083 instead?"),
        {"role": "user", "content": "Yes please, but don't charge my gift card."},
    ]


STYLES = {
    "claude_code": ("anthropic", claude_code),
    "openhands": ("openai", openhands),
    "mini_swe_agent": ("openai", mini_swe_agent),
    "swe_agent": ("openai", swe_agent),
    "codex": ("openai", codex),
    "tau_bench": ("openai", tau_bench),
}
"""Style name -> (format, conversation factory)."""
