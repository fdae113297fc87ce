"""Commands: shortened, unwrapped from shell argv, fenced in an agent's text, and the exit
codes their outputs report."""

from __future__ import annotations

import re
from typing import Any

from ctxengine_compressor.ledger.model import COMMAND_CHARS

__all__ = ["exit_code_of", "shorten_command", "truncate"]

# Exit codes as agents, shells and CI print them: "Exit code 1" (Claude Code), "[Command finished
# with exit code 0]" / "[The command completed with exit code 1.]" (OpenHands),
# "<returncode>1</returncode>" (mini-swe-agent), '"exit_code": 1' (Codex metadata), "Process
# exited with code 1" (Codex exec_command), "exited with status 2", "exit status 1",
# "returncode=1", "command terminated with exit code 1". One pattern per leading literal, so
# each scan is a substring search.
_EXIT_CODE_PARTS = tuple(
    (literal, re.compile(literal + rest + r"""["'\s:=>]*(-?\d{1,3})(?!\d)"""))
    for literal, rest in (
        ("xit", r"(?:ed with)?[ _](?:code|status)"),
        ("XIT CODE", ""),
        ("eturn", r"[ _]?code"),
    )
)
_EXIT_WINDOW = 300


def shorten_command(command: str) -> str:
    """The ledger form of a shell command: its first non-blank line, at most 200 characters.

    The same shortening is used when building the ledger and when rendering it, so the rendered
    command can be found verbatim in the output.
    """
    text = command.strip()
    first = text.split("\n", 1)[0].rstrip()
    return first[:COMMAND_CHARS].rstrip()


def truncate(text: str, limit: int) -> str:
    """``text`` stripped, cut to ``limit`` characters with an ellipsis when longer."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


# Shells that wrap a script in an argv: ["bash", "-lc", "pytest -q"] is the script.
_SHELL_WRAPPERS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})


def _command_of(arguments: dict[str, Any]) -> tuple[str, bool] | None:
    """``(command as the agent wrote it, is an apply_patch argv)`` of a shell call.

    A string ``command``/``cmd``/``script``; an argv ``[shell, "-c"/"-lc", script]`` is the
    script (Codex); ``["apply_patch", patch]`` is a patch; other argv lists are joined.
    """
    for key in ("command", "cmd", "script"):
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value, False
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if value[0] == "apply_patch":
                return "\n".join(value[1:]), True
            if len(value) >= 3 and value[0] in _SHELL_WRAPPERS and value[1].startswith("-"):
                return value[2], False
            return " ".join(value), False
    return None


def exit_code_of(text: str) -> int | None:
    """The exit code a shell result reports near its start or end (the last one wins).

    Formats: ``Exit code 1``, ``Exit code: 1``, ``[The command completed with exit code 1.]``,
    ``[Command finished with exit code 1]``, ``<returncode>1</returncode>``,
    ``"exit_code": 1``, ``Process exited with code 1``, ``exited with status 2``,
    ``exit status 1``, ``returncode=1``, ``return code: 1``, ``EXIT CODE 1``.
    """
    if len(text) > 2 * _EXIT_WINDOW:
        text = f"{text[:_EXIT_WINDOW]}\n{text[-_EXIT_WINDOW:]}"
    # Each alternative starts with its own literal, and matches of different alternatives
    # cannot overlap, so the last match overall is the latest of the per-literal last matches.
    # Literal-first patterns let the regex engine skip ahead by substring search, and a literal
    # that does not occur costs one substring test instead of a regex scan.
    found = None
    at = -1
    for literal, pattern in _EXIT_CODE_PARTS:
        if literal not in text:
            continue
        for match in pattern.finditer(text):
            if match.start() > at:
                at = match.start()
                found = int(match.group(1))
    return found


# Observations of agents that act through their text: the user message after a fenced command.
_OBSERVATION_STARTS = ("<returncode>", "OBSERVATION:")
_FENCE = re.compile(r"```(bash|sh|shell|console|zsh)?[ \t]*\n(.*?)```", re.S)


def _is_observation(text: str) -> bool:
    return text.lstrip().startswith(_OBSERVATION_STARTS)


def _text_actions(text: str) -> list[str]:
    """The fenced shell blocks of an assistant message's text (mini-swe-agent, SWE-agent text
    mode)."""
    return [m.group(2) for m in _FENCE.finditer(text) if m.group(2).strip()]
