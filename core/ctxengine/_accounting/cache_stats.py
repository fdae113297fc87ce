"""What prompt caching saved: per-response costs and per-session totals.

Prices come from the model metadata (USD per million tokens). Cache reads cost 0.1x the input
price, 5-minute writes 1.25x and 1-hour writes 2x (the multipliers live in
:class:`ctxengine.Usage`). The "uncached" cost prices every prompt token at the plain input price:
what the same traffic would have cost with no caching at all.
"""

from __future__ import annotations

import operator
from typing import Any

import attrs

from ctxengine._accounting.models import ModelInfo
from ctxengine._accounting.usage import (
    CACHE_READ_MULTIPLIER,
    CACHE_WRITE_1H_MULTIPLIER,
    CACHE_WRITE_5M_MULTIPLIER,
    COUNTS,
    Usage,
    usage_from_data,
)

_PER_MILLION = 1_000_000


@attrs.frozen
class CacheCost:
    """The cost of one response (or a sum of them), in USD, split by what was billed.

    :ivar total: what was billed: the sum of the five parts.
    :ivar uncached_total: the same tokens with no caching (all prompt tokens at the input price).
    """

    input_cost: float
    cache_read_cost: float
    cache_write_5m_cost: float
    cache_write_1h_cost: float
    output_cost: float
    total: float
    uncached_total: float

    @property
    def savings(self) -> float:
        """``uncached_total - total``; negative when writes cost more than reads saved."""
        return self.uncached_total - self.total

    @property
    def savings_ratio(self) -> float:
        """Share of the uncached cost saved (0.0 when nothing was spent)."""
        return self.savings / self.uncached_total if self.uncached_total else 0.0

    def __add__(self, other: CacheCost) -> CacheCost:
        if not isinstance(other, CacheCost):
            return NotImplemented
        return CacheCost(*map(operator.add, attrs.astuple(self), attrs.astuple(other)))


ZERO_COST = CacheCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def cost_of(usage: Usage, model: ModelInfo) -> CacheCost:
    """What ``usage`` cost at ``model``'s prices, and what it would have cost uncached.

    A model with unknown prices (0.0) costs 0.0 either way. Server-side compaction iterations
    (:attr:`Usage.compaction`) are added part by part.
    """
    per_in = model.input_price / _PER_MILLION
    per_out = model.output_price / _PER_MILLION
    uncached = usage.prompt_tokens * per_in + usage.output_tokens * per_out
    input_cost = usage.input_tokens * per_in
    read_cost = usage.cache_read_tokens * per_in * CACHE_READ_MULTIPLIER
    write_5m_cost = usage.cache_write_5m_tokens * per_in * CACHE_WRITE_5M_MULTIPLIER
    write_1h_cost = usage.cache_write_1h_tokens * per_in * CACHE_WRITE_1H_MULTIPLIER
    output_cost = usage.output_tokens * per_out
    cost = CacheCost(
        input_cost=input_cost,
        cache_read_cost=read_cost,
        cache_write_5m_cost=write_5m_cost,
        cache_write_1h_cost=write_1h_cost,
        output_cost=output_cost,
        total=input_cost + read_cost + write_5m_cost + write_1h_cost + output_cost,
        uncached_total=uncached,
    )
    if usage.compaction is not None:
        cost = cost + cost_of(usage.compaction, model)
    return cost


def cache_line(usage: Usage) -> str:
    """The per-response line: ``💾 Cache: 41,200/43,900 tokens (94% hit, 2,700 written)``.

    Read tokens over prompt tokens (uncached input + reads + writes); written counts both TTLs,
    and says how many were 1-hour writes when there were any. When the provider said why the
    prompt missed the cache, the reason follows:
    ``💾 Cache: 0/43,900 tokens (0% hit, 43,900 written; miss: system_changed, 41,000 tokens)``.
    """
    written = f"{usage.cache_write_tokens:,} written"
    if usage.cache_write_1h_tokens:
        written += f", {usage.cache_write_1h_tokens:,} of them 1h"
    if usage.cache_miss_reason:
        written += f"; miss: {usage.cache_miss_reason}"
        if usage.cache_missed_tokens:
            written += f", {usage.cache_missed_tokens:,} tokens"
    return (
        f"💾 Cache: {usage.cache_read_tokens:,}/{usage.prompt_tokens:,} tokens "
        f"({_percent(usage.cache_hit_ratio)} hit, {written})"
    )


def _percent(ratio: float) -> str:
    # Round half up so 0.5% shows as 1%, and never show 100% for a prompt that missed.
    percent = int(ratio * 100 + 0.5)
    if percent == 100 and ratio < 1.0:
        percent = 99
    return f"{percent}%"


@attrs.define
class SessionCacheStats:
    """Running totals of one session's responses.

    ``add`` each response's normalised usage with the model that served it (the model may change
    within a session, so it is passed per response).

    :ivar usage: the sum of every response's usage.
    :ivar cost: the sum of every response's cost.
    """

    responses: int = 0
    usage: Usage = attrs.field(factory=Usage)
    cost: CacheCost = ZERO_COST

    def add(self, usage: Usage, model: ModelInfo) -> CacheCost:
        """Count one response; returns its cost."""
        response_cost = cost_of(usage, model)
        self.responses += 1
        self.usage = self.usage + usage
        self.cost = self.cost + response_cost
        return response_cost

    def dump(self) -> dict[str, Any]:
        """The totals as JSON data, for another process to continue from (:meth:`restore`); the
        token counts in :data:`~ctxengine._accounting.usage.COUNTS` order (appending a count is
        fine, reordering breaks totals another process dumped)."""
        usage = self.usage
        return {
            "responses": self.responses,
            "tokens": [getattr(usage, name) for name in COUNTS],
            "costs": [*attrs.astuple(self.cost)],
            "miss_reason": usage.cache_miss_reason,
            "compaction": None if usage.compaction is None else attrs.asdict(usage.compaction),
        }

    @classmethod
    def restore(cls, data: Any) -> SessionCacheStats:
        """The totals :meth:`dump` gave.

        :raises ValueError: ``data`` is not what :meth:`dump` writes.
        """
        try:
            responses = int(data["responses"])
            tokens = [int(value) for value in data["tokens"]]
            costs = [float(value) for value in data["costs"]]
            reason = data["miss_reason"]
            compaction = data["compaction"]
            compaction = None if compaction is None else usage_from_data(compaction)
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not session cache statistics ({type(exc).__name__}: {exc})") from exc
        if (
            responses < 0
            or len(tokens) != len(COUNTS)
            or len(costs) != len(attrs.fields(CacheCost))
            or not (reason is None or isinstance(reason, str))
        ):
            raise ValueError(f"not session cache statistics: {data!r}")
        usage = Usage(
            **dict(zip(COUNTS, tokens, strict=True)),
            cache_miss_reason=reason,
            compaction=compaction,
        )
        return cls(responses=responses, usage=usage, cost=CacheCost(*costs))

    @property
    def hit_ratio(self) -> float:
        """Share of all prompt tokens so far that were read from the cache."""
        return self.usage.cache_hit_ratio

    def line(self) -> str:
        """A summary line, e.g. ``💾 Session cache: 12 responses, 380,000/410,000 prompt tokens
        from cache (93% hit), $0.2100 vs $1.2300 uncached (83% saved)``."""
        usage = self.usage
        return (
            f"💾 Session cache: {self.responses:,} responses, "
            f"{usage.cache_read_tokens:,}/{usage.prompt_tokens:,} prompt tokens from cache "
            f"({_percent(usage.cache_hit_ratio)} hit), "
            f"${self.cost.total:.4f} vs ${self.cost.uncached_total:.4f} uncached "
            f"({_savings(self.cost.savings_ratio)})"
        )


def _savings(ratio: float) -> str:
    if ratio < 0:
        return f"caching cost {_percent(-ratio)} more"
    return f"{_percent(ratio)} saved"
