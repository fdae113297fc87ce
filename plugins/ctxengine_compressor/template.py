"""Reading a template summary back and conforming a model's summary to the template.

The template's headings (:data:`ctxengine.SUMMARY_HEADINGS`) and the check a model's reply must
pass (:func:`ctxengine.check_summary`) are the SDK's; this module holds what only the compressor
does with them: :func:`split_summary` reads a summary (a model's or a local digest) back into
sections, :func:`conform_to_template` puts every heading of a model's summary in place.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxengine import (
    DIGEST_LABEL_PREFIX,
    EMPTY_SECTION,
    MIN_TEMPLATE_HEADINGS,
    SUMMARY_HEADINGS,
    check_summary,
)

__all__ = ["check_template_summary", "conform_to_template", "split_summary"]


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


def conform_to_template(summary: str) -> str | None:
    """``summary`` rewritten with every template heading, in order; ``None`` when it did not
    follow the template at all (fewer than :data:`MIN_TEMPLATE_HEADINGS` of its headings).

    Sections the model left out get :data:`EMPTY_SECTION`; text before the first heading is
    kept under ``## Critical Context`` rather than dropped. Nothing the model wrote is removed.
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
        lines.extend(sections.get(heading) or [EMPTY_SECTION])
    return "\n".join(lines)


def check_template_summary(reply: object, provider: str, instructions: Sequence[str]) -> str:
    """A model's reply as a template summary the compressor may store: it passed
    :func:`ctxengine.check_summary` (template, content, no refusal, no echo of ``instructions``)
    and is rewritten by :func:`conform_to_template`.

    :raises ctxengine.SummaryError: naming ``provider`` and what was wrong.
    """
    text = check_summary(reply, provider, template=True, instructions=instructions)
    conformed = conform_to_template(text)
    return text if conformed is None else conformed
