"""`ctxengine replay` over every real session in the shared transcripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxengine._cli.files import read_conversations
from ctxengine._cli.replay import SCENARIOS, replay
from ctxengine._config.core import Config
from ctxengine.testing.transcripts import transcript_files

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
