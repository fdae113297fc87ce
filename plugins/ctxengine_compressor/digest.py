"""The deterministic local digest: a summary of compacted turns built without any model.

When the summary model fails in a way that does not abort the compaction, or the ``extractive``
provider is configured, the middle of the conversation is replaced by :func:`build_digest`'s output
instead of a model's summary. It uses the same template as the model
(``ctxengine.SUMMARY_HEADINGS``), says on its first line that it was generated locally and why, and
fills the sections from the critical-context ledger (:mod:`.ledger`) and the last turns:

- Goal: the first user ask, then later asks;
- Constraints & Preferences: user sentences that state rules ("don't", "always", "must", ...);
- Progress / Done: tools called with counts, every command with its exit code when shown;
- Progress / In Progress: the last assistant text of the compacted part, truncated;
- Progress / Blocked: commands that exited non-zero;
- Relevant Files: every file path touched;
- Next Steps: the last user ask of the compacted part;
- Critical Context: error lines.

A ``previous_summary`` (the summary an earlier compaction produced) is carried forward: its lines
stay under their own headings ahead of the new items, so iterative compaction never loses what was
summarised before. The output never exceeds ``max_tokens`` (estimated as characters / 4); when
space runs out, ledger paths and commands are served first, then the carried summary, then errors
and later asks, each list dropping its oldest and longest items first and saying how many it
dropped. Secrets are redacted. Same input, same output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxengine import DIGEST_LABEL_PREFIX, SUMMARY_HEADINGS, Format, Message, split_summary
from ctxengine.messages import has_visible_assistant_text, redact, visible_text
from ctxengine_compressor.ledger import (
    Ledger,
    bounded_bullets,
    build_ledger,
    code_span,
    command_bullet,
)

__all__ = ["build_digest", "min_digest_tokens"]

_CHARS_PER_TOKEN = 4
_DEFAULT_REASON = "no summary model was used"
_REASON_CHARS = 200
_LAST_TEXT_CHARS = 1200
_NEXT_ASK_CHARS = 400
_EMPTY = "- (none recorded)"
# Shares of the space left after the fixed parts, when not everything fits: ledger paths and
# commands first, then the carried summary, then errors/later asks/failed commands/constraints.
# A tier that needs less gives the rest to the others, in this order.
_TIER_WEIGHTS = (0.55, 0.30, 0.15)
_FAILED_COMMANDS = 8

_CONSTRAINT_CUE = re.compile(
    r"(?i)\b(?:don'?t|do not|never|always|must(?: not)?|should(?:n'?t| not)?|avoid|"
    r"make sure|prefer|only use|without)\b"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def min_digest_tokens(reason: str | None = None) -> int:
    """The smallest ``max_tokens`` :func:`build_digest` accepts for this ``reason``."""
    fixed = _fixed_chars(_label(reason, 0))
    return -(-fixed // _CHARS_PER_TOKEN)


def _label(reason: str | None, count: int) -> str:
    why = " ".join((reason or _DEFAULT_REASON).split())
    if len(why) > _REASON_CHARS:
        why = why[: _REASON_CHARS - 1] + "…"
    return (
        f"{DIGEST_LABEL_PREFIX} because {why}. Built deterministically from {count} compacted "
        "messages: user asks, tools, files, commands with exit codes and error lines are quoted "
        "verbatim; reasoning between them is not reconstructed.]"
    )


def _fixed_chars(label: str) -> int:
    # label + blank line, then every heading with its line break, a placeholder line and the
    # blank line that separates sections.
    return len(label) + 2 + sum(len(h) + 1 + len(_EMPTY) + 2 for h in SUMMARY_HEADINGS)


def _truncate(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def _one_line(text: str, limit: int) -> str:
    return _truncate(" ".join(text.split()), limit)


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


def _allocate(needs: Sequence[int], room: int, weights: Sequence[float]) -> list[int]:
    """Split ``room`` characters between parts needing ``needs``; unused shares move on."""
    if sum(needs) <= room:
        return list(needs)
    alloc = [min(need, int(room * weight)) for need, weight in zip(needs, weights, strict=True)]
    left = room - sum(alloc)
    for i, need in enumerate(needs):
        extra = min(need - alloc[i], left)
        alloc[i] += extra
        left -= extra
    return alloc


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _fit_group(parts: Sequence[tuple[list[str], str]], room: int) -> list[list[str]]:
    """Fit several bullet lists into ``room`` characters, in proportion to their size."""
    needs = [_size(lines) for lines, _ in parts]
    total = sum(needs) or 1
    weights = [need / total for need in needs]
    alloc = _allocate(needs, room, weights)
    return [
        bounded_bullets(lines, chars, noun)
        for (lines, noun), chars in zip(parts, alloc, strict=True)
    ]


def build_digest(
    messages: Sequence[Message],
    fmt: Format,
    *,
    max_tokens: int,
    previous_summary: str | None = None,
    reason: str | None = None,
    ledger: Ledger | None = None,
) -> str:
    """A deterministic digest of ``messages`` in the summary template (see the module docstring).

    :param messages: the compacted turns, OpenAI chat or Anthropic Messages format (not mutated).
    :param fmt: ``"openai"`` or ``"anthropic"``.
    :param max_tokens: upper bound on the result, estimated as characters / 4.
    :param previous_summary: an earlier summary to carry forward under its headings.
    :param reason: why no model summary is used; shown on the label line.
    :param ledger: ``build_ledger(messages, fmt)`` when the caller already has it.
    :returns: the digest; its first line starts with :data:`DIGEST_LABEL_PREFIX`.
    :raises ValueError: for an unknown ``fmt``, or a ``max_tokens`` below
        :func:`min_digest_tokens` (the message says the minimum).
    """
    if fmt not in ("openai", "anthropic"):
        raise ValueError(f"unknown message format {fmt!r}; allowed: 'openai' or 'anthropic'")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise ValueError(f"max_tokens must be an integer, got {max_tokens!r}")
    if previous_summary is not None and not isinstance(previous_summary, str):
        raise ValueError(
            f"previous_summary must be a str or None, got {type(previous_summary).__name__}"
        )
    if ledger is None:
        ledger = build_ledger(messages, fmt)
    label = _label(redact(reason) if reason else None, len(messages))
    budget = max_tokens * _CHARS_PER_TOKEN
    fixed = _fixed_chars(label)
    if budget < fixed:
        raise ValueError(
            f"max_tokens={max_tokens} is too small for the summary template; "
            f"at least {-(-fixed // _CHARS_PER_TOKEN)} is needed"
        )

    # --- the parts, each a list of lines -----------------------------------------------------
    asks = ledger.asks
    goal_first = [f"- {asks[0]}"] if asks else []
    later_asks = [f"- Later: {ask}" for ask in asks[1:]]
    tool_line = (
        ["- Tools called: " + ", ".join(f"{name} ×{n}" for name, n in ledger.tools)]
        if ledger.tools
        else []
    )
    commands_head = [f"- Commands run ({len(ledger.commands)}):"] if ledger.commands else []
    commands = [
        command_bullet(c, e) for c, e in zip(ledger.commands, ledger.exit_codes, strict=True)
    ]
    failed = [
        command_bullet(c, e)
        for c, e in zip(ledger.commands, ledger.exit_codes, strict=True)
        if e not in (None, 0)
    ][-_FAILED_COMMANDS:]
    paths = [f"- {code_span(p)}" for p in ledger.paths]
    errors = [f"- {e}" for e in ledger.errors]
    constraints = _constraints(asks)
    last_text = _one_line(redact(_last_assistant_text(messages)), _LAST_TEXT_CHARS)
    in_progress = [f"- Last assistant update: {last_text}"] if last_text else []
    next_steps = (
        [f"- Pick up from the last request in these turns: {_one_line(asks[-1], _NEXT_ASK_CHARS)}"]
        if asks
        else []
    )
    carried = split_summary(redact(previous_summary)) if previous_summary else {}

    # --- budget -------------------------------------------------------------------------------
    essentials = goal_first + tool_line + commands_head + in_progress + next_steps
    room = budget - fixed
    if _size(essentials) > room // 4:
        # Tiny budgets: essentials are cut to a quarter of the room.
        cap = max(40, room // (4 * max(len(essentials), 1)))
        goal_first = [_truncate(x, cap) for x in goal_first]
        tool_line = [_truncate(x, cap) for x in tool_line]
        in_progress = [_truncate(x, cap) for x in in_progress]
        next_steps = [_truncate(x, cap) for x in next_steps]
        essentials = goal_first + tool_line + commands_head + in_progress + next_steps
    room -= _size(essentials)

    carried_parts = [(carried.get(h, []), "earlier summary lines") for h in (*SUMMARY_HEADINGS, "")]
    secondary = [
        (later_asks, "later asks"),
        (constraints, "constraints"),
        (failed, "failed commands"),
        (errors, "error lines"),
    ]
    needs = [
        _size(paths) + _size(commands),
        sum(_size(lines) for lines, _ in carried_parts),
        sum(_size(lines) for lines, _ in secondary),
    ]
    tier_room = _allocate(needs, max(room, 0), _TIER_WEIGHTS)
    paths, commands = _fit_group([(paths, "files"), (commands, "commands")], tier_room[0])
    fitted_carried = _fit_group(carried_parts, tier_room[1])
    later_asks, constraints, failed, errors = _fit_group(secondary, tier_room[2])
    prev = dict(zip((*SUMMARY_HEADINGS, ""), fitted_carried, strict=True))

    # --- assembly -----------------------------------------------------------------------------
    body: dict[str, list[str]] = {
        "## Goal": prev["## Goal"] + goal_first + later_asks,
        "## Constraints & Preferences": prev["## Constraints & Preferences"] + constraints,
        "## Progress": [],
        "### Done": prev["### Done"] + tool_line + commands_head + commands,
        "### In Progress": prev["### In Progress"] + in_progress,
        "### Blocked": prev["### Blocked"] + failed,
        "## Key Decisions": prev["## Key Decisions"],
        "## Relevant Files": prev["## Relevant Files"] + paths,
        "## Next Steps": prev["## Next Steps"] + next_steps,
        "## Critical Context": prev["## Critical Context"] + prev[""] + errors,
    }
    sections = [label]
    for heading in SUMMARY_HEADINGS:
        if heading == "## Progress":
            continue  # no body of its own: it heads Done, In Progress and Blocked
        lines = _dedupe(body[heading]) or [_EMPTY]
        title = "## Progress\n### Done" if heading == "### Done" else heading
        sections.append(title + "\n" + "\n".join(lines))
    return _enforce("\n\n".join(sections), budget)


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
