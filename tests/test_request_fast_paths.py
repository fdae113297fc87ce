"""What a request skips must not change what it answers.

``prepare`` reuses the size ``should_compress`` took of the very same entry list, and hooks with
plain implementations are called without pluggy's machinery; each case here compares the
answer with one that took no shortcut (a fresh session, a kernel built with another plugin).
"""

from __future__ import annotations

import copy
from typing import Any

import ctxengine
from ctxengine import hookimpl
from ctxengine.testing import samples

CONFIG: dict[str, Any] = {
    "model": {"name": "claude-sonnet-4-6", "context_length": 200_000},
    "auxiliary": {"compression": {"provider": "extractive"}},
}


def request(history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "messages": history}


def cold(kernel: ctxengine.Kernel, name: str, history: list[dict[str, Any]]) -> tuple[int, Any]:
    """The prepared record and request of a session that never saw ``history`` before."""
    session = kernel.session(name)
    prepared = session.prepare(request(copy.deepcopy(history)))
    assert session.ctx.last_request is not None
    return session.ctx.last_request.tokens, prepared


def served(session: ctxengine.Session, history: list[dict[str, Any]]) -> tuple[int, Any]:
    session.should_compress(history)
    prepared = session.prepare(request(history))
    assert session.ctx.last_request is not None
    return session.ctx.last_request.tokens, prepared


def test_prepare_after_should_compress_records_what_prepare_alone_does() -> None:
    kernel = ctxengine.load(CONFIG)
    history = samples.openai_conversation(turns=30)
    assert served(kernel.session("warm"), history) == cold(kernel, "cold", history)
    kernel.close()


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


def test_an_in_place_edit_after_a_reused_request_is_seen() -> None:
    kernel = ctxengine.load(CONFIG)
    session = kernel.session("warm")
    history = samples.openai_conversation(turns=30)
    before = served(session, history)
    session.update_usage({"input_tokens": 5_000, "output_tokens": 10})
    assert served(session, history) == before  # the same request again: every shortcut taken
    session.update_usage({"input_tokens": 5_000, "output_tokens": 10})
    history[3]["content"] = "an edited message, much longer than before " * 300
    after = served(session, history)
    assert after[0] > before[0]
    assert after == cold(kernel, "cold", history)
    kernel.close()


class AlwaysCompact:
    """An extension that answers the agent-stage decision before the engine does."""

    CTXENGINE_KIND = "extension"

    @hookimpl(tryfirst=True)
    def should_compress(self, stage: str) -> bool | None:
        return True if stage == "agent" else None


def test_a_plugin_that_answers_first_changes_the_decision() -> None:
    history = samples.openai_conversation(turns=5)
    plain = ctxengine.load(CONFIG)
    assert plain.session("s").should_compress(history) is False
    eager = ctxengine.load(CONFIG, plugins=[("always", AlwaysCompact())])
    assert eager.session("s").should_compress(history) is True
    plain.close()
    eager.close()


def test_caching_off_prepares_without_markers() -> None:
    history = samples.openai_conversation(turns=5)
    marked = ctxengine.load(CONFIG).session("s").prepare(request(history))
    unmarked = (
        ctxengine.load({**CONFIG, "prompt_caching": {"enabled": False}})
        .session("s")
        .prepare(request(history))
    )
    assert "cache_control" in repr(marked["messages"])
    assert "cache_control" not in repr(unmarked["messages"])
