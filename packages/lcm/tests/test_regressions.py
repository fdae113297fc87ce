"""Regressions for lcm's defects found by the adversarial run (issue "Hardening"): any reply
stored as a summary (3), arguments echoed back whole and evidence that carried secrets (7), and a
stale writer that rewound the session (8). Each of these failed before the fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxengine import ToolError
from ctxengine.testing import samples
from ctxengine_lcm.doctor import check_store
from ctxengine_lcm.engine import get_state


class Replies:
    """A host's summary provider that always gives the same reply."""

    name = "host-model"
    model = "host-model-1"
    context_length = 200_000

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls = 0

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        self.calls += 1
        return self.reply

    async def acomplete(self, system: str, prompt: str, max_tokens: int) -> str:
        return self.complete(system, prompt, max_tokens)


def _lcm(session: Any) -> Any:
    lcm = get_state(session.ctx).session
    assert lcm is not None
    return lcm


@pytest.mark.parametrize(
    "reply",
    [
        "lol I dunno",
        "I'm sorry, but I can't summarise this conversation.",
        "As an AI, I have no access to earlier turns.",
        # An echo of its own instructions, not a summary:
        "You write memory summaries for an AI agent whose older conversation turns are being "
        "compacted; the agent will rely on your summary instead of the original turns.",
    ],
)
def test_a_reply_that_is_no_summary_is_never_stored(make_kernel: Any, reply: str) -> None:
    # Defect 3: "lol I dunno" produced five stored summaries with fallback_used: False.
    kernel = make_kernel(fresh_tail_count=4, leaf_chunk_tokens=400, leaf_min_messages=1)
    provider = Replies(reply)
    kernel.use_summary_provider(provider)
    session = kernel.session("dunno")
    _, messages = samples.conversation("openai")
    result = session.compress(messages, force=True)
    assert result.status == "compacted", result.reason
    assert provider.calls > 0
    assert result.fallback_used is True
    lcm = _lcm(session)
    stored = lcm.store.summaries(lcm.conversation_id)
    assert stored
    assert all(s.mode == "deterministic" and reply not in s.content for s in stored)
    rejected = [a for call in result.calls for a in call.attempts if a.outcome == "unparsable"]
    assert rejected


@pytest.fixture
def compacted(make_kernel: Any) -> tuple[Any, dict[str, Any]]:
    kernel = make_kernel(fresh_tail_count=4)
    session = kernel.session("echo")
    _, messages = samples.conversation("openai")
    messages = [
        *messages[:2],
        {"role": "user", "content": "For checking module 3: my db password is hunter2, ok?"},
        {"role": "assistant", "content": "Understood, checking module 3 with that."},
        *messages[2:],
    ]
    result = session.compress(messages, force=True)
    assert result.status == "compacted", result.reason
    return session, {e.tool.name: e.tool.handler for e in session.tools()}


def test_a_megabyte_id_is_not_echoed_back(compacted: tuple[Any, dict[str, Any]]) -> None:
    # Defect 7: lcm_expand with a 1 MB unknown id answered with the whole id.
    session, handlers = compacted
    huge = "sum_" + "a" * 1_000_000
    for tool, arguments in (
        ("lcm_expand", {"summary_id": huge}),
        ("lcm_describe", {"id": huge}),
        ("lcm_expand_query", {"question": "q", "summary_ids": [huge]}),
        ("lcm_grep", {"pattern": "x", "mode": huge}),
        ("lcm_expand", {"summary_id": "sum_x", huge: 1}),
    ):
        with pytest.raises(ToolError) as excinfo:
            handlers[tool](arguments)
        assert len(str(excinfo.value)) < 600, tool
        answer = session.call_tool(tool, arguments)
        assert answer.startswith("Error: ") and len(answer) < 600, tool


def test_an_evidence_answer_echoes_a_bounded_question_and_no_secret(
    compacted: tuple[Any, dict[str, Any]],
) -> None:
    # Defect 7: lcm_expand_query echoed its whole argument; evidence carried prose secrets.
    session, handlers = compacted
    with pytest.raises(ToolError, match="question is 1,000,000 characters long"):
        handlers["lcm_expand_query"]({"question": "x" * 1_000_000, "output": "evidence"})
    result = handlers["lcm_expand_query"]({"question": "which password?", "output": "evidence"})
    text = json.dumps(result)
    assert "db password" in text  # the message is part of the evidence...
    assert "hunter2" not in text  # ...with its secret masked
    assert "[REDACTED:password]" in text
    lcm = _lcm(session)
    for summary in lcm.store.summaries(lcm.conversation_id):
        assert "hunter2" not in summary.content


def test_a_stale_writer_cannot_rewind_the_session(make_kernel: Any) -> None:
    # Defect 8: a second process sending an older prefix re-wrote summaries and set the active
    # context back to that older state.
    kernel = make_kernel(fresh_tail_count=4, leaf_chunk_tokens=400, leaf_min_messages=1)
    _, messages = samples.conversation("openai", turns=30)
    writer = kernel.session("shared")
    first = writer.compress(messages, force=True)
    assert first.status == "compacted", first.reason
    lcm = _lcm(writer)
    summaries = [s.id for s in lcm.store.summaries(lcm.conversation_id)]
    context = lcm.store.context(lcm.conversation_id)
    stored = lcm.store.message_count(lcm.conversation_id)
    # The stale writer has its own session object on the same store.
    stale = make_kernel(fresh_tail_count=4, leaf_chunk_tokens=400, leaf_min_messages=1)
    result = stale.session("shared").compress(messages[: len(messages) // 2], force=True)
    assert result.status == "noop"
    assert result.reason.startswith("stale history refused")
    assert "nothing was stored, no summary was rewritten" in result.reason.lower()
    assert result.messages == messages[: len(messages) // 2]
    assert [s.id for s in lcm.store.summaries(lcm.conversation_id)] == summaries
    assert lcm.store.context(lcm.conversation_id) == context
    assert lcm.store.message_count(lcm.conversation_id) == stored
    assert check_store(lcm.store) == []
    # The current writer carries on as if nothing happened.
    grown = [*first.messages, {"role": "user", "content": "And the next step?"}]
    again = writer.compress(grown, force=True)
    assert again.status in ("compacted", "noop"), again.reason
    assert lcm.store.message_count(lcm.conversation_id) == stored + 1
    # A writer that goes back and adds a message of its own is a branch, not a rewind.
    branch = [*messages[:10], {"role": "user", "content": "Actually, do something else."}]
    branched = stale.session("shared").compress(branch, force=True)
    assert not branched.reason.startswith("stale history refused")
