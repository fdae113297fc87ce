"""Deterministic sample conversations for tests and the conformance suite (no randomness)."""

from __future__ import annotations

import json
from typing import Any

from ctxengine import Format, Message, SystemPrompt

SYSTEM_PROMPT = (
    "You are a careful coding agent working in the repository /srv/app. "
    "Use the tools to read files and run commands."
)


def _tool_output(turn: int, size: int) -> str:
    line = f"turn {turn}: lib/app/module_{turn % 7}.py:{turn * 3} ok; checked value {turn * 37}\n"
    body = (line * (size // len(line) + 1))[:size]
    return body + f"\nexit code: {turn % 2}"


def openai_conversation(turns: int = 24, tool_output_chars: int = 2_400) -> list[Message]:
    """An OpenAI-format agent session: system, user asks, single and parallel tool calls.

    Ends with a user question and a visible assistant answer.
    """
    messages: list[Message] = [{"role": "system", "content": SYSTEM_PROMPT}]
    messages.append({"role": "user", "content": "Fix the failing tests in lib/app and explain."})
    for turn in range(turns):
        parallel = 2 if turn % 3 == 0 else 1
        calls = [
            {
                "id": f"call_{turn}_{k}",
                "type": "function",
                "function": {
                    "name": "terminal" if k == 0 else "read_file",
                    "arguments": json.dumps(
                        {"command": f"pytest -q tests/test_mod{turn}.py"}
                        if k == 0
                        else {"path": f"lib/app/module_{turn}.py"}
                    ),
                },
            }
            for k in range(parallel)
        ]
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {turn}: checking module {turn}.",
                "tool_calls": calls,
            }
        )
        messages.extend(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": _tool_output(turn, tool_output_chars),
            }
            for call in calls
        )
        if turn % 5 == 4:
            messages.append({"role": "assistant", "content": f"Module {turn} is fixed."})
            messages.append({"role": "user", "content": f"Good. Now look at module {turn + 1}."})
    messages.append({"role": "assistant", "content": "All modules checked; two fixes applied."})
    messages.append({"role": "user", "content": "Summarise what you changed in lib/app."})
    messages.append({"role": "assistant", "content": "I changed module_3.py and module_8.py."})
    return messages


def anthropic_conversation(
    turns: int = 24, tool_output_chars: int = 2_400
) -> tuple[SystemPrompt, list[Message]]:
    """The Anthropic-format twin of :func:`openai_conversation`: ``(system, messages)``."""
    messages: list[Message] = [
        {"role": "user", "content": "Fix the failing tests in lib/app and explain."}
    ]
    for turn in range(turns):
        parallel = 2 if turn % 3 == 0 else 1
        uses = [
            {
                "type": "tool_use",
                "id": f"toolu_{turn}_{k}",
                "name": "terminal" if k == 0 else "read_file",
                "input": (
                    {"command": f"pytest -q tests/test_mod{turn}.py"}
                    if k == 0
                    else {"path": f"lib/app/module_{turn}.py"}
                ),
            }
            for k in range(parallel)
        ]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {turn}: checking module {turn}."},
                    *uses,
                ],
            }
        )
        results: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": use["id"],
                "content": _tool_output(turn, tool_output_chars),
            }
            for use in uses
        ]
        if turn % 5 == 4:
            messages.append({"role": "user", "content": results})
            messages.append({"role": "assistant", "content": f"Module {turn} is fixed."})
            messages.append({"role": "user", "content": f"Good. Now look at module {turn + 1}."})
        else:
            messages.append({"role": "user", "content": results})
    if messages[-1]["role"] == "user":
        messages.append({"role": "assistant", "content": "All modules checked; two fixes applied."})
    messages.append({"role": "user", "content": "Summarise what you changed in lib/app."})
    messages.append({"role": "assistant", "content": "I changed module_3.py and module_8.py."})
    return SYSTEM_PROMPT, messages


def conversation(
    fmt: Format, turns: int = 24, tool_output_chars: int = 2_400
) -> tuple[SystemPrompt | None, list[Message]]:
    """``(system, messages)`` in ``fmt``; ``system`` is ``None`` for OpenAI (it is message 0)."""
    if fmt == "openai":
        return None, openai_conversation(turns, tool_output_chars)
    return anthropic_conversation(turns, tool_output_chars)


def short_conversation(fmt: Format) -> tuple[SystemPrompt | None, list[Message]]:
    """A two-turn exchange with nothing worth compacting."""
    exchange: list[Message] = [
        {"role": "user", "content": "Hello, what can you do?"},
        {"role": "assistant", "content": "I can read files and run commands."},
        {"role": "user", "content": "Great, list the files."},
    ]
    if fmt == "openai":
        return None, [{"role": "system", "content": SYSTEM_PROMPT}, *exchange]
    return SYSTEM_PROMPT, exchange
