"""Gateway session hygiene (SPEC §4): the safety net that decides the ``"gateway"`` stage.

A chat gateway calls :meth:`ctxengine.kernel.Kernel.hygiene` with a stored session's history
before handing the next message to the agent. This plugin answers ``should_compress`` for that
stage only: it fires at ``compression.hygiene_threshold`` (default 0.85) of the model's window —
deliberately above the agent's 0.50, so long gateway sessions are not compacted every turn — or
when the history reaches ``compression.hygiene_hard_message_limit`` messages; never for fewer
than four messages or with compression disabled. The compaction itself is the selected engine's.
"""

from __future__ import annotations

from ctxengine import EngineContext, Stage, hookimpl
from ctxengine._config.core import budgets

CTXENGINE_KIND = "extension"
MIN_HISTORY = 4
"""Shorter histories are never compacted by the gateway: there is nothing worth summarising."""


def hygiene_due(ctx: EngineContext, prompt_tokens: int, message_count: int) -> bool:
    """Whether the gateway should compact a history of this size now."""
    compression = ctx.config.compression
    if not compression.enabled or message_count < MIN_HISTORY:
        return False
    if message_count >= compression.hygiene_hard_message_limit:
        return True
    limits = budgets(compression, ctx.model.context_length, ctx.config.model.max_tokens)
    return prompt_tokens >= limits.hygiene_threshold_tokens


# tryfirst: the gateway stage is this plugin's decision, whichever engine is selected.
@hookimpl(tryfirst=True)
def should_compress(
    ctx: EngineContext, prompt_tokens: int, stage: Stage, message_count: int
) -> bool | None:
    """First result for ``stage == "gateway"``; no opinion at the agent stage."""
    if stage != "gateway":
        return None
    return hygiene_due(ctx, prompt_tokens, message_count)
