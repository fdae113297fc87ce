"""The built-in ``tool_turns`` cache strategy, as a pluggy plugin.

Selected with ``prompt_caching.strategy: tool_turns`` (``system_and_3`` stays the default). It
marks the stable part and the end of the system prompt, the ends of the last completed tool
transactions and the tail, with Anthropic's top-level automatic ``cache_control`` on routes that
accept it (see :mod:`ctxengine_tool_turns.layout`).
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxengine import CacheSettings, EngineContext, MarkedRequest, hookimpl
from ctxengine_tool_turns.layout import apply_tool_turns, mark_tool_turns

__all__ = [
    "CTXENGINE_KIND",
    "STATE_KEY",
    "LayoutState",
    "apply_tool_turns",
    "cache_strategy",
    "mark_tool_turns",
]

CTXENGINE_KIND = "cache_strategy"
STATE_KEY = "tool_turns"
"""The key of this plugin's entry in ``ctx.state`` (the plugin's registered name)."""


@attrs.define
class LayoutState:
    """What the strategy keeps for one session (``ctx.state["tool_turns"]``).

    :ivar requests: requests marked so far.
    :ivar automatic: requests whose tail was left to the top-level automatic marker.
    """

    requests: int = 0
    automatic: int = 0


@hookimpl
def cache_strategy(
    ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
) -> MarkedRequest | None:
    """Mark ``request`` with the ``tool_turns`` layout for this route and these TTLs."""
    state = ctx.plugin_state(STATE_KEY, LayoutState)
    marked = mark_tool_turns(
        request,
        ttl=settings.ttl,
        stable_ttl=settings.stable_ttl,
        native=settings.native,
        automatic=settings.automatic,
        memo=ctx.memo,
    )
    state.requests += 1
    if "cache_control" in marked.request:
        state.automatic += 1
    return marked
