"""The compressor's configuration keys (``engines.compressor``) and its token budgets.

``context.compaction`` and ``auxiliary.compression.abort_on_failure`` are the kernel's (every
engine honours them); the keys below are the compressor's own and are validated only while it
is the selected engine. Each was ``compression.<key>`` before, still read with a deprecation
notice. Derived values for a 200K window with the defaults: threshold 100,000 tokens, tail
budget 20,000, summary cap 10,000.
"""

from __future__ import annotations

import attrs

from ctxengine import EngineContext, SettingsSpec, setting
from ctxengine_compressor.state import get_state

MAX_SUMMARY_TOKENS = 12_000
"""Upper cap on one summary, whatever the window."""

SUMMARY_WINDOW_SHARE = 0.05
"""A summary never takes more than this share of the model's context length."""


@attrs.frozen
class CompressorSettings:
    """The compressor's validated keys."""

    threshold: float = setting(
        "number",
        0.50,
        ge=0.05,
        le=0.95,
        env="CTXENGINE_THRESHOLD",
        alias="compression.threshold",
        doc="compact when prompt tokens >= threshold x window",
    )
    target_ratio: float = setting(
        "number",
        0.20,
        ge=0.10,
        le=0.80,
        alias="compression.target_ratio",
        doc="tokens of recent messages kept verbatim = threshold tokens x target_ratio",
    )
    protect_last_n: int = setting(
        "int",
        20,
        ge=1,
        alias="compression.protect_last_n",
        doc="fewest recent messages kept verbatim",
    )
    protect_first_n: int = setting(
        "int",
        3,
        ge=0,
        alias="compression.protect_first_n",
        doc="messages after the system prompt kept verbatim (never past a previous summary)",
    )
    summary_max_calls: int = setting(
        "int",
        8,
        ge=1,
        le=64,
        alias="compression.summary_max_calls",
        doc="most summary calls per compaction: parts of a middle too large for the "
        "summary model, and their merge",
    )


SETTINGS: SettingsSpec[CompressorSettings] = SettingsSpec.of(
    "engines.compressor", CompressorSettings, trigger="threshold", doc="the compressor engine"
)


@attrs.frozen
class Budgets:
    """Token budgets for one session's window.

    :ivar window: context length minus the output reservation.
    :ivar threshold_tokens: the compressor fires at or above this prompt size.
    :ivar tail_token_budget: tokens of recent messages kept verbatim.
    :ivar max_summary_tokens: cap on one summary.
    """

    window: int
    threshold_tokens: int
    tail_token_budget: int
    max_summary_tokens: int


def budgets_for(settings: CompressorSettings, context_length: int, window: int) -> Budgets:
    """Derive the budgets; a 200K window with defaults -> 100,000 / 20,000 / 10,000."""
    threshold_tokens = int(settings.threshold * window)
    return Budgets(
        window=window,
        threshold_tokens=threshold_tokens,
        tail_token_budget=int(threshold_tokens * settings.target_ratio),
        max_summary_tokens=min(int(context_length * SUMMARY_WINDOW_SHARE), MAX_SUMMARY_TOKENS),
    )


def settings(ctx: EngineContext) -> CompressorSettings:
    """This session's validated compressor settings."""
    return ctx.config.settings(SETTINGS)


def budgets(ctx: EngineContext) -> Budgets:
    """This session's budgets (derived once per config and model)."""
    state = get_state(ctx)
    cached = state.budgets
    if cached is not None and cached[0] is ctx.config and cached[1] is ctx.model:
        return cached[2]
    derived = budgets_for(settings(ctx), ctx.model.context_length, ctx.window)
    state.budgets = (ctx.config, ctx.model, derived)
    return derived
