"""An engine may name a fallback engine (``CTXENGINE_FALLBACK``); the kernel loads it beside the
engine, lets it hear the broadcast hooks, keeps the engine hooks to the selected engine and runs
its ``compress`` on request (``ctx.fallback_compress``)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine
from ctxengine import CompressResult, hookimpl
from ctxengine.testing import samples


def _engine(fallback: object = "compressor", *, answer: bool = False) -> Any:
    @hookimpl
    def should_compress(ctx: Any) -> bool:
        return answer

    @hookimpl
    def compress(ctx: Any, conversation: Any, stage: Any, force: bool, focus: Any) -> Any:
        result = ctx.fallback_compress(conversation, stage=stage, force=force, focus=focus)
        if result is None:
            return CompressResult.unchanged(
                "noop", "no fallback", conversation, engine="delegating", tokens=0
            )
        return result

    return types.SimpleNamespace(
        CTXENGINE_KIND="engine",
        CTXENGINE_FALLBACK=fallback,
        should_compress=should_compress,
        compress=compress,
    )


@pytest.fixture
def registered() -> Iterator[Any]:
    plugin = _engine()
    with ctxengine.register_engine("delegating", plugin):
        yield plugin


def _load(**extra: Any) -> ctxengine.Kernel:
    return ctxengine.load(
        {
            "context": {"engine": "delegating"},
            "model": {"name": "claude-sonnet-4-6", "context_length": 16_000},
            "auxiliary": {"compression": {"provider": "extractive"}},
            "engines": {"compressor": {"protect_last_n": 6}},
            **extra,
        },
        env={},
    )


def test_the_fallback_is_loaded_beside_the_engine(registered: Any) -> None:
    with _load() as kernel:
        assert kernel.engine == "delegating"
        assert kernel.selection.fallback is not None
        assert kernel.selection.fallback.name == "compressor"
        assert "compressor" in kernel.plugin_names
        assert kernel.status_lines()[0].endswith(", falling back to compressor")
        # The fallback's keys are validated and listed with their owner.
        assert kernel.loaded.owners["engines.compressor.protect_last_n"] == "compressor"
        session = kernel.session("s")
        assert session.ctx.fallback_engine == "compressor"


def test_engine_hooks_reach_only_the_selected_engine(registered: Any) -> None:
    system, messages = samples.conversation("anthropic", turns=60)
    with _load() as kernel:
        session = kernel.session("s")
        # The compressor would say yes at this size; the selected engine says no.
        assert session.should_compress(messages, system) is False
        result = session.compress(messages, system, force=True)
    assert result.compacted and result.engine == "compressor"


def test_the_fallback_hears_the_broadcast_hooks(registered: Any) -> None:
    with _load() as kernel:
        session = kernel.session("s")
        session.update_usage({"input_tokens": 5_000, "output_tokens": 10})
        assert session.ctx.state["compressor"].last_prompt_tokens == 5_000
        session.reset()
        assert "compressor" not in session.ctx.state


def test_a_fallback_that_cannot_be_loaded_is_a_notice() -> None:
    with ctxengine.register_engine("delegating", _engine("nowhere")), _load() as kernel:
        assert kernel.selection.fallback is None
        (notice,) = kernel.notices
        assert notice.startswith(
            "the fallback of engine 'delegating': context engine 'nowhere' was not found"
        )
        session = kernel.session("s")
        system, messages = samples.conversation("anthropic")
        assert session.compress(messages, system, force=True).reason == "no fallback"


def test_a_fallback_name_that_is_not_a_string_is_a_notice() -> None:
    with ctxengine.register_engine("delegating", _engine(42)), _load() as kernel:
        assert kernel.notices == [
            "engine 'delegating' names 42 as CTXENGINE_FALLBACK, not an engine name; it "
            "runs without a fallback"
        ]


def test_a_crashing_fallback_is_an_aborted_result() -> None:
    @hookimpl
    def compress(ctx: Any) -> Any:
        raise RuntimeError("boom")

    broken = types.SimpleNamespace(CTXENGINE_KIND="engine", compress=compress)
    with (
        ctxengine.register_engine("broken", broken),
        ctxengine.register_engine("delegating", _engine("broken")),
    ):
        with _load() as kernel:
            system, messages = samples.conversation("anthropic")
            result = kernel.session("s").compress(messages, system, force=True)
        assert result.status == "aborted"
        assert result.engine == "broken"
        assert result.reason == (
            "engine 'broken' raised RuntimeError: boom; no messages were dropped"
        )
        assert result.messages == messages
