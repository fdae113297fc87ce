"""Fitting a ledger into a budget: the ledger as renderable units, the drop order (least
needed first) and :func:`fit_units`, which renders the fewest drops that fit."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import attrs

from ctxengine_compressor.ledger.merge import _PATH_AFTER, _PATH_BEFORE, _TOKEN_EDGE, _has_token
from ctxengine_compressor.ledger.model import _CHANGED, Ledger
from ctxengine_compressor.ledger.spans import _unspan, code_span

__all__ = [
    "FittedLedger",
    "Unit",
    "command_bullet",
    "fit_ledger",
    "fit_units",
    "ledger_units",
    "units_ledger",
]

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
