"""Per-session state of the compressor, kept in ``ctx.state["compressor"]`` and declared as a
:class:`~ctxengine.SessionState` (:data:`STATE`), so a session that moves to another worker
process keeps its cooldown, savings, previous summary and ledger, and one-time note."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ctxengine import CompactionGuard, SessionState
from ctxengine_compressor.ledger import Ledger

if TYPE_CHECKING:
    from ctxengine import Config, EngineContext, ModelInfo
    from ctxengine_compressor.settings import Budgets

STATE_KEY = "compressor"
"""The key of this engine's entry in ``EngineContext.state``."""
REMEMBERED_SUMMARIES = 4
"""How many of its own summaries a session remembers as already redacted: the summaries a
conversation still holds are its latest ones (the one each compaction updates, and one kept in
an earlier head), and each is at most a summary budget of text. An older one is redacted again
when it is read back, as any summary the engine does not know."""


@attrs.define
class CompressorState:
    """What the compressor remembers between calls for one session.

    :ivar compactions: compactions that changed the conversation.
    :ivar previous_summary: the summary text of the last compaction (without its wrapper).
    :ivar guard: the failure cooldown and the recent savings (anti-thrash); the newest saving
        is replaced by the real figure once the next response reports usage.
    :ivar previous_ledger: the critical-context items that summary holds; the next compaction
        merges them with its span's when it updates that summary.
    :ivar system_note_added: the one-time "earlier turns were compacted" note is in the system
        prompt.
    :ivar last_tokens_before: prompt tokens before the last compaction.
    :ivar last_prompt_tokens: real prompt tokens of the last response (``update_usage``).
    :ivar usage_fresh: ``last_prompt_tokens`` was measured after the last compaction.
    :ivar awaiting_measurement: the last compaction's saving is still an estimate.
    :ivar savings_baseline: prompt tokens before the last compaction, to measure its real saving.
    :ivar retry_above_tokens: after a compaction that would not pay (a noop), automatic
        compaction waits until the prompt grows past this many tokens, so a summary call is not
        spent on the same small middle every turn; a noop is not a compaction, so it never
        counts towards anti-thrash. On the provider's scale, like the prompt it is compared
        with (local counts times the learned ratio).
    """

    compactions: int = 0
    previous_summary: str | None = None
    guard: CompactionGuard = attrs.field(factory=CompactionGuard)
    previous_ledger: Ledger | None = None
    system_note_added: bool = False
    last_tokens_before: int | None = None
    last_prompt_tokens: int | None = None
    usage_fresh: bool = False
    awaiting_measurement: bool = False
    savings_baseline: int | None = None
    retry_above_tokens: int | None = None
    budgets: tuple[Config, ModelInfo, Budgets] | None = attrs.field(default=None, repr=False)
    """``(config, model, budgets)``: the budgets last derived, for that config and model (they
    are fixed for a session; derived once instead of on every request)."""
    redacted_summaries: tuple[str, ...] = attrs.field(default=(), repr=False)
    """The last :data:`REMEMBERED_SUMMARIES` summary texts this engine wrote that are
    ``redact``'s output as they stand (its local digests): when one comes back into a middle
    unchanged, reading it back skips the redaction (``redact`` is idempotent). Found by content,
    so a summary the host edited is redacted again. Not saved: a session restored on another
    worker redacts them once more."""

    def record_saving(self, ratio: float, *, baseline: int | None) -> None:
        """Remember one compaction's saving (an estimate until the next real usage arrives)."""
        self.guard.record_saving(ratio)
        self.awaiting_measurement = baseline is not None
        self.savings_baseline = baseline


_PLAIN = (
    "compactions",
    "previous_summary",
    "system_note_added",
    "last_tokens_before",
    "last_prompt_tokens",
    "usage_fresh",
    "awaiting_measurement",
    "savings_baseline",
    "retry_above_tokens",
)
"""The fields saved as they are (numbers, text, flags)."""


def dump_state(state: CompressorState, now: float) -> dict[str, Any]:
    """``state`` as JSON data (the guard's cooldown as the seconds left at ``now``)."""
    data: dict[str, Any] = {name: getattr(state, name) for name in _PLAIN}
    data["guard"] = state.guard.dump(now)
    ledger = state.previous_ledger
    data["previous_ledger"] = None if ledger is None else attrs.asdict(ledger)
    return data


def load_state(data: Any, now: float) -> CompressorState:
    """The state :func:`dump_state` described (``now``: the moment of the dump, here).

    :raises ValueError, TypeError: ``data`` is not what :func:`dump_state` writes.
    """
    if not isinstance(data, dict) or set(data) != {*_PLAIN, "guard", "previous_ledger"}:
        raise ValueError("not the compressor's saved state")
    ledger = data["previous_ledger"]
    return CompressorState(
        **{name: data[name] for name in _PLAIN},
        guard=CompactionGuard.restore(data["guard"], now),
        previous_ledger=None if ledger is None else Ledger(**_tuples(ledger)),
    )


def _tuples(value: Any) -> Any:
    """JSON lists back into the tuples the ledger holds (at every depth)."""
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


STATE: SessionState[CompressorState] = SessionState(
    STATE_KEY, CompressorState, dump=dump_state, load=load_state
)
"""The compressor's per-session state, saved between calls on a shared coordination backend."""


def get_state(ctx: EngineContext) -> CompressorState:
    """This session's compressor state: in memory, saved by another worker, or new."""
    return ctx.session_state(STATE)
