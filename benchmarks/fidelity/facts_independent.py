"""A second fact rule set, written independently of :mod:`.facts` and of the compressor.

Nothing here reuses the extraction code of :mod:`.facts` or reads the compressor's code; not
even the message readers of ``ctxengine.messages``: messages are read straight from the two wire
formats (OpenAI chat, Anthropic). Only the record type :class:`~.facts.Fact` and the
whitespace-collapsed text of :class:`~.facts.Haystack` are shared, so that the harness can
score both rule sets the same way: a fact is kept when it is in the summary text.

The rules (``docs/fidelity.md``, "Unseen sessions"):

- ``path``: paths in tool arguments whose name holds ``path``, ``file`` or ``dir``; path-shaped
  arguments of shell commands (``cd``, ``sed -i``, editors, ``open``/``create``, redirects,
  any argument with a ``/`` or a source-file extension), quoted paths in heredoc scripts; patch
  headers (``*** Update File:``, ``+++ b/``) in the agent's patches and in ``git diff`` output;
  the file line above a SEARCH/REPLACE block; files a user added to an Aider chat.
- ``command``: the first line of every shell command, function-style or fenced, at most 80
  characters (SWE-agent's ``edit``/``submit`` are not commands).
- ``error``: the innermost frame of a Python traceback and its final exception line, pytest
  ``E`` and ``FAILED`` lines, ``--- FAIL``/``FAIL``/``... FAILED`` lines, jest's ``●`` titles,
  compiler errors (``error[E…]``, ``error TS…``, ``file:line:col:`` diagnostics), panics,
  segfaults, ``fatal:``/``Error:`` lines; outputs that are file contents or search hits are
  skipped. The probe is the first 80 characters.
- ``ask``: what a person wrote (not tool output, observations, environment or file-adding
  messages, reminders), without wrapper tags; its first 150 characters.
- ``identifier``: UUIDs, hashes, ticket ids, ``#N`` numbers, ports, environment variable names,
  function names (snake_case with two underscores, camelCase, PascalCase), codes with digits,
  long numbers, given by a user or an output and used by a later assistant message.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from benchmarks.fidelity.facts import Fact, Haystack, Kind
from benchmarks.fidelity.harness import RuleSet

from ctxengine import Format, Message

__all__ = ["INDEPENDENT_RULES", "extract", "present"]

COMMAND_CHARS = 80
ERROR_CHARS = 80
ASK_CHARS = 150


# --- reading the wire formats --------------------------------------------------------------------


@attrs.frozen
class _Action:
    name: str
    args: dict[str, Any]
    command: str | None = None  # the shell command, when the action runs one


@attrs.frozen
class _Turn:
    index: int
    role: str  # "system", "assistant", "output", "person", "machine"
    text: str
    actions: tuple[_Action, ...] = ()
    source: _Action | None = None  # for an output: what produced it


_SHELL_TOOLS = ("bash", "shell", "terminal", "exec_command", "run_command", "execute_command")


def _shell_text(name: str, args: dict[str, Any]) -> str | None:
    if not any(word in name.lower() for word in _SHELL_TOOLS):
        return None
    for key in ("command", "cmd", "script"):
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if value[0] == "apply_patch":
                return None
            if len(value) > 2 and value[0] in ("bash", "sh", "zsh") and value[1].startswith("-"):
                return str(value[2])
            return " ".join(value)
    return None


def _action(name: str, args: Any) -> _Action:
    if isinstance(args, str):
        try:
            args = json.loads(args) if args else {}
        except ValueError:
            args = {}
    args = args if isinstance(args, dict) else {}
    return _Action(name, args, _shell_text(name, args))


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


_FENCE = re.compile(r"^```([\w+-]*)[ \t]*\n(.*?)^```", re.S | re.M)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_SWE_TRAILER = re.compile(r"\n?\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\nbash-\$\s*\Z")
_RAN = re.compile(r"\AI ran this command:\n\n(.*?)\n\nAnd got this output:(?:\n\n|\s*\Z)", re.S)
_MACHINE = ("<environment_context>", "<user_instructions>", "I added these files to the chat")


def _output_text(content: Any) -> str:
    """A tool result as the model reads it; a JSON object with an ``output`` string (Codex) is
    that string and its exit code."""
    text = _plain(content)
    if text.startswith("{") and '"output"' in text:
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            meta = value.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            output = str(value["output"])
            return output + ("" if code is None else f"\nexit_code: {code}")
    return text


def _text_actions(text: str) -> list[_Action]:
    out = []
    for match in _FENCE.finditer(text):
        lang, body = match.group(1).lower(), match.group(2).strip("\n")
        if lang in ("", "bash", "sh", "shell", "console") and body.strip():
            if "<<<<<<< SEARCH" in body:
                continue
            out.append(_Action("text", {}, body))
    return out


def _read(messages: Sequence[Message], fmt: Format) -> list[_Turn]:
    turns: list[_Turn] = []
    by_id: dict[str, _Action] = {}
    fenced: list[_Action] = []
    for index, msg in enumerate(messages):
        role, content = str(msg.get("role", "")), msg.get("content")
        if role == "assistant":
            actions = [
                _action(c["function"]["name"], c["function"].get("arguments"))
                for c in msg.get("tool_calls") or []
            ]
            for call, act in zip(msg.get("tool_calls") or [], actions, strict=True):
                by_id[str(call.get("id"))] = act
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        act = _action(str(block.get("name")), block.get("input"))
                        by_id[str(block.get("id"))] = act
                        actions.append(act)
            text = _plain(content)
            fenced = [] if actions else _text_actions(text)
            turns.append(_Turn(index, "assistant", text, tuple(actions) or tuple(fenced)))
            continue
        if role == "tool":
            source = by_id.get(str(msg.get("tool_call_id")))
            turns.append(_Turn(index, "output", _output_text(content), source=source))
            continue
        if role == "system":
            turns.append(_Turn(index, "system", _plain(content)))
            continue
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    source = by_id.get(str(block.get("tool_use_id")))
                    text = _output_text(block.get("content"))
                    turns.append(_Turn(index, "output", text, source=source))
        turns.append(_user_turn(index, _plain(content), fenced))
        fenced = []
    return turns


def _user_turn(index: int, text: str, fenced: list[_Action]) -> _Turn:
    """A user message: the output of the previous fenced action, a machine message, or what a
    person wrote."""
    text = _REMINDER.sub("", text).strip()
    ran = _RAN.match(text)
    if ran:
        return _Turn(index, "output", text[ran.end() :], source=_Action("text", {}, ran.group(1)))
    source = fenced[-1] if fenced else None
    if text.startswith("<returncode>") or text.startswith("OBSERVATION:"):
        return _Turn(index, "output", text, source=source)
    trailer = _SWE_TRAILER.search(text)
    if trailer and source is not None:
        return _Turn(index, "output", text[: trailer.start()], source=source)
    if trailer:
        text = text[: trailer.start()]
    if not text or text.startswith(_MACHINE) or text.startswith("# Fix any errors below"):
        return _Turn(index, "machine", text)
    return _Turn(index, "person", text)


# --- paths ---------------------------------------------------------------------------------------

_PATH_KEY = re.compile(r"(?:^|_)(?:path|file|filename|filepath|dir|directory)s?$")
_EXTENSIONS = frozenset(
    [
        "py",
        "ts",
        "tsx",
        "js",
        "jsx",
        "go",
        "rs",
        "toml",
        "json",
        "yaml",
        "yml",
        "md",
        "txt",
        "cfg",
        "ini",
        "lock",
        "mod",
        "sum",
        "c",
        "h",
        "cpp",
        "sh",
        "env",
        "log",
        "sql",
        "html",
        "css",
        "rb",
        "java",
        "kt",
    ]
)
_PATCH_FILE = re.compile(
    r"^(?:\*\*\* (?:Update|Add|Delete) File: |\*\*\* Move to: |\+\+\+ b/|--- a/)(\S+)", re.M
)


def _path_like(token: str) -> bool:
    token = token.strip("'\"").rstrip(",;:")
    if not token or token.startswith("-") or "://" in token or "*" in token or "..." in token:
        return False
    if token.startswith(("s/", "y/")) or token in ("/", "."):
        return False
    if any(ch in token for ch in "=$:"):  # assignments, variables, refspecs, host:path
        return False
    if token.startswith("/dev/"):
        return False
    base = token.rsplit("/", 1)[-1]
    ext = base.rsplit(".", 1)[-1] if "." in base[1:] else ""
    return "/" in token or ext in _EXTENSIONS


def _command_paths(command: str) -> Iterator[str]:
    lines = command.splitlines()
    head: list[str] = []
    for line in lines:
        head.append(line)
        if "<<" in line:
            break
    body = "\n".join(lines[len(head) :])
    for line in head:
        for simple in re.split(r"&&|\|\||;|\|", line.split("<<")[0]):
            try:
                words = shlex.split(simple)
            except ValueError:
                words = simple.split()
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]
            if not words:
                continue
            for word in words[1:]:
                if _path_like(word.lstrip(">")):
                    yield word.lstrip(">").strip("'\"").rstrip(",;:")
        if ">" in line:
            target = line.rsplit(">", 1)[1].split()
            if target and _path_like(target[0]):
                yield target[0]
    for match in re.finditer(r"""['"]([\w./-]+/[\w.-]+\.\w+)['"]""", body):
        yield match.group(1)


def _argument_paths(args: dict[str, Any]) -> Iterator[str]:
    for key, value in args.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if _PATH_KEY.search(key.lower()) and isinstance(item, str) and "\n" not in item:
                if item.strip() and "://" not in item:
                    yield item.strip()
            elif isinstance(item, str) and ("*** Begin Patch" in item or "\n+++ b/" in item):
                yield from (m.group(1) for m in _PATCH_FILE.finditer(item))


_SEARCH_REPLACE = re.compile(r"^([^\n`]+)\n```[\w+-]*\n<<<<<<< SEARCH", re.M)


def _assistant_paths(turn: _Turn) -> Iterator[str]:
    for match in _SEARCH_REPLACE.finditer(turn.text):
        yield match.group(1).strip()
    for act in turn.actions:
        if act.command is not None:
            first = act.command.strip().split("\n", 1)[0]
            if act.name == "text" and re.match(r"^(edit \d+:\d+|submit)\b", first):
                continue
            yield from _command_paths(act.command)
        yield from _argument_paths(act.args)


# --- errors --------------------------------------------------------------------------------------

_CONTENT_TOOLS = frozenset({"read", "grep", "glob", "ls", "view", "open", "search"})
_CONTENT_VERBS = re.compile(
    r"^(?:cd \S+ && )?(?:cat|nl|head|tail|sed -n|grep|rg|ls|find|git (?:show|log|ls-files|diff)"
    r"|open|search_dir|search_file|find_file)\b"
)
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+')
_ERROR_PATTERNS = [
    re.compile(p)
    for p in (
        r"^E\s+\w+(?:Error|Exception|Exit)\b",
        r"^(?:FAILED|ERROR) \S+",
        r"^--- FAIL: ",
        r"^FAIL\s+\S+",
        r"\.\.\. FAILED$",
        r"^● ",
        r"error\[E\d+\]",
        r"error TS\d+:",
        r"^\S+\.\w+:\d+:\d+: ",
        r"^error: ",
        r"^panic: ",
        r"panicked at ",
        r"Segmentation fault",
        r"^fatal: ",
        r"^Error: ",
        r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): ",
        r"command not found",
        r"^make(?:\[\d+\])?: \*\*\*",
        r"^[\w.-]+: error: ",
        r"No such file or directory",
    )
]


def _content_output(source: _Action | None) -> bool:
    if source is None:
        return False
    if source.command is not None:
        return _CONTENT_VERBS.match(source.command.strip()) is not None
    name = source.name.lower()
    verb = str(source.args.get("command", "")).lower()
    return name in _CONTENT_TOOLS or verb == "view" or "search" in name


def _errors(text: str) -> list[str]:
    found: list[str] = []
    lines = [" ".join(line.split()) for line in text.splitlines()]
    raw = text.splitlines()
    in_trace = False
    frame = ""
    for k, line in enumerate(lines):
        if not line:
            continue
        if line.startswith(("Traceback (most recent call last)", "Current thread 0x")):
            in_trace, frame = True, ""
            continue
        if in_trace:
            if _FRAME.match(raw[k]):
                frame = line
                if "(most recent call first)" in lines[k - 1]:
                    found.append(frame)
                continue
            if raw[k][:1].isspace():
                continue
            in_trace = False
            if frame:
                found.append(frame)
            found.append(line)
            continue
        if len(line) >= 8 and any(p.search(line) for p in _ERROR_PATTERNS):
            found.append(re.sub(r"^E\s+", "", line))
    return list(dict.fromkeys(found))


_STATUS = re.compile(r"(?i)(?:exit[ _]code\"?:?\s*|<returncode>)(\d+)")


def _status(text: str) -> int | None:
    codes = _STATUS.findall(text[:300] + "\n" + text[-300:])
    return int(codes[-1]) if codes else None


# --- identifiers ---------------------------------------------------------------------------------

_WORD = re.compile(
    r"(?<![A-Za-z0-9_#/.-])#?[A-Za-z0-9][A-Za-z0-9_-]*[A-Za-z0-9](?![A-Za-z0-9_/-]|\.\w)"
)
_ID_SHAPES = re.compile(
    "|".join(
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",  # UUID
            r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}",  # commit hash
            r"[A-Z][A-Z0-9]{1,9}-\d{2,6}",  # ticket
            r"[a-z]{1,8}-(?=[0-9a-f]*\d)[0-9a-f]{6,}",  # prefixed hex id (fx-1a2b3c4d)
            r"#[A-Z]?\d{2,}",  # PR, issue, order
            r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+",  # environment variable
            r"[a-z][a-z0-9]*(?:_[a-z0-9]+){2,}",  # snake_case name, user id
            r"[a-z]+_\d{4,}",  # payment method id
            r"[a-z]+(?:[A-Z][a-z0-9]+){2,}",  # camelCase name
            r"(?:[A-Z][a-z0-9]+){2,}",  # PascalCase name
            r"(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,8}",  # booking or flight code
            r"\d{7,}",  # long number
            r"\d{4}-\d{2}-\d{2}",  # date
        )
    )
)
_PORT = re.compile(r"(?:(?<=localhost:)|(?<=port )|(?<=PORT=))\d{4,5}\b")


def _ids(text: str) -> set[str]:
    """Identifier-shaped words of ``text``: a whole word (letters, digits, ``_``, ``-``, an
    optional leading ``#``) of one of the shapes above, at least five characters; and ports."""
    found = {m.group(0) for m in _PORT.finditer(text)}
    for match in _WORD.finditer(text):
        word = match.group(0)
        if len(word) >= 5 and _ID_SHAPES.fullmatch(word):
            found.add(word)
    return found


def _assistant_text(turn: _Turn) -> str:
    parts = [turn.text]
    for act in turn.actions:
        parts.append(act.command or "")
        parts.append(json.dumps(act.args, ensure_ascii=False))
    return "\n".join(parts)


# --- extraction ----------------------------------------------------------------------------------


class _Collected:
    def __init__(self) -> None:
        self.facts: dict[tuple[str, str], Fact] = {}
        self.pending: dict[str, list[str]] = {}  # action key -> its unresolved error keys

    def add(self, kind: Kind, key: str, home: int) -> None:
        if key and (kind, key) not in self.facts:
            self.facts[(kind, key)] = Fact(kind, key, key, home, raw=key)

    def outcome(self, key: str, errors: list[str], status: int | None, at: int) -> None:
        if errors:
            self.pending.setdefault(key, []).extend(errors)
            return
        if status in (None, 0):
            for error in self.pending.pop(key, []):
                old = self.facts[("error", error)]
                if old.resolved_at is None:
                    self.facts[("error", error)] = attrs.evolve(old, resolved_at=at)


def _first_line(command: str) -> str:
    line = next((x for x in command.splitlines() if x.strip()), "")
    return " ".join(line.split())[:COMMAND_CHARS].rstrip()


def extract(messages: Sequence[Message], fmt: Format) -> list[Fact]:
    """The facts of ``messages`` by the independent rules, in order of first appearance."""
    out = _Collected()
    given: dict[str, int] = {}
    seen: set[str] = set()
    for turn in _read(messages, fmt):
        if turn.role == "system":
            seen |= _ids(turn.text)
        elif turn.role == "assistant":
            for path in _assistant_paths(turn):
                out.add("path", path, turn.index)
            for act in turn.actions:
                if act.command is not None and not re.match(
                    r"^(edit \d+:\d+|submit)\b", act.command.strip()
                ):
                    out.add("command", _first_line(act.command), turn.index)
            used = _ids(_assistant_text(turn))
            for token in used & given.keys():
                out.add("identifier", token, given[token])
            seen |= used
        elif turn.role == "output":
            _output(turn, out)
            for token in _ids(turn.text) - seen:
                given.setdefault(token, turn.index)
        else:
            if turn.role == "person":
                text = re.sub(r"\A(?:\s*<[a-z_]+>\s*)+", "", turn.text)
                out.add("ask", " ".join(text.split())[:ASK_CHARS].rstrip(), turn.index)
            elif turn.text.startswith("I added these files to the chat: "):
                names = turn.text.split("\n", 1)[0].split(": ", 1)[1]
                for name in names.split(", "):
                    out.add("path", name.strip(), turn.index)
            for token in _ids(turn.text) - seen:
                given.setdefault(token, turn.index)
    return list(out.facts.values())


def _output(turn: _Turn, out: _Collected) -> None:
    source = turn.source
    command = source.command if source is not None else None
    if command is not None and "diff" in command.split("\n", 1)[0]:
        for match in re.finditer(r"^\+\+\+ b/(\S+)", turn.text, re.M):
            out.add("path", match.group(1), turn.index)
    if _content_output(source):
        errors = [e for e in _errors(turn.text) if "No such file" in e]
    else:
        errors = _errors(turn.text)
    keys = []
    for error in errors:
        key = error[:ERROR_CHARS].rstrip()
        out.add("error", key, turn.index)
        keys.append(key)
    if source is not None:
        key = (
            _first_line(command)
            if command is not None
            else f"{source.name} {json.dumps(source.args, sort_keys=True)}"
        )
        out.outcome(key, keys, _status(turn.text), turn.index)


# --- presence ------------------------------------------------------------------------------------


def _whole(text: str, token: str, before: str, after: str) -> bool:
    start = text.find(token)
    while start >= 0:
        prev = text[start - 1] if start else " "
        nxt = text[start + len(token)] if start + len(token) < len(text) else " "
        if prev not in before and nxt not in after and not prev.isalnum() and not nxt.isalnum():
            return True
        start = text.find(token, start + 1)
    return False


def present(haystack: Haystack, fact: Fact) -> bool:
    """Whether ``fact`` is in the text: paths and identifiers as whole tokens (a path also
    without a leading ``./``), the rest as substrings, whitespace collapsed."""
    text = haystack.flat
    if fact.kind == "path":
        probes = {fact.probe, fact.probe.removeprefix("./")}
        return any(_whole(text, p, "_/.-~", "_/-") for p in probes if p)
    if fact.kind == "identifier":
        return _whole(text, fact.probe, "_-#", "_-")
    return " ".join(fact.probe.split()) in text


INDEPENDENT_RULES = RuleSet("independent", extract, present)
"""The independent rule set, for the harness."""
