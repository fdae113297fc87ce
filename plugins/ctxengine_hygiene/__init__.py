"""Gateway session hygiene: the safety net that decides the ``"gateway"`` stage.

A chat gateway calls :meth:`ctxengine.Session.hygiene` (or ``Kernel.hygiene``) with a stored
session's history before handing the next message to the agent. This plugin answers
``should_compress`` for that stage only: it fires at ``gateways.hygiene.threshold`` (default
0.85) of the model's window — deliberately above the agent's trigger, so long gateway sessions
are not compacted every turn — or when the history reaches
``gateways.hygiene.hard_message_limit`` messages -- then with a message budget of half the
limit, which the engine's compaction must meet (the kernel reports an error when it does not);
never for fewer than four messages or with compression disabled. The compaction itself is the
selected engine's. An always-on extension. See ``docs/builtins/hygiene.md``.
"""

from __future__ import annotations

import attrs

from ctxengine import (
    EngineContext,
    GatewayVerdict,
    PluginSettings,
    SettingsSpec,
    SettingsView,
    Stage,
    TokenEstimate,
    hookimpl,
    setting,
)

CTXENGINE_KIND = "extension"
MIN_HISTORY = 4
"""Shorter histories are never compacted by the gateway: there is nothing worth summarising."""


@attrs.frozen
class HygieneSettings:
    """The safety net's validated keys (``gateways.hygiene``; ``compression.hygiene_<key>``
    before, still read with a deprecation notice)."""

    threshold: float = setting(
        "number",
        0.85,
        ge=0.05,
        le=1.0,
        env="CTXENGINE_HYGIENE_THRESHOLD",
        alias="compression.hygiene_threshold",
        doc="gateway safety net fires at this fraction of the window; >= the engine's trigger",
    )
    hard_message_limit: int = setting(
        "int",
        5000,
        ge=4,
        alias="compression.hygiene_hard_message_limit",
        doc="the safety net also fires at this many messages",
    )


def _above_engine_trigger(view: SettingsView) -> None:
    """``threshold`` must not be below the selected engine's own trigger: the gateway
    would then compact every history the agent is still happily working with."""
    high = "gateways.hygiene.threshold"
    low = view.engine_trigger
    if low is None or low not in view or view.has_problem(low, high):
        return
    if view.value(high) >= view.value(low):
        return
    if view.source(high) == "default":
        # The user only raised the engine's trigger; point at the key they wrote.
        rule = f"must be <= {view.describe(high, seen_from=view.source(low))}; raise {high} as well"
        view.problem(low, rule)
    else:
        rule = f"must be >= {view.describe(low, seen_from=view.source(high))} and <= 1.0"
        view.problem(high, rule)


SETTINGS: SettingsSpec[HygieneSettings] = SettingsSpec.of(
    "gateways.hygiene", HygieneSettings, checks=(_above_engine_trigger,), doc="gateway hygiene"
)


@hookimpl
def declare_settings(settings: PluginSettings) -> None:
    """``gateways.hygiene.threshold`` and ``gateways.hygiene.hard_message_limit``."""
    settings.add(SETTINGS)


BUDGET_SHARE = 0.5
"""Past the hard message limit, the compaction must leave at most this share of it, so the
next few turns do not hit the limit again at once."""


def hygiene_due(ctx: EngineContext, prompt: TokenEstimate, message_count: int) -> GatewayVerdict:
    """Whether the gateway should compact a history of this size now, and why (the answer exact
    counts give: the prompt is counted exactly only when it lies within its error of the
    threshold)."""
    if not ctx.config.context.compaction:
        return GatewayVerdict(False, "compression is disabled")
    if message_count < MIN_HISTORY:
        return GatewayVerdict(False, f"fewer than {MIN_HISTORY} messages")
    limits = ctx.config.settings(SETTINGS)
    limit = limits.hard_message_limit
    if message_count >= limit:
        return GatewayVerdict(
            True,
            f"{message_count:,} messages >= gateways.hygiene.hard_message_limit {limit:,}",
            message_budget=max(MIN_HISTORY, int(limit * BUDGET_SHARE)),
        )
    fire_at = ctx.fraction_of_window(limits.threshold)
    if prompt.reaches(fire_at):
        return GatewayVerdict(
            True,
            f"~{prompt.value:,} tokens >= {limits.threshold:g} of the window ({fire_at:,})",
        )
    return GatewayVerdict(False, f"~{prompt.value:,} tokens < {fire_at:,}")


# tryfirst: the gateway stage is this plugin's decision, whichever engine is selected.
@hookimpl(tryfirst=True)
def should_compress(
    ctx: EngineContext, prompt: TokenEstimate, stage: Stage, message_count: int
) -> GatewayVerdict | None:
    """First result for ``stage == "gateway"``; no opinion at the agent stage."""
    if stage != "gateway":
        return None
    return hygiene_due(ctx, prompt, message_count)
