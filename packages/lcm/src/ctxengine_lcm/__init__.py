"""ctxengine-lcm: the lossless context engine (engine name ``lcm``).

Installed with ``pip install 'ctxengine[lcm]'`` and selected with ``context.engine: lcm``; it
registers through the ``ctxengine`` entry-point group like any third-party engine and uses only
kernel services (summary providers, message helpers, redaction, token counting).

Every message is stored verbatim, in SQLite or in PostgreSQL (``engines.lcm.database_url``, for
many worker processes on many hosts); compaction replaces old messages in the prompt with
summaries that the agent can search and expand again with the ``lcm_*`` tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine import hookimpl
from ctxengine_lcm.engine import LcmSession, get_guard, get_state
from ctxengine_lcm.settings import settings_for

if TYPE_CHECKING:
    from ctxengine import (
        CompressResult,
        Conversation,
        EngineContext,
        PluginCommands,
        PluginSettings,
        Stage,
        TokenEstimate,
        Tool,
        Usage,
    )

__version__ = "0.1.0"

CTXENGINE_KIND = "engine"

__all__ = ["CTXENGINE_KIND", "__version__", "open_session"]


def open_session(ctx: EngineContext) -> LcmSession:
    """The session's engine object, opening the store on first use."""
    from ctxengine_lcm.backends import store_for

    state = get_state(ctx)
    if state.session is None:
        settings = settings_for(ctx.config, ctx.data_dir)
        state.session = LcmSession(store_for(settings), ctx.session_id, settings)
    return state.session


@hookimpl
def declare_settings(settings: PluginSettings) -> None:
    """The ``engines.lcm`` section (see :data:`ctxengine_lcm.settings.SETTINGS`)."""
    from ctxengine_lcm.settings import SETTINGS

    settings.add(SETTINGS)


@hookimpl
def should_compress(
    ctx: EngineContext, prompt: TokenEstimate, stage: Stage, force: bool
) -> bool | None:
    """Agent stage: prompt tokens >= ``engines.lcm.threshold`` x window (default 0.75).

    Off while compression is disabled, during the cooldown after an aborted compaction and after
    two compactions in a row that saved < 10 %, unless ``force``. The gateway stage is left to
    the gateway hygiene plugin (``None``).
    """
    if stage == "gateway":
        return None
    if not ctx.config.context.compaction:
        return False
    from ctxengine_lcm.compaction import budget_for

    settings = settings_for(ctx.config, ctx.data_dir)
    if not prompt.reaches(budget_for(ctx, settings).threshold_tokens):
        return False
    if force:
        return True
    held = get_guard(ctx).holds(ctx.clock(), force=False)
    if held is not None:
        ctx.log.debug("lcm: over threshold but %s", held)
        return False
    return True


@hookimpl
def compress(
    ctx: EngineContext,
    conversation: Conversation,
    stage: Stage,
    force: bool,
    focus: str | None,
    message_budget: int | None,
) -> CompressResult | None:
    """Store every new message, compact the active context, return it as messages.

    Summaries come back as one user message (plus an assistant acknowledgement when a user
    message follows) whose text names the ids the agent can expand; everything else is the
    caller's own messages. ``noop`` (nothing shrank) and ``aborted`` return the input unchanged;
    the new messages are stored either way, except when another compaction of the same session
    holds its lock for longer than ``LOCK_WAIT_SECONDS`` (30 s): then the result is ``noop``,
    nothing is stored, and the reason says so (the next call stores them). A history older than
    what the store holds (a stale writer) is answered with a ``noop`` that rewrites nothing.
    ``message_budget`` shrinks the fresh tail so the result holds at most that many messages.
    """
    return open_session(ctx).compress(
        ctx, conversation, force=force, focus=focus, stage=stage, message_budget=message_budget
    )


@hookimpl
def expose_tools(ctx: EngineContext) -> list[Tool]:
    """``lcm_grep``, ``lcm_describe``, ``lcm_expand`` and ``lcm_expand_query``."""
    from ctxengine_lcm.tools import build_tools

    return build_tools(lambda: open_session(ctx), ctx)


@hookimpl
def update_usage(ctx: EngineContext, usage: Usage) -> None:
    """Nothing to count: the kernel keeps ``ctx.last_usage``; the state is created early."""
    del usage
    get_state(ctx)


@hookimpl
def session_start(ctx: EngineContext) -> None:
    """Per-session state; the store is opened lazily on first compaction or tool call."""
    get_state(ctx)


@hookimpl
def session_reset(ctx: EngineContext) -> None:
    """Forget the session's in-memory state (the store keeps every message)."""
    session_end(ctx)


@hookimpl
def session_end(ctx: EngineContext) -> None:
    """Close the session's store connection."""
    state = get_state(ctx)
    if state.session is not None:
        state.session.close()
        state.session = None


@hookimpl
def register_commands(commands: PluginCommands) -> None:
    """``ctxengine lcm status|doctor|grep``."""
    from ctxengine_lcm.cli import register

    register(commands)
