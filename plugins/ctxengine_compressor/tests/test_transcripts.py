"""Every real session of the bundled transcripts (tests/data/transcripts), in both formats,
compacted at a threshold that forces compaction: valid output, system prompt and last exchange
kept, fewer tokens.
Run with ``-s`` to see the before/after table (also attached as junit properties)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxengine_compressor as plugin
from ctxengine import Format, TokenEstimate
from ctxengine.messages import to_anthropic, validate
from ctxengine.testing.transcripts import transcript_files

from .helpers import COUNTER, make_ctx, run

known = TokenEstimate.known
"""A prompt size known exactly (the engine's decisions are tested on exact sizes)."""

FILES = transcript_files()


def _sessions() -> Iterator[Any]:
    for path in FILES:
        fmt: Format = "anthropic" if ".anthropic." in path.name else "openai"
        with path.open(encoding="utf-8") as handle:
            for number, _line in enumerate(handle):
                label = f"{path.name.split('.')[0]}#{number}"
                yield pytest.param(path, number, fmt, id=f"{label}-{fmt}")
                if fmt == "openai" and not path.name.startswith("claude_code"):
                    # No Anthropic twin ships for these: convert them.
                    yield pytest.param(path, number, "anthropic", id=f"{label}-converted")


def _load(path: Path, number: int, fmt: Format) -> tuple[Any, list[dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if index == number:
                row = json.loads(line)
                break
    messages = row["messages"]
    if fmt == "anthropic" and ".openai." in path.name:
        return to_anthropic(messages)
    return row.get("system"), messages


@pytest.mark.parametrize(("path", "number", "fmt"), list(_sessions()))
def test_real_session_compacts_validly(
    path: Path, number: int, fmt: Format, record_property: Any
) -> None:
    system, messages = _load(path, number, fmt)
    assert validate(messages, fmt, system=system) == []
    # A window the size of the session: the 50 % threshold is well passed, the tail budget is a
    # tenth of the session.
    tokens = COUNTER.count(messages, system)
    ctx = make_ctx(None, context_length=max(tokens, 1_024))  # the config's smallest window
    assert plugin.should_compress(ctx, known(tokens), "agent", False) is (tokens >= 512)
    result = run(ctx, messages, fmt, system)
    record_property("status", result.status)
    record_property("tokens", f"{result.tokens_before} -> {result.tokens_after}")
    print(
        f"\n{path.name}#{number} [{fmt}] {result.status}: {result.tokens_before:,} -> "
        f"{result.tokens_after:,} tokens, {result.messages_before} -> {result.messages_after} "
        f"messages{'' if result.compacted else ' - ' + result.reason}"
    )
    assert result.tokens_after <= result.tokens_before
    if result.status == "noop":
        assert result.reason.startswith(("nothing to compact", "compaction would not pay"))
        assert result.messages is messages
        return
    assert result.status == "compacted", result.reason
    assert validate(result.messages, fmt, system=result.system) == []
    assert result.messages[-1] is messages[-1]
    if fmt == "openai" and messages[0]["role"] == "system":
        assert result.messages[0]["content"].startswith(messages[0]["content"])
    if len(messages) > 60:
        # Long sessions must really shrink, not just trade a few messages for a summary.
        assert result.tokens_after < result.tokens_before * 0.8
