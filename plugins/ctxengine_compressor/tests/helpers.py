"""Builders shared by the compressor tests: engine contexts, scripted providers, conversations."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import ctxengine
from ctxengine import (
    CompressResult,
    Config,
    Conversation,
    EngineContext,
    Format,
    Message,
    ModelInfo,
    SystemPrompt,
    TextSize,
    TokenCounter,
    TokenEstimate,
    config_from_mapping,
)
from ctxengine_compressor import engine

COUNTER = TokenCounter()
"""One counter for all tests: loading the encoding takes a moment."""


class CountedSizes:
    """Boundary sizes from a per-message count (exact everywhere), for boundary tests."""

    def __init__(self, messages: list[Message], count: Callable[[Message], int]) -> None:
        self._messages = messages
        self._count = count

    def exact(self, index: int) -> int:
        return self._count(self._messages[index])

    def run(self, start: int = 0, stop: int | None = None) -> TokenEstimate:
        return TokenEstimate.known(sum(map(self._count, self._messages[start:stop])))

    def size(self, start: int = 0, stop: int | None = None) -> TextSize:
        # All fixed: the bounds are the exact count, as for run.
        return TextSize(fixed=self.run(start, stop).exact())


class Clock:
    """A clock tests move by hand (cooldowns)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class ScriptedProvider:
    """A summary provider answering from a script: a string is returned, an exception raised."""

    name = "scripted"
    model = "scripted-1"

    def __init__(self, *replies: str | BaseException, context_length: int = 200_000) -> None:
        self.replies = list(replies)
        self.context_length = context_length
        self.calls: list[tuple[str, str, int]] = []

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        self.calls.append((system, prompt, max_tokens))
        reply = self.replies.pop(0) if self.replies else GOOD_SUMMARY
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def acomplete(self, system: str, prompt: str, max_tokens: int) -> str:
        return self.complete(system, prompt, max_tokens)


GOOD_SUMMARY = "\n".join(
    [
        "## Goal",
        "Fix the failing tests in lib/app.",
        "## Constraints & Preferences",
        "None.",
        "## Progress",
        "### Done",
        "- Checked the modules.",
        "### In Progress",
        "- Module fixes.",
        "### Blocked",
        "None.",
        "## Key Decisions",
        "None.",
        "## Relevant Files",
        "None.",
        "## Next Steps",
        "- Continue.",
        "## Critical Context",
        "None.",
    ]
)


@functools.lru_cache(maxsize=8_192)
def _config(
    context_length: int, compaction: bool, abort_on_failure: bool, options: str
) -> tuple[Config, ModelInfo]:
    """The validated configuration and model of :func:`make_ctx`, built once per setting (both
    are immutable; the property suites build tens of thousands of contexts)."""
    config = config_from_mapping(
        {
            "context": {"compaction": compaction},
            "model": {"context_length": context_length},
            "auxiliary": {"compression": {"abort_on_failure": abort_on_failure}},
            "engines": {"compressor": json.loads(options)},
        }
    )
    return config, _model(context_length)


@functools.lru_cache(maxsize=64)
def _model(context_length: int) -> ModelInfo:
    """The model as the kernel reads a model section with this context length (a kernel of its
    own: the compressor's values of :func:`_config` are checked against each other only by a
    kernel, and the property suites try any of them)."""
    return ctxengine.load({"model": {"context_length": context_length}}, env={}).model


def make_ctx(
    provider: object = None,
    *,
    context_length: int = 16_000,
    clock: Callable[[], float] | None = None,
    compaction: bool = True,
    abort_on_failure: bool = False,
    **options: Any,
) -> EngineContext:
    """A context for the compressor with a small window (so samples are over threshold):
    ``options`` are ``engines.compressor`` keys, ``compaction`` is ``context.compaction`` and
    ``abort_on_failure`` is ``auxiliary.compression.abort_on_failure``."""
    config, model = _config(
        context_length, compaction, abort_on_failure, json.dumps(options, sort_keys=True)
    )
    ctx = EngineContext(
        session_id="test",
        engine="compressor",
        config=config,
        model=model,
        tokens=COUNTER,
        summarizer=lambda: provider,  # type: ignore[arg-type,return-value]
    )
    if clock is not None:
        ctx.clock = clock
    return ctx


def run(
    ctx: EngineContext,
    messages: list[Message],
    fmt: Format,
    system: SystemPrompt | None = None,
    *,
    force: bool = True,
    focus: str | None = None,
) -> CompressResult:
    return engine.compress(ctx, Conversation(messages, fmt, system), "agent", force, focus)


def openai_call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def all_text(messages: list[Message], system: SystemPrompt | None = None) -> str:
    """Everything in a conversation as one string (for "is it still there" checks)."""
    return json.dumps([system, messages], ensure_ascii=False)
