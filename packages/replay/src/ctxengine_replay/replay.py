"""Replaying a recorded session turn by turn to show what compaction and caching change.

At every assistant turn of the recording, the request is everything the agent would hold before
that turn: the (possibly compacted) context plus the messages that arrived since. Each request
goes through the selected engine and the cache strategy like a live one, is priced against the
simulated provider cache (:mod:`ctxengine_fakeapi.cachesim`), and the recorded assistant
message is appended as the response.

Scenarios are data (:class:`Scenario`): whether caching and compaction are on, how summary calls
are made and priced, and which strategy and TTL policy mark the requests; each evolves the
configuration it is given (:meth:`Scenario.configure`). The default :data:`SCENARIOS` are four,
side by side:

- ``none``: no compaction, no caching (the baseline, :data:`BASELINE`, always replayed first);
- ``caching``: caching only;
- ``compaction``: compaction only;
- ``both``: compaction and caching, as configured.

:func:`scenario_set` adds variants: one ``both`` per strategy and per TTL policy, and the
compaction scenarios with priced summary calls. A priced summary call is made by a stand-in for
the main model (:class:`ReplaySummarizer`): ``fresh`` sends the compressor's bounded summariser
prompt (every token at the input price), ``cache-aware`` resends the agent's last request with the
instruction appended, through the same simulated cache. Its reply fills the summary budget (the
most a model is asked to write, so what follows the compaction is never underestimated) and is
priced as output.

Time between requests comes from a gap distribution (:class:`Gaps`): a fixed number of seconds,
``short`` (30 s), ``long`` (20 minutes), ``mixed`` (30 s inside the agent's own loop, 20 minutes
before each new message from the person) or ``recorded`` (the transcript's own timestamps). The
kernels run on the simulated clock, so the TTL planner of ``cache_ttl: auto`` measures these gaps.

Replays are simulations: each runs its kernels sandboxed (:func:`ctxengine.load` with
``sandbox=``), so engines that store what they see (lcm's database) write to a temporary folder,
never to the user's real stores.

Server-side context management is simulated the way the test API serves it
(:mod:`ctxengine_fakeapi.native`), counting with the session's own counter so every figure is
in the same tokens:

- with ``engine: native`` the server that compacts is a local :class:`~ctxengine_fakeapi.FakeAPI`
  (its compaction writes a deterministic summary, so the figures measure size and price, not
  summary quality); each compaction's own cost, its ``usage.iterations``, is priced as the
  summary call of the turn it ran before;
- with ``context_editing`` on, every scenario but the baseline sends the edits, and the server's
  clearing is applied to the request before it is priced (what it cleared is in the turn).

When either is in play the report also holds :attr:`ReplayReport.comparisons`, the
:data:`COMPARISONS` scenarios: local compaction (the compressor), server compaction (native) and
server clearing (caching with clearing, no compaction, beside caching alone) on the same session,
each with caching as configured.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ctxengine import (
    SUMMARY_HEADINGS,
    CacheCost,
    Config,
    ConversationRecord,
    Kernel,
    Message,
    TokenCounter,
    Usage,
    cost_of,
    load,
)
from ctxengine.messages import request_edits
from ctxengine_fakeapi import FakeAPI, native
from ctxengine_fakeapi.cachesim import PromptCacheSimulator, prompt_usage
from ctxengine_replay.results import Progress, ReplayReport, ScenarioResult, TurnRecord
from ctxengine_replay.scenarios import (
    BASELINE,
    COMPARISONS,
    NATIVE,
    SCENARIOS,
    SHORT_GAP,
    Gaps,
    Scenario,
    answer_indices,
)

FILLER = "- carried over from the compacted turns: decisions, files, commands and their results"


@attrs.define(eq=False)
class ReplaySummarizer:
    """The main model writing summaries in a replay, priced instead of called.

    A fresh prompt (:meth:`complete`) is billed at the plain input price; a cache-aware call
    (:meth:`complete_request`, offered only when ``cache_aware``) goes through the session's
    simulated cache at the current replay time, so it reads what the agent's requests cached.
    Each reply follows the summary template and fills its ``max_tokens`` budget.
    """

    simulator: PromptCacheSimulator
    counter: TokenCounter
    model: str
    context_length: int
    cache_aware: bool
    now: Callable[[], float]
    name: str = "main"
    calls: list[Usage] = attrs.field(factory=list)

    @property
    def serves_main(self) -> bool:
        return self.cache_aware

    def _reply(self, max_tokens: int) -> str:
        lines = list(SUMMARY_HEADINGS)
        per_line = max(1, self.counter.count_text(FILLER + "\n"))
        room = max(0, max_tokens - self.counter.count_text("\n".join(lines)))
        fill = [FILLER] * (room // per_line)
        # Spread the filler over the headings so every section has text.
        out: list[str] = []
        share = len(fill) // len(lines) + 1
        for number, heading in enumerate(lines):
            out.append(heading)
            out.extend(fill[number * share : (number + 1) * share] or ["None."])
        return "\n".join(out)

    def _answer(self, usage: Usage, max_tokens: int) -> str:
        text = self._reply(max_tokens)
        self.calls.append(attrs.evolve(usage, output_tokens=self.counter.count_text(text)))
        return text

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        request = {"system": system, "messages": [{"role": "user", "content": prompt}]}
        return self._answer(prompt_usage(self.counter, request), max_tokens)

    async def acomplete(self, system: str, prompt: str, max_tokens: int) -> str:
        return self.complete(system, prompt, max_tokens)

    def complete_request(self, request: Mapping[str, Any], max_tokens: int) -> str:
        return self._answer(self.simulator.send(request, self.now()), max_tokens)

    def take(self) -> list[Usage]:
        """The calls since the last take."""
        calls, self.calls = self.calls, []
        return calls


@attrs.frozen
class _Run:
    """One scenario's result and what its kernel ran with."""

    result: ScenarioResult
    engine: str
    trigger_key: str | None
    trigger: float | None


@contextlib.contextmanager
def _sandbox(folder: str | os.PathLike[str] | None) -> Iterator[Path]:
    """``folder``, or a temporary folder deleted afterwards."""
    if folder is not None:
        yield Path(folder)
        return
    with tempfile.TemporaryDirectory(prefix="ctxengine-replay-") as temporary:
        yield Path(temporary)


def with_server(config: Config, record: ConversationRecord, base_url: str) -> Config:
    """``config`` with the native engine's server at ``base_url`` (the simulated one), speaking
    the API of the record's format."""
    overrides = {
        **config.raw.overrides,
        "engines.native.api": "anthropic" if record.format == "anthropic" else "openai-responses",
        "engines.native.base_url": base_url,
        "engines.native.api_key": "replay",
    }
    return attrs.evolve(config, raw=attrs.evolve(config.raw, overrides=overrides))


def _simulated_server(
    stack: contextlib.ExitStack[Any], config: Config, record: ConversationRecord
) -> Config:
    """``config`` as a replay of ``record`` runs it: with ``engine: native``, its server is a
    local :class:`FakeAPI` that lives as long as ``stack``."""
    if config.context.engine != NATIVE:
        return config
    server = stack.enter_context(FakeAPI(counter=TokenCounter()))
    url = server.base_url if record.format == "anthropic" else server.openai_base_url
    return with_server(config, record, url)


def _as_one_call(usage: Usage) -> Usage:
    """``usage`` with its compaction iterations (:attr:`Usage.compaction`) folded into the top
    level: a compaction's own cost read as one summary call."""
    if usage.compaction is None:
        return usage
    return attrs.evolve(usage, compaction=None) + usage.compaction


def _cleared(prepared: Mapping[str, Any], counter: TokenCounter) -> tuple[dict[str, Any], int]:
    """The request as the server reads it after its context edits, and the tokens they
    cleared."""
    body: dict[str, Any] = {k: v for k, v in prepared.items() if not k.startswith("extra_")}
    edits = request_edits(prepared)
    if not edits:
        return body, 0
    body["context_management"] = {"edits": edits}
    clearing = native.apply_clearing(body, counter)
    return clearing.body, sum(int(e.get("cleared_input_tokens", 0)) for e in clearing.applied)


def _replay_one(
    record: ConversationRecord,
    config: Config,
    scenario: Scenario,
    *,
    sandbox: Path,
    times: Sequence[float],
    session_id: str,
    trigger: float | None,
    progress: Progress | None,
    env: Mapping[str, str] | None,
) -> _Run:
    clock = [0.0]
    kernel = load(
        scenario.configure(config),
        env=env,
        trigger=trigger,
        sandbox=sandbox,
        clock=lambda: clock[0],  # the simulated time: the TTL planner measures these gaps
    )
    with kernel:
        session = kernel.session(f"{session_id}:{scenario.name}")
        counter: TokenCounter = session.ctx.tokens
        simulator = PromptCacheSimulator(
            counter, min_cacheable_tokens=kernel.model.min_cacheable_tokens
        )
        caching_on = scenario.caching and kernel.cache_settings is not None
        editing = kernel.config.context_editing.enabled
        fallbacks = 0
        summarizer: ReplaySummarizer | None = None
        if scenario.summaries != "configured":
            summarizer = ReplaySummarizer(
                simulator,
                counter,
                model=kernel.model.name,
                context_length=kernel.model.context_length,
                cache_aware=scenario.summaries == "cache-aware" and caching_on,
                now=lambda: clock[0],
            )
            kernel.use_summary_provider(summarizer)

        view: list[Message] = []
        system = record.system
        pending: list[Message] = []
        turns: list[TurnRecord] = []
        compactions = 0
        outputs = 0.0
        answers = set(answer_indices(record))
        for index, message in enumerate(record.messages):
            if index not in answers:
                pending.append(message)
                continue
            view = view + pending
            pending = []
            clock[0] = now = times[len(turns)]
            event = None
            summary = Usage()
            if scenario.compaction and session.should_compress(view, system):
                result = session.compress(view, system)
                event = f"{result.status}: {result.reason}"
                fallbacks += result.fallback is not None
                if result.usage is not None:
                    # What the compaction's own model call cost: the server's iterations.
                    summary = _as_one_call(result.usage)
                if result.compacted:
                    compactions += 1
                    view, system = list(result.messages), result.system
            for call in summarizer.take() if summarizer is not None else ():
                summary = summary + call
            summary_cost = cost_of(summary, kernel.model)
            request: dict[str, Any] = {"model": kernel.model.name, "messages": view}
            if system is not None:
                request["system"] = system
            prepared = session.prepare(request) if caching_on or editing else request
            read, cleared = _cleared(prepared, counter)
            usage = simulator.send(read, now) if caching_on else prompt_usage(counter, read)
            output_tokens = counter.count_message(message)
            usage = attrs.evolve(usage, output_tokens=output_tokens, cleared_input_tokens=cleared)
            session.update_usage(usage)
            cost: CacheCost = cost_of(usage, kernel.model)
            outputs += cost.output_cost
            turn = _turn(len(turns) + 1, index, len(view), usage, cost, summary, summary_cost)
            turns.append(attrs.evolve(turn, compaction=event, seconds=now))
            view = [*view, message]
            if progress is not None:
                progress(scenario.name, len(turns), len(answers))
        caching = kernel.config.prompt_caching
        measured = ScenarioResult(
            scenario=scenario,
            caching=caching_on,
            turns=tuple(turns),
            compactions=compactions,
            output_cost=outputs,
            strategy=caching.strategy if caching_on else None,
            ttl=caching.cache_ttl if caching_on else None,
            engine=kernel.engine,
            clearing=editing,
            fallbacks=fallbacks,
        )
        return _ran(measured, kernel)


def _ran(result: ScenarioResult, kernel: Kernel) -> _Run:
    """``result`` with the engine and the trigger its kernel ran with."""
    key = kernel.trigger_key
    trigger = kernel.loaded.values.get(key) if key is not None else None
    return _Run(result, engine=kernel.engine, trigger_key=key, trigger=trigger)


def _turn(
    number: int,
    index: int,
    sent: int,
    usage: Usage,
    cost: CacheCost,
    summary: Usage,
    summary_cost: CacheCost,
) -> TurnRecord:
    """Turn ``number`` (the answer at ``index``, ``sent`` messages before it): what its request
    and its summary calls used and cost (its compaction and time are the caller's to set)."""
    return TurnRecord(
        turn=number,
        index=index,
        messages_sent=sent,
        prompt_tokens=usage.prompt_tokens,
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
        output_tokens=usage.output_tokens,
        cost=cost.total,
        uncached_cost=cost.uncached_total,
        read_cost=cost.cache_read_cost,
        write_cost=cost.cache_write_5m_cost + cost.cache_write_1h_cost,
        summary_prompt_tokens=summary.prompt_tokens,
        summary_cache_read_tokens=summary.cache_read_tokens,
        summary_input_cost=summary_cost.total - summary_cost.output_cost,
        summary_output_cost=summary_cost.output_cost,
        cleared_tokens=usage.cleared_input_tokens,
    )


def replay_scenario(
    record: ConversationRecord,
    config: Config,
    scenario: Scenario,
    *,
    gaps: Gaps | None = None,
    trigger: float | None = None,
    sandbox: str | os.PathLike[str] | None = None,
    session: str | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> ScenarioResult:
    """Replay ``record`` under one scenario (no baseline); the parameters are :func:`replay`'s.

    :raises ValueError: for recorded gaps without timestamps.
    """
    times = (gaps or Gaps.fixed(SHORT_GAP)).times(record)
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(_sandbox(sandbox))
        return _replay_one(
            record,
            _simulated_server(stack, config, record),
            scenario,
            sandbox=folder,
            times=times,
            session_id=f"replay:{session or record.id}",
            trigger=trigger,
            progress=progress,
            env=env,
        ).result


def replay(
    record: ConversationRecord,
    config: Config,
    *,
    gap_seconds: float = SHORT_GAP,
    gaps: Gaps | None = None,
    scenarios: Sequence[Scenario] = SCENARIOS,
    trigger: float | None = None,
    sandbox: str | os.PathLike[str] | None = None,
    session: str | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> ReplayReport:
    """Replay ``record`` under each scenario (:data:`BASELINE` is always included, first), and
    the :data:`COMPARISONS` when the native engine or context editing is in play (see the module
    docstring).

    Every kernel runs sandboxed (:func:`ctxengine.load` with ``sandbox=``): what engines store
    (lcm's database) goes to ``sandbox``, or to a temporary folder deleted afterwards, never to
    the user's own stores.

    :param gaps: the time between requests (default: ``gap_seconds`` each).
    :param trigger: the engine's compaction trigger (see :func:`ctxengine.load`).
    :param session: what each scenario's session id is named after,
        ``replay:<session>:<scenario>`` (default: the record's id); replays sharing a sandbox
        need different ones.
    :raises ValueError: for two scenarios with the same name, or recorded gaps without
        timestamps.
    :raises ConfigError: for an invalid configuration or a trigger the engine cannot take.
    :raises EngineNotFoundError: for an unknown engine with ``context.strict: true``.
    """
    wanted = (BASELINE, *(s for s in scenarios if s.name != BASELINE.name))
    names = [s.name for s in wanted]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"scenario names must differ; repeated: {', '.join(repeated)}")
    gaps = gaps or Gaps.fixed(gap_seconds)
    times = gaps.times(record)
    native = config.context.engine == NATIVE
    clearing = config.context_editing.enabled
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(_sandbox(sandbox))
        config = _simulated_server(stack, config, record)
        done: dict[tuple[object, ...], _Run] = {}

        def run(scenario: Scenario, *, reuse: bool) -> _Run:
            # A comparison that is one of the scenarios already replayed is not replayed again.
            configured = scenario.configure(config)
            caching = configured.prompt_caching
            key = (
                configured.context.compaction,
                caching.enabled,
                caching.strategy,
                caching.cache_ttl,
                scenario.summaries,
                configured.context.engine,
                configured.context_editing,
            )
            if not reuse or key not in done:
                result = _replay_one(
                    record,
                    config,
                    scenario,
                    sandbox=folder,
                    times=times,
                    session_id=f"replay:{session or record.id}",
                    trigger=trigger,
                    progress=progress,
                    env=env,
                )
                done.setdefault(key, result)
                return result
            return done[key]

        runs = [run(scenario, reuse=False) for scenario in wanted]
        comparisons: dict[str, ScenarioResult] = {}
        for scenario in COMPARISONS:
            wanted_here = {
                "local compaction": native or clearing,
                "server compaction": native,
                "server clearing": clearing,
                "caching only": clearing,
            }[scenario.name]
            if wanted_here:
                comparisons[scenario.name] = run(scenario, reuse=True).result
    last = runs[-1]
    return ReplayReport(
        session_id=record.id,
        format=record.format,
        model=config.model.name,
        engine=last.engine,
        trigger_key=last.trigger_key,
        trigger=last.trigger,
        messages=len(record.messages),
        gap_seconds=gaps.seconds,
        gaps=gaps.name,
        scenarios={run.result.name: run.result for run in runs},
        comparisons=comparisons,
    )
