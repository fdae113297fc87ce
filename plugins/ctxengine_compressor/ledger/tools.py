"""Tool calls as the ledger reads them: which kind of tool a call is (shell, content,
what it does to the paths it names) and its arguments decoded."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import attrs

from ctxengine import Format, Message
from ctxengine.messages import (
    tool_calls,
)
from ctxengine_compressor.ledger.model import Action

_SHELL_TOOL_NAMES = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "zsh",
        "terminal",
        "cmd",
        "powershell",
        "exec",
        "exec_command",
        "execute_bash",
        "execute_command",
        "execute_shell",
        "run",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "run_in_terminal",
        "local_shell",
    }
)


# Tools whose results are file contents or search hits: an "error" in them is usually code
# (``{:error, reason}``), so only a result that itself reports a failure is searched.
_CONTENT_TOOL_MARKERS = (
    "read",
    "view",
    "grep",
    "glob",
    "search",
    "fetch",
    "find",
    "list",
    "ls",
    # Edit/write tools answer with a snippet of the edited file.
    "edit",
    "write",
    "str_replace",
    "create",
)
# What a tool does to the paths in its arguments, by markers in its (lower-cased) name, first
# match wins. Editor tools (``str_replace_editor``) say it in their ``command`` argument.
_TOOL_ACTIONS: tuple[tuple[str, Action], ...] = (
    ("delete", "deleted"),
    ("remove", "deleted"),
    ("write", "created"),
    ("create", "created"),
    ("edit", "edited"),
    ("replace", "edited"),
    ("insert", "edited"),
    ("patch", "edited"),
    ("read", "read"),
    ("view", "read"),
    ("open", "read"),
    ("cat", "read"),
    ("glob", "listed"),
    ("grep", "listed"),
    ("find", "listed"),
    ("search", "listed"),
    ("list", "listed"),
    ("ls", "listed"),
)
_EDITOR_VERBS: dict[str, Action] = {"view": "read", "create": "created"}


@functools.lru_cache(maxsize=256)
def _is_shell_tool(name: str) -> bool:
    low = name.lower()
    return low in _SHELL_TOOL_NAMES or "bash" in low or "shell" in low or "terminal" in low


_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@functools.lru_cache(maxsize=256)
def _name_words(name: str) -> frozenset[str]:
    """The words of a tool name, lower-cased: ``WebFetch`` -> web, fetch; ``get_user_details``
    -> get, user, details (so ``details`` does not read as ``ls``)."""
    return frozenset(word.lower() for word in _NAME_WORD.findall(name))


@functools.lru_cache(maxsize=256)
def _is_content_tool(name: str) -> bool:
    words = _name_words(name)
    return not _is_shell_tool(name) and (
        any(m in words for m in _CONTENT_TOOL_MARKERS) or "str_replace" in name.lower()
    )


@functools.lru_cache(maxsize=256)
def _name_action(name: str) -> Action:
    words = _name_words(name)
    return next((action for marker, action in _TOOL_ACTIONS if marker in words), "mentioned")


def _tool_action(name: str, arguments: dict[str, Any]) -> Action:
    """What the call ``name(arguments)`` does to the paths among its arguments."""
    verb = arguments.get("command")
    if isinstance(verb, str) and "edit" in name.lower() and verb and " " not in verb:
        # An editor tool's verb, not a shell command (which has no place in an editor call).
        # str_replace_editor / str_replace_based_edit_tool: view, create, str_replace, insert...
        return _EDITOR_VERBS.get(verb, "edited")
    return _name_action(name)


# ``json.loads(text)`` for a str is exactly this call, minus two wrapper layers.
_decode_json = json.JSONDecoder().decode


def _loads(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict (``{}`` when empty, malformed or not an object)."""
    if not arguments:
        return {}
    try:
        value = _decode_json(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@attrs.frozen
class _Call:
    """A tool call as the ledger reads it: its id, its tool and its arguments decoded."""

    id: str
    name: str
    arguments: dict[str, Any]


def _calls(msg: Message, fmt: Format) -> list[_Call]:
    return [_Call(c.id, c.name, _loads(c.arguments)) for c in tool_calls(msg, fmt)]
