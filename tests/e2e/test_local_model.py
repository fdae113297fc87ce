"""End to end: the real compressor and lcm's ``lcm_expand_query`` against a real local model.

Every summary goes through the official SDK of its provider (``anthropic`` -> ``/v1/messages``,
``openai`` -> ``/v1/chat/completions``) to SmolLM2-135M served on 127.0.0.1 (see conftest.py).
The model writes poor summaries, so the assertions are about structure: the compaction
happened after a real model call (the local digest stands in only when the model ignored the
template), the template headings are present, the
output is a valid conversation in its format, nothing outside the summarised middle was lost,
and the token count went down. Slow (minutes on 2 CPU cores): run with ``pytest tests/e2e -m slow``
or ``nox -s e2e``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

import ctxengine
from ctxengine import SUMMARY_HEADINGS
from ctxengine._kernel.kernel import Kernel
from ctxengine._messages.conversation import Format, Message, SystemPrompt
from ctxengine._messages.read import cut_points, message_text
from ctxengine._messages.validate import validate
from ctxengine._plugin.results import CompressResult
from ctxengine.testing.transcripts import load_sessions

from .conftest import LocalModel, summary_config

pytestmark = pytest.mark.slow

SUMMARY_MARK = "[CONTEXT SUMMARY]"
# claude_code_spotter session 6: a short real Claude Code session (26 messages, ~10K tokens)
# shipped in both formats.
SPOTTER_SESSION = 6
FIRST_PART = 18
"""The first compaction sees messages[:FIRST_PART]; the second one the rest as well."""


def _session(fmt: Format) -> tuple[SystemPrompt | None, list[Message]]:
    row = load_sessions(f"claude_code_spotter.{fmt}.jsonl")[SPOTTER_SESSION]
    return row.get("system"), row["messages"]


def _prefix(messages: Sequence[Message], fmt: Format, wanted: int) -> list[Message]:
    """The longest prefix of at most ``wanted`` messages that splits no tool call from its
    results."""
    cuts = cut_points(messages, fmt)
    end = max(i for i in range(1, min(wanted, len(messages)) + 1) if cuts[i])
    return list(messages[:end])


def _summary_messages(messages: Sequence[Message]) -> list[int]:
    return [i for i, msg in enumerate(messages) if SUMMARY_MARK in json.dumps(msg)]


def _compress(
    kernel: Kernel, messages: list[Message], system: SystemPrompt | None
) -> CompressResult:
    snapshot = json.dumps(messages, sort_keys=True)
    result = kernel.session("e2e").compress(messages, system, force=True)
    assert json.dumps(messages, sort_keys=True) == snapshot, "the caller's list was mutated"
    return result


def _check_compaction(
    result: CompressResult,
    messages: Sequence[Message],
    fmt: Format,
    provider: str,
    kernel: Kernel,
) -> None:
    """What every successful model-made compaction must show, whatever the model wrote."""
    assert result.status == "compacted", result.reason
    assert result.provider == provider
    # The model answered (usage recorded). A 135M model often ignores the template; the only
    # fallback allowed is the one for that, never a failed call.
    usage = getattr(kernel.summary_provider(), "last_usage", None)
    assert usage is not None, "no usage recorded: the model was never called"
    if result.fallback_used:
        assert "does not follow the summary template" in result.reason, result.reason
    assert result.summary is not None
    for heading in SUMMARY_HEADINGS:
        assert heading in result.summary, heading
    assert validate(result.messages, fmt, system=result.system) == []
    assert result.tokens_after < result.tokens_before
    assert result.messages_after == len(result.messages) < len(messages)
    # Nothing lost: the kept head and tail are the caller's own messages, in order, and exactly
    # one summary message stands for everything between them.
    summaries = _summary_messages(result.messages)
    assert len(summaries) == 1, summaries
    at = summaries[0]
    assert result.summary.strip() in message_text(result.messages[at])
    head = result.messages[:at]
    tail = [m for m in result.messages[at + 1 :] if m not in head]
    assert all(m in messages for m in head)
    assert tail == list(messages[len(messages) - len(tail) :])
    assert tail and tail[-1] is messages[-1]


@pytest.fixture(scope="module")
def anthropic_first(local_model: LocalModel) -> tuple[Kernel, list[Message], CompressResult]:
    """The first compaction of the Anthropic-format slice (shared by two tests: model calls
    are slow)."""
    system, messages = _session("anthropic")
    part = _prefix(messages, "anthropic", FIRST_PART)
    kernel = ctxengine.load(summary_config(local_model, "anthropic"), env={})
    return kernel, part, _compress(kernel, part, system)


def test_compressor_through_anthropic_sdk(
    anthropic_first: tuple[Kernel, list[Message], CompressResult],
) -> None:
    kernel, part, result = anthropic_first
    _check_compaction(result, part, "anthropic", "anthropic", kernel)
    assert kernel.summary_provider() is not None
    assert type(kernel.summary_provider()).__name__ == "AnthropicProvider"


def test_second_compaction_updates_the_summary(
    anthropic_first: tuple[Kernel, list[Message], CompressResult],
) -> None:
    kernel, part, first = anthropic_first
    _, messages = _session("anthropic")
    grown = [*first.messages, *messages[len(part) :]]
    assert validate(grown, "anthropic", system=first.system) == []
    second = _compress(kernel, grown, first.system)
    _check_compaction(second, grown, "anthropic", "anthropic", kernel)
    # The earlier summary was folded into the new one, not stacked beside it.
    assert first.summary is not None and second.summary is not None
    assert second.summary != first.summary
    assert second.messages[-1] is messages[-1]


def test_compressor_through_openai_sdk(local_model: LocalModel) -> None:
    system, messages = _session("openai")
    part = _prefix(messages, "openai", FIRST_PART + 4)  # the OpenAI twin has more messages
    kernel = ctxengine.load(summary_config(local_model, "openai"), env={})
    result = _compress(kernel, part, system)
    _check_compaction(result, part, "openai", "openai", kernel)
    assert type(kernel.summary_provider()).__name__ == "OpenAIProvider"


def test_lcm_expand_query_answers_from_the_store(local_model: LocalModel) -> None:
    row = load_sessions("tau_bench_airline_gpt4o.openai.jsonl")[0]
    messages = _prefix(row["messages"], "openai", 16)  # ~2.5K tokens: few model calls
    options: dict[str, Any] = {
        "fresh_tail_count": 4,
        "leaf_chunk_tokens": 1_200,
        "leaf_min_messages": 4,
        "leaf_summary_tokens": 120,
    }
    config = summary_config(local_model, "openai", engine="lcm", engines={"lcm": options})
    kernel = ctxengine.load(config, env={})
    session = kernel.session("e2e-lcm")
    result = session.compress(messages, force=True)
    assert result.status == "compacted", result.reason
    assert validate(result.messages, "openai") == []
    assert result.tokens_after < result.tokens_before
    summary_ids = sorted(set(re.findall(r"\bsum_[0-9a-f]{12}\b", json.dumps(result.messages))))
    assert summary_ids, "no summary id in the rendered context"

    reply = json.loads(
        session.call_tool(
            "lcm_expand_query",
            {
                "question": "Which user id did the customer give, and where did they fly?",
                "summary_ids": summary_ids,
                "max_tokens": 60,
                "evidence_tokens": 800,
            },
        )
    )
    assert isinstance(reply["answer"], str) and reply["answer"].strip()
    assert reply["evidence_ids"], reply
    assert all(re.fullmatch(r"msg_\d+", i) for i in reply["evidence_ids"])
    # cited_ids are the evidence ids the model wrote in its answer (none is invented).
    assert isinstance(reply["cited_ids"], list)
    assert set(reply["cited_ids"]) <= set(reply["evidence_ids"])
    assert all(i in reply["answer"] for i in reply["cited_ids"])
    # The evidence is the stored originals: the user id from the compacted turns is in them.
    evidence = json.loads(
        session.call_tool(
            "lcm_expand_query",
            {"question": "user id mia_li_3668", "summary_ids": summary_ids, "output": "evidence"},
        )
    )
    assert any("mia_li_3668" in e["text"] for e in evidence["evidence"])
