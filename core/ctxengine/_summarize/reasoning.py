"""Keeping a model's reasoning out of the summary it writes."""

from __future__ import annotations

import re

_TAGS = r"think|thinking|reasoning"
_CLOSED_SPAN = re.compile(rf"<({_TAGS})\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_OPENER = re.compile(rf"<(?:{_TAGS})\b[^>]*>", re.IGNORECASE)
_CLOSER = re.compile(rf"</(?:{_TAGS})\s*>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """``text`` without inline reasoning, trimmed of surrounding whitespace.

    Removes closed ``<think>…</think>`` / ``<thinking>…</thinking>`` / ``<reasoning>…</reasoning>``
    spans anywhere; everything after an opener that is never closed (the model ran out of tokens
    while thinking); and everything before a stray closer (servers whose reasoning parser ate the
    opening tag). The result may be empty: then the reply held nothing but reasoning.
    """
    text = _CLOSED_SPAN.sub("", text)
    closers = list(_CLOSER.finditer(text))
    if closers:
        text = text[closers[-1].end() :]
    opener = _OPENER.search(text)
    if opener is not None:
        text = text[: opener.start()]
    return text.strip()
