"""The hook facade (``ctxengine._kernel.hooks``) calls every hook through pluggy: a failing
plugin is isolated, a plugin registered later is heard, wrappers run and tracing sees the calls
of plain implementations."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import pluggy
import pytest

import ctxengine
from ctxengine import hookimpl, hookspecs
from ctxengine._kernel.hooks import Hooks, guarded
from ctxengine.testing import samples


class Answers:
    """Plain implementations that record their calls into a shared list."""

    def __init__(self, name: str, answer: object, calls: list[str]) -> None:
        self.name, self.answer, self.calls = name, answer, calls

    @hookimpl
    def should_compress(self, message_count: int) -> object:
        self.calls.append(f"{self.name}:{message_count}")
        return self.answer

    @hookimpl
    def session_start(self, ctx: object) -> None:
        self.calls.append(f"start:{self.name}:{ctx}")


class First(Answers):
    @hookimpl(tryfirst=True)
    def should_compress(self, message_count: int) -> object:
        self.calls.append(f"{self.name}:{message_count}")
        return self.answer


class Raises:
    @hookimpl(tryfirst=True)
    def should_compress(self) -> object:
        raise RuntimeError("broken plugin")


class Wraps:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    @hookimpl(wrapper=True)
    def should_compress(self) -> Generator[None, object, object]:
        self.calls.append("wrapper")
        answer = yield
        return answer


def manager(*plugins: tuple[str, object]) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name, plugin in plugins:
        pm.register(guarded(pm, plugin, name), name=name)
    return pm


ARGS: dict[str, Any] = {
    "ctx": "ctx",
    "prompt_tokens": 1,
    "measured": False,
    "stage": "agent",
    "force": False,
    "message_count": 5,
    "prompt": None,
}


def test_a_failing_plugin_is_isolated() -> None:
    calls: list[str] = []
    hooks = Hooks(manager(("broken", Raises()), ("yes", Answers("yes", True, calls))))
    answer, failures, raised = hooks._call("should_compress", **ARGS)
    assert answer is True and not raised
    assert [(f.plugin, f.hook) for f in failures] == [("broken", "should_compress")]


def test_a_plugin_registered_after_the_first_call_is_heard() -> None:
    calls: list[str] = []
    pm = manager(("no", Answers("no", False, calls)))
    hooks = Hooks(pm)
    assert hooks._call("should_compress", **ARGS)[0] is False
    pm.register(guarded(pm, First("late", True, calls), "late"), name="late")
    assert hooks._call("should_compress", **ARGS)[0] is True
    assert calls == ["no:5", "late:5"]


def test_a_wrapper_registered_later_wraps_the_call() -> None:
    calls: list[str] = []
    pm = manager(("yes", Answers("yes", True, calls)))
    hooks = Hooks(pm)
    assert hooks._call("should_compress", **ARGS)[0] is True
    pm.register(Wraps(calls), name="wraps")
    assert hooks._call("should_compress", **ARGS)[0] is True
    assert calls == ["yes:5", "wrapper", "yes:5"]


def test_tracing_sees_the_calls_of_plain_implementations(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The built-in plugins have no wrappers: with CTXENGINE_TRACE their calls still go through
    pluggy's monitoring."""
    monkeypatch.setenv("CTXENGINE_TRACE", "1")
    caplog.set_level(logging.INFO, logger="ctxengine")
    kernel = ctxengine.load({"auxiliary": {"compression": {"provider": "extractive"}}})
    session = kernel.session("s")
    messages = [{"role": "user", "content": "hello"}]
    session.should_compress(messages)
    session.prepare({"model": "m", "messages": messages})
    session.update_usage({"input_tokens": 10, "output_tokens": 2})
    kernel.close()
    traced = {
        r.getMessage().split()[1].split("(")[0]
        for r in caplog.records
        if r.getMessage().startswith("hook ")
    }
    assert {"should_compress", "cache_strategy", "update_usage"} <= traced


class AlwaysCompact:
    """An extension that answers the agent-stage decision before the engine does."""

    CTXENGINE_KIND = "extension"

    @hookimpl(tryfirst=True)
    def should_compress(self, stage: str) -> bool | None:
        return True if stage == "agent" else None


def test_a_plugin_that_answers_first_changes_the_decision() -> None:
    config = {"auxiliary": {"compression": {"provider": "extractive"}}}
    history = samples.openai_conversation(turns=5)
    plain = ctxengine.load(config)
    assert plain.session("s").should_compress(history) is False
    eager = ctxengine.load(config, plugins=[("always", AlwaysCompact())])
    assert eager.session("s").should_compress(history) is True
    plain.close()
    eager.close()
