"""Guards every engine puts in front of automatic compaction: failure cooldown and anti-thrash.

- **Cooldown**: after a compaction aborted because the summary provider could not be reached
  (auth, network, timeout, rate limit), automatic compaction pauses for
  :attr:`CompactionGuard.cooldown_s`, so a broken provider is not called again on every turn.
- **Anti-thrash**: after :data:`THRASH_RUN` consecutive compactions that each saved less than
  :data:`THRASH_SAVING` of the prompt, automatic compaction stops until a forced one: the
  conversation is made of what cannot be compacted (a huge system prompt, the protected tail),
  and compacting again would only break the prompt cache.

A forced compaction (``force=True``: an explicit request, the gateway safety net) passes both.
Engines keep one :class:`CompactionGuard` in their per-session state, declared as a
:class:`~ctxengine.SessionState` so it survives a worker switch: :meth:`CompactionGuard.dump`
and :meth:`CompactionGuard.restore` are its codec (:data:`GUARD_STATE_VERSION`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs

GUARD_STATE_VERSION = 1
"""The shape of :meth:`CompactionGuard.dump`'s data."""

THRASH_SAVING = 0.10
"""A compaction that saved less than this fraction of the prompt counts towards anti-thrash."""

THRASH_RUN = 2
"""This many consecutive poor compactions switch automatic compaction off until ``force``."""

SAVINGS_KEPT = 4
"""How many recent savings are remembered."""


@attrs.define
class CompactionGuard:
    """One session's cooldown and recent savings.

    :ivar cooldown_until: clock time (the engine context's ``clock``) before which automatic
        compaction waits.
    :ivar recent_savings: the fraction of the prompt each recent compaction saved, newest last.
    """

    cooldown_until: float = float("-inf")
    cooldown_reason: str | None = None
    recent_savings: list[float] = attrs.field(factory=list)

    cooldown_s: ClassVar[float] = 60.0
    """How long automatic compaction pauses after an aborted summary (what an engine's reason
    for aborting says)."""

    def start_cooldown(self, now: float, reason: str) -> None:
        """Pause automatic compaction for :attr:`cooldown_s` from ``now``, because of
        ``reason``."""
        self.cooldown_until = now + self.cooldown_s
        self.cooldown_reason = reason

    def record_saving(self, ratio: float) -> None:
        """Remember one compaction's saving (``1 - after / before``)."""
        self.recent_savings.append(ratio)
        del self.recent_savings[:-SAVINGS_KEPT]

    def correct_last_saving(self, ratio: float) -> None:
        """Replace the newest saving (an estimate) by the measured one."""
        if self.recent_savings:
            self.recent_savings[-1] = ratio

    @property
    def thrashing(self) -> bool:
        """True after :data:`THRASH_RUN` consecutive compactions that saved too little."""
        recent = self.recent_savings[-THRASH_RUN:]
        return len(recent) == THRASH_RUN and all(saving < THRASH_SAVING for saving in recent)

    def holds(self, now: float, *, force: bool) -> str | None:
        """Why automatic compaction must wait now, or ``None`` when it may go ahead."""
        if force:
            return None
        if now < self.cooldown_until:
            return f"cooling down after a failed summary ({self.cooldown_reason})"
        if self.thrashing:
            return (
                f"the last {THRASH_RUN} compactions saved < {int(THRASH_SAVING * 100)} % each; "
                "waiting for a forced compaction"
            )
        return None

    def reset(self) -> None:
        self.cooldown_until = float("-inf")
        self.cooldown_reason = None
        self.recent_savings.clear()

    def dump(self, now: float) -> dict[str, Any]:
        """The guard as JSON data: the cooldown as the seconds left at ``now`` (``None`` when
        none is running), the savings as they are."""
        left = self.cooldown_until - now
        running = math.isfinite(left) and left > 0
        return {
            "cooldown_left_s": left if running else None,
            "cooldown_reason": self.cooldown_reason if running else None,
            "recent_savings": list(self.recent_savings),
        }

    @classmethod
    def restore(cls, data: Any, now: float) -> CompactionGuard:
        """The guard :meth:`dump` described, its cooldown ending ``cooldown_left_s`` after
        ``now`` (the moment of the dump in this process's clock).

        :raises ValueError: ``data`` is not what :meth:`dump` writes.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a guard is a JSON object, got {type(data).__name__}")
        left = data.get("cooldown_left_s")
        savings = data.get("recent_savings", [])
        if left is not None and not isinstance(left, int | float):
            raise ValueError(f"cooldown_left_s must be a number or null, got {left!r}")
        if not isinstance(savings, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in savings
        ):
            raise ValueError(f"recent_savings must be a list of numbers, got {savings!r}")
        guard = cls(recent_savings=[float(x) for x in savings][-SAVINGS_KEPT:])
        if left is not None:
            guard.cooldown_until = now + float(left)
            guard.cooldown_reason = data.get("cooldown_reason")
        return guard
