"""The critical-context ledger: what a summary of a stretch of conversation must not lose.

:func:`build_ledger` reads a message list (OpenAI chat or Anthropic Messages format, from any of
the common agent styles) in one pass and collects, in order of first appearance and without
duplicates:

- **paths** touched, each with what was done to it (``read``, ``edited``, ``created``,
  ``deleted``, ``listed`` or ``mentioned``, the strongest seen): tool-call arguments
  (``file_path``, ``path``, ``paths``, ...), ``apply_patch`` headers, path-looking tokens in shell
  commands (the verb of each simple command says what happens to them: ``rm`` deletes, ``sed -i``
  edits, a redirect creates) and in user/assistant text;
- **commands**: shell commands run (the ``command``/``cmd`` argument of shell tools, an argv
  ``["bash", "-lc", script]`` as its script, the fenced ``bash`` block of agents that act through
  their text, such as mini-swe-agent), shortened by :func:`shorten_command`, each with the exit
  codes its runs reported, in every common format (see :func:`exit_code_of`);
- **errors**: distinctive error lines of tool results and user text (tracebacks, ``error:``,
  ``FAILED``, ``fatal:``, ``panic:``, ``No such file``, ``command not found``, make's
  ``Error 2`` ...), each with the command or tool that produced it and whether a later run of the
  same command or call succeeded (``resolved``);
- **asks**: the text of each real user message, truncated (observations of text-acting agents,
  ``<returncode>…`` or ``OBSERVATION:`` user messages, are tool output, not asks);
- **identifiers**: id-like tokens (``ZFA04Y``, ``mia_li_3668``, ``#123``, ``a1b2c3d``, ports)
  that a user message or a tool result gave and a later assistant call or text used, with the
  argument they were passed as;
- **tools**: each tool's name with how often it was called.

Every item is passed through :func:`ctxengine.messages.redact` on entry, so whatever renders the
ledger (the local digest, the critical-context addendum of an LLM summary) carries no secrets and
shows the items byte-for-byte as stored here: checking ``item in summary`` is meaningful.

When a summary cannot hold everything, :func:`fit_ledger` decides what goes, least needed first
(listed-only paths, old successful commands, resolved errors, read-only paths) and never an
unresolved error, an edited file, a user ask or an identifier while anything else can go; what it
drops is counted in the rendered text, never silent. :func:`render_ledger` renders a ledger that
way; :func:`parse_ledger` reads one back from a summary, and :func:`merge_ledgers` combines an
earlier summary's ledger with the next span's, so items survive successive compactions.
:func:`missing_from` tells which items a summary left out.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Literal

import attrs

from ctxengine import Format, Message
from ctxengine.messages import (
    is_real_user_message,
    redact,
    tool_calls,
    tool_results,
    visible_text,
)

__all__ = [
    "ACTIONS",
    "ASK_CHARS",
    "COMMAND_CHARS",
    "ERROR_CHARS",
    "FittedLedger",
    "Ledger",
    "ParsedSummary",
    "Unit",
    "bounded_bullets",
    "build_ledger",
    "code_span",
    "command_bullet",
    "exit_code_of",
    "fit_ledger",
    "fit_units",
    "ledger_units",
    "merge_ledgers",
    "missing_from",
    "parse_ledger",
    "present_in",
    "readable_text",
    "render_ledger",
    "shorten_command",
    "units_ledger",
]

COMMAND_CHARS = 200
"""Commands are kept as their first line, cut to this many characters."""
ASK_CHARS = 400
"""User asks are cut to this many characters."""
ERROR_CHARS = 240
"""Error lines are cut to this many characters."""

Action = Literal["read", "edited", "created", "deleted", "listed", "mentioned"]
ACTIONS: tuple[Action, ...] = ("deleted", "created", "edited", "read", "listed", "mentioned")
"""What can be done to a path, strongest first (a path keeps the strongest action seen)."""
_STRENGTH: dict[str, int] = {action: len(ACTIONS) - i for i, action in enumerate(ACTIONS)}
_CHANGED: frozenset[str] = frozenset({"deleted", "created", "edited"})

_CHARS_PER_TOKEN = 4
# Tool results are only searched for errors near their start and end: that is where shells,
# compilers and test runners put them, and it keeps the pass cheap on 78k-character outputs.
_RESULT_HEAD = 1000
_RESULT_TAIL = 1500
_ERRORS_PER_RESULT = 6
_LONG_ITEM = 160
_BARE_ERROR_LINE = 20
_EXIT_HISTORY = 4
# Identifier uses: argument values longer than this are file contents or patches.
_LONG_ARGUMENT = 300
# An id counts when a user message before its first use, or one of this many tool results
# before it, gave it: tools' ids are passed on soon, a user's may be used much later.
_ID_LOOKBACK = 12


@attrs.frozen
class Ledger:
    """Items a summary must carry, each tuple in order of first appearance, de-duplicated.

    ``exit_codes[i]`` is the last exit code seen for ``commands[i]`` (``None`` when no result
    showed one); ``exit_history[i]`` every code its runs reported, repeats collapsed (at most the
    last four). ``actions[i]`` is what was done to ``paths[i]``. ``error_sources[i]`` is the
    command (or tool) whose output held ``errors[i]``; ``resolved[i]`` says a later run of it
    succeeded. ``identifier_keys[i]`` is the argument ``identifiers[i]`` was passed as (``""``
    when only the assistant's text used it). ``tools`` holds ``(tool name, number of calls)`` in
    order of first use. The parallel tuples other than ``exit_codes`` may be left empty, meaning
    "mentioned", ``(code,)``, ``""``, ``False`` and ``""`` for every item.
    """

    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()
    exit_codes: tuple[int | None, ...] = attrs.field(default=())
    tools: tuple[tuple[str, int], ...] = ()
    actions: tuple[str, ...] = ()
    exit_history: tuple[tuple[int, ...], ...] = ()
    error_sources: tuple[str, ...] = ()
    resolved: tuple[bool, ...] = ()
    identifiers: tuple[str, ...] = ()
    identifier_keys: tuple[str, ...] = ()

    @exit_codes.validator
    def _check_exit_codes(self, _: attrs.Attribute[Any], value: tuple[int | None, ...]) -> None:
        if len(value) != len(self.commands):
            raise ValueError(
                f"Ledger.exit_codes has {len(value)} entries but there are "
                f"{len(self.commands)} commands; give one exit code (or None) per command"
            )

    def __attrs_post_init__(self) -> None:
        for name, of in (
            ("actions", "paths"),
            ("exit_history", "commands"),
            ("error_sources", "errors"),
            ("resolved", "errors"),
            ("identifier_keys", "identifiers"),
        ):
            size, expected = len(getattr(self, name)), len(getattr(self, of))
            if size not in (0, expected):
                raise ValueError(
                    f"Ledger.{name} has {size} entries but there are {expected} {of}; give one "
                    f"per item or none"
                )
        for action in self.actions:
            if action not in _STRENGTH:
                raise ValueError(f"Ledger.actions holds {action!r}; allowed: {', '.join(ACTIONS)}")

    def __bool__(self) -> bool:
        return bool(
            self.paths
            or self.commands
            or self.errors
            or self.asks
            or self.tools
            or self.identifiers
        )

    def exit_code(self, command: str) -> int | None:
        """The exit code recorded for ``command`` (``None`` if unknown or not in the ledger)."""
        try:
            return self.exit_codes[self.commands.index(command)]
        except ValueError:
            return None

    def action(self, i: int) -> str:
        """What was done to ``paths[i]``."""
        return self.actions[i] if self.actions else "mentioned"

    def history(self, i: int) -> tuple[int, ...]:
        """The exit codes ``commands[i]`` reported, oldest first (empty when none showed)."""
        if self.exit_history:
            return self.exit_history[i]
        code = self.exit_codes[i]
        return () if code is None else (code,)

    def source(self, i: int) -> str:
        """The command or tool whose output held ``errors[i]`` (``""`` when unknown)."""
        return self.error_sources[i] if self.error_sources else ""

    def is_resolved(self, i: int) -> bool:
        """Whether a later run of the source of ``errors[i]`` succeeded."""
        return self.resolved[i] if self.resolved else False

    def identifier_key(self, i: int) -> str:
        """The argument ``identifiers[i]`` was passed as (``""``: used in text)."""
        return self.identifier_keys[i] if self.identifier_keys else ""

    def subset(
        self,
        *,
        paths: Iterable[int] | None = None,
        commands: Iterable[int] | None = None,
        errors: Iterable[int] | None = None,
        asks: Iterable[int] | None = None,
        identifiers: Iterable[int] | None = None,
        tools: bool = True,
    ) -> Ledger:
        """The ledger restricted to the given item indices (``None`` keeps a kind whole)."""

        def pick(values: tuple[Any, ...], keep: list[int] | None) -> tuple[Any, ...]:
            if keep is None or not values:
                return values
            return tuple(values[i] for i in keep)

        p = None if paths is None else sorted(set(paths))
        c = None if commands is None else sorted(set(commands))
        e = None if errors is None else sorted(set(errors))
        a = None if asks is None else sorted(set(asks))
        d = None if identifiers is None else sorted(set(identifiers))
        return Ledger(
            paths=pick(self.paths, p),
            commands=pick(self.commands, c),
            errors=pick(self.errors, e),
            asks=pick(self.asks, a),
            exit_codes=pick(self.exit_codes, c),
            tools=self.tools if tools else (),
            actions=pick(self.actions, p),
            exit_history=pick(self.exit_history, c),
            error_sources=pick(self.error_sources, e),
            resolved=pick(self.resolved, e),
            identifiers=pick(self.identifiers, d),
            identifier_keys=pick(self.identifier_keys, d),
        )


# --- extraction helpers --------------------------------------------------------------------------

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
# Arguments that hold paths (ledger items of their own) or a prose note, not ids to carry.
_NO_ID_KEYS = _PATH_ARGUMENT_KEYS | {"description"}
_FAILURE_STARTS = ("<tool_use_error>", "Error", "ERROR", "error", "fatal", "Failed", "failed")
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

# Every error word contains one of these. They are found with ``str.find`` (a fast substring
# search), and only the word around each hit is judged, in :func:`_is_error_word`: running a
# many-branched regex over every character of large outputs costs far more.
_ERROR_NEEDLES = (
    "rror",
    "RROR",
    "xception",
    "raceback",
    "ailed",
    "AILED",
    "ailure",
    "atal",
    "ATAL",
    "anic",
    "ANIC",
    "egmentation",
)
# Phrases that mark an error wherever they stand.
_ERROR_PHRASES = (
    "No such file",
    "command not found",
    "No module named",
    "Permission denied",
    "CMake Error",
)
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
# "3 failures", "1 error", "2 tests failed": a non-zero count right before the word.
_NONZERO_COUNT = re.compile(r"(?:^|[^\d:.])[1-9]\d* (?:tests? )?$")
_ALWAYS_ERROR_WORDS = frozenset(
    {"failed", "Failed", "FAILED", "FAILURE", "FATAL", "PANIC", "panicked", "Traceback"}
)


def _is_error_word(text: str, start: int, end: int) -> bool:
    """Whether the word ``text[start:end]`` marks an error report, judged with its neighbours.

    Error reports: ``error:``/``Error:``/``error[E0308]:``, ``[error]``, class names such as
    ``ValueError`` or ``ExUnit.AssertionError``, ``failed``/``FAILED``, ``fatal:``, ``panic:``,
    ``Traceback``, ``Segmentation fault``, ``<tool_use_error>``, and non-zero counts
    (``3 failures``, ``Total errors: 2``). Not errors: code and prose that merely mention them
    (``{:error, reason}``, ``error ->``, ``body["error"]``, "error handling", ``0 failures``).
    """
    word = text[start:end].rstrip(".")
    end = start + len(word)
    low = word.lower()
    after = text[end : end + 3]
    before = text[start - 1] if start > 0 else ""
    if word in _ALWAYS_ERROR_WORDS:
        return True
    if low in ("error", "errors"):
        if word == "Error" and after[1:2].isdigit() and "*** " in text[max(0, start - 120) : start]:
            return True  # make: *** [Makefile:12: build] Error 2
        if after.startswith(":") and not after.startswith("::"):
            return not after[1:].lstrip().startswith("0")
        if after.startswith("[") and "]:" in text[end : end + 24]:
            return True
        if before == "[" and after.startswith("]"):
            return True
        if before == "<" and after.startswith(">"):
            return True
        return _NONZERO_COUNT.search(text, max(0, start - 24), start) is not None
    if low in ("failure", "failures"):
        return _NONZERO_COUNT.search(text, max(0, start - 24), start) is not None
    if low in ("fatal", "panic"):
        return after.startswith(":") and not after.startswith("::")
    if low == "segmentation":
        return text[end : end + 6].lower() == " fault"
    if low == "tool_use_error":
        return before == "<"
    if word[:1].isupper() and len(word) > len("Error"):
        tail = word.rsplit(".", 1)[-1]
        return tail.endswith(("Error", "Exception")) and tail[:1].isupper()
    return word == "Exception" and after.startswith(":")


# Every needle and phrase above, lower-cased, contains one of these.
_LOWER_NEEDLES = tuple(
    dict.fromkeys(
        [needle.lower() for needle in _ERROR_NEEDLES]
        + [phrase.lower() for phrase in _ERROR_PHRASES]
    )
)


def _error_hits(text: str) -> list[tuple[int, bool]]:
    """Positions of error needles in ``text``, sorted; ``True`` marks a whole error phrase."""
    if text.isascii():
        # Most texts hold no needle: one lower-cased copy answers that with half the searches.
        # (ASCII only: lower-casing keeps every character in its place there.)
        low = text.lower()
        if not any(needle in low for needle in _LOWER_NEEDLES):
            return []
    hits: list[tuple[int, bool]] = []
    for needles, phrase in ((_ERROR_NEEDLES, False), (_ERROR_PHRASES, True)):
        for needle in needles:
            i = text.find(needle)
            while i >= 0:
                hits.append((i, phrase))
                i = text.find(needle, i + len(needle))
    hits.sort()
    return hits


# Source listings (``  12→code`` from Read, ``  12\tcode`` from cat -n): code, not errors.
_NUMBERED_LINE = re.compile(r"\s*\d+(?:→|\t)")


def shorten_command(command: str) -> str:
    """The ledger form of a shell command: its first non-blank line, at most 200 characters.

    The same shortening is used when building the ledger and when rendering it, so the rendered
    command can be found verbatim in the output.
    """
    text = command.strip()
    first = text.split("\n", 1)[0].rstrip()
    return first[:COMMAND_CHARS].rstrip()


def _truncate(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


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


def _patch_argument(arguments: dict[str, Any]) -> str:
    if "input" not in arguments and "patch" not in arguments:
        return ""
    for key in ("input", "patch"):
        value = arguments.get(key)
        if isinstance(value, str) and "*** " in value:
            return value
    return ""


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


def _unwrap_output(text: str) -> str:
    """A Codex-style JSON result (``{"output": "...", "metadata": {"exit_code": 1}}``) as its
    output text and exit code line; any other text unchanged. Decoded, its lines are lines."""
    if not text.startswith('{"output"') and not (text.startswith("{") and '"output"' in text[:40]):
        return text
    try:
        value = _decode_json(text)
    except ValueError:
        return text
    if not isinstance(value, dict) or not isinstance(value.get("output"), str):
        return text
    metadata = value.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, dict) else None
    suffix = f"\nExit code {code}" if isinstance(code, int) else ""
    return f"{value['output']}{suffix}"


def _error_lines(text: str, limit: int, *, last: bool = False) -> list[str]:
    """Up to ``limit`` distinct error lines of ``text``: the first ones, or the last ones."""
    found: list[str] = []
    line_end = -1  # end of the last line taken or rejected as a whole
    n = len(text)
    for hit, phrase in _error_hits(text):
        if hit < line_end:
            continue
        start = hit
        while start > 0 and text[start - 1] in _WORD_CHARS:
            start -= 1
        end = hit
        while end < n and text[end] in _WORD_CHARS:
            end += 1
        if not phrase and not _is_error_word(text, start, end):
            continue
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        if line_end < 0:
            line_end = n
        line = text[line_start:line_end]
        if _NUMBERED_LINE.match(line) or line.lstrip().startswith("raise "):
            continue  # a source listing, or the code line a traceback quotes
        if len(line.strip()) < _BARE_ERROR_LINE and line.rstrip().endswith(":"):
            # A bare "ERROR:" heading: the message is on the next line.
            nxt = text.find("\n", line_end + 1)
            nxt = n if nxt < 0 else nxt
            line = f"{line} {text[line_end + 1 : nxt]}"
            line_end = nxt
        line = _truncate(_DECORATION.sub("", " ".join(line.split())), ERROR_CHARS)
        if not line or line in found:
            continue
        found.append(line)
        if len(found) > limit:
            if not last:
                return found[:limit]
            del found[0]
    return found


# Rules framing a line (pytest's "==== 1 failed in 0.2s ===="): not part of the message.
_DECORATION = re.compile(r"^[=\-_*#~]{4,} *| *[=\-_*#~]{4,}$")
_TRACEBACK_HEADER = "Traceback (most recent call last):"


def _result_errors(text: str, tool_name: str, is_error: bool) -> list[str]:
    lines = _result_error_lines(text, tool_name, is_error)
    if len(lines) > 1 and _TRACEBACK_HEADER in lines:
        # The exception line says what went wrong; the header only that something did.
        lines.remove(_TRACEBACK_HEADER)
    return lines


def _result_error_lines(text: str, tool_name: str, is_error: bool) -> list[str]:
    if not text:
        return []
    if _is_content_tool(tool_name):
        # File contents are not errors even when they raise ValueError; only a result that is
        # itself a failure report ("<tool_use_error>File does not exist.", "Error: ...") counts.
        first = text[:300]
        if not is_error and not first.lstrip().startswith(_FAILURE_STARTS):
            return []
        return _error_lines(first, 2)
    half = _ERRORS_PER_RESULT // 2
    if len(text) > _RESULT_HEAD + _RESULT_TAIL:
        lines = _error_lines(text[:_RESULT_HEAD], half)
        tail = _error_lines(text[-_RESULT_TAIL:], half, last=True)
        return lines + [line for line in tail if line not in lines]
    lines = _error_lines(text, 2 * _ERRORS_PER_RESULT)
    if len(lines) > _ERRORS_PER_RESULT:
        lines = lines[:half] + lines[-half:]
    return lines


# Observations of agents that act through their text: the user message after a fenced command.
_OBSERVATION_STARTS = ("<returncode>", "OBSERVATION:")
_FENCE = re.compile(r"```(bash|sh|shell|console|zsh)?[ \t]*\n(.*?)```", re.S)


def _is_observation(text: str) -> bool:
    return text.lstrip().startswith(_OBSERVATION_STARTS)


def _text_actions(text: str) -> list[str]:
    """The fenced shell blocks of an assistant message's text (mini-swe-agent, SWE-agent text
    mode)."""
    return [m.group(2) for m in _FENCE.finditer(text) if m.group(2).strip()]


# Identifiers: tokens of letters, digits, "_" and "-" (four or more, at least one digit), or "#"
# and a number. Sizes, durations and ranges name no thing.
_IDENTIFIER = re.compile(r"(?<![\w#-])#?[A-Za-z0-9][\w-]{2,62}[A-Za-z0-9](?![\w-])|#\d{2,}\b")
_NOT_AN_IDENTIFIER = re.compile(r"\d+(?:[a-z]{1,3}|%|-\d+)|\d+-[A-Za-z]+|.*(?:a-z|A-Z|0-9).*")


_DIGIT = re.compile(r"\d")


def _identifier_tokens(text: str) -> list[str]:
    if _DIGIT.search(text) is None:
        return []
    # findall gives the tokens without building match objects; a token of letters only (most
    # words) holds no digit, and isalpha says so without a regex call.
    return [
        token
        for token in _IDENTIFIER.findall(text)
        if not token.isalpha() and _DIGIT.search(token) and not _NOT_AN_IDENTIFIER.fullmatch(token)
    ]


def _identifier_uses(text: str, calls: Sequence[_Call]) -> list[tuple[str, str]]:
    """``(token, argument key or "")`` for every id-shaped token an assistant message uses: in
    its text, in a command's first line, or in a short argument value."""
    found = [(token, "") for token in _identifier_tokens(text)]
    for call in calls:
        shell = _is_shell_tool(call.name)
        for key, value in call.arguments.items():
            if key not in _NO_ID_KEYS:
                found.extend((token, key) for token in _argument_tokens(key, value, shell))
    return found


def _argument_tokens(key: str, value: object, shell: bool) -> list[str]:
    """The id-shaped tokens of one argument value: a shell command's first line, or the short
    strings (and numbers) it holds; longer values are file contents or patches."""
    if isinstance(value, str):
        if shell and key in ("command", "cmd", "script"):
            return _identifier_tokens(value.split("\n", 1)[0])
        return [] if len(value) > _LONG_ARGUMENT else _identifier_tokens(value)
    tokens: list[str] = []
    for item in _flat_strings(value):
        if len(item) <= _LONG_ARGUMENT:
            tokens.extend(_identifier_tokens(item))
    return tokens


def _flat_strings(value: object) -> Iterator[str]:
    """The strings (and numbers, as text) a JSON value holds, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)
    elif isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _flat_strings(item)


class _Collector:
    """Ordered, de-duplicated, redacted item lists built in one pass."""

    def __init__(self) -> None:
        self.paths: dict[str, Action] = {}
        self.commands: dict[str, list[int]] = {}
        self.errors: dict[str, str] = {}  # error line -> source
        self.resolved: set[str] = set()
        self.asks: dict[str, None] = {}
        self.tools: dict[str, int] = {}
        self.identifiers: dict[str, str] = {}
        self._raw_seen: dict[str, str] = {}

    def _clean(self, raw: str) -> str:
        # Redacting is the costly step: do it once per distinct raw item.
        clean = self._raw_seen.get(raw)
        if clean is None:
            clean = redact(raw)
            self._raw_seen[raw] = clean
        return clean

    def path(self, raw: str, action: Action = "mentioned") -> None:
        clean = self._clean(raw)
        old = self.paths.get(clean)
        if old is None or _STRENGTH[action] > _STRENGTH[old]:
            self.paths[clean] = action

    def command(self, raw: str) -> str | None:
        short = shorten_command(raw)
        if not short:
            return None
        clean = self._clean(short)
        self.commands.setdefault(clean, [])
        return clean

    def exit(self, command: str, code: int) -> None:
        history = self.commands[command]
        if not history or history[-1] != code:
            history.append(code)
            del history[:-_EXIT_HISTORY]

    def error(self, line: str, source: str) -> str:
        clean = self._clean(line)
        self.errors.setdefault(clean, source)
        return clean

    def ask(self, text: str) -> None:
        # One line, so it renders as one bullet.
        ask = _truncate(" ".join(text.split()), ASK_CHARS)
        if ask:
            self.asks.setdefault(self._clean(ask), None)

    def identifier(self, token: str, key: str) -> None:
        clean = self._clean(token)
        if clean == token:  # a token that held a secret is not an identifier to repeat
            self.identifiers.setdefault(clean, key)

    def ledger(self) -> Ledger:
        errors = tuple(self.errors)
        return Ledger(
            paths=tuple(self.paths),
            commands=tuple(self.commands),
            errors=errors,
            asks=tuple(self.asks),
            exit_codes=tuple(h[-1] if h else None for h in self.commands.values()),
            tools=tuple(self.tools.items()),
            actions=tuple(self.paths.values()),
            exit_history=tuple(tuple(h) for h in self.commands.values()),
            error_sources=tuple(self.errors.values()),
            resolved=tuple(e in self.resolved for e in errors),
            identifiers=tuple(self.identifiers),
            identifier_keys=tuple(self.identifiers.values()),
        )


# The call id an observation answers (a text action has no id of its own).
_TEXT_ACTION = "\0text-action"


def _check_format(fmt: object) -> None:
    if fmt not in ("openai", "anthropic"):
        raise ValueError(f"unknown message format {fmt!r}; allowed: 'openai' or 'anthropic'")


@attrs.frozen
class _Call:
    """A tool call as the ledger reads it: its id, its tool and its arguments decoded."""

    id: str
    name: str
    arguments: dict[str, Any]


def _calls(msg: Message, fmt: Format) -> list[_Call]:
    return [_Call(c.id, c.name, _loads(c.arguments)) for c in tool_calls(msg, fmt)]


# A call waiting for its result: its tool, its command (shell calls) and the key its errors
# are filed under (to mark them resolved when the same call later succeeds).
_Pending = tuple[str, "str | None", str]


class _Scan:
    """The state of :func:`build_ledger`'s one pass over a message list."""

    def __init__(self, messages: Sequence[Message], fmt: Format) -> None:
        self.messages = messages
        self.fmt = fmt
        self.out = _Collector()
        self.pending: dict[str, list[_Pending]] = {}  # call id -> calls waiting for a result
        # error lines per source, until a later success of that source resolves them
        self.open_errors: dict[str, list[str]] = {}
        self.text_actions: list[_Pending] = []
        self.given: list[tuple[int, str]] = []  # (message index, text) of tool results
        self.said: list[tuple[int, str]] = []  # (message index, text) of user messages
        self.uses: dict[str, tuple[int, str]] = {}  # id-shaped token -> (first use, key)

    def assistant(self, index: int, msg: Message) -> None:
        """An assistant turn: paths in its text, its text actions, its calls, the ids it uses."""
        out = self.out
        text = visible_text(msg)
        calls = _calls(msg, self.fmt)
        self.text_actions = []
        for path in _text_paths(text):
            out.path(path)
        if not calls and text and _next_is_observation(self.messages, index):
            for command in _text_actions(text):
                clean = out.command(command)
                for path, action in _command_paths(command):
                    out.path(path, action)
                if clean is not None:
                    self.text_actions.append(("bash", clean, clean))
        for call in calls:
            out.tools[call.name] = out.tools.get(call.name, 0) + 1
            clean, source = _call_facts(out, call.name, call.arguments)
            self.pending.setdefault(call.id, []).append((call.name, clean, source))
        for token, key in _identifier_uses(text, calls):
            self.uses.setdefault(token, (index, key))

    def other(self, index: int, msg: Message) -> None:
        """A user or tool turn: its tool results, then what a person wrote in it."""
        results = [(r.call_id, r.text, r.is_error) for r in tool_results(msg, self.fmt)]
        real_user = is_real_user_message(msg, self.fmt)
        text = visible_text(msg) if real_user else ""
        if real_user and self.text_actions and _is_observation(text):
            # The output of the text action before it, not something a person wrote.
            results = [(_TEXT_ACTION, text, False)]
            real_user = False
        for call_id, raw, is_error in results:
            self.result(index, self._answered(call_id), raw, is_error)
        if real_user:
            self.said.append((index, text))
            self.out.ask(text)
            for path in _text_paths(text):
                self.out.path(path)
            for line in _error_lines(text, _ERRORS_PER_RESULT):
                self.out.error(line, "user")

    def _answered(self, call_id: str) -> _Pending | None:
        """The call a result with ``call_id`` answers: the oldest one waiting with that id."""
        if call_id == _TEXT_ACTION and self.text_actions:
            call = self.text_actions.pop()
            self.text_actions = []
            return call
        queue = self.pending.get(call_id)
        return queue.pop(0) if queue else None

    def result(self, index: int, call: _Pending | None, raw: str, is_error: bool) -> None:
        """One tool result: its errors, the exit code of its command, errors it resolves."""
        text = _unwrap_output(raw) if raw.startswith("{") else raw
        self.given.append((index, text))
        name, ran, source = call if call is not None else ("", None, "")
        lines = _result_errors(text, name, is_error)
        code = None
        if ran is not None:
            code = exit_code_of(text)
            if code is not None:
                self.out.exit(ran, code)
        for line in lines:
            clean = self.out.error(line, source)
            self.open_errors.setdefault(source, []).append(clean)
        if not lines and code in (None, 0) and not is_error and source in self.open_errors:
            self.out.resolved.update(self.open_errors.pop(source))

    def identifiers(self) -> None:
        """The id-shaped tokens the assistant used that a user message before the use, or one
        of the last few tool results before it, gave."""
        if not self.uses or not (self.given or self.said):
            return
        tool_at = [i for i, _ in self.given]
        for token, (at, key) in self.uses.items():
            before = bisect.bisect_left(tool_at, at)
            recent = self.given[max(0, before - _ID_LOOKBACK) : before]
            if any(token in text for _, text in recent) or any(
                i < at and token in text for i, text in self.said
            ):
                self.out.identifier(token, key)


def build_ledger(messages: Sequence[Message], fmt: Format) -> Ledger:
    """Collect the critical context of ``messages`` (see the module docstring).

    Deterministic, one pass over the list (plus a check of the few id-shaped tokens the
    assistant used against the text before them); never mutates the list. Tool results are
    matched to their calls in order per call id, so a reused id still maps each result to the
    right command.

    :raises ValueError: when ``fmt`` is not ``"openai"`` or ``"anthropic"``.
    """
    _check_format(fmt)
    scan = _Scan(messages, fmt)
    for index, msg in enumerate(messages):
        if msg.get("role") == "assistant":
            scan.assistant(index, msg)
        else:
            scan.other(index, msg)
    scan.identifiers()
    return scan.out.ledger()


def _next_is_observation(messages: Sequence[Message], index: int) -> bool:
    if index + 1 >= len(messages):
        return False
    nxt = messages[index + 1]
    return nxt.get("role") == "user" and _is_observation(visible_text(nxt))


def _call_facts(out: _Collector, name: str, arguments: dict[str, Any]) -> tuple[str | None, str]:
    """Record the paths (with actions) and the command of one call; returns its command (or
    ``None``) and the key its errors are filed under: the command, else the tool and its
    first path, else the tool."""
    if not arguments:
        return None, name
    if _is_shell_tool(name):
        found = _command_of(arguments)
        if found is None:
            return None, name
        command, is_patch = found
        if is_patch:
            for path, action in _patch_paths(command):
                out.path(path, action)
            return None, name
        if str(arguments.get("is_input", "")).lower() == "true":
            return None, name  # keystrokes for a running process, not a command
        for path, action in _command_paths(command):
            out.path(path, action)
        if "*** Begin Patch" in command:
            for path, action in _patch_paths(command):
                out.path(path, action)
        clean = out.command(command)
        return clean, clean or name
    action = _tool_action(name, arguments)
    paths = _argument_paths(arguments)
    for path in paths:
        out.path(path, action)
    patch = _patch_argument(arguments)
    if patch:
        for path, patch_action in _patch_paths(patch):
            out.path(path, patch_action)
    return None, f"{name} {paths[0]}" if paths else name


# --- combining and checking ----------------------------------------------------------------------


def merge_ledgers(older: Ledger, newer: Ledger) -> Ledger:
    """One ledger holding ``older``'s items then ``newer``'s, each once.

    A path keeps the strongest action; a command's exit codes are concatenated (repeats
    collapsed, the last four kept); an error of ``older`` is resolved when ``newer`` says so or
    when its source command ran again in ``newer`` and exited 0 without that error; tool counts
    add up.
    """
    if not older:
        return newer
    if not newer:
        return older
    paths: dict[str, str] = {}
    for ledger in (older, newer):
        for i, path in enumerate(ledger.paths):
            action = ledger.action(i)
            old = paths.get(path)
            if old is None or _STRENGTH[action] > _STRENGTH[old]:
                paths[path] = action
    commands: dict[str, list[int]] = {}
    for ledger in (older, newer):
        for i, command in enumerate(ledger.commands):
            history = commands.setdefault(command, [])
            for code in ledger.history(i):
                if not history or history[-1] != code:
                    history.append(code)
            del history[:-_EXIT_HISTORY]
    passed = {c for i, c in enumerate(newer.commands) if newer.exit_codes[i] == 0}
    errors: dict[str, tuple[str, bool]] = {}
    for i, error in enumerate(older.errors):
        source = older.source(i)
        fixed = older.is_resolved(i) or (source in passed and error not in newer.errors)
        errors[error] = (source, fixed)
    for i, error in enumerate(newer.errors):
        source, fixed = errors.get(error, (newer.source(i), False))
        errors[error] = (source, newer.is_resolved(i) if error in newer.errors else fixed)
    identifiers: dict[str, str] = {}
    for ledger in (older, newer):
        for i, token in enumerate(ledger.identifiers):
            identifiers.setdefault(token, ledger.identifier_key(i))
    tools: dict[str, int] = {}
    for ledger in (older, newer):
        for name, count in ledger.tools:
            tools[name] = tools.get(name, 0) + count
    return Ledger(
        paths=tuple(paths),
        commands=tuple(commands),
        errors=tuple(errors),
        asks=tuple(dict.fromkeys(older.asks + newer.asks)),
        exit_codes=tuple(h[-1] if h else None for h in commands.values()),
        tools=tuple(tools.items()),
        actions=tuple(paths.values()),
        exit_history=tuple(tuple(h) for h in commands.values()),
        error_sources=tuple(s for s, _ in errors.values()),
        resolved=tuple(r for _, r in errors.values()),
        identifiers=tuple(identifiers),
        identifier_keys=tuple(identifiers.values()),
    )


_PATH_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./~@+-")
_PATH_AFTER = _PATH_BEFORE - {"."}
_TOKEN_EDGE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-#")


def _has_token(text: str, token: str, before: frozenset[str], after: frozenset[str]) -> bool:
    """Whether ``token`` occurs in ``text`` not glued to a longer word on either side."""
    start = text.find(token)
    while start >= 0:
        end = start + len(token)
        if (start == 0 or text[start - 1] not in before) and (
            end == len(text) or text[end] not in after
        ):
            return True
        start = text.find(token, start + 1)
    return False


def _states_exit(text: str, command: str, code: int) -> bool:
    """Whether one line of ``text`` holds ``command`` and ``exit … code``."""
    pattern = re.compile(rf"exit[^\n]{{0,40}}?(?<![\d-]){code}(?!\d)")
    start = text.find(command)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        if pattern.search(text, line_start, len(text) if line_end < 0 else line_end):
            return True
        start = text.find(command, start + 1)
    return False


def _present(ledger: Ledger, text: str) -> dict[str, list[bool]]:
    """Per kind, whether each item of ``ledger`` occurs in ``text`` (see :func:`missing_from`)."""
    commands = []
    for i, command in enumerate(ledger.commands):
        failed = [c for c in dict.fromkeys(ledger.history(i)) if c != 0]
        commands.append(command in text and all(_states_exit(text, command, c) for c in failed))
    return {
        "paths": [_has_token(text, p, _PATH_BEFORE, _PATH_AFTER) for p in ledger.paths],
        "commands": commands,
        "errors": [e in text for e in ledger.errors],
        "asks": [a in text for a in ledger.asks],
        "identifiers": [_has_token(text, t, _TOKEN_EDGE, _TOKEN_EDGE) for t in ledger.identifiers],
    }


def _select(ledger: Ledger, found: dict[str, list[bool]], want: bool) -> Ledger:
    def keep(kind: str) -> list[int]:
        return [i for i, hit in enumerate(found[kind]) if hit is want]

    return ledger.subset(
        paths=keep("paths"),
        commands=keep("commands"),
        errors=keep("errors"),
        asks=keep("asks"),
        identifiers=keep("identifiers"),
    )


def readable_text(messages: Sequence[Message], fmt: Format) -> str:
    """What a model reads of ``messages``, as one string: visible text (system prompts and
    observations included), each tool call's name and argument values decoded (not
    JSON-escaped), and tool results. For checking which ledger items the messages show."""
    _check_format(fmt)
    pieces: list[str] = []
    for msg in messages:
        pieces.append(visible_text(msg))
        for call in _calls(msg, fmt):
            pieces.append(call.name)
            pieces.extend(_flat_strings(call.arguments))
        pieces.extend(result.text for result in tool_results(msg, fmt))
    return "\n".join(piece for piece in pieces if piece)


def missing_from(ledger: Ledger, text: str) -> Ledger:
    """The part of ``ledger`` whose items ``text`` does not hold.

    Paths and identifiers must occur as whole tokens (``lib/a.ex`` is not found inside
    ``/repo/lib/a.ex``); commands verbatim, and a command that failed also needs its exit code on
    the same line (``exit 1``); errors and asks verbatim. Tools are kept when their name does not
    occur.
    """
    missing = _select(ledger, _present(ledger, text), False)
    return attrs.evolve(
        missing, tools=tuple((name, n) for name, n in ledger.tools if name not in text)
    )


def present_in(ledger: Ledger, text: str) -> Ledger:
    """The part of ``ledger`` whose items ``text`` holds (the complement of
    :func:`missing_from`, tools included whole)."""
    return _select(ledger, _present(ledger, text), True)


# --- fitting a ledger into a budget --------------------------------------------------------------

# Drop order when a ledger does not fit, lowest first: what the agent is least likely to need.
_RANK_LISTED = 0  # paths only listed or mentioned
_RANK_RESOLVED = 1  # errors a later run fixed
_RANK_PASSED = 2  # commands that never failed (old ones go with old reads, oldest first)
_RANK_READ = 2  # paths only read
_RANK_RECOVERED = 4  # commands that failed, then passed
_RANK_CARRIED = 5  # lines of an earlier summary that are not ledger items
_RANK_PROTECTED = 9  # unresolved errors, failing commands, changed files, asks, identifiers


@attrs.frozen
class Unit:
    """One renderable item of a fitted ledger.

    ``group`` is the header line the item is listed under (``""``: a bullet of its own);
    ``inline`` groups list their items on the header's line, separated by commas. ``rank`` and
    ``age`` decide the drop order (lowest rank first, oldest first; ``age`` is the position in
    its list scaled to 0..1, so kinds of one rank interleave by recency); ``noun`` names the item in
    the omission note; ``kind``/``index`` point back into the ledger. A unit is not shown while
    one of the units ``covered_by`` (positions in the same list) is kept: their text already
    holds it.
    """

    section: str
    text: str
    rank: int
    age: float
    noun: str
    group: str = ""
    inline: bool = False
    kind: str = ""
    index: int = -1
    covered_by: tuple[int, ...] = ()

    def covered(self, by: tuple[int, ...]) -> Unit:
        """This unit with ``covered_by`` set to ``by``."""
        return attrs.evolve(self, covered_by=by)

    @property
    def size(self) -> int:
        if self.group and self.inline:
            return len(self.text) + 2
        if self.group:
            return len(self.text) + 5
        return len(self.text) + 1


@attrs.frozen
class FittedLedger:
    """What :func:`fit_ledger` kept: rendered lines per section (omission notes included),
    the ledger of the kept items, and how many items it dropped."""

    lines: dict[str, list[str]]
    kept: Ledger
    omitted: int


def command_bullet(command: str, exit_code: int | None, history: Sequence[int] = ()) -> str:
    """``- `cmd` -> exit N`` (every code its runs reported, ``exit 1, 0``; nothing when none)."""
    codes = list(history) if history else ([] if exit_code is None else [exit_code])
    suffix = f" -> exit {', '.join(str(c) for c in codes)}" if codes else ""
    return f"- {code_span(command)}{suffix}"


def _source_header(source: str) -> str:
    if source == "user":
        return "- the user reported:"
    if not source:
        return "- other errors:"
    return f"- after {code_span(source)}:"


def ledger_units(ledger: Ledger, *, first_ask: str = "- ", later_ask: str = "- ") -> list[Unit]:
    """The ledger as units, in the sections they render in (see :class:`Unit`)."""
    units = [
        *_ask_units(ledger, first_ask, later_ask),
        *_path_units(ledger),
        *_command_units(ledger),
    ]
    failing = {ledger.commands[u.index]: u.text for u in units if u.section == "blocked"}
    units += _error_units(ledger, failing)
    units += _identifier_units(ledger)
    return _with_cover(units)


def _ask_units(ledger: Ledger, first_ask: str, later_ask: str) -> list[Unit]:
    units = []
    for i, ask in enumerate(ledger.asks):
        prefix = first_ask if i == 0 else later_ask
        # The first ask states the task: it is the last ask to go.
        age = 2.0 if i == 0 else i / len(ledger.asks)
        units.append(
            Unit("asks", f"{prefix}{ask}", _RANK_PROTECTED, age, "user asks", kind="asks", index=i)
        )
    return units


_PATH_NOUNS = {"read": "read-only paths", "listed": "listed paths", "mentioned": "mentioned paths"}


def _path_units(ledger: Ledger) -> list[Unit]:
    units = []
    for i, path in enumerate(ledger.paths):
        action = ledger.action(i)
        rank = _RANK_READ if action == "read" else _RANK_LISTED
        if action in _CHANGED:
            rank = _RANK_PROTECTED
        noun = _PATH_NOUNS.get(action, "changed paths")
        age = i / len(ledger.paths)
        units.append(
            Unit("files", code_span(path), rank, age, noun, f"- {action}: ", True, "paths", i)
        )
    return units


def _command_units(ledger: Ledger) -> list[Unit]:
    units = []
    for i, command in enumerate(ledger.commands):
        history = ledger.history(i)
        line = command_bullet(command, ledger.exit_codes[i], history)
        if history and history[-1] != 0:
            section, rank, noun = "blocked", _RANK_PROTECTED, "failing commands"
        elif any(code != 0 for code in history):
            section, rank, noun = "done", _RANK_RECOVERED, "commands that failed, then passed"
        else:
            section, rank, noun = "done", _RANK_PASSED, "older successful commands"
        age = i / len(ledger.commands)
        units.append(Unit(section, line, rank, age, noun, kind="commands", index=i))
    return units


def _error_units(ledger: Ledger, failing: dict[str, str]) -> list[Unit]:
    """The errors; one of a command that still fails (``failing``: command -> its bullet) is
    listed under that command in Blocked."""
    units = []
    for i, error in enumerate(ledger.errors):
        resolved = ledger.is_resolved(i)
        source = ledger.source(i)
        bullet = failing.get(source) if source and not resolved else None
        units.append(
            Unit(
                "blocked" if bullet else "errors",
                f"{error} (resolved)" if resolved else error,
                _RANK_RESOLVED if resolved else _RANK_PROTECTED,
                i / len(ledger.errors),
                "resolved errors" if resolved else "errors",
                bullet or _source_header(source),
                False,
                "errors",
                i,
            )
        )
    return units


def _identifier_units(ledger: Ledger) -> list[Unit]:
    units = []
    for i, token in enumerate(ledger.identifiers):
        key = ledger.identifier_key(i)
        header = f"- ids passed as {key}: " if key else "- ids in text: "
        age = i / len(ledger.identifiers)
        units.append(
            Unit("ids", token, _RANK_PROTECTED, age, "identifiers", header, True, "identifiers", i)
        )
    return units


def _with_cover(units: list[Unit]) -> list[Unit]:
    """Mark unchanged paths and identifiers that a command, an ask or an error line quotes:
    while that unit is kept, they need no line of their own."""
    quoting = [i for i, u in enumerate(units) if u.kind in ("commands", "asks", "errors")]
    if not quoting:
        return units
    # One string of all quoting texts: each token is a few substring searches, not one per unit.
    joined = "\n".join(units[i].text for i in quoting)
    starts: list[int] = []
    at = 0
    for i in quoting:
        starts.append(at)
        at += len(units[i].text) + 1
    out = []
    for unit in units:
        if unit.kind == "paths" and unit.rank != _RANK_PROTECTED:
            token, before, after = _unspan(unit.text), _PATH_BEFORE, _PATH_AFTER
        elif unit.kind == "identifiers":
            token, before, after = unit.text, _TOKEN_EDGE, _TOKEN_EDGE
        else:
            out.append(unit)
            continue
        cover: list[int] = []
        hit = joined.find(token)
        while hit >= 0:
            slot = bisect.bisect_right(starts, hit) - 1
            owner = quoting[slot]
            if owner not in cover and _has_token(units[owner].text, token, before, after):
                cover.append(owner)
            hit = joined.find(token, hit + 1)
        out.append(unit.covered(tuple(cover)) if cover else unit)
    return out


def _note(counts: dict[str, int]) -> str:
    parts = [f"{n} {noun}" for noun, n in counts.items() if n]
    return f"- … {', '.join(parts)} omitted for space (least needed first)"


def _render_units(units: Sequence[Unit], kept: Sequence[bool]) -> dict[str, list[str]]:
    """Lines per section, items in ledger order, omission notes last."""
    lines: dict[str, list[str]] = {}
    omitted: dict[str, dict[str, int]] = {}
    groups: dict[tuple[str, str], list[Unit]] = {}
    order: list[tuple[str, str]] = []
    for unit, keep in zip(units, kept, strict=True):
        if not keep:
            counts = omitted.setdefault(unit.section, {})
            counts[unit.noun] = counts.get(unit.noun, 0) + 1
            continue
        if any(kept[i] for i in unit.covered_by):
            continue
        key = (unit.section, unit.group if unit.group else f"\0{len(order)}")
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(unit)
    done: set[tuple[str, str]] = set()
    for key in order:
        if key in done:
            continue
        members = groups[key]
        section = key[0]
        first = members[0]
        out = lines.setdefault(section, [])
        if not first.group:
            for unit in members:
                out.append(unit.text)
                # A failing command's errors stand right under it.
                nested = (section, unit.text)
                if nested in groups:
                    out.extend(f"  - {u.text}" for u in groups[nested])
                    done.add(nested)
        elif first.inline:
            out.append(first.group + ", ".join(u.text for u in members))
        else:
            out.append(first.group)
            out.extend(f"  - {u.text}" for u in members)
    for section, counts in omitted.items():
        lines.setdefault(section, []).append(_note(counts))
    return lines


def _sections_size(lines: dict[str, list[str]]) -> int:
    return sum(len(line) + 1 for section in lines.values() for line in section)


def fit_units(units: Sequence[Unit], max_chars: int) -> tuple[dict[str, list[str]], list[bool]]:
    """Render ``units`` in at most ``max_chars`` (lines joined with newlines, all sections),
    dropping the lowest-ranked, oldest units first. Returns the lines per section and which
    units were kept. Deterministic."""
    kept = [True] * len(units)
    lines = _render_units(units, kept)
    if _sections_size(lines) <= max_chars:
        return lines, kept
    order = sorted(range(len(units)), key=lambda i: (units[i].rank, units[i].age, i))

    def render(dropped: int) -> tuple[dict[str, list[str]], list[bool]]:
        keep = [True] * len(units)
        for i in order[:dropped]:
            keep[i] = False
        return _render_units(units, keep), keep

    def size(dropped: int) -> int:
        return _sections_size(render(dropped)[0])

    # The fewest drops (in drop order) that fit. The size shrinks with each drop except where
    # a dropped command uncovers a path, so search, then step on past any such bump.
    low, high = 1, len(order)
    while low < high:
        mid = (low + high) // 2
        if size(mid) <= max_chars:
            high = mid
        else:
            low = mid + 1
    while size(low) > max_chars and low < len(order):
        low += 1
    lines, kept = render(low)
    if _sections_size(lines) > max_chars:
        # Not even the omission notes fit: say nothing rather than break the bound.
        lines = {}
    return lines, kept


def units_ledger(ledger: Ledger, units: Sequence[Unit], kept: Sequence[bool]) -> Ledger:
    """The part of ``ledger`` whose units (from :func:`ledger_units`) were ``kept``."""
    picked: dict[str, list[int]] = {
        "paths": [],
        "commands": [],
        "errors": [],
        "asks": [],
        "identifiers": [],
    }
    for unit, keep in zip(units, kept, strict=True):
        if keep and unit.kind in picked:
            picked[unit.kind].append(unit.index)
    return ledger.subset(
        paths=picked["paths"],
        commands=picked["commands"],
        errors=picked["errors"],
        asks=picked["asks"],
        identifiers=picked["identifiers"],
    )


def fit_ledger(ledger: Ledger, max_chars: int, **ask_prefixes: str) -> FittedLedger:
    """The ledger rendered into at most ``max_chars`` characters, least needed items dropped
    first (see the module docstring) and counted in an omission note per section."""
    units = ledger_units(ledger, **ask_prefixes)
    lines, kept = fit_units(units, max_chars)
    return FittedLedger(lines, units_ledger(ledger, units, kept), kept.count(False))


# --- rendering -----------------------------------------------------------------------------------


def code_span(text: str) -> str:
    """``text`` as a Markdown code span that shows it verbatim (longer fences around backticks)."""
    if "`" not in text:
        return f"`{text}`"
    longest = max(len(run) for run in re.findall(r"`+", text))
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def bounded_bullets(bullets: Sequence[str], max_chars: int, noun: str = "items") -> list[str]:
    """The lines of ``bullets`` that fit in ``max_chars`` (joined with newlines), in order.

    When not all fit, the least recent and the longest go first: short items are kept newest
    first, then long ones (over 160 characters) newest first, while they fit; a closing line
    ``- … N earlier <noun> omitted`` says how many were dropped (its size is budgeted too).
    Deterministic.
    """
    total = sum(len(b) + 1 for b in bullets)
    if total <= max_chars:
        return list(bullets)
    note_room = len(f"- … {len(bullets)} earlier {noun} omitted") + 1
    room = max_chars - note_room
    order = sorted(range(len(bullets)), key=lambda i: (len(bullets[i]) > _LONG_ITEM, -i))
    kept: set[int] = set()
    for i in order:
        size = len(bullets[i]) + 1
        if size <= room:
            kept.add(i)
            room -= size
    lines = [bullets[i] for i in sorted(kept)]
    omitted = len(bullets) - len(kept)
    if omitted and note_room <= max_chars:
        lines.append(f"- … {omitted} earlier {noun} omitted")
    return lines


_ADDENDUM_SECTIONS = (
    ("asks", "User asks"),
    ("files", "Files"),
    ("commands", "Commands"),
    ("errors", "Errors"),
    ("ids", "Identifiers"),
)


def render_ledger(ledger: Ledger, max_tokens: int, *, heading: str = "###") -> str:
    """Render ``ledger`` as Markdown under sub-headings, in at most ``max_tokens``.

    Sections (empty ones are left out): User asks, Files (grouped by what was done to them),
    Commands (with exit codes; failing ones last), Errors (grouped by the command that produced
    them), Identifiers (grouped by the argument they were passed as). Tokens are estimated as
    characters / 4. What does not fit is dropped least needed first and counted per section.
    Returns "" for an empty ledger.

    :raises ValueError: when ``max_tokens`` is not a positive integer.
    """
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    units = ledger_units(ledger)
    if not units:
        return ""
    sections = {u.section for u in units}
    titles = [
        t
        for key, t in _ADDENDUM_SECTIONS
        if key in sections or (key == "commands" and sections & {"done", "blocked"})
    ]
    fixed = sum(len(f"{heading} {t}") + 2 for t in titles)
    lines, _ = fit_units(units, max_tokens * _CHARS_PER_TOKEN - fixed)
    lines["commands"] = lines.pop("done", []) + lines.pop("blocked", [])
    out = [
        f"{heading} {title}\n" + "\n".join(lines[key])
        for key, title in _ADDENDUM_SECTIONS
        if lines.get(key)
    ]
    return "\n\n".join(out)


# --- reading a ledger back from a summary --------------------------------------------------------

_SPAN = re.compile(r"(`+) ?(.+?) ?\1(?!`)")
_ACTION_LINE = re.compile(r"^- (deleted|created|edited|read|listed|mentioned): (.*)$")
_COMMAND_LINE = re.compile(r"^- (`+ ?.+? ?`+)(?: -> exit (-?\d+(?:, -?\d+)*))?$")
_IDS_LINE = re.compile(r"^- ids (?:passed as ([\w.-]+)|in text): (.*)$")
_TOOLS_LINE = re.compile(r"^- Tools called: (.*)$")
_NOTE_LINE = re.compile(r"^- … (.*) omitted")
_SOURCE_LINE = re.compile(r"^- (?:after (`+ ?.+? ?`+)|the user reported|other errors):$")
_FILES_TITLES = frozenset({"Files", "Relevant Files"})
_COMMAND_TITLES = frozenset({"Commands", "Done", "Blocked", "Progress"})
_ASK_TITLES = frozenset({"User asks"})


def _unspan(text: str) -> str:
    match = _SPAN.fullmatch(text.strip())
    return match.group(2) if match else text.strip()


@attrs.frozen
class ParsedSummary:
    """A summary read back: the ledger items it lists in this module's formats, its other lines
    per section title (``""`` before the first heading), and the items its omission notes said
    earlier summaries dropped."""

    ledger: Ledger
    other: dict[str, list[str]]
    omitted: int


def parse_ledger(summary: str, *, asks_in: Iterable[str] = ()) -> ParsedSummary:
    """Read back the ledger items a summary lists in the formats this module renders.

    Lines under a Files / Relevant Files heading (``- edited: `a`, `b```, ``- `a```), under
    Commands / Done / Blocked (``- `cmd` -> exit 1, 0``), error groups (``- after `cmd`:`` then
    ``  - line``), identifier lines (``- ids passed as key: a, b``), the tools line and user asks
    (under User asks, or under the headings named in ``asks_in``, e.g. a digest's Goal) become
    ledger items; everything else is returned as other lines of its section.
    """
    reader = _SummaryReader(_ASK_TITLES | set(asks_in))
    for raw in summary.splitlines():
        line = raw.rstrip()
        if line.strip():
            reader.read(line)
    return reader.parsed()


class _SummaryReader:
    """The state of :func:`parse_ledger` line by line: the section title, the error group
    being read (its source), and the items found so far."""

    def __init__(self, ask_titles: Collection[str]) -> None:
        self.ask_titles = ask_titles
        self.paths: dict[str, str] = {}
        self.commands: dict[str, tuple[int, ...]] = {}
        self.errors: dict[str, tuple[str, bool]] = {}
        self.asks: dict[str, None] = {}
        self.ids: dict[str, str] = {}
        self.tools: dict[str, int] = {}
        self.other: dict[str, list[str]] = {}
        self.omitted = 0
        self.title = ""
        self.source: str | None = None

    def read(self, line: str) -> None:
        """One non-blank line, in order."""
        if line.startswith("#"):
            self.title = line.lstrip("#").strip()
            self.source = None
            return
        if self.source is not None and line.startswith("  - "):
            text = line[4:]
            fixed = text.endswith(" (resolved)")
            key = text[: -len(" (resolved)")] if fixed else text
            self.errors.setdefault(key, (self.source, fixed))
            return
        self.source = None
        if not (self._group_line(line) or self._item_line(line)):
            self.other.setdefault(self.title, []).append(line)

    def _group_line(self, line: str) -> bool:
        """An error group's header, an omission note, the tools line or an ids line."""
        found = _SOURCE_LINE.match(line)
        if found:
            self.source = (
                _unspan(found.group(1)) if found.group(1) else ("user" if "user" in line else "")
            )
            return True
        found = _NOTE_LINE.match(line)
        if found:
            self.omitted += sum(int(n) for n in re.findall(r"(\d+) [^\d,]+", found.group(1)))
            return True
        found = _TOOLS_LINE.match(line)
        if found:
            for part in found.group(1).split(", "):
                name, _, count = part.rpartition(" ×")
                if name and count.isdigit():
                    self.tools[name] = self.tools.get(name, 0) + int(count)
            return True
        found = _IDS_LINE.match(line)
        if found:
            for token in found.group(2).split(", "):
                if token.strip():
                    self.ids.setdefault(token.strip(), found.group(1) or "")
            return True
        return False

    def _item_line(self, line: str) -> bool:
        """A path, command or ask line of the sections that hold them."""
        if self.title in _FILES_TITLES and self._path_line(line):
            return True
        if self.title in _COMMAND_TITLES:
            found = _COMMAND_LINE.match(line)
            if found:
                codes = tuple(int(c) for c in found.group(2).split(", ")) if found.group(2) else ()
                command = _unspan(found.group(1))
                self.commands.setdefault(command, codes)
                self.source = command  # its error lines may follow, indented
                return True
        if self.title in self.ask_titles and line.startswith("- "):
            text = line[2:]
            text = text[len("Later: ") :] if text.startswith("Later: ") else text
            self.asks.setdefault(text, None)
            return True
        return False

    def _path_line(self, line: str) -> bool:
        found = _ACTION_LINE.match(line)
        if found:
            for span in _SPAN.finditer(found.group(2)):
                self.paths.setdefault(span.group(2), found.group(1))
            return True
        if line.startswith("- `") and _SPAN.fullmatch(line[2:]):
            self.paths.setdefault(_unspan(line[2:]), "mentioned")
            return True
        return False

    def parsed(self) -> ParsedSummary:
        commands, errors, ids = self.commands, self.errors, self.ids
        ledger = Ledger(
            paths=tuple(self.paths),
            commands=tuple(commands),
            errors=tuple(errors),
            asks=tuple(self.asks),
            exit_codes=tuple(h[-1] if h else None for h in commands.values()),
            tools=tuple(self.tools.items()),
            actions=tuple(self.paths.values()),
            exit_history=tuple(commands.values()),
            error_sources=tuple(s for s, _ in errors.values()),
            resolved=tuple(r for _, r in errors.values()),
            identifiers=tuple(ids),
            identifier_keys=tuple(ids.values()),
        )
        return ParsedSummary(ledger, self.other, self.omitted)
