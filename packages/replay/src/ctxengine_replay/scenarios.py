"""What a replay compares and on which clock: the :class:`Scenario` data, the default
:data:`SCENARIOS` and :func:`scenario_set`'s variants, the engine :data:`COMPARISONS`, and the gap
distributions between turns (:class:`Gaps`)."""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

import attrs

from ctxengine import (
    CacheTTL,
    Config,
    ConversationRecord,
    Message,
)
from ctxengine.messages import is_real_user_message

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
        caching = config.prompt_caching
        editing = config.context_editing
        if self.clearing is False or not (self.compaction or self.caching):
            editing = type(editing)()
        elif self.clearing and not editing.enabled:
            editing = type(editing)(clear_tool_uses=True)
        context = attrs.evolve(
            config.context, compaction=config.context.compaction and self.compaction
        )
        if self.engine is not None:
            context = attrs.evolve(context, engine=self.engine)
        return attrs.evolve(
            config,
            context=context,
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
