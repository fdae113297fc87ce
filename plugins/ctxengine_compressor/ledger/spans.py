"""Markdown code spans: how ledger items are quoted when rendered, and read back."""

from __future__ import annotations

import re

__all__ = ["code_span"]


def code_span(text: str) -> str:
    """``text`` as a Markdown code span that shows it verbatim (longer fences around backticks)."""
    if "`" not in text:
        return f"`{text}`"
    longest = max(len(run) for run in re.findall(r"`+", text))
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


_SPAN = re.compile(r"(`+) ?(.+?) ?\1(?!`)")


def _unspan(text: str) -> str:
    match = _SPAN.fullmatch(text.strip())
    return match.group(2) if match else text.strip()
