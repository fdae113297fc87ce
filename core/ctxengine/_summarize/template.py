"""The summary template every engine's model summaries follow, and reading it back.

The compressor asks its summary model for these sections; lcm's summaries and the local digest
use them too, so one reader (:func:`split_summary`) and one conformance step
(:func:`conform_to_template`) serve every engine.
"""

from __future__ import annotations

__all__ = [
    "DIGEST_LABEL_PREFIX",
    "MIN_TEMPLATE_HEADINGS",
    "SUMMARY_HEADINGS",
    "conform_to_template",
    "split_summary",
]

SUMMARY_HEADINGS: tuple[str, ...] = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Relevant Files",
    "## Next Steps",
    "## Critical Context",
)
"""The summary template's section headings, exactly and in order."""

DIGEST_LABEL_PREFIX = "[Local digest: generated without a model"
"""The first line of every digest starts with this."""


def split_summary(summary: str) -> dict[str, list[str]]:
    """Split a summary in the template into ``{heading: lines}`` (headings from SUMMARY_HEADINGS).

    Lines before the first heading go under ``""``; a digest label line is dropped. Unknown
    headings stay as bold text lines of the section they appear in. Blank lines are dropped.
    """
    known = set(SUMMARY_HEADINGS)
    sections: dict[str, list[str]] = {}
    current = ""
    for raw in summary.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped in known:
            current = stripped
            sections.setdefault(current, [])
            continue
        if stripped.startswith(DIGEST_LABEL_PREFIX):
            continue
        if stripped.startswith("#"):
            line = f"**{stripped.lstrip('#').strip()}**"
        sections.setdefault(current, []).append(line)
    # "## Progress" has no body of its own in the template: what is there belongs to Done.
    progress = sections.pop("## Progress", [])
    if progress:
        sections["### Done"] = progress + sections.get("### Done", [])
    return sections


MIN_TEMPLATE_HEADINGS = 4
"""A model's summary with fewer of the template's headings did not follow the template."""


def conform_to_template(summary: str) -> str | None:
    """``summary`` rewritten with every template heading, in order; ``None`` when it did not
    follow the template at all (fewer than :data:`MIN_TEMPLATE_HEADINGS` of its headings).

    Sections the model left out get ``- (none)``; text before the first heading is kept under
    ``## Critical Context`` rather than dropped. Nothing the model wrote is removed.
    """
    present = {line.strip() for line in summary.splitlines()} & set(SUMMARY_HEADINGS)
    if len(present) < MIN_TEMPLATE_HEADINGS:
        return None
    sections = split_summary(summary)
    preamble = sections.pop("", [])
    if preamble:
        sections["## Critical Context"] = sections.get("## Critical Context", []) + preamble
    lines: list[str] = []
    for heading in SUMMARY_HEADINGS:
        lines.append(heading)
        if heading == "## Progress":  # a parent heading: its items live under Done/In Progress
            continue
        lines.extend(sections.get(heading) or ["- (none)"])
    return "\n".join(lines)
