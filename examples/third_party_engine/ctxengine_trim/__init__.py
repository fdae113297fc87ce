"""``trim``: a small third-party context engine written only against the ctxengine SDK.

It drops the oldest turns of a conversation and leaves one short note in their place. It loses
what it drops, so it is an example of the engine interface, not a recommendation: every part a
real engine needs is here — declared settings with a trigger, the SDK's guards, a tool, per-
session state, valid output in both formats — in about a hundred lines.

Published with::

    [project.entry-points."ctxengine.engines"]
    trim = "ctxengine_trim"

and selected with ``context.engine: trim``.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from ctxengine import (
    CompactionGuard,
    CompressResult,
    Conversation,
    EngineContext,
    PluginSettings,
    SettingsSpec,
    Stage,
    TokenEstimate,
    Tool,
    hookimpl,
    setting,
)
from ctxengine.messages import cut_points, is_tool_message

CTXENGINE_KIND = "engine"
NAME = "trim"


@attrs.frozen
class TrimSettings:
    threshold: float = setting(
        "number",
        0.6,
        gt=0.0,
        le=0.95,
        env="CTXENGINE_TRIM_THRESHOLD",
        doc="compact when prompt tokens >= threshold x window",
    )
    keep_last: int = setting("int", 8, ge=2, doc="fewest recent messages kept")


SETTINGS: SettingsSpec[TrimSettings] = SettingsSpec.of(
    "engines.trim", TrimSettings, trigger="threshold"
)


@attrs.define
class TrimState:
    guard: CompactionGuard = attrs.field(factory=CompactionGuard)
    dropped: int = 0


def state(ctx: EngineContext) -> TrimState:
    return ctx.plugin_state(NAME, TrimState)


@hookimpl
def declare_settings(settings: PluginSettings) -> None:
    settings.add(SETTINGS)


@hookimpl
def should_compress(
    ctx: EngineContext, prompt: TokenEstimate, stage: Stage, force: bool
) -> bool | None:
    if stage == "gateway":
        return None  # the gateway safety net decides that stage
    if not ctx.config.context.compaction:
        return False
    limit = ctx.fraction_of_window(ctx.config.settings(SETTINGS).threshold)
    # reaches: the answer exact counts give, counting only when the prompt is close to the limit
    return prompt.reaches(limit) and state(ctx).guard.holds(ctx.clock(), force=force) is None


@hookimpl
def compress(ctx: EngineContext, conversation: Conversation) -> CompressResult:
    started = time.perf_counter()
    messages, fmt = conversation.messages, conversation.format
    before = ctx.tokens.count(messages, conversation.system)
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in ("system", "developer"):
        lead += 1
    keep = ctx.config.settings(SETTINGS).keep_last
    cuts = cut_points(messages, fmt)
    # The tail starts at an assistant message that begins a turn, so the note (a user message)
    # before it keeps the roles alternating and no tool call loses its results.
    start = next(
        (
            i
            for i in range(len(messages) - keep, lead + 1, -1)
            if cuts[i]
            and messages[i].get("role") == "assistant"
            and not is_tool_message(messages[i - 1])
        ),
        None,
    )
    if start is None:
        return CompressResult.unchanged(
            "noop", "nothing old enough to trim", conversation, engine=NAME, tokens=before
        )
    dropped = start - lead
    note: dict[str, Any] = {
        "role": "user",
        "content": f"[{dropped} earlier messages were removed to save space.]",
    }
    kept = [*messages[:lead], note, *messages[start:]]
    after = ctx.tokens.count(kept, conversation.system)
    if after >= before:
        return CompressResult.unchanged(
            "noop", "trimming would not save tokens", conversation, engine=NAME, tokens=before
        )
    state(ctx).dropped += dropped
    state(ctx).guard.record_saving(1 - after / before)
    return CompressResult(
        status="compacted",
        reason=f"dropped {dropped} messages",
        conversation=conversation.with_messages(kept),
        engine=NAME,
        tokens_before=before,
        tokens_after=after,
        messages_before=len(messages),
        messages_after=len(kept),
        duration_s=time.perf_counter() - started,
    )


@hookimpl
def expose_tools(ctx: EngineContext) -> list[Tool]:
    def dropped(arguments: Any) -> dict[str, int]:
        return {"dropped": state(ctx).dropped}

    return [
        Tool(
            "trim_dropped",
            "How many earlier messages this session has dropped.",
            {"type": "object", "properties": {}},
            dropped,
        )
    ]


@hookimpl
def session_reset(ctx: EngineContext) -> None:
    ctx.state.pop(NAME, None)
