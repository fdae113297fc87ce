"""`ctxengine replay` over every real session in the shared transcripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxengine import Config, read_conversations
from ctxengine.testing.transcripts import transcript_files
from ctxengine_replay.replay import replay
from ctxengine_replay.scenarios import SCENARIOS

FILES = transcript_files()
LONG_SESSION_MESSAGES = 250
"""The five long main Claude Code sessions have 278 to 462 messages; sub-agents have < 70."""


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_session_replays(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for record in read_conversations(path):
        report = replay(record, Config())
        assert tuple(report.scenarios) == tuple(s.name for s in SCENARIOS)
        turns = {len(result.turns) for result in report.scenarios.values()}
        assert len(turns) == 1 and turns.pop() > 0
        none, both = report.scenarios["none"], report.scenarios["both"]
        assert none.cache_read_tokens == 0 and none.compactions == 0
        # Caching can cost a short session more (writes are billed at 1.25x), never nothing.
        assert both.cost > 0 and none.cost > 0
        assert both.prompt_tokens <= none.prompt_tokens
        if (
            path.name.startswith("claude_code_spotter")
            and len(record.messages) >= LONG_SESSION_MESSAGES
        ):
            # Long Claude Code sessions: caching alone saves >= 70 % of the input cost.
            with capsys.disabled():
                print(
                    f"\n{path.name} {record.id}: caching saves {report.savings('caching'):.1%}, "
                    f"compaction {report.savings('compaction'):.1%}, "
                    f"both {report.savings('both'):.1%} of input cost"
                )
            assert report.savings("caching") >= 0.70
            assert both.compactions >= 1


NATIVE_AND_CLEARING = {
    "context": {"engine": "native"},
    "context_editing": {"clear_tool_uses": True},
}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_server_compaction_and_clearing_replay_beside_local_compaction(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxengine import config_from_mapping

    config = config_from_mapping(NATIVE_AND_CLEARING)
    records = read_conversations(path)
    # Every long session, and a few short ones (the rest replay the same way, only faster).
    chosen = [r for i, r in enumerate(records) if i < 3 or len(r.messages) >= 100]
    for record in chosen:
        report = replay(record, config, scenarios=[s for s in SCENARIOS if s.name == "caching"])
        local = report.comparisons["local compaction"]
        server = report.comparisons["server compaction"]
        clearing = report.comparisons["server clearing"]
        caching = report.comparisons["caching only"]
        assert (local.engine, server.engine) == ("compressor", "native")
        assert server.fallbacks == 0, [t.compaction for t in server.turns if t.compaction]
        assert (server.compaction_cost > 0) == (server.compactions > 0)
        assert local.compaction_cost == 0  # local digests cost no model call
        if record.format == "openai":
            # Anthropic's clearing is for Anthropic requests only.
            assert clearing.cleared_tokens == 0 and clearing.cost == caching.cost
        if len(record.messages) < LONG_SESSION_MESSAGES:
            continue
        assert server.compactions >= 1 and local.compactions >= 1
        assert server.input_cost < caching.input_cost
        if record.format == "anthropic":
            assert clearing.cleared_tokens > 0
        with capsys.disabled():
            print(
                f"\n{path.name} {record.id}: input cost saved vs none -- local compaction "
                f"{report.saved(local):.1%} ({local.compactions}), server compaction "
                f"{report.saved(server):.1%} ({server.compactions}, iterations "
                f"${server.compaction_cost:.2f}), server clearing {report.saved(clearing):.1%} "
                f"({clearing.cleared_tokens:,} tokens cleared), caching alone "
                f"{report.saved(caching):.1%}"
            )
