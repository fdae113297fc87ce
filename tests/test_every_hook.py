"""A test plugin that implements every hook (plus wrappers), driven through a real kernel.

``EveryHook`` is an engine implementing each hookspec; ``Wrappers`` is an extension holding
pluggy wrappers (new style ``wrapper=True`` and old style ``hookwrapper=True``) and ordering
markers. The tests check that every hook reaches the plugin through pluggy: wrappers run,
``tryfirst`` wins, ``CTXENGINE_TRACE=1`` logs each call compactly, and a raising plugin is
isolated. :mod:`tests.test_hookspecs` checks that this plugin covers every hookspec.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Generator
from pathlib import Path
from typing import Any

import attrs
import pytest

import ctxengine
from ctxengine import (
    CacheSettings,
    CompressResult,
    Conversation,
    EngineContext,
    Field,
    PluginCommands,
    PluginSettings,
    SettingsSpec,
    Stage,
    Tool,
    Usage,
    hookimpl,
    register_engine,
)
from ctxengine.coordination import Coordinator, ProcessCoordinator
from ctxengine.testing import samples

NAME = "everyhook"


@attrs.frozen
class EveryHookSettings:
    mode: str = "calm"
    limit: int = 3


SETTINGS: SettingsSpec[EveryHookSettings] = SettingsSpec(
    "engines.everyhook",
    (
        Field("mode", "choice", "calm", choices=("calm", "eager"), doc="how eager to compact"),
        Field("limit", "int", 3, ge=1, env="EVERYHOOK_LIMIT", doc="a number"),
    ),
    build=EveryHookSettings,
)


class EveryHook:
    """An engine that records every hook call."""

    CTXENGINE_KIND = "engine"

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def declare_settings(self, settings: PluginSettings) -> None:
        self.calls.append(f"declare_settings:{settings.owner}")
        settings.add(SETTINGS)

    @hookimpl
    def should_compress(self, ctx: EngineContext, prompt_tokens: int, stage: Stage) -> bool:
        self.calls.append("should_compress")
        return ctx.config.settings(SETTINGS).mode == "eager" and stage == "agent"

    @hookimpl
    def compress(self, ctx: EngineContext, conversation: Conversation) -> CompressResult:
        self.calls.append("compress")
        return CompressResult.unchanged(
            "noop", "everyhook never compacts", conversation, engine=ctx.engine, tokens=0
        )

    @hookimpl
    def expose_tools(self, ctx: EngineContext) -> list[Tool]:
        self.calls.append("expose_tools")
        return [Tool("echo", "Echo the text back.", {"type": "object"}, lambda a: a)]

    @hookimpl
    def update_usage(self, ctx: EngineContext, usage: Usage) -> None:
        self.calls.append(f"update_usage:{usage.prompt_tokens}")

    @hookimpl
    def session_start(self, ctx: EngineContext) -> None:
        self.calls.append(f"session_start:{ctx.session_id}")

    @hookimpl
    def session_reset(self, ctx: EngineContext) -> None:
        self.calls.append(f"session_reset:{ctx.session_id}")

    @hookimpl
    def session_end(self, ctx: EngineContext) -> None:
        self.calls.append(f"session_end:{ctx.session_id}")

    @hookimpl
    def register_commands(self, commands: PluginCommands) -> None:
        self.calls.append(f"register_commands:{commands.owner}")

        def configure(parser: argparse.ArgumentParser) -> None:
            parser.add_argument("--word", default="hi")

        commands.add("everyhook-say", "say a word", configure, lambda args: 0)


class Marker:
    """A cache strategy that tags the requests it sees."""

    CTXENGINE_KIND = "cache_strategy"

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def cache_strategy(
        self, ctx: EngineContext, request: dict[str, Any], settings: CacheSettings
    ) -> dict[str, Any]:
        self.calls.append(f"cache_strategy:{settings.ttl}")
        return {**request, "metadata": {"marked_by": "marker"}}


class SharedBackend:
    """A coordination backend plugin (``coordination.backend: shared``)."""

    CTXENGINE_KIND = "extension"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Path]] = []
        self.opened = ProcessCoordinator()

    @hookimpl
    def coordination_backend(self, backend: str, data_dir: Path) -> Coordinator | None:
        self.calls.append((backend, data_dir))
        return self.opened if backend == "shared" else None


TEST_PLUGINS = (EveryHook, Marker, SharedBackend)
"""With :class:`Wrappers`, these implement every hookspec (checked by test_hookspecs)."""


class Wrappers:
    """An extension with wrappers around hooks of every dispatch kind."""

    CTXENGINE_KIND = "extension"

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl(wrapper=True)
    def update_usage(self, usage: Usage) -> Generator[None, None, None]:
        self.calls.append(f"before update_usage:{usage.prompt_tokens}")
        yield
        self.calls.append("after update_usage")

    @hookimpl(hookwrapper=True)
    def compress(self) -> Generator[None, Any, None]:
        outcome = yield
        result = outcome.get_result()
        self.calls.append(f"old-style wrapper saw {result.status}")

    @hookimpl(wrapper=True)
    def should_compress(self, stage: Stage) -> Generator[None, bool | None, bool | None]:
        answer = yield
        self.calls.append(f"should_compress answered {answer}")
        return answer

    @hookimpl(tryfirst=True)
    def expose_tools(self) -> list[Tool]:
        return [Tool("first", "Offered first.", {"type": "object"}, lambda a: "first")]


@pytest.fixture
def engine() -> Generator[EveryHook]:
    plugin = EveryHook()
    MARKER.calls.clear()
    with register_engine(NAME, plugin), register_engine("marker", MARKER, kind="cache_strategy"):
        yield plugin


MARKER = Marker()


def kernel_with(
    engine: EveryHook, wrappers: Wrappers | None = None, **config: Any
) -> ctxengine.Kernel:
    data: dict[str, Any] = {"context": {"engine": NAME}, "prompt_caching": {"strategy": "marker"}}
    data.update(config)
    plugins = [("wrappers", wrappers)] if wrappers is not None else []
    return ctxengine.load(data, plugins=plugins)


def test_declare_settings_validates_the_plugins_section_at_load(engine: EveryHook) -> None:
    kernel = kernel_with(engine, engines={NAME: {"mode": "eager", "limit": 5}})
    assert f"declare_settings:{NAME}" in engine.calls
    assert kernel.config.settings(SETTINGS) == EveryHookSettings("eager", 5)
    assert kernel.loaded.owners["engines.everyhook.mode"] == NAME
    with pytest.raises(ctxengine.ConfigError) as error:
        kernel_with(engine, engines={NAME: {"mood": "eager", "limit": 0}})
    assert str(error.value).splitlines() == [
        "config error in <mapping>: engines.everyhook.mood: unknown key; did you mean 'mode'? "
        "(allowed: mode, limit)",
        "config error in <mapping>: engines.everyhook.limit = 0: must be an integer >= 1",
    ]


def test_declare_settings_reads_the_declared_environment_variable(
    engine: EveryHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVERYHOOK_LIMIT", "9")
    monkeypatch.setenv("CTXENGINE_ENGINE", NAME)
    kernel = ctxengine.load()
    assert kernel.config.settings(SETTINGS).limit == 9
    assert kernel.loaded.sources["engines.everyhook.limit"] == "env EVERYHOOK_LIMIT"


def test_coordination_backend_is_asked_after_loading_the_plugin_named_for_it(
    engine: EveryHook, tmp_path: Path
) -> None:
    backend = SharedBackend()
    with register_engine("coordination.shared", backend, kind="extension"):
        data = {"context": {"engine": NAME}, "coordination": {"backend": "shared"}}
        kernel = ctxengine.load(data, env={"CTXENGINE_HOME": str(tmp_path)})
        assert kernel.coordinator is backend.opened
        assert backend.calls == [("shared", tmp_path)]
        assert "coordination.shared" in kernel.plugin_names
        kernel.close()
    # Without the plugin, the name is a configuration error listing what there is.
    with pytest.raises(ctxengine.ConfigError, match=r"coordination\.backend = 'shared': no plugin"):
        ctxengine.load(data, env={"CTXENGINE_HOME": str(tmp_path)})


def test_should_compress_and_its_wrapper(engine: EveryHook) -> None:
    wrappers = Wrappers()
    session = kernel_with(engine, wrappers, engines={NAME: {"mode": "eager"}}).session("s")
    _, messages = samples.short_conversation("openai")
    assert session.should_compress(messages) is True
    assert wrappers.calls == ["should_compress answered True"]


def test_compress_runs_inside_an_old_style_hookwrapper(engine: EveryHook) -> None:
    wrappers = Wrappers()
    session = kernel_with(engine, wrappers).session("s")
    _, messages = samples.short_conversation("openai")
    result = session.compress(messages)
    assert result.reason == "everyhook never compacts"
    assert wrappers.calls == ["old-style wrapper saw noop"]


def test_expose_tools_are_stamped_and_ordered_by_tryfirst(engine: EveryHook) -> None:
    session = kernel_with(engine, Wrappers()).session("s")
    tools = session.tools()
    assert [(t.tool.name, t.provider) for t in tools] == [("echo", NAME), ("first", "wrappers")]
    assert session.call_tool("echo", {"x": 1}) == '{"x": 1}'


def test_update_usage_wrapper_runs(engine: EveryHook) -> None:
    wrappers = Wrappers()
    session = kernel_with(engine, wrappers).session("s")
    session.update_usage({"input_tokens": 10, "output_tokens": 2})
    assert "update_usage:10" in engine.calls
    assert wrappers.calls == ["before update_usage:10", "after update_usage"]


def test_cache_strategy_is_the_selected_one(engine: EveryHook) -> None:
    session = kernel_with(engine).session("s")
    request = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}]}
    assert session.prepare(request)["metadata"] == {"marked_by": "marker"}
    assert MARKER.calls == ["cache_strategy:5m"]


def test_session_start_reset_and_end(engine: EveryHook) -> None:
    kernel = kernel_with(engine)
    kernel.session("a").reset()
    kernel.close_session("a")
    assert [c for c in engine.calls if c.startswith("session_")] == [
        "session_start:a",
        "session_reset:a",
        "session_end:a",
    ]


def test_register_commands_is_stamped_with_the_plugin(
    engine: EveryHook, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxengine_cli.main import main

    assert main(["everyhook-say", "--word", "x"]) == 0
    assert f"register_commands:{NAME}" in engine.calls


def test_a_raising_implementation_is_isolated_and_the_others_still_run(engine: EveryHook) -> None:
    class Broken:
        CTXENGINE_KIND = "extension"

        @hookimpl
        def update_usage(self) -> None:
            raise RuntimeError("broken plugin")

    session = ctxengine.load({"context": {"engine": NAME}}, plugins=[("broken", Broken())]).session(
        "s"
    )
    session.update_usage({"input_tokens": 7, "output_tokens": 1})
    assert "update_usage:7" in engine.calls


def test_trace_logs_every_hook_call_compactly(
    engine: EveryHook, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CTXENGINE_TRACE", "1")
    caplog.set_level(logging.INFO, logger="ctxengine")
    kernel = kernel_with(engine, Wrappers())
    session = kernel.session("s")
    messages = samples.openai_conversation(turns=40)
    session.should_compress(messages)
    session.compress(messages)
    session.prepare({"model": "m", "messages": messages})
    session.update_usage({"input_tokens": 10, "output_tokens": 2})
    session.tools()
    session.reset()
    kernel.close()
    traced = [r.getMessage() for r in caplog.records if r.getMessage().startswith("hook ")]
    called = {line.split()[1].split("(")[0] for line in traced}
    assert {
        "declare_settings",
        "session_start",
        "should_compress",
        "compress",
        "cache_strategy",
        "update_usage",
        "expose_tools",
        "session_reset",
        "session_end",
    } <= called
    assert any("conversation=<" in line and " openai messages>" in line for line in traced)
    # Compact: no message text is dumped, whatever the conversation's size.
    longest = max(len(line) for line in traced)
    assert longest < 400, max(traced, key=len)
