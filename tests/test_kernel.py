"""The kernel and session facade: hook dispatch, failure isolation, usage, tools, caching."""

from __future__ import annotations

import asyncio
import copy
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import ctxengine
from ctxengine import hookimpl
from ctxengine._config.spec import SettingsDeclarationError
from ctxengine._kernel.resolve import register_engine
from ctxengine._messages.conversation import Conversation
from ctxengine._plugin.context import EngineContext
from ctxengine._plugin.results import CompressResult
from ctxengine._plugin.tools import DuplicateToolError, Tool, ToolError
from ctxengine.testing import samples


class RecordingEngine:
    """An engine whose behaviour each test sets, recording every call it gets."""

    CTXENGINE_KIND = "engine"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.answer: bool | None = True
        self.fail_with: Exception | None = None

    @hookimpl
    def should_compress(
        self, ctx: EngineContext, prompt_tokens: int, measured: bool, stage: str
    ) -> bool | None:
        self.calls.append(("should_compress", (prompt_tokens, measured, stage)))
        if self.fail_with:
            raise self.fail_with
        return self.answer

    @hookimpl
    def compress(self, ctx: EngineContext, conversation: Conversation) -> CompressResult:
        self.calls.append(("compress", ctx.session_id))
        if self.fail_with:
            raise self.fail_with
        ctx.state["count"] = ctx.state.get("count", 0) + 1
        kept = [conversation.messages[0], *conversation.messages[-2:]]
        return CompressResult(
            status="compacted",
            reason="kept the ends",
            conversation=conversation.with_messages(kept),
            engine=ctx.engine,
            tokens_before=100,
            tokens_after=10,
            messages_before=len(conversation.messages),
            messages_after=len(kept),
        )

    @hookimpl
    def update_usage(self, ctx: EngineContext, usage: ctxengine.Usage) -> None:
        self.calls.append(("update_usage", usage.prompt_tokens))

    @hookimpl
    def expose_tools(self, ctx: EngineContext) -> list[Tool]:
        def echo(args: Mapping[str, Any]) -> Any:
            if "fail" in args:
                raise ToolError("fail was asked for")
            if "crash" in args:
                raise RuntimeError("tool bug")
            return {"echo": dict(args), "session": ctx.session_id}

        return [
            Tool(
                name="echo",
                description="Echo the arguments.",
                input_schema={"type": "object", "properties": {}},
                handler=echo,
            )
        ]

    @hookimpl
    def session_start(self, ctx: EngineContext) -> None:
        self.calls.append(("session_start", ctx.session_id))
        ctx.state["started"] = True

    @hookimpl
    def session_reset(self, ctx: EngineContext) -> None:
        self.calls.append(("session_reset", ctx.session_id))

    @hookimpl
    def session_end(self, ctx: EngineContext) -> None:
        self.calls.append(("session_end", ctx.session_id))


@pytest.fixture
def engine() -> Iterator[RecordingEngine]:
    instance = RecordingEngine()
    with register_engine("recording", instance):
        yield instance


@pytest.fixture
def kernel(engine: RecordingEngine) -> ctxengine.Kernel:
    return ctxengine.load({"context": {"engine": "recording"}})


def test_import_is_light() -> None:
    import subprocess

    code = (
        "import sys, ctxengine; "
        "print(sorted(m for m in ('anthropic','tiktoken','openai','yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_compress_goes_to_the_selected_engine(
    kernel: ctxengine.Kernel, engine: RecordingEngine
) -> None:
    _, messages = samples.conversation("openai", turns=3)
    before = copy.deepcopy(messages)
    result = kernel.session("a").compress(messages)
    assert result.status == "compacted"
    assert result.messages == [messages[0], *messages[-2:]]
    assert messages == before
    assert ("compress", "a") in engine.calls


def test_sessions_have_their_own_state(kernel: ctxengine.Kernel) -> None:
    _, messages = samples.conversation("openai", turns=3)
    kernel.session("a").compress(messages)
    kernel.session("a").compress(messages)
    kernel.session("b").compress(messages)
    assert kernel.session("a").ctx.state["count"] == 2
    assert kernel.session("b").ctx.state["count"] == 1
    assert kernel.session("a") is kernel.session("a")


def test_engine_crash_returns_the_conversation_unchanged(
    kernel: ctxengine.Kernel, engine: RecordingEngine
) -> None:
    engine.fail_with = RuntimeError("engine bug")
    _, messages = samples.conversation("openai", turns=3)
    result = kernel.session("a").compress(messages)
    assert result.status == "aborted"
    assert result.reason == (
        "engine 'recording' raised RuntimeError: engine bug; no messages were dropped"
    )
    assert result.messages == messages
    assert kernel.session("a").should_compress(messages) is False


def test_should_compress_uses_estimates_until_usage_then_real_tokens(
    kernel: ctxengine.Kernel, engine: RecordingEngine
) -> None:
    session = kernel.session("a")
    _, messages = samples.conversation("openai", turns=3)
    session.should_compress(messages)
    tokens, measured, stage = engine.calls[-1][1]
    assert measured is False and stage == "agent" and tokens > 0
    session.update_usage({"input_tokens": 50, "cache_read_input_tokens": 900, "output_tokens": 5})
    session.should_compress(messages)
    assert engine.calls[-1][1] == (950, True, "agent")
    # A compaction makes the last real count stale: estimates again until the next usage.
    session.compress(messages)
    session.should_compress(messages)
    assert engine.calls[-1][1][1] is False


def test_update_usage_broadcasts_and_calibrates(
    kernel: ctxengine.Kernel, engine: RecordingEngine
) -> None:
    session = kernel.session("a")
    _, messages = samples.conversation("openai", turns=3)
    request = session.prepare({"model": "claude-sonnet-4-6", "messages": messages})
    local = session.ctx.tokens.count(request["messages"])
    usage = session.update_usage({"prompt_tokens": local * 2, "completion_tokens": 3})
    assert usage.prompt_tokens == local * 2
    assert ("update_usage", local * 2) in engine.calls
    assert session.ctx.tokens.ratio > 1.0


def test_update_usage_rejects_unknown_shapes(kernel: ctxengine.Kernel) -> None:
    with pytest.raises(ValueError):
        kernel.session("a").update_usage({"bananas": 3})


def test_disabled_compression_never_asks_the_engine(engine: RecordingEngine) -> None:
    kernel = ctxengine.load({"context": {"engine": "recording", "compaction": False}})
    _, messages = samples.conversation("openai", turns=3)
    assert kernel.session("a").should_compress(messages) is False
    assert [name for name, _ in engine.calls] == ["session_start"]


def test_expose_tools_are_listed_and_called(kernel: ctxengine.Kernel) -> None:
    session = kernel.session("a")
    [entry] = session.tools()
    assert entry.provider == "recording"
    assert session.tool_schemas("anthropic")[0]["name"] == "echo"
    assert session.tool_schemas("openai")[0]["function"]["name"] == "echo"
    assert session.call_tool("echo", '{"x": 1}') == '{"echo": {"x": 1}, "session": "a"}'
    assert session.call_tool("echo", {"fail": 1}) == "Error: fail was asked for"
    assert session.call_tool("echo", {"crash": 1}) == (
        "Error: tool 'echo' failed: RuntimeError: tool bug"
    )
    assert session.call_tool("echo", "{not json").startswith(
        "Error: the arguments are not valid JSON"
    )
    with pytest.raises(KeyError, match="no tool named 'nope'; tools offered: echo"):
        session.call_tool("nope", {})


def test_expose_tools_duplicate_names_name_both_plugins(engine: RecordingEngine) -> None:
    class Other:
        @hookimpl
        def expose_tools(self, ctx: EngineContext) -> list[Tool]:
            return [Tool("echo", "Another echo.", {"type": "object"}, lambda a: "x")]

    kernel = ctxengine.load({"context": {"engine": "recording"}}, plugins=[("other", Other())])
    with pytest.raises(DuplicateToolError) as raised:
        kernel.session("a").tools()
    assert str(raised.value) == (
        "tool 'echo' is offered by two plugins: 'recording' and 'other'; "
        "rename one of them or select only one engine"
    )


def test_cache_strategy_marks_claude_requests_and_leaves_the_input_alone(
    kernel: ctxengine.Kernel,
) -> None:
    system, messages = samples.conversation("anthropic", turns=3)
    request = {"model": "claude-sonnet-4-6", "system": system, "messages": messages}
    before = copy.deepcopy(request)
    prepared = kernel.session("a").prepare(request)
    assert request == before
    assert prepared is not request
    assert "cache_control" in str(prepared["system"])


def test_cache_strategy_is_not_registered_when_caching_is_off(engine: RecordingEngine) -> None:
    kernel = ctxengine.load(
        {"context": {"engine": "recording"}, "prompt_caching": {"enabled": False}}
    )
    system, messages = samples.conversation("anthropic", turns=3)
    request = {"model": "claude-sonnet-4-6", "system": system, "messages": messages}
    assert kernel.session("a").prepare(request) == request
    assert "system_and_3" not in kernel.hooks.plugin_names


def test_close_broadcasts_session_end_once(
    kernel: ctxengine.Kernel, engine: RecordingEngine
) -> None:
    kernel.session("a")
    kernel.close_session("a")
    kernel.close_session("a")
    assert engine.calls.count(("session_end", "a")) == 1


def test_session_start_and_session_reset_reach_the_engine(
    kernel: ctxengine.Kernel, engine: RecordingEngine
) -> None:
    session = kernel.session("a")
    assert ("session_start", "a") in engine.calls
    assert session.ctx.state["started"] is True
    session.update_usage({"input_tokens": 5, "output_tokens": 1})
    session.reset()
    assert ("session_reset", "a") in engine.calls
    assert session.ctx.state == {}
    assert session.ctx.last_usage is None


def test_session_is_thread_safe(kernel: ctxengine.Kernel) -> None:
    _, messages = samples.conversation("openai", turns=3)
    session = kernel.session("a")

    def work() -> None:
        for _ in range(20):
            session.compress(messages)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert session.ctx.state["count"] == 80


def test_async_variants(kernel: ctxengine.Kernel) -> None:
    _, messages = samples.conversation("openai", turns=3)
    session = kernel.session("a")
    result = asyncio.run(session.acompress(messages))
    assert result.status == "compacted"
    assert asyncio.run(session.acall_tool("echo", {})).startswith('{"echo"')


def test_status_lines_name_the_engine_and_caching(kernel: ctxengine.Kernel) -> None:
    lines = kernel.status_lines()
    assert lines[0] == "🧠 Context engine: recording (registry)"
    assert lines[1].startswith("💾 Prompt caching: ENABLED")
    assert lines[2].startswith("📝 Summaries: auto -> ")


def test_a_compaction_frees_the_counts_of_what_it_replaced(kernel: ctxengine.Kernel) -> None:
    _, messages = samples.conversation("openai", turns=3)
    session = kernel.session("a")
    session.should_compress(messages)
    assert len(session.ctx.tokens) >= len(messages)
    result = session.compress(messages)
    assert len(session.ctx.tokens) <= len(result.messages)


def test_a_config_evolved_in_code_keeps_its_values() -> None:
    import attrs

    from ctxengine import Config
    from ctxengine_compressor.settings import SETTINGS

    base = ctxengine.config_from_mapping(
        {"engines": {"compressor": {"threshold": 0.4}}}, specs=[SETTINGS]
    )
    evolved = attrs.evolve(base, context=attrs.evolve(base.context, compaction=False))
    kernel = ctxengine.load(evolved)
    assert kernel.config.context.compaction is False
    # The plugins' keys still come from the layers they were written in.
    assert kernel.config.settings(SETTINGS).threshold == 0.4
    _, messages = samples.conversation("openai", turns=60)
    assert kernel.session("s").should_compress(messages) is False
    assert ctxengine.load(Config()).config.context.compaction is True


# -- load(trigger=...) and load(sandbox=...) ------------------------------------------------


def test_trigger_sets_the_selected_engines_own_key() -> None:
    compressor = ctxengine.load(trigger=0.4)
    assert compressor.trigger_key == "engines.compressor.threshold"
    assert compressor.loaded.values["engines.compressor.threshold"] == 0.4
    assert compressor.loaded.sources["engines.compressor.threshold"] == "override"
    lcm = ctxengine.load({"context": {"engine": "lcm"}}, trigger=0.4)
    assert lcm.trigger_key == "engines.lcm.threshold"
    assert lcm.loaded.values["engines.lcm.threshold"] == 0.4
    assert "engines.compressor.threshold" not in lcm.loaded.values  # the compressor is not selected


def test_trigger_is_validated_like_the_key_it_sets() -> None:
    with pytest.raises(ctxengine.ConfigError) as raised:
        ctxengine.load({"context": {"engine": "lcm"}}, trigger=0.0)
    assert str(raised.value) == (
        "config error in override: engines.lcm.threshold = 0.0: must be a number > 0.0 and <= 1.0"
    )


def test_sandbox_redirects_data_dir_and_every_storage_setting(tmp_path: Path) -> None:
    configured = tmp_path / "real" / "lcm.db"
    config = {"context": {"engine": "lcm"}, "engines": {"lcm": {"db_path": str(configured)}}}
    real = ctxengine.load(config)
    assert real.data_dir == ctxengine.ctxengine_home()
    assert real.loaded.values["engines.lcm.db_path"] == str(configured)
    sandboxed = ctxengine.load(config, sandbox=tmp_path / "sandbox")
    assert sandboxed.data_dir == tmp_path / "sandbox"
    assert sandboxed.loaded.values["engines.lcm.db_path"] is None
    session = sandboxed.session("s")
    assert session.ctx.data_dir == tmp_path / "sandbox"
    messages = samples.openai_conversation()
    assert session.compress(messages, force=True).compacted
    sandboxed.close()
    assert (tmp_path / "sandbox" / "lcm" / "lcm.db").is_file()
    assert not configured.parent.exists()
    # A configured PostgreSQL store is redirected the same way (never connected to).
    remote = {
        "context": {"engine": "lcm"},
        "engines": {"lcm": {"database_url": "postgresql://db/x"}},
    }
    kernel = ctxengine.load(remote, sandbox=tmp_path / "sandbox2")
    assert kernel.loaded.values["engines.lcm.database_url"] is None
    assert kernel.session("s").compress(messages, force=True).compacted
    kernel.close()
    assert (tmp_path / "sandbox2" / "lcm" / "lcm.db").is_file()


def test_a_storage_field_must_default_to_null() -> None:
    with pytest.raises(SettingsDeclarationError) as raised:
        ctxengine.SettingsSpec(
            "engines.x", (ctxengine.Field("path", "str", "/var/x.db", storage=True),)
        )
    assert str(raised.value) == (
        "engines.x.path: a storage field must be nullable with default null (null = a place "
        "under ctx.data_dir), so a sandbox can redirect it"
    )


# -- malformed input is an error naming the message and the field (regression: defect 6) -------

_BODY = [
    {"role": "assistant", "content": "Sure, step " + "x " * 200},
    {"role": "user", "content": "next " * 200},
] * 12


@pytest.mark.parametrize(
    ("fmt", "bad", "where", "rule"),
    [
        (
            "openai",
            {"role": "assistant", "content": None, "tool_calls": "f()"},
            ".tool_calls",
            "tool-call-shape",
        ),
        (
            "openai",
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}
                ],
            },
            ".tool_calls[0]",
            "tool-call-arguments",
        ),
        (
            "openai",
            {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function"}]},
            ".tool_calls[0]",
            "tool-call-shape",
        ),
        ("openai", {"role": "assistant", "content": ["not a part"]}, ".content[0]", "part-shape"),
        (
            "anthropic",
            {"role": "assistant", "content": [{"text": "hi"}]},
            ".content[0]",
            "part-shape",
        ),
        (
            "anthropic",
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "f", "input": "{}"}],
            },
            ".content[0]",
            "tool-use-shape",
        ),
        (
            "openai",
            {"role": "assistant", "content": "ok", "meta": {"a": {"b": {"c": [{"d": 1}]}}}},
            ".meta",
            "field-unknown",
        ),
    ],
    ids=[
        "tool_calls-string",
        "arguments-dict",
        "call-without-function",
        "part-not-a-dict",
        "block-without-type",
        "tool_use-input-string",
        "nested-unknown-field",
    ],
)
def test_compress_rejects_a_malformed_message_naming_index_and_field(
    fmt: str, bad: dict[str, Any], where: str, rule: str
) -> None:
    kernel = ctxengine.load({"engines": {"compressor": {"protect_last_n": 1}}}, env={})
    messages: list[Any] = [{"role": "user", "content": "start"}, *copy.deepcopy(_BODY)]
    messages[5] = bad
    with pytest.raises(ctxengine.MessageFormatError) as excinfo:
        kernel.session("s").compress(messages, format=fmt, force=True)  # type: ignore[arg-type]
    problems = excinfo.value.problems
    assert [p.rule for p in problems] == [rule]
    assert problems[0].index == 5
    assert problems[0].message.startswith(f"messages[5]{where}: ")


@pytest.mark.parametrize("value", [[1, 2], 42, b"config.yaml", object()])
def test_load_rejects_a_config_that_is_neither_a_mapping_nor_a_path(value: object) -> None:
    with pytest.raises(ctxengine.ConfigError) as excinfo:
        ctxengine.load(value)  # type: ignore[arg-type]
    assert "ctxengine.load() takes a config mapping, a path to a YAML file" in str(excinfo.value)
    assert type(value).__name__ in str(excinfo.value)
