"""The built-in ``system_and_3`` cache strategy (SPEC §3), as a pluggy plugin.

Registered through the ``ctxengine`` entry-point group under the name ``system_and_3``; the
kernel loads it only when ``prompt_caching.strategy`` names it and caching is on. It marks the
system prompt and the last three non-system messages (see :mod:`ctxengine_caching.strategy`)
and keeps, per session, a report of which breakpoints close a prefix long enough to be cached.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxengine import hookimpl
from ctxengine.caching import Breakpoint, breakpoint_report
from ctxengine.context import CacheSettings, EngineContext
from ctxengine_caching.strategy import apply_system_and_3, strip_cache_markers

__all__ = [
    "CTXENGINE_KIND",
    "STATE_KEY",
    "StrategyState",
    "apply_system_and_3",
    "cache_strategy",
    "strip_cache_markers",
]

CTXENGINE_KIND = "cache_strategy"
STATE_KEY = "system_and_3"
"""The key of this plugin's entry in ``ctx.state`` (the plugin's registered name)."""


@attrs.define
class StrategyState:
    """What the strategy recorded for one session (``ctx.state["system_and_3"]``).

    :ivar requests: requests marked so far.
    :ivar breakpoints: the report for the last request, in prompt order.
    :ivar uncacheable_requests: requests with at least one breakpoint below the model's minimum
        cacheable prefix (the API caches nothing there and says nothing).
    """

    requests: int = 0
    breakpoints: tuple[Breakpoint, ...] = ()
    uncacheable_requests: int = 0

    @property
    def uncacheable(self) -> tuple[Breakpoint, ...]:
        """The last request's breakpoints that cannot cache."""
        return tuple(point for point in self.breakpoints if not point.cacheable)


@hookimpl
def cache_strategy(
    ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
) -> dict[str, Any] | None:
    """Mark ``request`` with ``system_and_3`` and record its breakpoint report.

    The first request of a session with a breakpoint below the minimum is logged once (short
    conversations start below it; later ones are only counted, to keep logs quiet).
    """
    marked = apply_system_and_3(request, ttl=settings.ttl, native=settings.native)
    report = breakpoint_report(marked, ctx.tokens, settings.min_cacheable_tokens, unmarked=request)
    state = ctx.state.get(STATE_KEY)
    if not isinstance(state, StrategyState):
        state = StrategyState()
        ctx.state[STATE_KEY] = state
    state.requests += 1
    state.breakpoints = tuple(report)
    below = state.uncacheable
    if below:
        if state.uncacheable_requests == 0:
            ctx.log.info(
                "prompt caching: %d of %d breakpoints cover fewer than %d tokens (%s), so the "
                "API caches nothing there yet",
                len(below),
                len(report),
                settings.min_cacheable_tokens,
                ", ".join(f"{p.position}={p.prefix_tokens}" for p in below),
            )
        state.uncacheable_requests += 1
    return marked
