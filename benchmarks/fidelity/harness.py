"""Forcing compactions and measuring what survives them.

:func:`compact_at_window` replays a session up to the point where a window of the given size
would trigger compaction and forces one; :func:`compact_successively` keeps replaying and
compacting a growing session. Both return :class:`Compaction` records; :func:`retention`
compares the facts of the compacted span (:mod:`benchmarks.fidelity.facts`) with the summary.

The compressor is treated as a black box: the compacted span is inferred from its output
(head, one summary message, a tail equal to the input's end), never read from its internals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
from benchmarks.fidelity.facts import (
    KINDS,
    Fact,
    Haystack,
    contains,
    extract_facts,
    message_plain_text,
)

from ctxengine import (
    CompressResult,
    Conversation,
    Format,
    Message,
    SummaryProvider,
    SystemPrompt,
    TokenCounter,
)
from ctxengine._accounting.models import model_for_settings
from ctxengine._config.core import config_from_mapping
from ctxengine._plugin.context import EngineContext
from ctxengine.messages import visible_text
from ctxengine_compressor.assemble import SUMMARY_PREFIX, SUMMARY_SUFFIX
from ctxengine_compressor.engine import compress
from ctxengine_compressor.settings import budgets

__all__ = [
    "BENCHMARK_RULES",
    "Compaction",
    "KindRetention",
    "RuleSet",
    "Session",
    "compact_at_window",
    "compact_successively",
    "retention",
]

COUNTER = TokenCounter()
"""One counter for every run: loading the encoding takes a moment."""

Replier = Callable[[Sequence[Message], Sequence[int | None]], None]
"""Called before each compaction with the conversation about to be compacted and the original
index of each of its messages (``None`` for a summary); a scripted model queues its reply."""


@attrs.frozen
class RuleSet:
    """A set of fact rules: ``extract`` finds the facts of a message list, ``contains`` says
    whether a fact is present in a text. The harness scores every rule set the same way."""

    name: str
    extract: Callable[[Sequence[Message], Format], list[Fact]]
    contains: Callable[[Haystack, Fact], bool]


BENCHMARK_RULES = RuleSet("benchmark", extract_facts, contains)
"""The benchmark's own rules (:mod:`.facts`)."""


@attrs.frozen
class Session:
    """One conversation to measure: ``style`` names the agent (``claude_code``, ``openhands``,
    ``tau_bench``, ...)."""

    name: str
    style: str
    fmt: Format
    system: SystemPrompt | None
    messages: list[Message] = attrs.field(eq=False, repr=False)

    def facts(self, upto: int, rules: RuleSet = BENCHMARK_RULES) -> list[Fact]:
        """The facts of the first ``upto`` messages (as the conversation stood then)."""
        key = (self.name, self.fmt, upto, rules.name)
        found = _FACTS.get(key)
        if found is None:
            found = rules.extract(self.messages[:upto], self.fmt)
            _FACTS[key] = found
        return found


_FACTS: dict[tuple[str, str, int, str], list[Fact]] = {}


@attrs.frozen
class Compaction:
    """One compaction of ``session`` and what it kept.

    :ivar upto: how many original messages the conversation held when it was compacted.
    :ivar span: original indices of the messages the summary replaced (earlier summaries
        excluded).
    :ivar summary: the summary message's text; ``kept`` the text of the other messages.
    :ivar span_tokens: tokens of the replaced messages; ``summary_tokens`` of the summary.
    :ivar output: the conversation after the compaction (with original indices in ``origin``).
    """

    session: Session
    window: int
    upto: int
    span: frozenset[int]
    summary: str
    kept: str
    span_tokens: int
    summary_tokens: int
    output: list[Message]
    origin: list[int | None]
    status: str
    reason: str


def _context(window: int, provider: SummaryProvider | None) -> EngineContext:
    config = config_from_mapping(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": window},
            "auxiliary": {
                "compression": {"provider": "extractive" if provider is None else "auto"}
            },
        }
    )
    return EngineContext(
        session_id="fidelity",
        engine="compressor",
        config=config,
        model=model_for_settings(config),
        tokens=COUNTER,
        summarizer=lambda: provider,
    )


def _threshold(ctx: EngineContext) -> int:
    return budgets(ctx).threshold_tokens


def _at_request(messages: Sequence[Message], index: int) -> bool:
    """Whether a request would be sent after ``messages[index]`` (the next is the model's)."""
    return index + 1 == len(messages) or messages[index + 1].get("role") == "assistant"


def _compact(
    ctx: EngineContext,
    session: Session,
    conversation: list[Message],
    origin: list[int | None],
    system: SystemPrompt | None,
    upto: int,
    replier: Replier | None,
) -> Compaction:
    if replier is not None:
        replier(conversation, origin)
    result = compress(ctx, Conversation(conversation, session.fmt, system), "agent", True, None)
    return _inspect(ctx, session, conversation, origin, result, upto)


def _inspect(
    ctx: EngineContext,
    session: Session,
    conversation: list[Message],
    origin: list[int | None],
    result: CompressResult,
    upto: int,
) -> Compaction:
    out = result.messages
    if result.status != "compacted":
        return Compaction(
            session, ctx.model.context_length, upto, frozenset(), "", "", 0, 0,
            list(conversation), list(origin), result.status, result.reason,
        )  # fmt: skip
    # The new summary (an older one may stay in the kept head).
    probe = (result.summary or "").strip()[:400]
    where = next(
        i
        for i in range(len(out) - 1, -1, -1)
        if SUMMARY_PREFIX in (t := visible_text(out[i])) and probe in t
    )
    tail = 0
    while (
        tail < len(out) - where - 1
        and tail < len(conversation)
        and out[-1 - tail] == conversation[-1 - tail]
    ):
        tail += 1
    summary_msg = out[where]
    summary = result.summary or ""
    # Facts count as kept only when they are in the text the model reads: the summary scored is
    # the one standing verbatim in the compacted prompt.
    assert summary.strip() in message_plain_text(summary_msg, session.fmt), session.name
    # A summary merged into the last head message (roles collided) stands after that message,
    # whose own text and tool results stay in the prompt.
    rest = message_plain_text(summary_msg, session.fmt).replace(summary.strip(), "")
    merged = bool(rest.replace(SUMMARY_PREFIX, "").replace(SUMMARY_SUFFIX, "").strip())
    first = where + 1 if merged else where
    last = len(conversation) - tail
    replaced = range(first, last)
    span = frozenset(i for i in (origin[k] for k in replaced) if i is not None)
    kept = "\n".join(message_plain_text(m, session.fmt) for k, m in enumerate(out) if k != where)
    kept += "\n" + rest
    new_origin = [*origin[:where], None, *origin[last:]]
    if merged:
        new_origin = [*origin[: where + 1], *origin[last:]]
    assert len(new_origin) == len(out), (len(new_origin), len(out))
    return Compaction(
        session,
        ctx.model.context_length,
        upto,
        span,
        summary,
        kept,
        sum(COUNTER.count_message(conversation[k]) for k in replaced),
        COUNTER.count_text(summary),
        list(out),
        new_origin,
        result.status,
        result.reason,
    )


def compact_at_window(
    session: Session,
    window: int,
    *,
    provider: SummaryProvider | None = None,
    replier: Replier | None = None,
) -> Compaction:
    """Replay ``session`` until its prompt reaches the compaction threshold of a ``window``-token
    model (the whole session when it never does) and force one compaction there."""
    ctx = _context(window, provider)
    threshold = _threshold(ctx)
    messages = session.messages
    total = COUNTER.count_system(session.system) if session.system is not None else 0
    upto = len(messages)
    for index, msg in enumerate(messages):
        total += COUNTER.count_message(msg)
        if total >= threshold and _at_request(messages, index):
            upto = index + 1
            break
    conversation = list(messages[:upto])
    return _compact(ctx, session, conversation, list(range(upto)), session.system, upto, replier)


def compact_successively(
    session: Session,
    window: int,
    times: int,
    *,
    provider: SummaryProvider | None = None,
    replier: Replier | None = None,
) -> list[Compaction]:
    """Replay ``session`` message by message, compacting each time the prompt reaches the
    threshold, until ``times`` compactions happened or the session ends."""
    ctx = _context(window, provider)
    threshold = _threshold(ctx)
    conversation: list[Message] = []
    origin: list[int | None] = []
    system = session.system
    done: list[Compaction] = []
    base = COUNTER.count_system(system) if system is not None else 0
    tokens = base
    for index, msg in enumerate(session.messages):
        conversation.append(msg)
        origin.append(index)
        tokens += COUNTER.count_message(msg)
        if tokens < threshold or not _at_request(session.messages, index):
            continue
        step = _compact(ctx, session, conversation, origin, system, index + 1, replier)
        if step.status != "compacted":
            continue
        done.append(step)
        if len(done) == times:
            break
        conversation, origin = list(step.output), list(step.origin)
        tokens = base + sum(COUNTER.count_message(m) for m in conversation)
    return done


# --- retention -----------------------------------------------------------------------------------


@attrs.frozen
class KindRetention:
    """For one fact kind: facts of the compacted span not present in kept messages (``total``),
    how many of them the summary holds (``kept``), and the ones it lost."""

    total: int = 0
    kept: int = 0
    lost: tuple[Fact, ...] = ()

    def __add__(self, other: KindRetention) -> KindRetention:
        return KindRetention(
            self.total + other.total, self.kept + other.kept, self.lost + other.lost
        )

    @property
    def ratio(self) -> float | None:
        return None if self.total == 0 else self.kept / self.total


def span_facts(compaction: Compaction, rules: RuleSet = BENCHMARK_RULES) -> list[Fact]:
    """Facts introduced in the compacted span and not present in the kept messages."""
    kept = Haystack.of(compaction.kept)
    return [
        fact
        for fact in compaction.session.facts(compaction.upto, rules)
        if fact.home in compaction.span and not rules.contains(kept, fact)
    ]


def retention(
    compaction: Compaction,
    facts: Sequence[Fact] | None = None,
    rules: RuleSet = BENCHMARK_RULES,
) -> dict[str, KindRetention]:
    """Per kind, how many of ``facts`` (default: :func:`span_facts`) the summary holds."""
    if facts is None:
        facts = span_facts(compaction, rules)
    summary = Haystack.of(compaction.summary)
    out: dict[str, KindRetention] = {kind: KindRetention() for kind in KINDS}
    for fact in facts:
        present = rules.contains(summary, fact)
        out[fact.kind] = out[fact.kind] + KindRetention(1, int(present), () if present else (fact,))
    return out


def present_anywhere(
    compaction: Compaction, facts: Sequence[Fact], rules: RuleSet = BENCHMARK_RULES
) -> dict[str, KindRetention]:
    """Per kind, how many of ``facts`` the whole compacted conversation (summary and kept
    messages) still holds."""
    text = Haystack.of(compaction.summary + "\n" + compaction.kept)
    out: dict[str, KindRetention] = {kind: KindRetention() for kind in KINDS}
    for fact in facts:
        present = rules.contains(text, fact)
        out[fact.kind] = out[fact.kind] + KindRetention(1, int(present), () if present else (fact,))
    return out


def total_of(parts: Sequence[dict[str, KindRetention]]) -> dict[str, KindRetention]:
    """The per-kind sums of several retention tables."""
    out: dict[str, KindRetention] = {kind: KindRetention() for kind in KINDS}
    for part in parts:
        for kind, value in part.items():
            out[kind] = out[kind] + value
    return out


def describe(value: Any) -> str:
    """A ratio as ``97.5 %`` (``-`` when there was nothing to measure)."""
    return "-" if value is None else f"{100 * value:.1f} %"
