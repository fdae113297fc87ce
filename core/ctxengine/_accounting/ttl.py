"""Adaptive cache TTL (``prompt_caching.cache_ttl: auto``): which TTL each breakpoint of the next
request gets, from the session's measured request gaps and the price model.

The price model (multiples of the input price, :mod:`ctxengine._accounting.usage`): a 5-minute
write costs 1.25, a 1-hour write 2.0, a read 0.1. A request reads the prefix an earlier request
cached and writes only what is new (``D`` tokens); the TTL of its breakpoints decides how long the
*whole* prefix it ends stays cached. So per request the choice is:

- **5m**: the new tokens cost 1.25; if the next gap is longer than five minutes (and at most an
  hour), everything written since the last 1h entry (``T`` tokens, this request's included) is
  written again instead of read: an expected extra ``q × (1.25 − 0.1) × T``, ``q`` being the
  measured share of such gaps;
- **1h** (a *checkpoint*): the new tokens cost 0.75 more, ``0.75 × D``, and the whole prefix
  survives any gap up to an hour.

:class:`TTLPlanner` picks 1h when ``q × 1.15 × T ≥ 0.75 × D``, else 5m. With only short gaps
(``q = 0``) every request is 5m; with mostly long ones every request is 1h; in between,
checkpoints fall on requests that add little while much is unprotected. A checkpoint more than
:data:`MAX_CHECKPOINT_INTERVAL` requests back is out of the provider's look-back, so then ``T`` is
the whole prompt; after a compaction the prompt is all new, so ``T = D``. Breakpoints on the
stable prefix (tools, system prompt) are 1h as soon as one gap longer than five minutes was seen:
they are written once, so the premium is paid once, while each long gap would write them again.
Gaps longer than an hour expire both TTLs and count for neither. Until a long gap has been
measured everything is 5m. Longer TTLs always come before shorter ones, as the API requires: the
stable breakpoints come first and are never shorter than the rolling ones.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ctxengine._accounting.usage import (
    CACHE_READ_MULTIPLIER,
    CACHE_WRITE_1H_MULTIPLIER,
    CACHE_WRITE_5M_MULTIPLIER,
)

__all__ = ["MAX_CHECKPOINT_INTERVAL", "TTLChoice", "TTLPlanner"]

Ttl = Literal["5m", "1h"]

SHORT_SECONDS = 300.0
LONG_SECONDS = 3600.0
TTL_SECONDS = {"5m": SHORT_SECONDS, "1h": LONG_SECONDS}
"""How long a cache entry written (or last read) with each TTL lives, in seconds."""
MAX_CHECKPOINT_INTERVAL = 8
"""A checkpoint this many requests back counts as lost: the provider looks back only about 20
blocks from each breakpoint, and a request adds a couple of messages."""

PRIOR_LONG_GAPS = 0.3
"""What the planner assumes before it has seen a long gap: three tenths of one. With only short gaps
``q`` falls towards 0, but a request that adds very little while much is unprotected still
becomes a cheap checkpoint, so the first long gap of a session never loses the whole prompt."""

_PREMIUM = CACHE_WRITE_1H_MULTIPLIER - CACHE_WRITE_5M_MULTIPLIER  # 0.75: the 1h write premium
_REWRITE = CACHE_WRITE_5M_MULTIPLIER - CACHE_READ_MULTIPLIER  # 1.15: a miss instead of a read


@attrs.frozen
class TTLChoice:
    """The TTLs of one request's breakpoints.

    :ivar ttl: for breakpoints that move with the conversation (messages, the automatic marker).
    :ivar stable_ttl: for breakpoints closing a prefix that does not change between requests
        (tools, system prompt); never shorter than ``ttl``.
    """

    ttl: Ttl
    stable_ttl: Ttl


@attrs.define
class TTLPlanner:
    """One session's measurements and the decision rule of the module docstring.

    Call :meth:`choose` once per prepared request with the request's time and prompt size.
    """

    gaps: int = 0
    mid_gaps: int = 0
    """Gaps longer than five minutes and at most an hour: the ones a 1h entry survives."""
    last_time: float | None = None
    last_tokens: int | None = None
    unprotected: int = 0
    """Tokens written since the last 1h checkpoint (``T`` before this request)."""
    since_checkpoint: int | None = None
    """Requests since the last 1h checkpoint; ``None`` before the first."""

    @property
    def long_gap_share(self) -> float:
        """``q``: the expected share of gaps that a 5m entry does not survive but a 1h one does,
        ``(long gaps + PRIOR_LONG_GAPS) / (gaps + 1)``."""
        return (self.mid_gaps + PRIOR_LONG_GAPS) / (self.gaps + 1)

    def observe(self, now: float, prompt_tokens: int) -> int:
        """Record a request sent at ``now`` (seconds) with ``prompt_tokens`` tokens; returns how
        many of them are new (``D``: all of them after a compaction)."""
        if self.last_time is not None:
            gap = now - self.last_time
            self.gaps += 1
            if SHORT_SECONDS < gap <= LONG_SECONDS:
                self.mid_gaps += 1
        if self.last_tokens is None or prompt_tokens < self.last_tokens:
            # First request, or a compaction: the prefix is new, earlier checkpoints are gone.
            new = prompt_tokens
            self.unprotected = 0
            self.since_checkpoint = None
        else:
            new = prompt_tokens - self.last_tokens
        self.last_time = now
        self.last_tokens = prompt_tokens
        return new

    def choose(self, now: float, prompt_tokens: int) -> TTLChoice:
        """Measure this request, then return the TTLs of its breakpoints."""
        new = self.observe(now, prompt_tokens)
        q = self.long_gap_share
        stable: Ttl = "1h" if self.mid_gaps else "5m"
        reachable = (
            self.since_checkpoint is not None and self.since_checkpoint < MAX_CHECKPOINT_INTERVAL
        )
        unprotected = (self.unprotected if reachable else prompt_tokens - new) + new
        if q * _REWRITE * unprotected >= _PREMIUM * max(new, 1):
            self.unprotected = 0
            self.since_checkpoint = 0
            return TTLChoice("1h", "1h")
        self.unprotected = unprotected
        if self.since_checkpoint is not None:
            self.since_checkpoint += 1
        return TTLChoice("5m", stable)
