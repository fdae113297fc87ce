"""The summary template's headings and the one check every engine applies to what a summary
model wrote.

:data:`SUMMARY_HEADINGS` are the sections a template summary has (the compressor's model
summaries and local digests, the replay and testing fakes' replies). :func:`check_summary`
decides whether a model's reply may be stored as a summary at all (the compressor's template
summaries and lcm's plain-text ones alike). Reading a template summary back and conforming one
to the template are the compressor's (``ctxengine_compressor.template``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxengine._summarize.errors import SummaryError
from ctxengine._summarize.reasoning import strip_reasoning

__all__ = [
    "DIGEST_LABEL_PREFIX",
    "EMPTY_SECTION",
    "MIN_SUMMARY_WORDS",
    "MIN_TEMPLATE_HEADINGS",
    "SUMMARY_HEADINGS",
    "check_summary",
    "is_placeholder",
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

EMPTY_SECTION = "- (none)"
"""What a section with nothing to say holds, in a digest and in a conformed model summary."""


MIN_TEMPLATE_HEADINGS = 4
"""A model's summary with fewer of the template's headings did not follow the template."""


MIN_SUMMARY_WORDS = 6
"""A reply with fewer words of its own (headings and placeholders such as ``None.`` do not
count) says nothing a summary must say."""

ECHO_MIN_CHARS = 40
"""Instruction sentences at least this long are looked for in the reply; shorter ones (a
heading, "Stay under about 2,000 tokens.") may be repeated by a good summary."""

# What a model says instead of summarising: an apology, a refusal, not knowing. Matched at the
# start of the first line that is not a heading.
_REFUSAL = re.compile(
    r"^[\W_]*(?:i['’]?m (?:so |very )?sorry|i am (?:so |very )?sorry|sorry\b|i apologi[sz]e"
    r"|my apologies|apologies\b|unfortunately,? i\b|i (?:cannot|can['’]?t|can not|won['’]?t"
    r"|will not|am unable|['’]?m unable|am not able|['’]?m not able|do not know|don['’]?t know"
    r"|dunno|have no idea)|as an ai\b|dunno\b|no idea\b|lol\b|idk\b)",
    re.IGNORECASE,
)
_PLACEHOLDER_LINE = re.compile(
    r"^[\s>*_`-]*(?:\(?(?:none|n/a|nothing|empty|tbd|-)\)?[.!]?)?[\s*_`]*$", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+|\n+")


def is_placeholder(line: str) -> bool:
    """Whether a summary line only says its section is empty (:data:`EMPTY_SECTION`, ``None.``,
    ``- n/a``, ``TBD``, a blank line): such a line is not content, and an earlier summary's
    placeholders are not carried into the next one."""
    return _PLACEHOLDER_LINE.match(line) is not None


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _content_lines(text: str) -> list[str]:
    headings = set(SUMMARY_HEADINGS)
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line in headings or line.startswith(DIGEST_LABEL_PREFIX):
            continue
        if line.startswith("#") and len(line.lstrip("#").split()) <= 4:
            continue  # another heading
        if is_placeholder(line):
            continue
        lines.append(line)
    return lines


def check_summary(
    reply: object,
    provider: str,
    *,
    template: bool = True,
    instructions: Sequence[str] = (),
    min_words: int = MIN_SUMMARY_WORDS,
) -> str:
    """A model's reply as a summary an engine may store, or the reason it may not.

    The same checks for every engine, in this order:

    - reasoning (``<think>`` and the like) is removed; nothing left is an ``empty`` failure;
    - with ``template``, fewer than :data:`MIN_TEMPLATE_HEADINGS` of the template's headings is
      ``unparsable`` (an engine that wants every heading in place conforms the reply itself);
    - a reply whose first line of content is an apology, a refusal or "I don't know" is
      ``unparsable``;
    - fewer than ``min_words`` words outside headings and placeholders is ``unparsable``;
    - a sentence of ``instructions`` (the system prompt and the instruction paragraphs the model
      was given, not the material it summarised) of at least :data:`ECHO_MIN_CHARS` characters
      repeated in the reply is ``unparsable``: the model echoed its instructions.

    :raises SummaryError: naming ``provider`` and what was wrong.
    """
    if not isinstance(reply, str):
        raise SummaryError.of(
            "unparsable", provider, f"the reply is {type(reply).__name__}, not text"
        )
    text = strip_reasoning(reply).strip()
    if not text:
        raise SummaryError.of("empty", provider, "no text besides reasoning" if reply else "")
    if template:
        present = {line.strip() for line in text.splitlines()} & set(SUMMARY_HEADINGS)
        if len(present) < MIN_TEMPLATE_HEADINGS:
            raise SummaryError.of(
                "unparsable",
                provider,
                f"the reply does not follow the summary template (fewer than "
                f"{MIN_TEMPLATE_HEADINGS} of its headings): {text[:80]!r}",
            )
    content = _content_lines(text)
    if content and _REFUSAL.match(content[0]):
        raise SummaryError.of(
            "unparsable", provider, f"the reply is a refusal or an apology: {content[0][:80]!r}"
        )
    words = sum(len(line.split()) for line in content)
    if words < min_words:
        raise SummaryError.of(
            "unparsable",
            provider,
            f"the reply says too little to be a summary ({words} words of content, at least "
            f"{min_words} needed): {text[:80]!r}",
        )
    said = _normal(text)
    for instruction in instructions:
        for sentence in _SENTENCE_END.split(instruction):
            probe = _normal(sentence)
            if len(probe) >= ECHO_MIN_CHARS and probe in said:
                raise SummaryError.of(
                    "unparsable",
                    provider,
                    f"the reply repeats its instructions instead of summarising: {sentence[:80]!r}",
                )
    return text
