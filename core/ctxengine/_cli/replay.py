"""Replaying a recorded session turn by turn to show what compaction and caching change.

At every assistant turn of the recording, the request is everything the agent would hold before
that turn: the (possibly compacted) context plus the messages that arrived since. Each request
goes through the selected engine and the cache strategy like a live one, is priced against the
simulated provider cache (:mod:`ctxengine._accounting.cachesim`), and the recorded assistant
message is appended as the response. The default :data:`SCENARIOS` run side by side:

- ``none``: no compaction, no caching (the baseline);
- ``caching``: caching only;
- ``compaction``: compaction only;
- ``both``: compaction and caching, as configured.

Replays are simulations: each runs its kernels sandboxed, so engines that store what they see
(lcm's database) write to a temporary folder, never to the user's real stores.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ctxengine._accounting.cache_stats import CacheCost, cost_of
from ctxengine._accounting.cachesim import PromptCacheSimulator, prompt_usage
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._accounting.usage import Usage
from ctxengine._cli.files import ConversationRecord
from ctxengine._config.core import Config
from ctxengine._kernel.kernel import Kernel, load
from ctxengine._messages.conversation import Message

Progress = Callable[[str, int, int], None]
"""Called as ``progress(scenario name, done, total)`` after each turn."""


@attrs.frozen
class Scenario:
    """One way of sending a recorded session, compared with the others side by side.

    Scenarios are data: the runner, the tables, the JSON and the charts take any tuple of them,
    so comparing another setting means adding a scenario and the configuration change it stands
    for (:meth:`configure`).

    :ivar name: the key in reports and JSON (``"both"``).
    :ivar label: what tables and charts call it (``"compaction + caching"``).
    """

    name: str
    label: str
    compaction: bool
    caching: bool

    def configure(self, config: Config) -> Config:
        """``config`` with this scenario in place (the kernel keeps the kernel values of a
        configuration evolved in code, and reads the plugins' keys from its layers)."""
        compression = config.compression
        caching = config.prompt_caching
        return attrs.evolve(
            config,
            compression=attrs.evolve(compression, enabled=compression.enabled and self.compaction),
            prompt_caching=attrs.evolve(
                caching, enabled=caching.enabled if self.caching else False
            ),
        )


BASELINE = Scenario("none", "no compaction, no caching", compaction=False, caching=False)
"""What every other scenario is compared with; always replayed first."""

SCENARIOS: tuple[Scenario, ...] = (
    BASELINE,
    Scenario("caching", "caching only", compaction=False, caching=True),
    Scenario("compaction", "compaction only", compaction=True, caching=False),
    Scenario("both", "compaction + caching", compaction=True, caching=True),
)
"""The default comparison; the last one is the configuration as the user wrote it."""


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
    """A whole session under one scenario.

    :ivar caching: whether requests were really marked for caching (the configuration may turn
        caching off for the model even when the scenario asks for it).
    """

    scenario: Scenario
    caching: bool
    turns: tuple[TurnRecord, ...]
    compactions: int
    output_cost: float
    """Cost of the output tokens, the same in every scenario."""

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def compaction(self) -> bool:
        return self.scenario.compaction

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
            "scenario": self.scenario.name,
            "label": self.scenario.label,
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
    """A session replayed under every scenario.

    :ivar engine: the engine that ran (the built-in compressor after a fallback).
    :ivar trigger_key: the key holding the engine's compaction trigger, ``None`` if it has none.
    :ivar trigger: that key's value (a fraction of the window).
    :ivar scenarios: scenario name -> result, the baseline first.
    """

    session_id: str
    format: str
    model: str
    engine: str
    trigger_key: str | None
    trigger: float | None
    messages: int
    gap_seconds: float
    scenarios: Mapping[str, ScenarioResult]

    @property
    def baseline(self) -> ScenarioResult:
        return self.scenarios[BASELINE.name]

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
            "savings_vs_none": {
                name: {
                    "input_cost": round(self.savings(name), 4),
                    "total_cost": round(self.savings(name, input_only=False), 4),
                }
                for name in self.scenarios
                if name != BASELINE.name
            },
            "scenarios": {name: result.to_json() for name, result in self.scenarios.items()},
        }


@attrs.frozen
class _Run:
    """One scenario's result and what its kernel ran with."""

    result: ScenarioResult
    engine: str
    trigger_key: str | None
    trigger: float | None


def _kernel(
    config: Config,
    scenario: Scenario,
    *,
    sandbox: Path,
    trigger: float | None,
    env: Mapping[str, str] | None,
) -> Kernel:
    return load(scenario.configure(config), env=env, trigger=trigger, sandbox=sandbox)


def _replay_one(
    record: ConversationRecord,
    config: Config,
    scenario: Scenario,
    *,
    sandbox: Path,
    gap_seconds: float,
    trigger: float | None,
    progress: Progress | None,
    env: Mapping[str, str] | None,
) -> _Run:
    kernel = _kernel(config, scenario, sandbox=sandbox, trigger=trigger, env=env)
    with kernel:
        session = kernel.session(f"replay:{record.id}:{scenario.name}")
        counter: TokenCounter = session.ctx.tokens
        simulator = PromptCacheSimulator(
            counter, min_cacheable_tokens=kernel.model.min_cacheable_tokens
        )
        caching_on = scenario.caching and kernel.cache_settings is not None

        view: list[Message] = []
        system = record.system
        pending: list[Message] = []
        turns: list[TurnRecord] = []
        compactions = 0
        outputs = 0.0
        answers = {
            i for i, m in enumerate(record.messages) if m.get("role") == "assistant" and i > 0
        }
        for index, message in enumerate(record.messages):
            if index not in answers:
                pending.append(message)
                continue
            view = view + pending
            pending = []
            event = None
            if scenario.compaction and session.should_compress(view, system):
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
                progress(scenario.name, len(turns), len(answers))
        key = kernel.trigger_key
        return _Run(
            ScenarioResult(
                scenario=scenario,
                caching=caching_on,
                turns=tuple(turns),
                compactions=compactions,
                output_cost=outputs,
            ),
            engine=kernel.engine,
            trigger_key=key,
            trigger=kernel.loaded.values.get(key) if key is not None else None,
        )


def replay(
    record: ConversationRecord,
    config: Config,
    *,
    gap_seconds: float = 30.0,
    scenarios: Sequence[Scenario] = SCENARIOS,
    trigger: float | None = None,
    sandbox: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> ReplayReport:
    """Replay ``record`` under each scenario (:data:`BASELINE` is always included, first).

    Every kernel runs sandboxed (:func:`ctxengine.load` with ``sandbox=``): what engines store
    (lcm's database) goes to ``sandbox``, or to a temporary folder deleted afterwards, never to
    the user's own stores.

    :param trigger: the engine's compaction trigger (see :func:`ctxengine.load`).
    :raises ConfigError: for an invalid configuration or a trigger the engine cannot take.
    :raises EngineNotFoundError: for an unknown engine with ``context.strict: true``.
    """
    wanted = (BASELINE, *(s for s in scenarios if s.name != BASELINE.name))
    with contextlib.ExitStack() as stack:
        if sandbox is None:
            sandbox = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxengine-replay-"))
        runs = [
            _replay_one(
                record,
                config,
                scenario,
                sandbox=Path(sandbox),
                gap_seconds=gap_seconds,
                trigger=trigger,
                progress=progress,
                env=env,
            )
            for scenario in wanted
        ]
    last = runs[-1]
    return ReplayReport(
        session_id=record.id,
        format=record.format,
        model=config.model.name,
        engine=last.engine,
        trigger_key=last.trigger_key,
        trigger=last.trigger,
        messages=len(record.messages),
        gap_seconds=gap_seconds,
        scenarios={run.result.name: run.result for run in runs},
    )


@attrs.frozen
class Totals:
    """One scenario summed over several sessions."""

    scenario: Scenario
    sessions: int
    prompt_tokens: int
    input_cost: float
    cost: float
    compactions: int


def totals(reports: Sequence[ReplayReport]) -> list[Totals]:
    """Each scenario summed over ``reports``, in the order the first report holds them."""
    sums: dict[str, Totals] = {}
    for report in reports:
        for name, result in report.scenarios.items():
            before = sums.get(name) or Totals(result.scenario, 0, 0, 0.0, 0.0, 0)
            sums[name] = Totals(
                result.scenario,
                before.sessions + 1,
                before.prompt_tokens + result.prompt_tokens,
                before.input_cost + result.input_cost,
                before.cost + result.cost,
                before.compactions + result.compactions,
            )
    return list(sums.values())
