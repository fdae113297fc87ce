"""Checking the cache markers a strategy wrote, for its tests: :func:`marker_problems`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxengine._messages.markers import marked_items, marker_findings

__all__ = ["marker_problems"]


def marker_problems(request: Mapping[str, Any]) -> list[str]:
    """What Anthropic would reject about the markers of ``request``, one line each (empty when
    nothing): the ``cache-control-*`` rules of :func:`ctxengine.messages.validate`, counting a
    top-level ``cache_control``."""
    findings = marker_findings(marked_items(request), request.get("cache_control"))
    return [f"{where}: {text}" for _, _, where, text in findings]
