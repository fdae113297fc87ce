"""Replaying a recorded session turn by turn to show what compaction and caching change.

At every assistant turn of the recording, the request is everything the agent would hold before
that turn: the (possibly compacted) context plus the messages that arrived since. Each request
goes through the selected engine and the cache strategy like a live one, is priced against the
simulated provider cache (:mod:`ctxengine._accounting.cachesim`), and the recorded assistant
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
(:mod:`ctxengine.testing.fake_native`), counting with the session's own counter so every figure is
in the same tokens:

- with ``engine: native`` the server that compacts is a local :class:`~ctxengine.testing.fake_api.
  FakeAPI` (its compaction writes a deterministic summary, so the figures measure size and price,
  not summary quality); each compaction's own cost, its ``usage.iterations``, is priced as the
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
import itertools
import math
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, overload

import attrs

from ctxengine._accounting.cache_stats import CacheCost, cost_of
from ctxengine._accounting.cachesim import PromptCacheSimulator, prompt_usage
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._accounting.usage import Usage
from ctxengine._cli.files import ConversationRecord
from ctxengine._config.core import CacheTTL, Config, ContextEditingSettings
from ctxengine._kernel.kernel import load
from ctxengine._messages.conversation import Message
from ctxengine._messages.editing import request_edits
from ctxengine._messages.read import is_real_user_message
from ctxengine._summarize.template import SUMMARY_HEADINGS
from ctxengine.testing import fake_native
from ctxengine.testing.fake_api import FakeAPI

SummaryCalls = Literal["configured", "fresh", "cache-aware"]
"""How a scenario's summaries are written: by the configured provider (extractive in a replay
without API keys: no call), or by the priced stand-in with a fresh prompt or cache-aware."""


@attrs.frozen
class Scenario:
    """One way of sending a recorded session, compared with the others side by side.

    Scenarios are data: the runner, the tables, the JSON and the charts take any tuple of them,
    so comparing another setting means adding a scenario and the configuration change it stands
    for (:meth:`configure`).

    :ivar name: the key in reports and JSON (``both``, ``both:tool_turns``, ``both:ttl=auto``,
        ``both:cache-aware``, ...).
    :ivar label: what tables and charts call it (``"compaction + caching"``).
    :ivar summaries: how summary calls are made and priced.
    :ivar strategy: the cache strategy (``None``: ``prompt_caching.strategy``).
    :ivar ttl: the TTL policy (``None``: ``prompt_caching.cache_ttl``).
    :ivar engine: the engine (``None``: ``context.engine``).
    :ivar clearing: context editing's clearing on (the configured edits, else tool-result clearing
        with the API's defaults) or off (``None``: as configured). A scenario with neither
        compaction nor caching (the baseline) never sends edits.
    """

    name: str
    label: str
    compaction: bool
    caching: bool
    summaries: SummaryCalls = "configured"
    strategy: str | None = None
    ttl: CacheTTL | None = None
    engine: str | None = None
    clearing: bool | None = None

    def configure(self, config: Config) -> Config:
        """``config`` with this scenario in place (the kernel keeps the kernel values of a
        configuration evolved in code, and reads the plugins' keys from its layers)."""
        compression = config.compression
        caching = config.prompt_caching
        editing = config.context_editing
        if self.clearing is False or not (self.compaction or self.caching):
            editing = ContextEditingSettings()
        elif self.clearing and not editing.enabled:
            editing = ContextEditingSettings(clear_tool_uses=True)
        context = config.context
        if self.engine is not None:
            context = attrs.evolve(context, engine=self.engine)
        return attrs.evolve(
            config,
            context=context,
            compression=attrs.evolve(compression, enabled=compression.enabled and self.compaction),
            prompt_caching=attrs.evolve(
                caching,
                enabled=caching.enabled if self.caching else False,
                strategy=self.strategy or caching.strategy,
                cache_ttl=self.ttl or caching.cache_ttl,
            ),
            context_editing=editing,
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

NATIVE = "native"
LOCAL_ENGINE = "compressor"

COMPARISONS: tuple[Scenario, ...] = (
    Scenario(
        "local compaction",
        "local compaction (compressor)",
        compaction=True,
        caching=True,
        engine=LOCAL_ENGINE,
        clearing=False,
    ),
    Scenario(
        "server compaction",
        "server compaction (native)",
        compaction=True,
        caching=True,
        engine=NATIVE,
        clearing=False,
    ),
    Scenario(
        "server clearing",
        "server clearing (no compaction)",
        compaction=False,
        caching=True,
        clearing=True,
    ),
    Scenario(
        "caching only", "caching only (no clearing)", compaction=False, caching=True, clearing=False
    ),
)
"""The runs :attr:`ReplayReport.comparisons` may hold: server compaction when the native engine
is selected, server clearing and caching alone when context editing is on, local compaction with
either."""

SUMMARY_LABELS: Mapping[SummaryCalls, str] = {
    "configured": "",
    "fresh": "fresh summary prompt",
    "cache-aware": "cache-aware summaries",
}


def scenario_set(
    *,
    strategies: Sequence[str] = (),
    ttls: Sequence[CacheTTL] = (),
    summaries: Sequence[SummaryCalls] = (),
) -> tuple[Scenario, ...]:
    """The default four plus variants of ``both``: one per strategy, one per TTL policy and one
    per way of making summary calls (``fresh`` also adds compaction only with fresh summary
    calls, the no-caching price of a summary). With several of each, every combination runs."""
    if not (strategies or ttls or summaries):
        return SCENARIOS
    out = list(SCENARIOS)
    if "fresh" in summaries:
        out.append(
            Scenario(
                "compaction:fresh",
                "compaction only, fresh summary prompt",
                compaction=True,
                caching=False,
                summaries="fresh",
            )
        )
    strategy_options: Sequence[str | None] = strategies or (None,)
    ttl_options: Sequence[CacheTTL | None] = ttls or (None,)
    summary_options: Sequence[SummaryCalls] = summaries or ("configured",)
    for strategy, ttl, calls in itertools.product(strategy_options, ttl_options, summary_options):
        parts = [p for p in (strategy, f"ttl={ttl}" if ttl else None) if p]
        if calls != "configured":
            parts.append(calls)
        details = [strategy or "", f"{ttl} TTL" if ttl else "", SUMMARY_LABELS[calls]]
        out.append(
            Scenario(
                "both:" + ",".join(parts),
                ", ".join(["compaction + caching", *(d for d in details if d)]),
                compaction=True,
                caching=True,
                summaries=calls,
                strategy=strategy,
                ttl=ttl,
            )
        )
    return tuple(out)


# -- gaps ------------------------------------------------------------------------------------

SHORT_GAP = 30.0
LONG_GAP = 1200.0
TIMESTAMP_KEYS = ("timestamp", "created_at", "time")
"""Message keys read by the ``recorded`` gap distribution (ISO 8601 text or epoch seconds)."""


@attrs.frozen
class Gaps:
    """Seconds between consecutive requests of a replay.

    :ivar name: ``short``, ``long``, ``mixed``, ``mixed:P``, ``recorded`` or a number of seconds
        as text (``"45s"``).
    :ivar seconds: the fixed gap, ``None`` for a distribution.
    """

    name: str
    seconds: float | None = None
    long_share: float | None = None
    """For ``mixed:P``: the share of gaps that are long, drawn per gap from the session id."""

    @classmethod
    def fixed(cls, seconds: float) -> Gaps:
        """The same ``seconds`` between every two requests."""
        return cls(f"{seconds:g}s", seconds)

    @classmethod
    def parse(cls, text: str) -> Gaps:
        """``short``, ``long``, ``mixed``, ``mixed:P``, ``recorded`` or seconds (``"45"``).

        :raises ValueError: naming the accepted values.
        """
        if text in ("short", "long", "mixed", "recorded"):
            return cls(text)
        if text.startswith("mixed:"):
            try:
                share = float(text[6:])
            except ValueError:
                share = -1.0
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"gaps {text!r}: mixed:P takes a share P from 0 to 1")
            return cls(text, long_share=share)
        try:
            seconds = float(text)
        except ValueError:
            raise ValueError(
                f"gaps {text!r}: expected short, long, mixed, recorded or a number of seconds"
            ) from None
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"gaps {text!r}: seconds must be a finite number >= 0")
        return cls.fixed(seconds)

    def times(self, record: ConversationRecord) -> list[float]:
        """When each request of a replay of ``record`` (:func:`answer_indices`) is sent, in
        seconds from the session's start.

        :raises ValueError: for ``recorded`` when a message of the recording has no timestamp.
        """
        answers = answer_indices(record)
        if self.name == "recorded":
            return _recorded_times(record, answers)
        times: list[float] = []
        now = 0.0
        for turn, index in enumerate(answers):
            if turn:
                if self.long_share is not None:
                    draw = zlib.crc32(f"{record.id}:{turn}".encode()) / 2**32
                    now += LONG_GAP if draw < self.long_share else SHORT_GAP
                else:
                    now += self._gap(record.messages, answers[turn - 1], index)
            times.append(now)
        return times

    def _gap(self, messages: Sequence[Message], previous: int, index: int) -> float:
        if self.seconds is not None:
            return self.seconds
        if self.name == "short":
            return SHORT_GAP
        if self.name == "long":
            return LONG_GAP
        # mixed: a person wrote something since the previous request -> they took their time.
        person = any(is_real_user_message(m, "openai") for m in messages[previous + 1 : index])
        return LONG_GAP if person else SHORT_GAP


def _timestamp(message: Message) -> float | None:
    for key in TIMESTAMP_KEYS:
        value = message.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and value.strip():
            try:
                return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def _recorded_times(record: ConversationRecord, answers: Sequence[int]) -> list[float]:
    """Each request is sent when the message before its answer was recorded."""
    times: list[float] = []
    for index in answers:
        stamp = _timestamp(record.messages[index - 1]) or _timestamp(record.messages[index])
        if stamp is None:
            raise ValueError(
                f"{record.id}: message {index - 1} has no timestamp "
                f"({', '.join(TIMESTAMP_KEYS)}); use --gaps short, long, mixed or seconds"
            )
        times.append(stamp)
    start = times[0] if times else 0.0
    # Out-of-order stamps would make time run backwards; never let it.
    out, latest = [], 0.0
    for stamp in times:
        latest = max(latest, stamp - start)
        out.append(latest)
    return out


def answer_indices(record: ConversationRecord) -> list[int]:
    """Indices of the assistant messages a replay sends a request for (all but a first one)."""
    return [i for i, m in enumerate(record.messages) if m.get("role") == "assistant" and i > 0]


# -- results ---------------------------------------------------------------------------------

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


# -- running ---------------------------------------------------------------------------------

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
    clearing = fake_native.apply_clearing(body, counter)
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
                    seconds=now,
                    read_cost=cost.cache_read_cost,
                    write_cost=cost.cache_write_5m_cost + cost.cache_write_1h_cost,
                    summary_prompt_tokens=summary.prompt_tokens,
                    summary_cache_read_tokens=summary.cache_read_tokens,
                    summary_input_cost=summary_cost.total - summary_cost.output_cost,
                    summary_output_cost=summary_cost.output_cost,
                    cleared_tokens=cleared,
                )
            )
            view = [*view, message]
            if progress is not None:
                progress(scenario.name, len(turns), len(answers))
        key = kernel.trigger_key
        caching = kernel.config.prompt_caching
        return _Run(
            ScenarioResult(
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
            ),
            engine=kernel.engine,
            trigger_key=key,
            trigger=kernel.loaded.values.get(key) if key is not None else None,
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
                configured.compression.enabled,
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


# -- across sessions -------------------------------------------------------------------------


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
