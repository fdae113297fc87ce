"""However the host hands the history over, the kernel decides and prepares the same.

Every bundled session is replayed turn by turn, as an agent loop would, once per arrival mode:
the same list appended in place, a new list of the same dicts, new dicts with new strings every
turn, and a fresh session for every request. The window is small enough that the long sessions
cross the compaction threshold several times, so decisions near it (which count exactly) are part
of the replay. Every ``should_compress`` answer, the point estimate handed to the engine and
every prepared request must be identical in all modes.

With provider usage and compaction (the host keeps a compaction's result), the modes of one
long-lived session are compared. A fresh session has neither the previous usage nor the engine's
memory of earlier compactions (a compaction that did not pay makes the engine wait), so it is
compared with the others on a replay without usage in which the host only asks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine
from ctxengine._accounting.tokens import TokenCounter
from ctxengine.testing import samples
from ctxengine.testing.transcripts import load_sessions, transcript_files

WINDOW = 60_000
THRESHOLD = 30_000
"""The compressor's threshold (0.5 x the window): the long sessions cross it several times."""

REFERENCE = TokenCounter()
"""Counts the "provider's" usage of each prepared request (1.15 x tiktoken, like Claude)."""


def turn_ends(messages: list[dict[str, Any]]) -> list[int]:
    """Where each request's history ends: before every assistant reply to a non-assistant."""
    ends = [
        i
        for i in range(1, len(messages))
        if messages[i].get("role") == "assistant" and messages[i - 1].get("role") != "assistant"
    ]
    return [*ends, len(messages)]


def fresh(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    copied: list[dict[str, Any]] = json.loads(json.dumps(history))
    return copied


class Host:
    """An agent loop with one way of handing its history over.

    It keeps its canonical history as plain data: the transcript's messages as they arrive, with
    a compaction's result replacing what it compacted.
    """

    def __init__(self, kernel: ctxengine.Kernel, mode: str, usage: bool) -> None:
        self.kernel = kernel
        self.mode = mode
        self.usage = usage  # report usage and apply compactions, or only ask
        self.session = kernel.session(f"{mode}-0")
        self.turn = 0
        self.history: list[dict[str, Any]] = []  # what the host hands over ("same" keeps it)
        self.system: Any = None

    def handed(self) -> list[dict[str, Any]]:
        if self.mode == "same":
            return self.history
        if self.mode == "new_list":
            return list(self.history)
        return fresh(self.history)  # new dicts, and every fresh session

    def serve(self, arrived: list[dict[str, Any]]) -> tuple[bool, int, dict[str, Any]]:
        """One turn: ``arrived`` are the messages new since the last request."""
        self.turn += 1
        if self.mode == "fresh":
            self.session = self.kernel.session(f"fresh-{self.turn}")
        self.history.extend(arrived)
        history = self.handed()
        prompt = self.session.prompt(history, self.system)
        decision = self.session.should_compress(history, self.system)
        if not self.usage:
            # No usage, no calibration: the decision must be the one exact counts give.
            exact = REFERENCE.count(history, self.system)
            assert decision == (exact >= THRESHOLD), f"turn {self.turn}: {exact} tokens"
        if decision and self.usage:
            result = self.session.compress(history, self.system)
            if result.compacted:
                self.history = list(result.messages)
                self.system = result.system
                history = self.handed()
        request: dict[str, Any] = {"model": "claude-sonnet-4-6", "messages": history}
        if self.system is not None:
            request["system"] = self.system
        prepared = self.session.prepare(request)
        if self.usage:
            local = REFERENCE.count(prepared["messages"], prepared.get("system"))
            self.session.update_usage({"input_tokens": round(local * 1.15), "output_tokens": 1})
        if self.mode == "fresh":
            self.kernel.close_session(self.session.id)
        return decision, prompt.value, prepared


def replay(
    row: dict[str, Any], modes: tuple[str, ...], usage: bool
) -> Iterator[dict[str, tuple[bool, int, dict[str, Any]]]]:
    """Each turn's (decision, point estimate, prepared request) per mode."""
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": WINDOW},
            "auxiliary": {"compression": {"provider": "extractive"}},
        }
    )
    hosts = {mode: Host(kernel, mode, usage) for mode in modes}
    for host in hosts.values():
        host.system = row.get("system")
    messages = row["messages"]
    start = 0
    for end in turn_ends(messages):
        arrived = messages[start:end]
        start = end
        yield {mode: host.serve(arrived) for mode, host in hosts.items()}
    kernel.close()


def all_sessions() -> Iterator[Any]:
    for path in transcript_files():
        for row in load_sessions(path.name):
            yield pytest.param(row, id=f"{path.name.split('.')[0]}:{str(row['id'])[-8:]}")


def assert_same(turns: Iterator[dict[str, tuple[bool, int, dict[str, Any]]]]) -> None:
    for number, outcome in enumerate(turns):
        first = outcome["same"]
        for mode, other in outcome.items():
            assert other[0] == first[0], f"turn {number}: {mode} decided {other[0]}"
            assert other[1] == first[1], f"turn {number}: {mode} estimated {other[1]}"
            assert other[2] == first[2], f"turn {number}: {mode} prepared another request"


@pytest.mark.parametrize("row", list(all_sessions()))
def test_every_mode_decides_and_prepares_the_same(row: dict[str, Any]) -> None:
    assert_same(replay(row, ("same", "new_list", "new_dicts"), usage=True))


@pytest.mark.parametrize("row", list(all_sessions()))
def test_a_fresh_session_per_request_decides_and_prepares_the_same(row: dict[str, Any]) -> None:
    assert_same(replay(row, ("same", "new_list", "new_dicts", "fresh"), usage=False))


def test_the_long_sessions_cross_the_threshold() -> None:
    """The replay exercises decisions at the threshold and compactions, not only "no"."""
    row = max(
        load_sessions("claude_code_spotter.anthropic.jsonl"), key=lambda r: len(r["messages"])
    )
    decisions = [outcome["same"][0] for outcome in replay(row, ("same",), usage=True)]
    assert decisions.count(True) >= 2


# -- a list that changes between should_compress and prepare -----------------------------------

CONFIG: dict[str, Any] = {
    "model": {"name": "claude-sonnet-4-6", "context_length": 200_000},
    "auxiliary": {"compression": {"provider": "extractive"}},
}


def request(history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "messages": history}


def cold(kernel: ctxengine.Kernel, name: str, history: list[dict[str, Any]]) -> tuple[int, Any]:
    """The prepared record and request of a session that never saw ``history`` before."""
    session = kernel.session(name)
    prepared = session.prepare(request(json.loads(json.dumps(history))))
    assert session.ctx.last_request is not None
    return session.ctx.last_request.tokens, prepared


def served(session: ctxengine.Session, history: list[dict[str, Any]]) -> tuple[int, Any]:
    session.should_compress(history)
    prepared = session.prepare(request(history))
    assert session.ctx.last_request is not None
    return session.ctx.last_request.tokens, prepared


def test_a_list_grown_between_the_two_calls_is_sized_from_its_own_messages() -> None:
    kernel = ctxengine.load(CONFIG)
    session = kernel.session("warm")
    history = samples.openai_conversation(turns=30)
    session.should_compress(history)
    grown = [*history, {"role": "user", "content": "and one more question " * 200}]
    prepared = session.prepare(request(grown))
    assert session.ctx.last_request is not None
    assert (session.ctx.last_request.tokens, prepared) == cold(kernel, "cold", grown)
    kernel.close()


def test_an_in_place_edit_after_the_same_request_is_seen() -> None:
    kernel = ctxengine.load(CONFIG)
    session = kernel.session("warm")
    history = samples.openai_conversation(turns=30)
    before = served(session, history)
    session.update_usage({"input_tokens": 5_000, "output_tokens": 10})
    assert served(session, history) == before
    session.update_usage({"input_tokens": 5_000, "output_tokens": 10})
    history[3]["content"] = "an edited message, much longer than before " * 300
    after = served(session, history)
    assert after[0] > before[0]
    assert after == cold(kernel, "cold", history)
    kernel.close()
