"""The conformance suite every context engine must pass.

Use it from an engine's own tests by subclassing :class:`EngineConformance`::

    from ctxengine.testing.conformance import EngineConformance

    class TestConformance(EngineConformance):
        engine = "lcm"

        def engine_options(self, tmp_path):          # optional: the `engines.<name>` section
            return {"db_path": str(tmp_path / "lcm.db")}

        def extra_config(self, tmp_path):            # optional: other sections it reads
            return {}

pytest collects the inherited tests. Each test builds a real kernel through ``ctxengine.load``
(so the engine must be installed, or set ``plugin`` to register it with ``register_engine``), with
the ``extractive`` summary provider (no network), a small context window, and ``CTXENGINE_HOME``
pointing at a temporary folder. The checks: output valid on every route (the validator's strict
profile: the provider's rules, a user message first, alternating turns), system prompt and tail
preserved, the caller's list never mutated, ``noop`` reported
honestly, both formats, sessions isolated, tools well-formed.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ctxengine import (
    CompressResult,
    Format,
    Kernel,
    Message,
    SystemPrompt,
    load,
    register_engine,
)
from ctxengine.messages import validate, visible_text
from ctxengine.testing import samples

FORMATS: tuple[Format, ...] = ("openai", "anthropic")


def _system_text(system: SystemPrompt | None, messages: list[Message], fmt: Format) -> str:
    if fmt == "openai":
        first = messages[0]
        return visible_text(first) if first.get("role") == "system" else ""
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "".join(str(block.get("text", "")) for block in system)


def assert_valid(result: CompressResult, fmt: Format) -> None:
    """The result's conversation passes the validator's strict route profile for ``fmt``: the
    provider's own rules, plus a user message first after the system prompt and alternating
    turns (Claude on Bedrock and the routes forwarding to it). Hosts send an engine's output as
    it is, to whichever provider they use."""
    problems = validate(result.messages, fmt, system=result.system, profile="strict")
    assert not problems, "\n".join(p.message for p in problems)


class EngineConformance:
    """Checks every engine must pass; subclass it and set :attr:`engine`."""

    engine: ClassVar[str]
    plugin: ClassVar[object | None] = None
    """Set to register the engine object at run time instead of relying on installation."""
    context_length: ClassVar[int] = 16_000
    """A small window, so the sample conversations are well over any threshold."""

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        """The ``engines.<name>`` options for the engine under test (none by default)."""
        return {}

    def extra_config(self, tmp_path: Path) -> dict[str, Any]:
        """More top-level sections for the engine under test, e.g. keys it declares in
        ``prompt_caching`` (none by default: the suite assumes nothing about any engine's keys)."""
        return {}

    def config(self, tmp_path: Path) -> dict[str, Any]:
        """The configuration every check loads: the engine selected strictly, a small window,
        the local extractive summariser (no network), plus the engine's own options."""
        options = self.engine_options(tmp_path)
        return {
            "context": {"engine": self.engine, "strict": True},
            "model": {"name": "claude-sonnet-4-6", "context_length": self.context_length},
            "auxiliary": {"compression": {"provider": "extractive"}},
            "engines": {self.engine: options} if options else {},
            **self.extra_config(tmp_path),
        }

    @pytest.fixture
    def kernel(self, tmp_path: Path) -> Iterator[Kernel]:
        env = {**os.environ, "CTXENGINE_HOME": str(tmp_path / "home")}
        env.pop("CTXENGINE_CONFIG", None)
        with contextlib.ExitStack() as stack:
            if self.plugin is not None:
                stack.enter_context(register_engine(self.engine, self.plugin))
            with load(self.config(tmp_path), env=env) as kernel:
                yield kernel

    # -- the checks -------------------------------------------------------------------------

    def test_engine_is_selected(self, kernel: Kernel) -> None:
        assert kernel.engine == self.engine
        assert kernel.notices == []

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_compaction_is_valid_and_smaller(self, kernel: Kernel, fmt: Format) -> None:
        system, messages = samples.conversation(fmt)
        result = kernel.session("s").compress(messages, system, force=True)
        assert result.status == "compacted", result.reason
        assert result.engine == self.engine
        assert_valid(result, fmt)
        assert result.tokens_after < result.tokens_before
        assert result.messages_before == len(messages)
        assert result.messages_after == len(result.messages)

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_system_prompt_and_tail_are_preserved(self, kernel: Kernel, fmt: Format) -> None:
        system, messages = samples.conversation(fmt)
        result = kernel.session("s").compress(messages, system, force=True)
        # The original system prompt stays (an engine may append a note after it).
        assert _system_text(result.system, result.messages, fmt).startswith(
            _system_text(system, messages, fmt)
        )
        # The last exchange is kept byte-for-byte.
        assert result.messages[-2:] == messages[-2:]

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_input_is_never_mutated(self, kernel: Kernel, fmt: Format) -> None:
        system, messages = samples.conversation(fmt)
        before = copy.deepcopy((system, messages))
        session = kernel.session("s")
        session.should_compress(messages, system)
        session.compress(messages, system, force=True)
        session.prepare({"model": "claude-sonnet-4-6", "system": system, "messages": messages})
        assert (system, messages) == before

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_short_conversation_is_an_honest_noop(self, kernel: Kernel, fmt: Format) -> None:
        system, messages = samples.short_conversation(fmt)
        result = kernel.session("s").compress(messages, system, force=True)
        assert result.status == "noop"
        assert result.reason
        assert result.messages == messages
        assert result.tokens_after == result.tokens_before

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_repeated_compaction_stays_valid(self, kernel: Kernel, fmt: Format) -> None:
        system, messages = samples.conversation(fmt)
        session = kernel.session("s")
        first = session.compress(messages, system, force=True)
        assert first.status == "compacted", first.reason
        _, more = samples.conversation(fmt, turns=12)
        grown = first.messages + [m for m in more if m.get("role") != "system"]
        second = session.compress(grown, first.system, force=True)
        assert second.status in ("compacted", "noop"), second.reason
        assert_valid(second, fmt)
        assert second.messages[-2:] == grown[-2:]

    def test_should_compress_answers(self, kernel: Kernel) -> None:
        session = kernel.session("s")
        system, short = samples.short_conversation("openai")
        assert session.should_compress(short, system) is False
        _, long = samples.conversation("openai", turns=60)
        assert session.should_compress(long) is True

    def test_sessions_do_not_share_state(self, kernel: Kernel) -> None:
        a, b = kernel.session("a"), kernel.session("b")
        assert a.ctx is not b.ctx
        assert a.ctx.state is not b.ctx.state
        _, messages = samples.conversation("openai")
        a.compress(messages, force=True)
        _, short = samples.short_conversation("openai")
        result = b.compress(short, force=True)
        assert result.status == "noop"

    def test_tools_are_well_formed(self, kernel: Kernel) -> None:
        tools = kernel.session("s").tools()
        names = [entry.tool.name for entry in tools]
        assert len(names) == len(set(names))
        for entry in tools:
            assert entry.tool.name
            assert entry.tool.description
            assert entry.tool.input_schema.get("type") == "object"
            assert callable(entry.tool.handler)
