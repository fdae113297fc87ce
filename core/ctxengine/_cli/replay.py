"""Replaying a recorded session turn by turn to show what compaction and caching change.

At every assistant turn of the recording, the request is everything the agent would hold before
that turn: the (possibly compacted) context plus the messages that arrived since. Each request
goes through the selected engine and the cache strategy like a live one, is priced against the
simulated provider cache (:mod:`ctxengine._accounting.cachesim`), and the recorded assistant
message is appended as the response. Four scenarios run side by side:

- ``none``: no compaction, no caching (the baseline);
- ``caching``: caching only;
- ``compaction``: compaction only;
- ``both``: compaction and caching, as configured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from ctxengine._accounting.cache_stats import CacheCost, cost_of
from ctxengine._accounting.cachesim import PromptCacheSimulator, prompt_usage
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._accounting.usage import Usage
from ctxengine._cli.files import ConversationRecord
from ctxengine._config.core import Config
from ctxengine._kernel.kernel import load
from ctxengine._messages.conversation import Message

Scenario = Literal["none", "caching", "compaction", "both"]
SCENARIOS: tuple[Scenario, ...] = ("none", "caching", "compaction", "both")
Progress = Callable[[str, int, int], None]
"""Called as ``progress(label, done, total)`` after each turn."""


@attrs.frozen
class TurnRecord:
    """One simulated request/response."""

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
    uncached_cost: float
    compaction: str | None = None
    """``None``, or the compaction status and reason when one ran before this request."""

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


@attrs.frozen
class ScenarioResult:
    """A whole session under one scenario."""

    scenario: Scenario
    caching: bool
    compaction: bool
    turns: tuple[TurnRecord, ...]
    compactions: int
    output_cost: float
    """Cost of the output tokens, the same in every scenario."""

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def cache_read_tokens(self) -> int:
        return sum(t.cache_read_tokens for t in self.turns)

    @property
    def cache_write_tokens(self) -> int:
        return sum(t.cache_write_tokens for t in self.turns)

    @property
    def cost(self) -> float:
        return sum(t.cost for t in self.turns)

    @property
    def input_cost(self) -> float:
        """Cost of the prompt side only (input, cache reads and writes; no output)."""
        return self.cost - self.output_cost

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "caching": self.caching,
            "compaction": self.compaction,
            "compactions": self.compactions,
            "prompt_tokens": self.prompt_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": round(self.cost, 6),
            "input_cost_usd": round(self.input_cost, 6),
            "turns": [attrs.asdict(t) for t in self.turns],
        }


@attrs.frozen
class ReplayReport:
    """A session replayed under every scenario."""

    session_id: str
    format: str
    model: str
    engine: str
    messages: int
    gap_seconds: float
    scenarios: Mapping[Scenario, ScenarioResult]

    def savings(self, scenario: Scenario, *, input_only: bool = True) -> float:
        """Share of the baseline's cost (input side by default) that ``scenario`` saves."""
        base = self.scenarios["none"]
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
            "messages": self.messages,
            "gap_seconds": self.gap_seconds,
            "savings_vs_none": {
                name: {
                    "input_cost": round(self.savings(name), 4),
                    "total_cost": round(self.savings(name, input_only=False), 4),
                }
                for name in self.scenarios
                if name != "none"
            },
            "scenarios": {name: result.to_json() for name, result in self.scenarios.items()},
        }


def _scenario_config(config: Config, caching: bool, compaction: bool) -> Config:
    return attrs.evolve(
        config,
        compression=attrs.evolve(config.compression, enabled=compaction),
        prompt_caching=attrs.evolve(
            config.prompt_caching,
            enabled=config.prompt_caching.enabled if caching else False,
        ),
    )


def replay_scenario(
    record: ConversationRecord,
    config: Config,
    scenario: Scenario,
    *,
    gap_seconds: float = 30.0,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> ScenarioResult:
    """Replay ``record`` under one scenario; see the module docstring."""
    caching = scenario in ("caching", "both")
    compaction = scenario in ("compaction", "both")
    kernel = load(_scenario_config(config, caching, compaction), env=env)
    session = kernel.session(f"replay:{record.id}:{scenario}")
    counter: TokenCounter = session.ctx.tokens
    simulator = PromptCacheSimulator(
        counter, min_cacheable_tokens=kernel.model.min_cacheable_tokens
    )
    caching_on = caching and kernel.cache_settings is not None

    view: list[Message] = []
    system = record.system
    pending: list[Message] = []
    turns: list[TurnRecord] = []
    compactions = 0
    outputs = 0.0
    answers = {i for i, m in enumerate(record.messages) if m.get("role") == "assistant" and i > 0}
    for index, message in enumerate(record.messages):
        if index not in answers:
            pending.append(message)
            continue
        view = view + pending
        pending = []
        event = None
        if compaction and session.should_compress(view, system):
            result = session.compress(view, system)
            event = f"{result.status}: {result.reason}"
            if result.compacted:
                compactions += 1
                view, system = list(result.messages), result.system
        request: dict[str, Any] = {"model": kernel.model.name, "messages": view}
        if system is not None:
            request["system"] = system
        prepared = session.prepare(request) if caching_on else request
        now = len(turns) * gap_seconds
        usage = simulator.send(prepared, now) if caching_on else prompt_usage(counter, request)
        output_tokens = counter.count_message(message)
        usage = attrs.evolve(usage, output_tokens=output_tokens)
        session.update_usage(usage)
        cost: CacheCost = cost_of(usage, kernel.model)
        outputs += cost.output_cost
        turns.append(
            TurnRecord(
                turn=len(turns) + 1,
                index=index,
                messages_sent=len(view),
                prompt_tokens=usage.prompt_tokens,
                input_tokens=usage.input_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cache_write_1h_tokens=usage.cache_write_1h_tokens,
                output_tokens=output_tokens,
                cost=cost.total,
                uncached_cost=cost.uncached_total,
                compaction=event,
            )
        )
        view = [*view, message]
        if progress is not None:
            progress(scenario, len(turns), len(answers))
    kernel.close()
    return ScenarioResult(
        scenario=scenario,
        caching=caching_on,
        compaction=compaction,
        turns=tuple(turns),
        compactions=compactions,
        output_cost=outputs,
    )


def replay(
    record: ConversationRecord,
    config: Config,
    *,
    gap_seconds: float = 30.0,
    scenarios: tuple[Scenario, ...] = SCENARIOS,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> ReplayReport:
    """Replay ``record`` under each scenario (``none`` is always included as the baseline)."""
    wanted: tuple[Scenario, ...] = ("none", *(s for s in scenarios if s != "none"))
    results: dict[Scenario, ScenarioResult] = {
        name: replay_scenario(
            record, config, name, gap_seconds=gap_seconds, progress=progress, env=env
        )
        for name in wanted
    }
    kernel_engine = config.context.engine
    return ReplayReport(
        session_id=record.id,
        format=record.format,
        model=config.model.name,
        engine=kernel_engine,
        messages=len(record.messages),
        gap_seconds=gap_seconds,
        scenarios=results,
    )
