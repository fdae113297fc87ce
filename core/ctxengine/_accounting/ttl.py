"""Adaptive cache TTL (``prompt_caching.cache_ttl: auto``): which TTL each breakpoint of the next
request gets, from the session's measured request gaps and the price model.

The price model (multiples of the input price, :mod:`ctxengine._accounting.usage`): a 5-minute
write costs 1.25, a 1-hour write 2.0, a read 0.1. A request reads the prefix the previous request
cached and writes what is new, so, per request, with ``P`` the prompt and ``D`` the new tokens:

- with 5-minute entries everything new is written at 1.25, but after a gap longer than five
  minutes (and at most an hour) the whole prefix is written again: an expected extra
  ``q × (1.25 − 0.1) × P`` per request, ``q`` being the share of such gaps;
- with 1-hour entries nothing expires within an hour, but every new token costs 0.75 more:
  ``0.75 × D`` extra per request;
- with a 1-hour *checkpoint* every ``K`` requests (that request's breakpoints all 1h, the others
  5m) a long gap only loses what was written since the last checkpoint, on average
  ``(K − 1) / 2`` requests' worth: ``0.75 × D / K + q × 1.15 × D × (K − 1) / 2`` extra, smallest
  at ``K = sqrt(1.5 / (1.15 q))``.

:class:`TTLPlanner` measures ``q`` (gaps between prepared requests), ``P`` (the last prompt) and
``D`` (the mean growth of the prompt between requests) and picks the cheapest of the three for
each request. Breakpoints on the stable prefix (tools, system prompt) are 1h as soon as one gap
longer than five minutes was seen: they are written once, so the premium is paid once, while
each long gap would write them again. Gaps longer than an hour expire both TTLs and count for
neither. Until a long gap has been measured everything is 5m (the cheapest when requests follow
each other quickly). Longer TTLs always come before shorter ones, as the API requires: the stable
breakpoints come first and are never shorter than the rolling ones.
"""

from __future__ import annotations

import math
from typing import Literal

import attrs

from ctxengine._accounting.usage import (
    CACHE_READ_MULTIPLIER,
    CACHE_WRITE_1H_MULTIPLIER,
    CACHE_WRITE_5M_MULTIPLIER,
)

__all__ = ["MAX_CHECKPOINT_INTERVAL", "TTLChoice", "TTLPlanner"]

Ttl = Literal["5m", "1h"]
Policy = Literal["5m", "1h", "checkpoint"]

SHORT_SECONDS = 300.0
LONG_SECONDS = 3600.0
MAX_CHECKPOINT_INTERVAL = 8
"""Checkpoints are at most this many requests apart, so the last one stays within the provider's
look-back (about 20 blocks) of the next request's rolling breakpoints."""

_PREMIUM = CACHE_WRITE_1H_MULTIPLIER - CACHE_WRITE_5M_MULTIPLIER  # 0.75: the 1h write premium
_REWRITE = CACHE_WRITE_5M_MULTIPLIER - CACHE_READ_MULTIPLIER  # 1.15: a miss instead of a read


@attrs.frozen
class TTLChoice:
    """The TTLs of one request's breakpoints.

    :ivar ttl: for breakpoints that move with the conversation (messages, the automatic marker).
    :ivar stable_ttl: for breakpoints closing a prefix that does not change between requests
        (tools, system prompt); never shorter than ``ttl``.
    :ivar policy: which of the three layouts was chosen (see the module docstring).
    :ivar interval: requests between checkpoints when ``policy == "checkpoint"``.
    """

    ttl: Ttl
    stable_ttl: Ttl
    policy: Policy
    interval: int = 1


@attrs.define
class TTLPlanner:
    """One session's measurements and the decision rule of the module docstring.

    Call :meth:`choose` once per prepared request with the request's time and prompt size.
    """

    requests: int = 0
    gaps: int = 0
    mid_gaps: int = 0
    """Gaps longer than five minutes and at most an hour: the ones a 1h entry survives."""
    growth_total: int = 0
    growth_steps: int = 0
    last_time: float | None = None
    last_tokens: int | None = None
    since_checkpoint: int = MAX_CHECKPOINT_INTERVAL
    """Requests since the last checkpoint; starts high so the first checkpoint comes at once."""
    shrank: bool = False
    """The last request was smaller than the one before (a compaction): its prefix is all new."""

    @property
    def long_gap_share(self) -> float:
        """``q``: the share of measured gaps that a 5m entry does not survive but a 1h one does."""
        return self.mid_gaps / self.gaps if self.gaps else 0.0

    @property
    def mean_growth(self) -> float:
        """``D``: the mean number of tokens a request adds to the previous one."""
        return self.growth_total / self.growth_steps if self.growth_steps else 0.0

    def observe(self, now: float, prompt_tokens: int) -> None:
        """Record a request sent at ``now`` (seconds) with ``prompt_tokens`` tokens."""
        if self.last_time is not None:
            gap = now - self.last_time
            self.gaps += 1
            if SHORT_SECONDS < gap <= LONG_SECONDS:
                self.mid_gaps += 1
        self.shrank = self.last_tokens is not None and prompt_tokens < self.last_tokens
        if self.last_tokens is not None and prompt_tokens > self.last_tokens:
            # Shrinking prompts are compactions: they say nothing about how fast turns grow.
            self.growth_total += prompt_tokens - self.last_tokens
            self.growth_steps += 1
        self.last_time = now
        self.last_tokens = prompt_tokens
        self.requests += 1

    def decide(self, prompt_tokens: int) -> tuple[Policy, int]:
        """The cheapest policy for a prompt of ``prompt_tokens`` and, for checkpoints, ``K``."""
        q = self.long_gap_share
        if q <= 0.0:
            return "5m", 1
        growth = max(self.mean_growth, 1.0)
        interval = round(math.sqrt(2 * _PREMIUM / (_REWRITE * q)))
        interval = min(max(interval, 1), MAX_CHECKPOINT_INTERVAL)
        costs: dict[Policy, float] = {
            "5m": q * _REWRITE * prompt_tokens,
            "1h": _PREMIUM * growth,
            "checkpoint": _PREMIUM * growth / interval
            + q * _REWRITE * growth * (interval - 1) / 2,
        }
        if interval == 1:
            del costs["checkpoint"]  # the same as 1h
        best = min(costs, key=lambda policy: costs[policy])
        return best, interval

    def choose(self, now: float, prompt_tokens: int) -> TTLChoice:
        """Measure this request, then return the TTLs of its breakpoints."""
        self.observe(now, prompt_tokens)
        policy, interval = self.decide(prompt_tokens)
        stable: Ttl = "1h" if self.mid_gaps else "5m"
        if policy != "checkpoint":
            self.since_checkpoint = MAX_CHECKPOINT_INTERVAL
            ttl: Ttl = "1h" if policy == "1h" else "5m"
            return TTLChoice(ttl, "1h" if policy == "1h" else stable, policy)
        self.since_checkpoint += 1
        # Right after a compaction the whole prompt is written anew: a checkpoint would pay the
        # 1h premium on all of it, so it waits for the next request.
        if self.since_checkpoint >= interval and not self.shrank:
            self.since_checkpoint = 0
            return TTLChoice("1h", "1h", policy, interval)
        return TTLChoice("5m", stable, policy, interval)
