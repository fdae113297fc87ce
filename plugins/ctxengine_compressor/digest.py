"""The deterministic local digest: a summary of compacted turns built without any model.

When the summary model fails in a way that does not abort the compaction, or the ``extractive``
provider is configured, the middle of the conversation is replaced by :func:`build_digest`'s
output instead of a model's summary. It uses the same template as the model
(``ctxengine.SUMMARY_HEADINGS``), says on its first line that it was generated locally and why,
and fills the sections from the critical-context ledger (:mod:`.ledger`) and the last turns:

- Goal: the first user ask, then later asks, verbatim;
- Constraints & Preferences: user sentences that state rules ("don't", "always", "must", ...);
- Progress / Done: tools called with counts, commands with every exit code they reported;
- Progress / In Progress: the last assistant text of the compacted part, truncated;
- Progress / Blocked: commands whose last run failed;
- Relevant Files: every file path touched, grouped by what was done to it;
- Next Steps: a pointer to the last user ask;
- Critical Context: error lines grouped by the command that produced them, and the ids the
  conversation relies on, grouped by the argument they were passed as.

A ``previous_summary`` (the summary an earlier compaction produced) is carried forward: its
ledger items (:func:`.ledger.parse_ledger`, or ``previous_ledger`` when the caller kept
it) are merged with the new ones, and its other lines stay under their headings, so iterative
compaction never loses what was summarized before while there is room. Items the messages kept
verbatim after the compaction already show (``kept``) are not repeated when room is short.

The output never exceeds ``max_tokens`` (estimated as characters / 4). When space runs out, what
the agent is least likely to need goes first (listed-only paths, old successful commands,
resolved errors, read-only paths, older summary lines), never an unresolved error, a changed
file, a user ask or an identifier while anything else can go; each section says how many items
it dropped. Secrets are redacted. Same input, same output.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import attrs

from ctxengine import (
    DIGEST_LABEL_PREFIX,
    EMPTY_SECTION,
    SUMMARY_HEADINGS,
    Format,
    Message,
    is_placeholder,
)
from ctxengine.messages import redact, visible_text
from ctxengine_compressor.boundaries import has_visible_assistant_text
from ctxengine_compressor.chunks import CHARS_PER_TOKEN
from ctxengine_compressor.ledger import (
    Ledger,
    ParsedSummary,
    Unit,
    build_ledger,
    fit_units,
    ledger_units,
    merge_ledgers,
    missing_from,
    parse_ledger,
    readable_text,
    truncate,
    units_ledger,
)
from ctxengine_compressor.template import split_summary

__all__ = [
    "build_digest",
    "carried_ledger",
    "digest_and_ledger",
    "min_digest_tokens",
    "redacted",
]

_DEFAULT_REASON = "no summary model was used"
_REASON_CHARS = 200
_LAST_TEXT_CHARS = 1200
_LAST_TEXT_TIGHT = 300
_NEXT_STEP = "- Pick up from the last user ask under Goal."
# How the digest's Goal lists the first and the later asks.
_ASK_PREFIXES = {"first_ask": "- ", "later_ask": "- Later: "}

_CONSTRAINT_CUE = re.compile(
    r"(?i)\b(?:don'?t|do not|never|always|must(?: not)?|should(?:n'?t| not)?|avoid|"
    r"make sure|prefer|only use|without)\b"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Lines of an earlier digest that the new one replaces rather than carries.
_SUPERSEDED = ("- Last assistant update:", "- Pick up from the last", "- Commands run (")
# Where non-ledger lines stand in the drop order (see .ledger): an earlier summary's
# prose goes after recovered commands; constraint sentences (their asks stay) just before asks.
_CARRIED_RANK = 5
_CONSTRAINT_RANK = 6
# Where the ledger's sections render in the template.
_PLACES = {
    "asks": "## Goal",
    "constraints": "## Constraints & Preferences",
    "done": "### Done",
    "blocked": "### Blocked",
    "files": "## Relevant Files",
    "errors": "## Critical Context",
    "ids": "## Critical Context",
}
# Headings by their bare titles (as parse_ledger reports them).
_BY_TITLE = {h.lstrip("#").strip(): h for h in SUMMARY_HEADINGS}


def min_digest_tokens(reason: str | None = None) -> int:
    """The smallest ``max_tokens`` :func:`build_digest` accepts for this ``reason``, whatever
    the number of messages (the label names it: sized here for up to a billion)."""
    fixed = _fixed_chars(_label(reason, 10**9 - 1))
    return -(-fixed // CHARS_PER_TOKEN)


def _label(reason: str | None, count: int) -> str:
    why = " ".join((reason or _DEFAULT_REASON).split())
    if len(why) > _REASON_CHARS:
        why = why[: _REASON_CHARS - 1] + "…"
    return (
        f"{DIGEST_LABEL_PREFIX} because {why}. Built deterministically from {count} compacted "
        "messages: asks, files, commands with exit codes, errors and ids are quoted verbatim; "
        "reasoning between them is not reconstructed.]"
    )


def _fixed_chars(label: str) -> int:
    # label + blank line, then every heading with its line break, a placeholder line and the
    # blank line that separates sections.
    return len(label) + 2 + sum(len(h) + 1 + len(EMPTY_SECTION) + 2 for h in SUMMARY_HEADINGS)


def _one_line(text: str, limit: int) -> str:
    return truncate(" ".join(text.split()), limit)


def _constraints(asks: Sequence[str]) -> list[str]:
    found: dict[str, None] = {}
    for ask in asks:
        for sentence in _SENTENCE_END.split(ask):
            if _CONSTRAINT_CUE.search(sentence):
                found.setdefault(f"- {sentence.strip()}", None)
    return list(found)


def _last_assistant_text(messages: Sequence[Message]) -> str:
    for msg in reversed(messages):
        if has_visible_assistant_text(msg):
            return visible_text(msg)
    return ""


def carried_ledger(
    previous_summary: str | None,
    previous_ledger: Ledger | None = None,
    clean: Collection[str] = (),
) -> Ledger:
    """The ledger an earlier summary carries: ``previous_ledger`` when the caller kept it, else
    what :func:`~.ledger.parse_ledger` reads back from the summary text (a digest's
    Goal lines count as asks). ``clean``: see :func:`redacted`."""
    if previous_ledger is not None:
        return previous_ledger
    if not previous_summary:
        return Ledger()
    return _read_back(previous_summary, clean).ledger


def _read_back(summary: str, clean: Collection[str]) -> ParsedSummary:
    """What :func:`~.ledger.parse_ledger` reads from an earlier summary, redacted and in the
    template's headings (a digest's Goal lines count as asks; ``clean``: see :func:`redacted`)."""
    asks_in = ("Goal",) if DIGEST_LABEL_PREFIX in summary else ()
    return parse_ledger(_in_template(redacted(summary, clean)), asks_in=asks_in)


def redacted(summary: str, clean: Collection[str] = ()) -> str:
    """``redact(summary)``, without the scan when ``summary`` is one of the texts in ``clean``.

    ``clean`` holds texts that are :func:`~ctxengine.messages.redact`'s own output (summaries
    this engine wrote), and ``redact`` is idempotent, so for them the result is the text itself.
    Matched by content: a summary the host edited is a different text and is redacted again.
    """
    return summary if summary in clean else redact(summary)


def _in_template(summary: str) -> str:
    """``summary`` re-laid in the template's headings (unknown headings become bold lines of
    the section they stand in, text before the first heading goes to Critical Context)."""
    sections = split_summary(summary)
    preamble = sections.pop("", [])
    if preamble:
        sections["## Critical Context"] = preamble + sections.get("## Critical Context", [])
    return "\n".join(
        f"{heading}\n" + "\n".join(sections[heading])
        for heading in SUMMARY_HEADINGS
        if heading in sections
    )


def _carried_units(previous_summary: str, clean: Collection[str]) -> tuple[list[Unit], int]:
    """The earlier summary's lines that are not ledger items, as units under their headings,
    and how many items its own omission notes counted (``clean``: see :func:`redacted`)."""
    parsed = _read_back(previous_summary, clean)
    carried: list[tuple[str, str]] = []
    for title, lines in parsed.other.items():
        heading = _BY_TITLE.get(title, "## Critical Context")
        if heading == "## Progress":
            heading = "### Done"
        carried += [
            (heading, line)
            for line in lines
            if not line.startswith(_SUPERSEDED) and not is_placeholder(line)
        ]
    units = [
        Unit(f"carried:{heading}", line, _CARRIED_RANK, i / len(carried), "earlier summary lines")
        for i, (heading, line) in enumerate(carried)
    ]
    return units, parsed.omitted


def build_digest(
    messages: Sequence[Message],
    fmt: Format,
    *,
    max_tokens: int,
    previous_summary: str | None = None,
    reason: str | None = None,
    ledger: Ledger | None = None,
    previous_ledger: Ledger | None = None,
    kept: Sequence[Message] = (),
    clean: Collection[str] = (),
) -> str:
    """A deterministic digest of ``messages`` in the summary template (see the module docstring).

    :param messages: the compacted turns, OpenAI chat or Anthropic Messages format (not mutated).
    :param fmt: ``"openai"`` or ``"anthropic"``.
    :param max_tokens: upper bound on the result, estimated as characters / 4.
    :param previous_summary: an earlier summary to carry forward.
    :param reason: why no model summary is used; shown on the label line.
    :param ledger: ``build_ledger(messages, fmt)`` when the caller already has it.
    :param previous_ledger: the ledger ``previous_summary`` carried, when the caller kept it
        (otherwise it is read back from the text).
    :param kept: the messages that stay in the prompt; when room is short, ledger items they
        already show are not repeated.
    :param clean: texts known to be ``redact``'s output (see :func:`redacted`): a
        ``previous_summary`` among them is not scanned for secrets again.
    :returns: the digest; its first line starts with :data:`DIGEST_LABEL_PREFIX`.
    :raises ValueError: for an unknown ``fmt``, or a ``max_tokens`` below
        :func:`min_digest_tokens` (the message says the minimum).
    """
    return digest_and_ledger(
        messages,
        fmt,
        max_tokens=max_tokens,
        previous_summary=previous_summary,
        reason=reason,
        ledger=ledger,
        previous_ledger=previous_ledger,
        kept=kept,
        clean=clean,
    )[0]


def digest_and_ledger(
    messages: Sequence[Message],
    fmt: Format,
    *,
    max_tokens: int,
    previous_summary: str | None = None,
    reason: str | None = None,
    ledger: Ledger | None = None,
    previous_ledger: Ledger | None = None,
    kept: Sequence[Message] = (),
    clean: Collection[str] = (),
) -> tuple[str, Ledger]:
    """:func:`build_digest`, and the ledger of the items the digest holds (to carry into the
    next compaction)."""
    _check_arguments(fmt, max_tokens, previous_summary)
    if ledger is None:
        ledger = build_ledger(messages, fmt)
    label = _label(redact(reason) if reason else None, len(messages))
    budget = max_tokens * CHARS_PER_TOKEN
    fixed = _fixed_chars(label)
    if budget < fixed:
        raise ValueError(
            f"max_tokens={max_tokens} is too small for the summary template; "
            f"at least {-(-fixed // CHARS_PER_TOKEN)} is needed"
        )
    merged = merge_ledgers(carried_ledger(previous_summary, previous_ledger, clean), ledger)
    room = budget - fixed
    parts = _Parts.of(messages, merged, previous_summary, clean, room)
    essentials = _size(parts.tools + parts.next_steps + parts.earlier) + 2
    shown = merged
    units = _digest_units(shown, parts.carried)
    want = sum(u.size for u in units) + essentials
    if kept and want + _LAST_TEXT_TIGHT > room:
        # Short of room for every item: what the kept messages already show is not repeated.
        shown = attrs.evolve(missing_from(merged, readable_text(kept, fmt)), tools=merged.tools)
        units = _digest_units(shown, parts.carried)
        want = sum(u.size for u in units) + essentials
    # The last assistant update gets what the items leave, between 300 and 1,200 characters.
    last_chars = _LAST_TEXT_CHARS if want + _LAST_TEXT_CHARS < room else _LAST_TEXT_TIGHT
    in_progress = (
        [f"- Last assistant update: {_one_line(parts.last_text, last_chars)}"]
        if parts.last_text
        else []
    )
    essentials += _size(in_progress)
    lines, held = fit_units(units, max(room - essentials, 0))
    text = _enforce(_assemble(label, lines, parts, in_progress), budget)
    return text, units_ledger(shown, units, held)


def _check_arguments(fmt: object, max_tokens: object, previous_summary: object) -> None:
    if fmt not in ("openai", "anthropic"):
        raise ValueError(f"unknown message format {fmt!r}; allowed: 'openai' or 'anthropic'")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise ValueError(f"max_tokens must be an integer, got {max_tokens!r}")
    if previous_summary is not None and not isinstance(previous_summary, str):
        raise ValueError(
            f"previous_summary must be a str or None, got {type(previous_summary).__name__}"
        )


@attrs.frozen
class _Parts:
    """The digest's lines besides the ledger items: the tools line, the next step, the note of
    what earlier summaries omitted, the earlier summary's other lines (as units) and the last
    assistant update's text."""

    tools: list[str]
    next_steps: list[str]
    earlier: list[str]
    carried: list[Unit]
    last_text: str

    @classmethod
    def of(
        cls,
        messages: Sequence[Message],
        merged: Ledger,
        previous_summary: str | None,
        clean: Collection[str],
        room: int,
    ) -> _Parts:
        tools = (
            ["- Tools called: " + ", ".join(f"{name} ×{n}" for name, n in merged.tools)]
            if merged.tools
            else []
        )
        tools = [truncate(line, max(40, room // 8)) for line in tools]
        omitted_before = 0
        carried: list[Unit] = []
        if previous_summary:
            carried, omitted_before = _carried_units(previous_summary, clean)
        earlier = (
            [f"- … earlier summaries omitted {omitted_before} items for space"]
            if omitted_before
            else []
        )
        return cls(
            tools=tools,
            next_steps=[_NEXT_STEP] if merged.asks else [],
            earlier=earlier,
            carried=carried,
            last_text=redact(_last_assistant_text(messages)),
        )


def _assemble(
    label: str, lines: dict[str, list[str]], parts: _Parts, in_progress: list[str]
) -> str:
    """The digest's text: the label, then every template section in order."""
    body: dict[str, list[str]] = {h: [] for h in SUMMARY_HEADINGS}
    for heading in SUMMARY_HEADINGS:
        body[heading] += lines.get(f"carried:{heading}", [])
    body["### Done"] = parts.tools + body["### Done"]
    body["### In Progress"] += in_progress
    body["## Next Steps"] += parts.next_steps
    for section, heading in _PLACES.items():
        body[heading] += lines.get(section, [])
    body["## Critical Context"] += parts.earlier
    sections = [label]
    for heading in SUMMARY_HEADINGS:
        if heading == "## Progress":
            continue  # no body of its own: it heads Done, In Progress and Blocked
        section_lines = _dedupe(body[heading]) or [EMPTY_SECTION]
        title = "## Progress\n### Done" if heading == "### Done" else heading
        sections.append(title + "\n" + "\n".join(section_lines))
    return "\n\n".join(sections)


def _digest_units(ledger: Ledger, carried: Sequence[Unit]) -> list[Unit]:
    units = ledger_units(ledger, **_ASK_PREFIXES)
    constraints = _constraints(ledger.asks)
    units += [
        Unit("constraints", line, _CONSTRAINT_RANK, i / len(constraints), "constraints")
        for i, line in enumerate(constraints)
    ]
    return [*units, *carried]


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _dedupe(lines: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for line in lines:
        seen.setdefault(line, None)
    return list(seen)


def _enforce(text: str, budget: int) -> str:
    """Guarantee the bound even if an estimate above was off: drop body lines from the end.

    Headings and the label are never dropped. This is a safety net; the budget arithmetic
    above normally leaves it nothing to do.
    """
    if len(text) <= budget:
        return text
    headings = set(SUMMARY_HEADINGS)
    lines: list[str | None] = list(text.split("\n"))
    total = len(text)
    i = len(lines) - 1
    while total > budget and i > 0:
        line = lines[i]
        if line and line not in headings:
            total -= len(line) + 1
            lines[i] = None
        i -= 1
    return "\n".join(line for line in lines if line is not None)
