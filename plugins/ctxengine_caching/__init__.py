"""The built-in ``system_and_3`` cache strategy, as a pluggy plugin.

Registered through the ``ctxengine`` entry-point group under the name ``system_and_3``; the
kernel loads it only when ``prompt_caching.strategy`` names it and caching is on. It marks the
system prompt and the last three non-system messages (see :mod:`ctxengine_caching.strategy`)
and keeps, per session, a report of which breakpoints close a prefix long enough to be cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ctxengine import CacheSettings, EngineContext, MarkedRequest, hookimpl
from ctxengine.messages import strip_cache_markers
from ctxengine_caching.breakpoints import Breakpoint, breakpoint_report, shortfall
from ctxengine_caching.strategy import apply_system_and_3, mark_system_and_3

__all__ = [
    "CTXENGINE_KIND",
    "STATE_KEY",
    "StrategyState",
    "apply_system_and_3",
    "cache_strategy",
    "mark_system_and_3",
    "strip_cache_markers",
]

CTXENGINE_KIND = "cache_strategy"
STATE_KEY = "system_and_3"
"""The key of this plugin's entry in ``ctx.state`` (the plugin's registered name)."""


@attrs.define
class StrategyState:
    """What the strategy recorded for one session (``ctx.state["system_and_3"]``).

    Until the session's prompt first reaches the model's minimum cacheable prefix, every request's
    breakpoints are checked as it is marked, counting exactly only the prefixes near or below the
    minimum (so a long conversation that reaches it at once costs no tokenizing), and the first
    shortfall is logged. After that the report of the last request is computed only when
    :attr:`breakpoints` is read, so a long session pays nothing per request for it.

    :ivar requests: requests marked so far.
    :ivar below_minimum_requests: requests whose longest breakpoint closed a prefix below the
        minimum: the API cached nothing for them and said nothing.
    :ivar reached_minimum: some request's longest prefix reached the minimum.
    :ivar logged: the shortfall notice was logged (once per session).
    """

    requests: int = 0
    below_minimum_requests: int = 0
    reached_minimum: bool = False
    logged: bool = False
    _report: Callable[[], list[Breakpoint]] | None = attrs.field(default=None, repr=False)
    _breakpoints: tuple[Breakpoint, ...] | None = attrs.field(default=None, repr=False)

    @property
    def breakpoints(self) -> tuple[Breakpoint, ...]:
        """The last request's breakpoints in prompt order, measured on first access."""
        if self._breakpoints is None:
            self._breakpoints = tuple(self._report()) if self._report is not None else ()
            self._report = None
        return self._breakpoints

    @property
    def uncacheable(self) -> tuple[Breakpoint, ...]:
        """The last request's breakpoints that cannot cache."""
        return tuple(point for point in self.breakpoints if not point.cacheable)

    def record(self, report: Callable[[], list[Breakpoint]]) -> None:
        """Remember how to measure the newest request (measured later, on demand)."""
        self.requests += 1
        self._report = report
        self._breakpoints = None


@hookimpl
def cache_strategy(
    ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
) -> MarkedRequest | None:
    """Mark ``request`` with ``system_and_3`` and record its breakpoint report.

    The first breakpoint shortfall of a session is logged once at INFO (short conversations start
    below the minimum); see :class:`StrategyState` for what is measured when.
    """
    state = ctx.plugin_state(STATE_KEY, StrategyState)
    result = mark_system_and_3(
        request,
        ttl=settings.ttl,
        native=settings.native,
        memo=ctx.memo,
        stable_ttl=settings.stable_ttl,
    )
    marked = result.request
    # Counts come from the caller's message objects (the session's memo knows them); the list
    # itself is snapshotted because the caller keeps appending to it.
    unmarked = {**request, "messages": list(request["messages"])}
    counter, minimum = ctx.tokens, settings.min_cacheable_tokens
    state.record(lambda: breakpoint_report(marked, counter, minimum, unmarked=unmarked))
    if not state.reached_minimum:
        _check_minimum(ctx, state, minimum, shortfall(marked, request, counter, minimum))
    return result


def _check_minimum(
    ctx: EngineContext,
    state: StrategyState,
    minimum: int,
    found: tuple[int, bool, list[Breakpoint]],
) -> None:
    total, last_cacheable, below = found
    if not total:
        return
    if last_cacheable:
        state.reached_minimum = True
    else:
        state.below_minimum_requests += 1
    if below and not state.logged:
        state.logged = True
        ctx.log.info(
            "prompt caching: %d of %d breakpoints cover fewer than %d tokens (%s), so the "
            "API caches nothing there yet",
            len(below),
            total,
            minimum,
            ", ".join(f"{p.position}={p.prefix_tokens}" for p in below),
        )
