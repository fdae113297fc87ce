"""The fidelity benchmark's own fact rules: what an agent must still know after a compaction.

These rules define the measure (documented in ``docs/fidelity.md``) and are written
independently of the compressor's ledger on purpose: a benchmark that reused the ledger's
extractors would only measure the ledger against itself. Nothing here imports
``ctxengine.ledger`` or ``ctxengine.digest``; only the message readers of ``ctxengine.messages``
(visible text, tool calls, tool results) are shared, since they define the formats, not facts.

:func:`read_conversation` turns a message list of any supported agent style into
:class:`Step` records; :func:`extract_facts` applies the five fact rules to them;
:func:`contains` decides whether a fact is still present in a text.

Fact kinds (the ``kind`` of :class:`Fact`):

- ``path``: a file or directory the agent touched, with what it did to it;
- ``command``: a shell command the agent ran (its first line);
- ``error``: a distinctive error line of a tool's output, or a non-zero exit status;
- ``ask``: what a user message asked (its first 200 characters);
- ``identifier``: an id a user or a tool gave that the assistant used later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

import attrs

from ctxengine import Format, Message
from ctxengine.messages import is_real_user_message, tool_calls, tool_results, visible_text

__all__ = [
    "ASK_PROBE_CHARS",
    "COMMAND_PROBE_CHARS",
    "ERROR_PROBE_CHARS",
    "KINDS",
    "Fact",
    "Haystack",
    "Step",
    "contains",
    "exit_status",
    "extract_facts",
    "message_plain_text",
    "normalise",
    "read_conversation",
]

Kind = Literal["path", "command", "error", "ask", "identifier"]
KINDS: tuple[Kind, ...] = ("path", "command", "error", "ask", "identifier")
Action = Literal["read", "edited", "created", "deleted", "listed", "mentioned"]

COMMAND_PROBE_CHARS = 100
"""A command counts as kept when the first this-many characters of its first line are."""
ERROR_PROBE_CHARS = 100
"""An error line counts as kept when its first this-many characters are."""
ASK_PROBE_CHARS = 200
"""A user ask is its first this-many characters (whitespace collapsed)."""

_LONG_ARGUMENT = 300
"""Argument values longer than this are file contents or patches: not where ids are used."""


# --- reading a conversation ----------------------------------------------------------------------


@attrs.frozen
class Call:
    """One action of the assistant: a function-style tool call, or a text action (a fenced
    command block of an agent that acts through its text)."""

    id: str
    name: str
    arguments: dict[str, Any]
    text_action: bool = False


@attrs.frozen
class Output:
    """What one action returned: a tool result, or the observation of a text action."""

    call: Call | None
    text: str
    is_error: bool = False


@attrs.frozen
class Step:
    """One message, read the same way in every format and agent style.

    ``role`` is ``"observation"`` for a user message that reports the output of the previous
    text action (mini-swe-agent's ``<returncode>``, SWE-agent's ``OBSERVATION:``); ``ask`` is
    set for a user message a person (or a simulated user) wrote.
    """

    index: int
    role: str
    text: str
    calls: tuple[Call, ...] = ()
    outputs: tuple[Output, ...] = ()
    ask: bool = False


_OBSERVATION = re.compile(r"\A\s*(?:<returncode>\s*-?\d+\s*</returncode>|OBSERVATION:)")
_FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)```", re.S)
_SHELL_FENCES = frozenset({"", "bash", "sh", "shell", "console", "zsh"})


def _is_observation(text: str) -> bool:
    return _OBSERVATION.match(text) is not None


def _text_actions(text: str, index: int) -> tuple[Call, ...]:
    """The fenced shell blocks of an assistant message whose next message is an observation."""
    calls = []
    for k, match in enumerate(_FENCE.finditer(text)):
        if match.group(1).lower() in _SHELL_FENCES and match.group(2).strip():
            command = match.group(2).strip("\n")
            calls.append(Call(f"text-{index}-{k}", "bash", {"command": command}, text_action=True))
    return tuple(calls)


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def read_conversation(messages: Sequence[Message], fmt: Format) -> list[Step]:
    """``messages`` as steps, tool results matched to their calls in order per call id.

    A reused call id (several turns using the same id) maps each result to the latest call
    with that id still waiting for a result.
    """
    steps: list[Step] = []
    waiting: dict[str, list[Call]] = {}
    last_text_actions: tuple[Call, ...] = ()
    for index, msg in enumerate(messages):
        role = str(msg.get("role", ""))
        text = visible_text(msg)
        if role == "assistant":
            calls = [Call(c.id, c.name, _arguments(c.arguments)) for c in tool_calls(msg, fmt)]
            nxt = messages[index + 1] if index + 1 < len(messages) else None
            if (
                not calls
                and nxt is not None
                and nxt.get("role") == "user"
                and _is_observation(visible_text(nxt))
            ):
                calls = list(_text_actions(text, index))
                last_text_actions = tuple(calls)
            for call in calls:
                if not call.text_action:
                    waiting.setdefault(call.id, []).append(call)
            steps.append(Step(index, role, text, tuple(calls)))
            continue
        outputs = []
        for result in tool_results(msg, fmt):
            queue = waiting.get(result.call_id)
            caller = queue.pop(0) if queue else None
            outputs.append(Output(caller, _unwrap_output(result.text), result.is_error))
        if role == "user" and _is_observation(text):
            caller = last_text_actions[-1] if last_text_actions else None
            steps.append(Step(index, "observation", "", (), (Output(caller, text),)))
            last_text_actions = ()
            continue
        ask = role == "user" and is_real_user_message(msg, fmt) and bool(text.strip())
        steps.append(
            Step(index, role, text if role in ("user", "system") else "", (), tuple(outputs), ask)
        )
    return steps


def _unwrap_output(text: str) -> str:
    """A Codex-style JSON result (``{"output": ..., "metadata": {"exit_code": N}}``) as its
    output text followed by its metadata; any other text unchanged."""
    if not text.startswith("{") or '"output"' not in text:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict) or not isinstance(value.get("output"), str):
        return text
    metadata = value.get("metadata")
    tail = json.dumps(metadata) if isinstance(metadata, dict) else ""
    return f"{value['output']}\n{tail}".rstrip()


def message_plain_text(msg: Message, fmt: Format) -> str:
    """What the model reads of ``msg``: visible text, each tool call's name and argument values
    (decoded, not JSON-escaped), and tool results; joined with newlines."""
    pieces = [visible_text(msg)]
    for call in tool_calls(msg, fmt):
        pieces.append(call.name)
        pieces.extend(_strings(_arguments(call.arguments)) or [call.arguments])
    pieces.extend(_unwrap_output(result.text) for result in tool_results(msg, fmt))
    return "\n".join(p for p in pieces if p)


def _strings(value: object) -> list[str]:
    """Every string (and number) inside a JSON value, depth first, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [str(value)]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [str(key), *_strings(item)]]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


# --- facts ---------------------------------------------------------------------------------------


@attrs.frozen
class Fact:
    """One thing the agent should still know.

    :ivar kind: one of :data:`KINDS`.
    :ivar key: what identifies the fact (two occurrences with the same key are one fact).
    :ivar probe: the text that must be present for the fact to count as kept; for an exit
        status, ``probe`` is the command and ``status`` the code, which must share a line.
    :ivar home: the index of the message that introduced the fact (for an identifier, the
        message that gave it).
    :ivar action: for a path, what was done to it (the strongest action seen).
    :ivar status: for an exit-status error, the non-zero exit code.
    :ivar resolved_at: for an error, the index of a later message showing the same command or
        call succeeding (``None`` while unresolved).
    :ivar raw: a verbatim piece of the home message holding the fact, as the agent or tool wrote
        it (``probe`` has whitespace collapsed); what a search of the original must find.
    """

    kind: Kind
    key: str
    probe: str
    home: int
    action: Action | None = None
    status: int | None = None
    resolved_at: int | None = None
    raw: str = ""


def normalise(text: str) -> str:
    """Runs of whitespace as one space, ends stripped: the form probes are compared in."""
    return " ".join(text.split())


# Tools by what they do, judged by name (lower-cased). Shell tools run a command string or argv.
_SHELL_NAMES = frozenset(
    {
        "bash",
        "sh",
        "shell",
        "zsh",
        "terminal",
        "execute_bash",
        "execute_command",
        "exec_command",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "run_in_terminal",
        "local_shell",
        "container.exec",
    }
)
_EDITOR_NAMES = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
_READ_NAMES = frozenset({"read", "read_file", "view", "view_file", "open", "open_file", "cat"})
_WRITE_NAMES = frozenset({"write", "write_file", "create", "create_file"})
_EDIT_NAMES = frozenset(
    {"edit", "multiedit", "edit_file", "notebookedit", "replace", "apply_diff", "insert"}
)
_DELETE_NAMES = frozenset({"delete", "delete_file", "remove_file"})
_LIST_NAMES = frozenset(
    {
        "glob",
        "grep",
        "ls",
        "list",
        "list_dir",
        "list_files",
        "find_file",
        "search_dir",
        "search_file",
    }
)
_FETCH_MARKERS = ("fetch", "search", "browse", "web")
_PATCH_NAMES = frozenset({"apply_patch"})
_PATH_KEYS = frozenset(
    {
        "path",
        "paths",
        "file_path",
        "file_paths",
        "filepath",
        "filename",
        "file",
        "files",
        "notebook_path",
        "target_file",
        "dir",
        "dir_path",
        "directory",
        "relative_path",
    }
)
_ACTION_RANK: dict[str, int] = {
    "mentioned": 0,
    "listed": 1,
    "read": 2,
    "edited": 3,
    "created": 4,
    "deleted": 5,
}


def _kind_of_tool(name: str, arguments: dict[str, Any]) -> str:
    """``shell``, ``patch``, ``read``, ``edit``, ``create``, ``delete``, ``list``, ``fetch`` or
    ``other`` for a tool call."""
    low = name.lower()
    if low in _EDITOR_NAMES:
        verb = str(arguments.get("command", "")).lower()
        return {"view": "read", "create": "create"}.get(verb, "edit")
    if low in _PATCH_NAMES:
        return "patch"
    if low in _SHELL_NAMES or "bash" in low or "shell" in low or "terminal" in low:
        command = _shell_command(arguments)
        if command is not None and command[1]:
            return "patch"
        return "shell"
    if low in _READ_NAMES:
        return "read"
    if low in _WRITE_NAMES:
        return "create"
    if low in _EDIT_NAMES:
        return "edit"
    if low in _DELETE_NAMES:
        return "delete"
    if low in _LIST_NAMES:
        return "list"
    if any(marker in low for marker in _FETCH_MARKERS):
        return "fetch"
    return "other"


_SHELL_WRAPPERS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})


def _shell_command(arguments: dict[str, Any]) -> tuple[str, bool] | None:
    """``(command as the agent wrote it, is an apply_patch call)`` of a shell tool's arguments.

    An argv list ``["bash", "-lc", script]`` (Codex) is the script; ``["apply_patch", patch]``
    is a patch, not a command; other lists are joined with spaces.
    """
    for key in ("command", "cmd", "script"):
        value = arguments.get(key)
        if isinstance(value, str):
            return (value, False) if value.strip() else None
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if value[0] == "apply_patch":
                return ("\n".join(value[1:]), True)
            if len(value) >= 3 and value[0] in _SHELL_WRAPPERS and value[1].startswith("-"):
                return (value[2], False)
            return (" ".join(value), False)
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return normalise(line)
    return ""


# Paths in free text and shell commands: absolute (two or more components), ~/..., or relative
# with a directory and a file extension. The look-behind keeps URLs, ``Mod.fun/2`` and the middle
# of longer tokens out.
_TEXT_PATH = re.compile(
    r"(?<![\w.@+~/:$%\\-])"
    r"(?:~/[\w.@+-]+(?:/[\w.@+-]+)*"
    r"|/[\w.@+-]+(?:/[\w.@+-]+)+"
    r"|(?:\.{1,2}/)?[\w@+-][\w.@+-]*(?:/[\w.@+-]+)*/[\w@+-][\w.@+-]*\.[A-Za-z][A-Za-z0-9]{0,7})"
    r"(?![\w/*{@+-]|\.[\w/-])"
)
_NOT_FILES = ("/dev/", "/proc/", "/sys/")
_PATCH_HEADER = re.compile(
    r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$|"
    r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)",
    re.M,
)


def _clean_path(path: str) -> str | None:
    path = path.rstrip(".,;:")
    if not path or len(path) > 300 or path.startswith(_NOT_FILES) or path in ("/", "~"):
        return None
    return path


def _text_paths(text: str) -> Iterator[str]:
    if "/" not in text:
        return
    for match in _TEXT_PATH.finditer(text):
        path = _clean_path(match.group(0))
        if path is not None:
            yield path


def _patch_paths(patch: str) -> Iterator[tuple[str, Action]]:
    for match in _PATCH_HEADER.finditer(patch):
        verb, path, moved, diff_path = match.groups()
        if path:
            yield path, {"Add": "created", "Update": "edited", "Delete": "deleted"}[verb]  # type: ignore[misc]
        elif moved:
            yield moved, "created"
        elif diff_path and diff_path != "/dev/null":
            yield diff_path, "edited"


def _argument_paths(arguments: dict[str, Any]) -> Iterator[str]:
    for key, value in arguments.items():
        if key.lower() not in _PATH_KEYS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.strip() and "\n" not in item and "://" not in item:
                path = _clean_path(item.strip())
                if path is not None:
                    yield path


# What a shell command does to the paths it names, by its verb (the first word of each simple
# command of its first line).
_VERB_ACTIONS: dict[str, Action] = {
    "rm": "deleted",
    "unlink": "deleted",
    "rmdir": "deleted",
    "touch": "created",
    "mkdir": "created",
    "cp": "created",
    "mv": "created",
    "cat": "read",
    "head": "read",
    "tail": "read",
    "less": "read",
    "nl": "read",
    "ls": "listed",
    "find": "listed",
    "tree": "listed",
}
_SIMPLE_SPLIT = re.compile(r"&&|\|\||;|\|")
_REDIRECT = re.compile(r">>?\s*([^\s;&|]+)")


def _command_paths(command: str) -> Iterator[tuple[str, Action]]:
    """The paths a shell command names, each with what the command does to it."""
    for part in _SIMPLE_SPLIT.split(command):
        words = part.split()
        verb = words[0] if words else ""
        if verb == "git" and len(words) > 1:
            verb = "rm" if words[1] == "rm" else "git"
        action: Action = _VERB_ACTIONS.get(verb, "mentioned")
        if verb in ("sed", "perl") and any(w.startswith(("-i", "-pi")) for w in words[1:]):
            action = "edited"
        targets = {m.group(1) for m in _REDIRECT.finditer(part)}
        for path in _text_paths(part):
            yield path, ("created" if path in targets else action)


# --- exit status and error lines -----------------------------------------------------------------

# Every common way an agent harness, shell or CI prints a command's exit status. The last match
# in a result is its status.
_EXIT_PATTERNS = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),  # mini-swe-agent
    re.compile(r'"exit_code"\s*:\s*(-?\d+)'),  # Codex JSON metadata
    re.compile(r"(?i)\bexit(?:ed)?[ _](?:code|status)\b\s*(?:of\s*)?[:=]?\s*(-?\d+)"),
    re.compile(r"(?i)\bexited with (?:code|status)\s*(-?\d+)"),
    re.compile(r"(?i)\bprocess (?:exited|completed|finished) with (?:exit )?code\s*(-?\d+)"),
    re.compile(r"(?i)\breturn ?code\s*[:=]?\s*(-?\d+)"),
    re.compile(r"(?i)\bcommand terminated with exit code\s*(-?\d+)"),
)
_EXIT_WINDOW = 400


def exit_status(text: str) -> int | None:
    """The exit status a shell result reports at its start or its end, or ``None``.

    Formats: ``Exit code 1`` (Claude Code), ``[The command completed with exit code 1.]`` and
    ``[Command finished with exit code 1]`` (OpenHands), ``<returncode>1</returncode>``
    (mini-swe-agent), ``"exit_code": 1`` and ``Process exited with code 1`` / ``Exit code: 1``
    (Codex), ``exit status 1``, ``exited with code 1``, ``returncode=1``, ``return code: 1``,
    ``command terminated with exit code 1``.
    """
    window = (
        text if len(text) <= 2 * _EXIT_WINDOW else text[:_EXIT_WINDOW] + "\n" + text[-_EXIT_WINDOW:]
    )
    best: tuple[int, int] | None = None
    for pattern in _EXIT_PATTERNS:
        for match in pattern.finditer(window):
            if best is None or match.start() > best[0]:
                best = (match.start(), int(match.group(1)))
    return None if best is None else best[1]


_ERROR_LINE = re.compile(
    r"(?:\b\w*(?:Error|Exception)\b(?:\[[^\]]*\])?:\s*\S"  # ValueError: x, error[E0308]: x
    r"|(?i:\berror\b)(?:\[[^\]]*\])?:\s*\S"  # error: x, Error: x
    r"|\bERROR\b"
    r"|\bFAILED\b|^\s*---\s*FAIL\b|^\s*FAIL\b"
    r"|\*\*\*.*\bError \d+"  # make
    r"|\bCMake Error\b"
    r"|No such file|command not found|No module named|Permission denied"
    r"|^\s*(?:fatal|panic):"
    r"|Segmentation fault"
    r"|<tool_use_error>)"
)
_BARE_HEADING = re.compile(r"^\s*(?:ERROR|Error|error)\s*:?\s*$")
_LISTING = re.compile(r"^\s*\d+(?:→|\t)")
_TRACEBACK = "Traceback (most recent call last):"
# Shell commands whose output is file contents or search hits: a line there is an error only
# when the command itself reports it (``grep: x: No such file or directory``).
_CONTENT_COMMANDS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "nl",
        "grep",
        "rg",
        "ag",
        "egrep",
        "find",
        "ls",
        "tree",
        "sed",
        "awk",
        "wc",
        "diff",
        "jq",
        "bat",
    }
)
_CONTENT_GIT = re.compile(r"^\s*git\s+(?:show|diff|log|blame|grep)\b")


def _content_command(command: str) -> bool:
    first = command.strip().split("\n", 1)[0]
    if _CONTENT_GIT.match(first):
        return True
    # cd somewhere && cat x: judge the last command of a simple chain.
    last = re.split(r"&&|;|\|", first)[-1].strip().split()
    word = first.strip().split()[0] if first.strip() else ""
    if last and last[0] in _CONTENT_COMMANDS and "|" in first:
        return True
    return word in _CONTENT_COMMANDS or (bool(last) and last[0] in _CONTENT_COMMANDS)


def _self_report(line: str) -> bool:
    """A failure the command itself reports (``cat: x: No such file or directory``, ``fatal:``)."""
    stripped = line.strip()
    return bool(
        re.match(
            r"^[\w./-]+: .*(?:No such file|Permission denied|not found|invalid|cannot)", stripped
        )
        or re.match(r"^(?:fatal|error|ERROR|Error)(?:\[[^\]]*\])?:", stripped)
        or stripped.startswith("<tool_use_error>")
    )


def error_lines(text: str, *, content: bool) -> list[tuple[str, str]]:
    """The distinctive error lines of one tool output, in order: each whitespace-collapsed,
    with a verbatim piece of the output that holds it (for a search of the original).

    Rules: the exception line that ends a Python traceback; lines matching an error marker
    (``SomethingError:``/``error:``/``ERROR``/``FAILED``/``--- FAIL``/make's ``*** ... Error N``/
    ``CMake Error``/``No such file``/``command not found``/``No module named``/
    ``Permission denied``/``fatal:``/``panic:``/``Segmentation fault``/``<tool_use_error>``).
    A bare ``ERROR:`` heading is joined with the next line. Numbered source listings are not
    errors. With ``content`` (file contents, search hits), only lines the tool or command
    reports about itself count.
    """
    found: dict[str, str] = {}
    lines = text.splitlines()
    in_traceback = False
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        if not line.strip():
            continue
        if _TRACEBACK in line and not content:
            in_traceback = True
            continue
        if in_traceback:
            if line[:1].isspace():
                continue
            in_traceback = False
            found.setdefault(normalise(line), line.strip())
            continue
        if _LISTING.match(line):
            continue
        verbatim = line.strip()
        if _BARE_HEADING.match(line):
            nxt = next((n for n in lines[i + 1 :] if n.strip()), "")
            line = f"{line.strip()} {nxt.strip()}"
            verbatim = nxt.strip() or verbatim
            if content and not nxt:
                continue
        elif content:
            if not _self_report(line):
                continue
        elif _ERROR_LINE.search(line) is None:
            continue
        found.setdefault(normalise(line), verbatim)
    return list(found.items())


# --- identifiers ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"(?<![\w#-])#?[A-Za-z0-9][A-Za-z0-9_-]*[A-Za-z0-9](?![\w-])|(?<![\w#])#\d+\b")


# Shapes that hold a digit but name no thing: sizes and durations (``5rem``, ``30ms``, ``20th``),
# ranges (``27-45``), counts of a unit (``10-line``), regex classes (``a-zA-Z0-9``).
_NOT_IDENTIFIER = re.compile(r"\d+[A-Za-z]{1,3}|\d+-\d+|\d+-[A-Za-z]+|.*(?:a-z|A-Z|0-9).*")


def _identifiers(text: str) -> set[str]:
    """Tokens shaped like ids: at least four characters with a digit (``ZFA04Y``,
    ``mia_li_3668``, ``8080``, ``a1b2c3d``, ``2024-05-20``), or ``#`` and a number (``#123``);
    not sizes, ranges or regex classes."""
    found: set[str] = set()
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token.startswith("#"):
            rest = token[1:]
            if (rest.isdigit() and len(rest) > 1) or _shaped_like_id(rest):
                found.add(token)
            continue
        if _shaped_like_id(token):
            found.add(token)
    return found


def _shaped_like_id(token: str) -> bool:
    return (
        len(token) >= 4
        and any(ch.isdigit() for ch in token)
        and _NOT_IDENTIFIER.fullmatch(token) is None
    )


def _used_texts(step: Step) -> list[str]:
    """Where the assistant uses an id: its visible text, the first line of its commands, and
    short argument values (long ones are file contents and patches)."""
    texts = [step.text]
    for call in step.calls:
        command = (
            _shell_command(call.arguments)
            if _kind_of_tool(call.name, call.arguments) == "shell"
            else None
        )
        for key, value in call.arguments.items():
            if command is not None and key in ("command", "cmd", "script"):
                texts.append(_first_line(command[0]))
                continue
            for item in _strings(value):
                if len(item) <= _LONG_ARGUMENT:
                    texts.append(item)
    return texts


# --- extraction ----------------------------------------------------------------------------------


class _Facts:
    """Facts in order of first appearance, one per key."""

    def __init__(self) -> None:
        self.facts: dict[tuple[str, str], Fact] = {}

    def add(self, fact: Fact) -> None:
        key = (fact.kind, fact.key)
        old = self.facts.get(key)
        if old is None:
            self.facts[key] = fact
        elif (
            fact.action is not None
            and old.action is not None
            and _ACTION_RANK[fact.action] > _ACTION_RANK[old.action]
        ):
            self.facts[key] = attrs.evolve(old, action=fact.action)

    def resolve(self, kind: Kind, key: str, at: int) -> None:
        old = self.facts.get((kind, key))
        if old is not None and old.resolved_at is None:
            self.facts[(kind, key)] = attrs.evolve(old, resolved_at=at)


def extract_facts(messages: Sequence[Message], fmt: Format) -> list[Fact]:
    """Every fact of ``messages`` (see ``docs/fidelity.md``), in order of first appearance.

    Paths and commands come from the assistant's calls and text, errors from tool outputs,
    asks from user messages, identifiers from user and tool text that a later assistant message
    uses.
    """
    steps = read_conversation(messages, fmt)
    out = _Facts()
    # error keys produced per command/call, to mark them resolved when it later succeeds
    errors_of: dict[str, list[str]] = {}
    given: dict[str, int] = {}  # identifier -> message that gave it
    assistant_seen: set[str] = set()
    for step in steps:
        if step.role == "assistant":
            _assistant_facts(step, out)
            for text in _used_texts(step):
                for token in _identifiers(text):
                    home = given.get(token)
                    if home is not None:
                        out.add(Fact("identifier", token, token, home, raw=token))
            assistant_seen |= {
                t for text in [step.text, *_all_argument_text(step)] for t in _identifiers(text)
            }
            continue
        if step.role == "system":
            assistant_seen |= _identifiers(step.text)
            continue
        for output in step.outputs:
            _output_facts(step.index, output, out, errors_of)
            for token in _identifiers(output.text):
                if token not in assistant_seen:
                    given.setdefault(token, step.index)
        if step.ask:
            ask = normalise(step.text)[:ASK_PROBE_CHARS].rstrip()
            raw = step.text.strip()[:ASK_PROBE_CHARS].rstrip()
            out.add(Fact("ask", ask, ask, step.index, raw=raw))
            for token in _identifiers(step.text):
                if token not in assistant_seen:
                    given.setdefault(token, step.index)
    return list(out.facts.values())


def _all_argument_text(step: Step) -> Iterable[str]:
    for call in step.calls:
        yield from _strings(call.arguments)


_TOOL_ACTIONS: dict[str, Action] = {
    "read": "read",
    "edit": "edited",
    "create": "created",
    "delete": "deleted",
    "list": "listed",
}


def _assistant_facts(step: Step, out: _Facts) -> None:
    for path in _text_paths(step.text):
        out.add(Fact("path", path, path, step.index, action="mentioned", raw=path))
    for call in step.calls:
        kind = _kind_of_tool(call.name, call.arguments)
        if kind == "patch":
            shell = _shell_command(call.arguments)
            patch = shell[0] if shell is not None else _patch_text(call.arguments)
            for path, action in _patch_paths(patch):
                out.add(Fact("path", path, path, step.index, action=action, raw=path))
            continue
        if kind == "shell":
            shell = _shell_command(call.arguments)
            if shell is None:
                continue
            command = shell[0]
            if str(call.arguments.get("is_input", "")).lower() == "true":
                continue  # keystrokes sent to a running process, not a command
            probe = _first_line(command)[:COMMAND_PROBE_CHARS].rstrip()
            if probe:
                raw = next(x for x in command.splitlines() if x.strip()).strip()
                out.add(Fact("command", probe, probe, step.index, raw=raw[:COMMAND_PROBE_CHARS]))
            for path, action in _command_paths(command):
                out.add(Fact("path", path, path, step.index, action=action, raw=path))
            if "*** Begin Patch" in command:
                for path, patch_action in _patch_paths(command):
                    out.add(Fact("path", path, path, step.index, action=patch_action, raw=path))
            continue
        tool_action = _TOOL_ACTIONS.get(kind, "mentioned")
        for path in _argument_paths(call.arguments):
            out.add(Fact("path", path, path, step.index, action=tool_action, raw=path))
        patch = _patch_text(call.arguments)
        if "*** Begin Patch" in patch:
            for path, patch_action in _patch_paths(patch):
                out.add(Fact("path", path, path, step.index, action=patch_action, raw=path))


def _patch_text(arguments: dict[str, Any]) -> str:
    for key in ("input", "patch", "diff"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
    return ""


def _call_key(call: Call | None) -> str:
    if call is None:
        return ""
    shell = _shell_command(call.arguments)
    if shell is not None and not shell[1] and _kind_of_tool(call.name, call.arguments) == "shell":
        return "$ " + _first_line(shell[0])[:COMMAND_PROBE_CHARS].rstrip()
    return f"{call.name} {json.dumps(call.arguments, sort_keys=True)}"


def _output_facts(index: int, output: Output, out: _Facts, errors_of: dict[str, list[str]]) -> None:
    call = output.call
    kind = _kind_of_tool(call.name, call.arguments) if call is not None else "other"
    status = exit_status(output.text) if kind == "shell" else None
    command = _call_key(call)
    content = kind in ("read", "list", "fetch", "edit", "create") or (
        kind == "shell"
        and call is not None
        and _content_command((_shell_command(call.arguments) or ("", False))[0])
    )
    lines = error_lines(output.text, content=content)
    keys: list[str] = []
    for line, raw in lines:
        probe = line[:ERROR_PROBE_CHARS].rstrip()
        out.add(Fact("error", probe, probe, index, raw=raw[:ERROR_PROBE_CHARS].rstrip()))
        keys.append(probe)
    if status not in (None, 0) and command.startswith("$ ") and call is not None:
        key = f"exit {status}: {command[2:]}"
        shell = _shell_command(call.arguments)
        first = next((x for x in (shell[0] if shell else "").splitlines() if x.strip()), "")
        raw = first.strip()[:COMMAND_PROBE_CHARS]
        out.add(Fact("error", key, command[2:], index, status=status, raw=raw))
        keys.append(key)
    if not command:
        return
    if not keys and status in (None, 0) and not output.is_error:
        for key in errors_of.pop(command, []):
            out.resolve("error", key, index)
    elif keys:
        errors_of.setdefault(command, []).extend(keys)


# --- presence ------------------------------------------------------------------------------------


@attrs.frozen
class Haystack:
    """A text to look for facts in, in the two normal forms :func:`contains` compares.

    ``flat`` has every run of whitespace (line breaks included) as one space; ``lines`` keeps
    the line breaks and collapses the rest.
    """

    flat: str
    lines: str

    @classmethod
    def of(cls, text: str) -> Haystack:
        return cls(normalise(text), "\n".join(normalise(line) for line in text.splitlines()))


def contains(haystack: Haystack, fact: Fact) -> bool:
    """Whether ``fact`` is present in ``haystack``.

    Paths and identifiers must stand as whole tokens (``lib/a.ex`` is not found inside
    ``/repo/lib/a.ex``; ``1234`` not inside ``12345``); commands, error lines and asks as
    substrings, whitespace collapsed. An exit-status fact needs the start of its command and
    ``exit … N`` on one line.
    """
    probe = normalise(fact.probe)
    if fact.kind == "error" and fact.status is not None:
        return _exit_on_one_line(haystack.lines, probe, fact.status)
    text = haystack.flat
    if fact.kind not in ("path", "identifier"):
        return probe in text
    start = text.find(probe)
    while start >= 0:
        before = text[start - 1] if start > 0 else " "
        after = text[start + len(probe) : start + len(probe) + 1] or " "
        if fact.kind == "path":
            ok = _PATH_BEFORE.match(before) is None and _PATH_AFTER.match(after) is None
        else:
            ok = not (before.isalnum() or before in "_-#") and not (
                after.isalnum() or after in "_-"
            )
        if ok:
            return True
        start = text.find(probe, start + 1)
    return False


_PATH_BEFORE = re.compile(r"[\w./~@+-]")
_PATH_AFTER = re.compile(r"[\w/~@+-]")


def _exit_on_one_line(text: str, command: str, status: int) -> bool:
    head = command[:60]
    exit_re = re.compile(rf"(?i)exit[^\n]{{0,40}}?(?<![\d-]){status}(?!\d)")
    start = text.find(head)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if exit_re.search(line):
            return True
        start = text.find(head, start + 1)
    return False
