"""Reading a ledger back from a summary's text: :func:`parse_ledger`."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

import attrs

from ctxengine_compressor.ledger.model import Ledger
from ctxengine_compressor.ledger.spans import _SPAN, _unspan

__all__ = ["ParsedSummary", "parse_ledger"]

_ACTION_LINE = re.compile(r"^- (deleted|created|edited|read|listed|mentioned): (.*)$")
_COMMAND_LINE = re.compile(r"^- (`+ ?.+? ?`+)(?: -> exit (-?\d+(?:, -?\d+)*))?$")
_IDS_LINE = re.compile(r"^- ids (?:passed as ([\w.-]+)|in text): (.*)$")
_TOOLS_LINE = re.compile(r"^- Tools called: (.*)$")
_NOTE_LINE = re.compile(r"^- … (.*) omitted")
_SOURCE_LINE = re.compile(r"^- (?:after (`+ ?.+? ?`+)|the user reported|other errors):$")
_FILES_TITLES = frozenset({"Files", "Relevant Files"})
_COMMAND_TITLES = frozenset({"Commands", "Done", "Blocked", "Progress"})
_ASK_TITLES = frozenset({"User asks"})


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
