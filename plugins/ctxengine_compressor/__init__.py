"""The default context engine ``compressor``: lossy summarization of the middle.

Four phases on every compaction, in OpenAI chat and Anthropic Messages format alike:

1. prune old tool output to one-line descriptions (no model call) - :mod:`.prune`;
2. find the kept head and tail without splitting tool groups - :mod:`.boundaries`;
3. summarize the middle in a fixed template, updating the previous summary - :mod:`.summary`;
4. assemble head + summary + tail and repair tool pairs - :mod:`.assemble`.

When to compact (threshold, failure cooldown, anti-thrash) is :mod:`.trigger`; its settings and
budgets are :mod:`.settings`; per-session state is :mod:`.state`; the deterministic digest and
the critical-context ledger are :mod:`.digest` and :mod:`.ledger`. See
``docs/builtins/compressor.md``. Every ``compress`` call returns a
:class:`~ctxengine.CompressResult`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine import hookimpl

# should_compress and update_usage run on every request and call trigger: imported once here,
# since an import statement of a package's submodule goes through importlib on every call. The
# rest (the engine, its phases) loads on first use.
from ctxengine_compressor import trigger

if TYPE_CHECKING:
    from ctxengine import (
        CompressResult,
        Conversation,
        EngineContext,
        PluginSettings,
        Stage,
        TokenEstimate,
        Usage,
    )

CTXENGINE_KIND = "engine"


@hookimpl
def declare_settings(settings: PluginSettings) -> None:
    """``engines.compressor``: ``threshold``, ``target_ratio``, ``protect_last_n``,
    ``protect_first_n``, ``summary_max_calls``."""
    from ctxengine_compressor.settings import SETTINGS

    settings.add(SETTINGS)


@hookimpl
def should_compress(
    ctx: EngineContext, prompt: TokenEstimate, stage: Stage, force: bool
) -> bool | None:
    """Threshold with failure cooldown and anti-thrash; no opinion on the gateway stage (gateway
    hygiene decides that one)."""
    if stage == "gateway":
        return None
    return trigger.should_compress(ctx, prompt, force)


@hookimpl
def compress(
    ctx: EngineContext,
    conversation: Conversation,
    stage: Stage,
    force: bool,
    focus: str | None,
    message_budget: int | None,
) -> CompressResult:
    """Compact the conversation; see :func:`ctxengine_compressor.engine.compress`."""
    from ctxengine_compressor import engine

    return engine.compress(ctx, conversation, stage, force, focus, message_budget)


@hookimpl
def update_usage(ctx: EngineContext, usage: Usage) -> None:
    """Remember real prompt tokens; measure the last compaction's real saving."""
    trigger.update_usage(ctx, usage)


@hookimpl
def session_reset(ctx: EngineContext) -> None:
    """Forget summaries, cooldowns and savings: the session starts over."""
    from ctxengine_compressor.state import STATE_KEY

    ctx.state.pop(STATE_KEY, None)
