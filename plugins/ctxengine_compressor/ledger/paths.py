"""Paths: from tool-call arguments, patch headers, shell commands (with what each command
does to them) and text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from ctxengine_compressor.ledger.model import Action

_PATH_ARGUMENT_KEYS = frozenset(
    {
        "file_path",
        "filepath",
        "file",
        "filename",
        "path",
        "paths",
        "files",
        "file_paths",
        "notebook_path",
        "target_file",
        "target_path",
        "relative_path",
        "old_path",
        "new_path",
        "directory",
        "dir",
        "dir_path",
        "cwd",
    }
)


# Absolute paths (two or more components), ~/paths, and relative paths with a directory and a
# file extension. The leading look-behind keeps URLs (``https://x/y``), sed expressions and
# Elixir ``Mod.fun/2`` references out.
_PATH = re.compile(
    r"(?<![\w.:/~@$%\\-])"
    r"(?:"
    r"~/(?:[\w.@+-]+/)*[\w.@+-]+"
    r"|/[\w.@+-]+(?:/[\w.@+-]+)+"
    r"|(?:\.{1,2}/)?(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])"
    r")"
)
_MAX_PATH_CHARS = 300
# Device and kernel files show up in commands (``2>/dev/null``) but are not files worked on.
_PSEUDO_FILES = ("/dev/", "/proc/", "/sys/")
# apply_patch (Codex) headers, and unified-diff headers.
_PATCH_HEADER = re.compile(
    r"^\*\*\* (Add|Update|Delete) File: (.+?)[ \t]*$|^\*\*\* Move to: (.+?)[ \t]*$"
    r"|^\+\+\+ (?:b/)?(\S+)",
    re.M,
)
_PATCH_ACTIONS: dict[str, Action] = {"Add": "created", "Update": "edited", "Delete": "deleted"}
# The verb of a simple shell command and what it does to the paths it names.
_VERB_ACTIONS: dict[str, Action] = {
    "rm": "deleted",
    "rmdir": "deleted",
    "unlink": "deleted",
    "touch": "created",
    "mkdir": "created",
    "cp": "created",
    "mv": "created",
    "tee": "created",
    "cat": "read",
    "head": "read",
    "tail": "read",
    "less": "read",
    "nl": "read",
    "ls": "listed",
    "find": "listed",
    "tree": "listed",
}
_SIMPLE_COMMANDS = re.compile(r"&&|\|\||[;|\n]")
_REDIRECT_TARGET = re.compile(r">>?\s*([^\s;&|<>]+)")


def _argument_paths(arguments: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for key, value in arguments.items():  # the call's own key order: deterministic
        if key not in _PATH_ARGUMENT_KEYS:
            continue
        for item in value if isinstance(value, list) else (value,):
            if (
                isinstance(item, str)
                and 0 < len(item) <= _MAX_PATH_CHARS
                and "\n" not in item
                and "://" not in item
                and item.strip() == item
            ):
                found.append(item)
    return found


def _text_paths(text: str) -> Iterable[str]:
    # Paths never contain whitespace here, so only whitespace-separated words holding a slash
    # are searched: far cheaper than running the pattern over all of the text.
    if "/" not in text:
        return
    for word in [w for w in text.split() if "/" in w]:
        for match in _PATH.finditer(word):
            path = match.group(0).rstrip(".")
            if len(path) <= _MAX_PATH_CHARS and not path.startswith(_PSEUDO_FILES):
                yield path


def _command_paths(command: str) -> Iterator[tuple[str, Action]]:
    """The paths a shell command names, each with what the command does to it."""
    if "/" not in command:
        return
    for part in _SIMPLE_COMMANDS.split(command):
        if "/" not in part:
            continue
        words = part.split()
        verb = words[0] if words else ""
        if verb == "git" and len(words) > 1 and words[1] == "rm":
            verb = "rm"
        action = _VERB_ACTIONS.get(verb, "mentioned")
        if verb in ("sed", "perl") and any(w.startswith(("-i", "-pi")) for w in words[1:]):
            action = "edited"
        targets = {m.group(1) for m in _REDIRECT_TARGET.finditer(part)} if ">" in part else ()
        for path in _text_paths(part):
            yield path, ("created" if path in targets else action)


def _patch_paths(patch: str) -> Iterator[tuple[str, Action]]:
    """The files an ``apply_patch`` patch (or a unified diff) adds, updates or deletes."""
    for match in _PATCH_HEADER.finditer(patch):
        verb, path, moved, diff_path = match.groups()
        if path:
            yield path, _PATCH_ACTIONS[verb]
        elif moved:
            yield moved, "created"
        elif diff_path and diff_path != "/dev/null":
            yield diff_path, "edited"


def _patch_argument(arguments: dict[str, Any]) -> str:
    if "input" not in arguments and "patch" not in arguments:
        return ""
    for key in ("input", "patch"):
        value = arguments.get(key)
        if isinstance(value, str) and "*** " in value:
            return value
    return ""
