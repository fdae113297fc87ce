"""Errors: the distinctive error lines of tool results and user text."""

from __future__ import annotations

import re

from ctxengine_compressor.ledger.commands import truncate
from ctxengine_compressor.ledger.model import ERROR_CHARS
from ctxengine_compressor.ledger.tools import _decode_json, _is_content_tool

# Tool results are only searched for errors near their start and end: that is where shells,
# compilers and test runners put them, and it keeps the pass cheap on 78k-character outputs.
_RESULT_HEAD = 1000
_RESULT_TAIL = 1500
_ERRORS_PER_RESULT = 6


_BARE_ERROR_LINE = 20


_FAILURE_STARTS = ("<tool_use_error>", "Error", "ERROR", "error", "fatal", "Failed", "failed")


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
        line = truncate(_DECORATION.sub("", " ".join(line.split())), ERROR_CHARS)
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
