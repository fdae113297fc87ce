"""What a replay measured: each turn (:class:`TurnRecord`), each scenario (:class:`ScenarioResult`),
each session (:class:`ReplayReport`), and the sums over sessions (:func:`all_sessions`,
:func:`totals`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs

from ctxengine import (
    CacheTTL,
    Usage,
)
from ctxengine_replay.scenarios import BASELINE, Scenario

Progress = Callable[[str, int, int], None]
"""Called as ``progress(scenario name, done, total)`` after each turn."""


@attrs.frozen
class TurnRecord:
    """One simulated request/response (and the summary call made before it, if any)."""

    turn: int
    index: int
    """Index in the recording of the assistant message answering this request."""
    messages_sent: int
    prompt_tokens: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int
    cost: float
    """This request's cost (prompt and output), without the summary call."""
    uncached_cost: float
    compaction: str | None = None
    """``None``, or the compaction status and reason when one ran before this request."""
    seconds: float = 0.0
    """When the request was sent, from the start of the session."""
    read_cost: float = 0.0
    write_cost: float = 0.0
    summary_prompt_tokens: int = 0
    summary_cache_read_tokens: int = 0
    summary_input_cost: float = 0.0
    summary_output_cost: float = 0.0
    cleared_tokens: int = 0
    """Input tokens the server's context editing cleared from this request."""

    @property
    def total_cost(self) -> float:
        """This request and the summary call made before it."""
        return self.cost + self.summary_input_cost + self.summary_output_cost

    @property
    def usage(self) -> Usage:
        """The prompt-side usage of this request as the provider would report it."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_5m_tokens=self.cache_write_tokens - self.cache_write_1h_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens,
        )


BREAKDOWN_KEYS = ("cache_reads", "cache_writes", "uncached_input", "summary_calls", "output")
"""Where the money goes (:meth:`ScenarioResult.breakdown`), in the order reports show it."""


Number = TypeVar("Number", int, float)


class _TurnSum(Generic[Number]):
    """A :class:`ScenarioResult` figure: one :class:`TurnRecord` attribute summed over the
    result's turns (read-only, computed when read)."""

    def __init__(self, attribute: str, kind: type[Number], doc: str | None = None) -> None:
        self._attribute = attribute
        self._zero: Number = kind()
        self.__doc__ = doc or f"The turns' ``{attribute}``, summed."

    @overload
    def __get__(self, result: None, owner: type[Any]) -> _TurnSum[Number]: ...

    @overload
    def __get__(self, result: ScenarioResult, owner: type[Any]) -> Number: ...

    def __get__(self, result: ScenarioResult | None, owner: type[Any]) -> Number | _TurnSum[Number]:
        if result is None:
            return self
        attribute = self._attribute
        total = self._zero
        for turn in result.turns:
            total += getattr(turn, attribute)
        return total


@attrs.frozen
class ScenarioResult:
    """A whole session under one scenario.

    :ivar caching: whether requests were really marked for caching (the configuration may turn
        caching off for the model even when the scenario asks for it).
    :ivar strategy: the strategy that marked the requests (``None`` without caching).
    :ivar ttl: the TTL policy it used (``None`` without caching).
    :ivar engine: the engine that ran.
    :ivar clearing: whether requests carried context edits.
    :ivar fallbacks: compactions the engine handed to its fallback (the native engine's local
        compressor).
    """

    scenario: Scenario
    caching: bool
    turns: tuple[TurnRecord, ...]
    compactions: int
    output_cost: float
    """Cost of the agent's output tokens, the same in every scenario."""
    strategy: str | None = None
    ttl: CacheTTL | None = None
    engine: str = ""
    clearing: bool = False
    fallbacks: int = 0

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def compaction(self) -> bool:
        return self.scenario.compaction

    prompt_tokens = _TurnSum("prompt_tokens", int)
    cache_read_tokens = _TurnSum("cache_read_tokens", int)
    cache_write_tokens = _TurnSum("cache_write_tokens", int)
    read_cost = _TurnSum("read_cost", float, "Prompt tokens read from the cache (0.1x).")
    write_cost = _TurnSum("write_cost", float, "Prompt tokens written to the cache (1.25x / 2x).")
    summary_input_cost = _TurnSum(
        "summary_input_cost", float, "The prompt side of the summary calls."
    )
    summary_output_cost = _TurnSum("summary_output_cost", float)
    cleared_tokens = _TurnSum(
        "cleared_tokens",
        int,
        "Input tokens the server's context editing cleared, over every request.",
    )
    cost = _TurnSum(
        "total_cost",
        float,
        "Everything: the agent's requests and the summary calls, input and output.",
    )

    @property
    def summary_calls(self) -> int:
        return sum(1 for t in self.turns if t.summary_prompt_tokens)

    @property
    def compaction_cost(self) -> float:
        """What the compactions themselves cost: their summary calls, input and output (the
        server's compaction iterations for the native engine)."""
        return self.summary_input_cost + self.summary_output_cost

    @property
    def input_cost(self) -> float:
        """Cost of the prompt side only (input, cache reads and writes, summary call prompts)."""
        return self.cost - self.output_cost - self.summary_output_cost

    @property
    def uncached_input_cost(self) -> float:
        """The agent's prompt tokens billed at the plain input price."""
        return self.input_cost - self.read_cost - self.write_cost - self.summary_input_cost

    def breakdown(self) -> dict[str, float]:
        """Where the money goes, by :data:`BREAKDOWN_KEYS`: prompt reads, writes, uncached
        input, summary calls (input and output), the agent's output. The parts sum to
        :attr:`cost`."""
        return {
            "cache_reads": self.read_cost,
            "cache_writes": self.write_cost,
            "uncached_input": self.uncached_input_cost,
            "summary_calls": self.summary_input_cost + self.summary_output_cost,
            "output": self.output_cost,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "label": self.scenario.label,
            "caching": self.caching,
            "compaction": self.compaction,
            "strategy": self.strategy,
            "ttl": self.ttl,
            "summaries": self.scenario.summaries,
            "compactions": self.compactions,
            "engine": self.engine,
            "clearing": self.clearing,
            "fallbacks": self.fallbacks,
            "compaction_cost_usd": round(self.compaction_cost, 6),
            "cleared_tokens": self.cleared_tokens,
            "summary_calls": self.summary_calls,
            "prompt_tokens": self.prompt_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": round(self.cost, 6),
            "input_cost_usd": round(self.input_cost, 6),
            "breakdown_usd": {key: round(value, 6) for key, value in self.breakdown().items()},
            "turns": [attrs.asdict(t) for t in self.turns],
        }


@attrs.frozen
class ReplayReport:
    """A session replayed under every scenario, with one gap distribution.

    :ivar engine: the engine that ran (the built-in compressor after a fallback).
    :ivar trigger_key: the key holding the engine's compaction trigger, ``None`` if it has none.
    :ivar trigger: that key's value (a fraction of the window).
    :ivar gap_seconds: the fixed time between requests, ``None`` for a distribution.
    :ivar gaps: the gap distribution's name (``"30s"``, ``"mixed"``, ...).
    :ivar scenarios: scenario name -> result, the baseline first.
    :ivar comparisons: comparison name (:data:`COMPARISONS`) -> result; empty when neither the
        native engine nor context editing is in play (see the module docstring).
    """

    session_id: str
    format: str
    model: str
    engine: str
    trigger_key: str | None
    trigger: float | None
    messages: int
    gap_seconds: float | None
    gaps: str
    scenarios: Mapping[str, ScenarioResult]
    comparisons: Mapping[str, ScenarioResult] = attrs.field(factory=dict)

    @property
    def baseline(self) -> ScenarioResult:
        return self.scenarios[BASELINE.name]

    def saved(self, result: ScenarioResult) -> float:
        """Share of the baseline's input cost that ``result`` saves."""
        before = self.baseline.input_cost
        return 1.0 - result.input_cost / before if before else 0.0

    def savings(self, scenario: str, *, input_only: bool = True) -> float:
        """Share of the baseline's cost (input side by default) that ``scenario`` saves."""
        base = self.baseline
        other = self.scenarios[scenario]
        before = base.input_cost if input_only else base.cost
        after = other.input_cost if input_only else other.cost
        return 1.0 - after / before if before else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "format": self.format,
            "model": self.model,
            "engine": self.engine,
            "trigger": {"key": self.trigger_key, "value": self.trigger},
            "messages": self.messages,
            "gap_seconds": self.gap_seconds,
            "gaps": self.gaps,
            "savings_vs_none": {
                name: {
                    "input_cost": round(self.savings(name), 4),
                    "total_cost": round(self.savings(name, input_only=False), 4),
                }
                for name in self.scenarios
                if name != BASELINE.name
            },
            "scenarios": {name: result.to_json() for name, result in self.scenarios.items()},
            "comparisons": {
                name: {**result.to_json(), "input_cost_saved_vs_none": round(self.saved(result), 4)}
                for name, result in self.comparisons.items()
            },
        }


def all_sessions(reports: Sequence[ReplayReport]) -> ReplayReport:
    """``reports`` (of one gap distribution) as one report, session ``all N sessions``: each
    scenario's and comparison's turns one after the other, so every figure and saving is the
    total over the sessions. A scenario or comparison counts only when every report holds it.

    :raises ValueError: when ``reports`` is empty or mixes gap distributions.
    """
    if not reports:
        raise ValueError("all_sessions needs at least one report")
    first = reports[0]
    if any(report.gaps != first.gaps for report in reports):
        raise ValueError("all_sessions sums reports of one gap distribution")

    def merged(results: Sequence[ScenarioResult]) -> ScenarioResult:
        return attrs.evolve(
            results[0],
            turns=tuple(turn for result in results for turn in result.turns),
            compactions=sum(r.compactions for r in results),
            output_cost=sum(r.output_cost for r in results),
            fallbacks=sum(r.fallbacks for r in results),
        )

    scenarios = {
        name: merged([r.scenarios[name] for r in reports])
        for name in first.scenarios
        if all(name in r.scenarios for r in reports)
    }
    comparisons = {
        name: merged([r.comparisons[name] for r in reports])
        for name in first.comparisons
        if all(name in r.comparisons for r in reports)
    }
    return attrs.evolve(
        first,
        session_id=f"all {len(reports)} sessions",
        messages=sum(r.messages for r in reports),
        scenarios=scenarios,
        comparisons=comparisons,
    )


def by_gaps(reports: Sequence[ReplayReport]) -> dict[str, list[ReplayReport]]:
    """``reports`` grouped by gap distribution, in the order they first appear."""
    groups: dict[str, list[ReplayReport]] = {}
    for report in reports:
        groups.setdefault(report.gaps, []).append(report)
    return groups


@attrs.frozen
class Totals:
    """One scenario summed over several sessions replayed with the same gap distribution.

    :ivar gaps: that distribution's name, or ``None`` when every report shares one.
    :ivar input_saved: the share of the input cost saved against the baseline of the same
        sessions and gaps (``None`` for the baseline itself).
    :ivar breakdown: where the money goes, summed (:meth:`ScenarioResult.breakdown`).
    """

    scenario: Scenario
    gaps: str | None
    sessions: int
    prompt_tokens: int
    input_cost: float
    cost: float
    compactions: int
    breakdown: Mapping[str, float]
    input_saved: float | None = None

    @property
    def name(self) -> str:
        """The scenario's name, with ``@gaps`` when reports of several distributions are summed."""
        return self.scenario.name if self.gaps is None else f"{self.scenario.name}@{self.gaps}"

    @property
    def label(self) -> str:
        label = self.scenario.label
        return label if self.gaps is None else f"{label}, {self.gaps} gaps"


def totals(reports: Sequence[ReplayReport]) -> list[Totals]:
    """Each scenario summed over ``reports``, per gap distribution when they use several, in the
    order the reports hold them (each distribution's baseline first)."""
    several = len({report.gaps for report in reports}) > 1
    sums: dict[tuple[str | None, str], Totals] = {}
    for report in reports:
        gaps = report.gaps if several else None
        for name, result in report.scenarios.items():
            before = sums.get((gaps, name))
            parts = result.breakdown()
            if before is not None:
                parts = {key: before.breakdown[key] + value for key, value in parts.items()}
            sums[(gaps, name)] = Totals(
                result.scenario,
                gaps,
                (before.sessions if before else 0) + 1,
                (before.prompt_tokens if before else 0) + result.prompt_tokens,
                (before.input_cost if before else 0.0) + result.input_cost,
                (before.cost if before else 0.0) + result.cost,
                (before.compactions if before else 0) + result.compactions,
                parts,
            )
    out = []
    for (gaps, name), total in sums.items():
        base = sums[(gaps, BASELINE.name)].input_cost
        saved = None if name == BASELINE.name else (1.0 - total.input_cost / base if base else 0.0)
        out.append(attrs.evolve(total, input_saved=saved))
    return out
