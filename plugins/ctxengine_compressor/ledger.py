"""The critical-context ledger: what a summary of a stretch of conversation must not lose.

:func:`build_ledger` reads a message list (OpenAI chat or Anthropic Messages format) in one pass
and collects, in order of first appearance and without duplicates:

- **paths**: file paths touched: tool-call arguments (``file_path``, ``path``, ``paths``, ...),
  path-looking tokens in shell commands and in user/assistant text (absolute paths, ``~/...``,
  and relative paths with a directory and an extension such as ``lib/foo/bar.ex``);
- **commands**: shell commands run (the ``command`` argument of Bash/terminal/shell tools),
  shortened by :func:`shorten_command`, each with the last exit code seen in its results;
- **errors**: error lines from tool results and user text (tracebacks, ``error:``, ``FAILED``,
  ``fatal:``, ``panic:``, ``Exit code N`` ...), trimmed;
- **asks**: the text of each real user message, truncated;
- **tools**: each tool's name with how often it was called.

Every item is passed through :func:`ctxengine.messages.redact` on entry, so whatever renders the
ledger (the local digest, the critical-context appendix of an LLM summary) carries no secrets and
shows the items byte-for-byte as stored here: checking ``item in summary`` is meaningful.

:func:`missing_from` tells which items a summary left out; :func:`render_ledger` renders a ledger
as bounded Markdown bullet lists.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ctxengine import Format, Message
from ctxengine.messages import is_real_user_content, redact

__all__ = [
    "ASK_CHARS",
    "COMMAND_CHARS",
    "ERROR_CHARS",
    "Ledger",
    "bounded_bullets",
    "build_ledger",
    "code_span",
    "command_bullet",
    "missing_from",
    "render_ledger",
    "shorten_command",
]

COMMAND_CHARS = 200
"""Commands are kept as their first line, cut to this many characters."""
ASK_CHARS = 400
"""User asks are cut to this many characters."""
ERROR_CHARS = 240
"""Error lines are cut to this many characters."""

_CHARS_PER_TOKEN = 4
# Tool results are only searched for errors near their start and end: that is where shells,
# compilers and test runners put them, and it keeps the pass cheap on 78k-character outputs.
_RESULT_HEAD = 1000
_RESULT_TAIL = 1500
_ERRORS_PER_RESULT = 4
_LONG_ITEM = 160
_BARE_ERROR_LINE = 20


@attrs.frozen
class Ledger:
    """Items a summary must carry, each tuple in order of first appearance, de-duplicated.

    ``exit_codes[i]`` is the last exit code seen for ``commands[i]`` (``None`` when no result
    showed one). ``tools`` holds ``(tool name, number of calls)`` in order of first use.
    """

    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()
    exit_codes: tuple[int | None, ...] = attrs.field(default=())
    tools: tuple[tuple[str, int], ...] = ()

    @exit_codes.validator
    def _check_exit_codes(self, _: attrs.Attribute[Any], value: tuple[int | None, ...]) -> None:
        if len(value) != len(self.commands):
            raise ValueError(
                f"Ledger.exit_codes has {len(value)} entries but there are "
                f"{len(self.commands)} commands; give one exit code (or None) per command"
            )

    def __bool__(self) -> bool:
        return bool(self.paths or self.commands or self.errors or self.asks or self.tools)

    def exit_code(self, command: str) -> int | None:
        """The exit code recorded for ``command`` (``None`` if unknown or not in the ledger)."""
        try:
            return self.exit_codes[self.commands.index(command)]
        except ValueError:
            return None


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
        "notebook_path",
        "target_file",
        "target_path",
        "old_path",
        "new_path",
        "directory",
        "dir",
        "cwd",
    }
)
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


@functools.lru_cache(maxsize=256)
def _is_shell_tool(name: str) -> bool:
    low = name.lower()
    return low in _SHELL_TOOL_NAMES or "bash" in low or "shell" in low or "terminal" in low


@functools.lru_cache(maxsize=256)
def _is_content_tool(name: str) -> bool:
    low = name.lower()
    return not _is_shell_tool(name) and any(m in low for m in _CONTENT_TOOL_MARKERS)


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

# "Exit code 1" (Claude Code), "[Command finished with exit code 0]" (OpenHands),
# "exited with status 2", "returncode=1". One pattern per leading literal,
# so each scan is a substring search.
_EXIT_CODE_PARTS = tuple(
    (literal, re.compile(literal + rest + r"[\s:=]*(-?\d{1,3})(?!\d)"))
    for literal, rest in (
        ("xit", r"(?:ed with)?[ _](?:code|status)"),
        ("XIT CODE", ""),
        ("eturn", r" ?code"),
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


def _error_hits(text: str) -> list[int]:
    hits: list[int] = []
    for needle in _ERROR_NEEDLES:
        i = text.find(needle)
        while i >= 0:
            hits.append(i)
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


def _command_of(arguments: dict[str, Any]) -> str | None:
    for key in ("command", "cmd", "script"):
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def _exit_code(text: str) -> int | None:
    """The exit code a shell result reports near its start or end (the last one wins)."""
    if len(text) > 2 * _EXIT_WINDOW:
        text = f"{text[:_EXIT_WINDOW]}\n{text[-_EXIT_WINDOW:]}"
    # Each alternative of _EXIT_CODE starts with its own literal, and matches of different
    # alternatives cannot overlap, so the last match overall is the latest of the per-literal
    # last matches. Literal-first patterns let the regex engine skip ahead by substring search,
    # and a literal that does not occur costs one substring test instead of a regex scan.
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


def _error_lines(text: str, limit: int, *, last: bool = False) -> list[str]:
    """Up to ``limit`` distinct error lines of ``text``: the first ones, or the last ones."""
    found: list[str] = []
    line_end = -1  # end of the last line taken or rejected as a whole
    for hit in _error_hits(text):
        if hit < line_end:
            continue
        start = hit
        while start > 0 and text[start - 1] in _WORD_CHARS:
            start -= 1
        end = hit
        n = len(text)
        while end < n and text[end] in _WORD_CHARS:
            end += 1
        if not _is_error_word(text, start, end):
            continue
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        if line_end < 0:
            line_end = n
        line = text[line_start:line_end]
        if _NUMBERED_LINE.match(line):
            continue
        if len(line.strip()) < _BARE_ERROR_LINE and line.rstrip().endswith(":"):
            # A bare "ERROR:" heading: the message is on the next line.
            nxt = text.find("\n", line_end + 1)
            nxt = n if nxt < 0 else nxt
            line = f"{line} {text[line_end + 1 : nxt]}"
            line_end = nxt
        line = _truncate(" ".join(line.split()), ERROR_CHARS)
        if not line or line in found:
            continue
        found.append(line)
        if len(found) > limit:
            if not last:
                return found[:limit]
            del found[0]
    return found


def _result_errors(text: str, tool_name: str, is_error: bool) -> list[str]:
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


class _Collector:
    """Ordered, de-duplicated, redacted item lists built in one pass."""

    def __init__(self) -> None:
        self.paths: dict[str, None] = {}
        self.commands: dict[str, int | None] = {}
        self.errors: dict[str, None] = {}
        self.asks: dict[str, None] = {}
        self.tools: dict[str, int] = {}
        self._raw_seen: dict[str, str] = {}

    def _clean(self, raw: str) -> str:
        # Redacting is the costly step: do it once per distinct raw item.
        clean = self._raw_seen.get(raw)
        if clean is None:
            clean = redact(raw)
            self._raw_seen[raw] = clean
        return clean

    def path(self, raw: str) -> None:
        self.paths.setdefault(self._clean(raw), None)

    def command(self, raw: str) -> str | None:
        short = shorten_command(raw)
        if not short:
            return None
        clean = self._clean(short)
        self.commands.setdefault(clean, None)
        return clean

    def error(self, line: str) -> None:
        self.errors.setdefault(self._clean(line), None)

    def ask(self, text: str) -> None:
        # One line, so it renders as one bullet.
        ask = _truncate(" ".join(text.split()), ASK_CHARS)
        if ask:
            self.asks.setdefault(self._clean(ask), None)

    def ledger(self) -> Ledger:
        return Ledger(
            paths=tuple(self.paths),
            commands=tuple(self.commands),
            errors=tuple(self.errors),
            asks=tuple(self.asks),
            exit_codes=tuple(self.commands.values()),
            tools=tuple(self.tools.items()),
        )


def _check_format(fmt: object) -> None:
    if fmt not in ("openai", "anthropic"):
        raise ValueError(f"unknown message format {fmt!r}; allowed: 'openai' or 'anthropic'")


def build_ledger(messages: Sequence[Message], fmt: Format) -> Ledger:
    """Collect the critical context of ``messages`` (see the module docstring).

    Deterministic, one pass over the list; never mutates it. Tool results are matched to their
    calls in order per call id, so a reused id still maps each result to the right command.

    :raises ValueError: when ``fmt`` is not ``"openai"`` or ``"anthropic"``.
    """
    _check_format(fmt)
    out = _Collector()
    # call id -> queue of (tool name, command or None) still waiting for a result
    pending: dict[str, list[tuple[str, str | None]]] = {}
    read = _read_anthropic if fmt == "anthropic" else _read_openai
    for msg in messages:
        # One walk over the message gives its visible text, calls and results; the result is
        # the same as visible_text / tool_calls / tool_results / is_real_user_message would
        # give, without building ToolCall records or re-serialising Anthropic tool inputs.
        role = msg.get("role")
        texts, calls, results, real_user = read(msg, role)
        if role == "assistant":
            for text in texts:
                for path in _text_paths(text):
                    out.path(path)
            for call_id, name, arguments in calls:
                out.tools[name] = out.tools.get(name, 0) + 1
                if arguments:
                    for path in _argument_paths(arguments):
                        out.path(path)
                command = _command_of(arguments) if arguments and _is_shell_tool(name) else None
                clean = None
                if command is not None:
                    clean = out.command(command)
                    for path in _text_paths(command):
                        out.path(path)
                queue = pending.get(call_id)
                if queue is None:
                    pending[call_id] = [(name, clean)]
                else:
                    queue.append((name, clean))
            continue
        for call_id, text, is_error in results:
            queue = pending.get(call_id)
            name, command = queue.pop(0) if queue else ("", None)
            if command is not None:
                code = _exit_code(text)
                if code is not None:
                    out.commands[command] = code
            for line in _result_errors(text, name, is_error):
                out.error(line)
        if real_user:
            text = "\n".join(texts)
            out.ask(text)
            for path in _text_paths(text):
                out.path(path)
            for line in _error_lines(text, _ERRORS_PER_RESULT):
                out.error(line)
    return out.ledger()


# What build_ledger needs of one message: its non-empty text parts (joined with newlines they
# are ``visible_text``), its calls as (id, name, arguments), its results as (call id, text,
# is_error) and whether it is a real user turn. These readers mirror ctxengine.messages exactly
# (lenient about malformed parts in the same way); tests compare them over real transcripts.
_Read = tuple[
    list[str],
    list[tuple[str, str, dict[str, Any]]],
    list[tuple[str, str, bool]],
    bool,
]
_NO_CALLS: list[tuple[str, str, dict[str, Any]]] = []
_NO_RESULTS: list[tuple[str, str, bool]] = []


def _str_or_empty(value: object) -> str:
    return value if isinstance(value, str) else ""


def _block_texts(content: object) -> list[str]:
    """The non-empty text parts of a content value (a string is one part)."""
    if isinstance(content, str):
        return [content] if content else []
    if not isinstance(content, list):
        return []
    texts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if text and isinstance(text, str):
                texts.append(text)
    return texts


def _joined_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(_block_texts(content))


def _read_openai(msg: Message, role: object) -> _Read:
    content = msg.get("content")
    if role == "tool":
        result = (_str_or_empty(msg.get("tool_call_id")), _joined_text(content), False)
        return [], _NO_CALLS, [result], False
    if role == "assistant":
        calls: list[tuple[str, str, dict[str, Any]]] = []
        raw = msg.get("tool_calls")
        if isinstance(raw, list):
            for tc in raw:
                if not isinstance(tc, dict):
                    continue
                fn = tc.get("function")
                fn = fn if isinstance(fn, dict) else {}
                args = fn.get("arguments", "")
                text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                calls.append(
                    (_str_or_empty(tc.get("id")), _str_or_empty(fn.get("name")), _loads(text))
                )
        return _block_texts(content), calls, _NO_RESULTS, False
    real = role == "user" and is_real_user_content(content)
    return (_block_texts(content) if real else []), _NO_CALLS, _NO_RESULTS, real


def _read_anthropic(msg: Message, role: object) -> _Read:
    content = msg.get("content")
    if role == "assistant":
        if not isinstance(content, list):
            return _block_texts(content), _NO_CALLS, _NO_RESULTS, False
        texts: list[str] = []
        calls: list[tuple[str, str, dict[str, Any]]] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if text and isinstance(text, str):
                    texts.append(text)
            elif kind == "tool_use":
                # The input is already a dict: no JSON round trip (only dicts carry arguments).
                value = block.get("input")
                calls.append(
                    (
                        _str_or_empty(block.get("id")),
                        _str_or_empty(block.get("name")),
                        value if isinstance(value, dict) else {},
                    )
                )
        return texts, calls, _NO_RESULTS, False
    if role != "user":
        return [], _NO_CALLS, _NO_RESULTS, False
    results: list[tuple[str, str, bool]] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(
                    (
                        _str_or_empty(block.get("tool_use_id")),
                        _joined_text(block.get("content")),
                        block.get("is_error") is True,
                    )
                )
    real = is_real_user_content(content)
    return (_block_texts(content) if real else []), _NO_CALLS, results or _NO_RESULTS, real


def missing_from(ledger: Ledger, text: str) -> Ledger:
    """The part of ``ledger`` whose items do not occur verbatim in ``text``.

    Paths, commands (with their exit codes), errors and asks are kept when ``item not in text``;
    tools when their name does not occur.
    """
    keep = [i for i, command in enumerate(ledger.commands) if command not in text]
    return Ledger(
        paths=tuple(p for p in ledger.paths if p not in text),
        commands=tuple(ledger.commands[i] for i in keep),
        errors=tuple(e for e in ledger.errors if e not in text),
        asks=tuple(a for a in ledger.asks if a not in text),
        exit_codes=tuple(ledger.exit_codes[i] for i in keep),
        tools=tuple((name, n) for name, n in ledger.tools if name not in text),
    )


# --- rendering -----------------------------------------------------------------------------------


def code_span(text: str) -> str:
    """``text`` as a Markdown code span that shows it verbatim (longer fences around backticks)."""
    if "`" not in text:
        return f"`{text}`"
    longest = max(len(run) for run in re.findall(r"`+", text))
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def command_bullet(command: str, exit_code: int | None) -> str:
    """``- `cmd` -> exit N`` (or without the exit part when it is unknown)."""
    suffix = "" if exit_code is None else f" -> exit {exit_code}"
    return f"- {code_span(command)}{suffix}"


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


def _section(title: str, lines: list[str]) -> str:
    return f"{title}\n" + "\n".join(lines)


def render_ledger(ledger: Ledger, max_tokens: int, *, heading: str = "###") -> str:
    """Render ``ledger`` as Markdown bullet lists under sub-headings, in at most ``max_tokens``.

    Sections (empty ones are left out): Files, Commands (with exit codes), Errors, User asks.
    Tokens are estimated as characters / 4. Paths and commands are served first; what does not
    fit is dropped oldest/longest first with a note saying how many were omitted. Returns ""
    for an empty ledger.

    :raises ValueError: when ``max_tokens`` is not a positive integer.
    """
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    budget = max_tokens * _CHARS_PER_TOKEN
    sections: list[tuple[str, list[str], str]] = [
        (f"{heading} Files", [f"- {code_span(p)}" for p in ledger.paths], "files"),
        (
            f"{heading} Commands",
            [command_bullet(c, e) for c, e in zip(ledger.commands, ledger.exit_codes, strict=True)],
            "commands",
        ),
        (f"{heading} Errors", [f"- {e}" for e in ledger.errors], "errors"),
        (f"{heading} User asks", [f"- {a}" for a in ledger.asks], "asks"),
    ]
    sections = [s for s in sections if s[1]]
    if not sections:
        return ""
    # Paths and commands share the budget first (in proportion to their size); errors and asks
    # get what they leave.
    rendered: list[str] = []
    remaining = budget
    primary = [s for s in sections if s[2] in ("files", "commands")]
    secondary = [s for s in sections if s[2] not in ("files", "commands")]
    for group in (primary, secondary):
        sizes = [sum(len(b) + 1 for b in s[1]) + len(s[0]) + 2 for s in group]
        want = sum(sizes)
        for (title, bullets, noun), size in zip(group, sizes, strict=True):
            share = remaining if want <= remaining else remaining * size // max(want, 1)
            room = share - len(title) - 2
            if room <= 0:
                continue
            lines = bounded_bullets(bullets, room, noun)
            if lines:
                text = _section(title, lines)
                rendered.append(text)
        remaining = budget - len("\n\n".join(rendered)) - 2
    return "\n\n".join(rendered)
