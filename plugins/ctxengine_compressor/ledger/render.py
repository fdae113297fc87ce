"""Rendering a ledger as Markdown under sub-headings within a token budget, and bounded
bullet lists."""

from __future__ import annotations

from collections.abc import Sequence

from ctxengine_compressor.chunks import CHARS_PER_TOKEN
from ctxengine_compressor.ledger.fit import fit_units, ledger_units
from ctxengine_compressor.ledger.model import Ledger

__all__ = ["bounded_bullets", "render_ledger"]


_LONG_ITEM = 160


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
    lines, _ = fit_units(units, max_tokens * CHARS_PER_TOKEN - fixed)
    lines["commands"] = lines.pop("done", []) + lines.pop("blocked", [])
    out = [
        f"{heading} {title}\n" + "\n".join(lines[key])
        for key, title in _ADDENDUM_SECTIONS
        if lines.get(key)
    ]
    return "\n\n".join(out)
