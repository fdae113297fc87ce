"""Regressions for the compressor's defects found by the adversarial run (issue "Hardening"):
assistant-first outputs (1), a summariser that saw a fraction of the middle (2) and prose secrets
carried into summaries (7). Each of these failed before the fix."""

from __future__ import annotations

from typing import Any

from ctxengine import Format, Message
from ctxengine.messages import to_anthropic, validate
from ctxengine.testing import samples
from ctxengine_compressor.assemble import SUMMARY_PREFIX

from .helpers import GOOD_SUMMARY, ScriptedProvider, make_ctx, openai_call, run


def _strict(messages: list[Message], fmt: Format, system: Any = None) -> list[str]:
    return [str(p) for p in validate(messages, fmt, system=system, profile="strict")]


def _agent_turn(n: int, steps: int = 12) -> list[Message]:
    """A user ask followed by an agent loop of tool calls and a short answer."""
    out: list[Message] = [{"role": "user", "content": f"Now handle ticket T-{n} in lib/t{n}.py."}]
    for k in range(steps):
        call = openai_call(f"c{n}_{k}", "terminal", command=f"pytest -q tests/t{n}_{k}.py")
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": call["id"], "content": f"ok {n}.{k}\n" * 120})
    out.append({"role": "assistant", "content": f"Ticket T-{n} is done."})
    return out


def test_every_compaction_of_an_agent_loop_is_user_first_and_alternating() -> None:
    # Defect 1: later compactions kept only the system message, folded the user's task into the
    # summary and put the summary first as an assistant message: Bedrock answers 400.
    ctx = make_ctx(ScriptedProvider(*[GOOD_SUMMARY] * 20))  # the default settings otherwise
    messages: list[Message] = [{"role": "system", "content": "You are an agent."}]
    messages += _agent_turn(0)
    outputs: list[list[Message]] = []
    for n in range(1, 6):
        messages = [*messages, *_agent_turn(n)]
        result = run(ctx, messages, "openai")
        if result.compacted:
            messages = result.messages
            outputs.append(messages)
    assert len(outputs) >= 3
    # The user's first task keeps its place, in the user's own words, on every compaction.
    task = {"role": "user", "content": "Now handle ticket T-0 in lib/t0.py."}
    assert [out[1] for out in outputs] == [task] * len(outputs)
    for out in outputs:
        assert _strict(out, "openai") == []
        # Converted for Claude (e.g. by a gateway in front of Bedrock) it opens with the user.
        _, converted = to_anthropic(out)
        assert converted[0]["role"] == "user"
        assert validate(converted, "anthropic") == []


def test_an_anthropic_list_opening_with_an_orphan_result_compacts_user_first() -> None:
    # Defect 1, Anthropic variant: an orphan tool_result first and protect_first_n: 2 left the
    # head opening with the assistant once the sanitizer dropped the orphan.
    system, messages = samples.anthropic_conversation(turns=16)
    orphan = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "gone"}]}
    messages = [orphan, {"role": "assistant", "content": "Picking up where we left off."}]
    messages += samples.anthropic_conversation(turns=16)[1]
    results = [
        run(
            make_ctx(None, protect_first_n=first_n, protect_last_n=3), messages, "anthropic", system
        )
        for first_n in range(6)
    ]
    assert all(result.compacted for result in results)
    assert [result.messages[0]["role"] for result in results] == ["user"] * 6
    for result in results:
        assert _strict(result.messages, "anthropic", result.system) == []


def test_an_openai_list_opening_with_the_assistant_gets_the_summary_first() -> None:
    messages = samples.openai_conversation(turns=16)
    messages.insert(1, {"role": "assistant", "content": "Resuming the earlier session."})
    ctx = make_ctx(None, protect_first_n=3, protect_last_n=3)
    result = run(ctx, messages, "openai")
    assert result.compacted, result.reason
    assert result.messages[1]["role"] == "user"
    assert SUMMARY_PREFIX in result.messages[1]["content"]
    assert _strict(result.messages, "openai") == []


def _long_session(asks: int) -> list[Message]:
    """System + many short exchanges, each with a unique marker the summariser must see."""
    messages: list[Message] = [{"role": "system", "content": "You are an agent."}]
    for k in range(asks):
        messages.append({"role": "user", "content": f"Ask MARK{k:05d}: look at src/m{k}.py now."})
        messages.append({"role": "assistant", "content": f"Looked at src/m{k}.py; fine. " * 8})
    return messages


def test_a_middle_larger_than_the_summary_window_is_summarized_in_parts() -> None:
    # Defect 2: with a 16,000-token summary window and a ~1,300-message middle, 1,201 messages
    # were dropped from the summariser's prompt and the result did not say so.
    provider = ScriptedProvider(*[GOOD_SUMMARY] * 64, context_length=16_000)
    ctx = make_ctx(provider, context_length=200_000, protect_last_n=4)
    messages = _long_session(660)
    result = run(ctx, messages, "openai")
    assert result.compacted, result.reason
    # Every ask replaced by the summary was shown to the summary model.
    sent = "\n".join(prompt for _, prompt, _ in provider.calls)
    kept = {id(m) for m in result.messages}
    replaced = [k for k in range(660) if id(messages[1 + 2 * k]) not in kept]
    assert len(replaced) > 400
    assert [k for k in replaced if f"MARK{k:05d}" not in sent] == []
    # head + one summary + tail remain: the rest is the middle
    middle = result.messages_before - (result.messages_after - 1)
    parts = [c for c in result.calls if c.purpose.startswith("part ")]
    assert len(parts) >= 2 and result.calls[-1].purpose == "merge"
    assert len(result.calls) <= 8  # engines.compressor.summary_max_calls
    assert sum(c.messages for c in parts) + result.unsummarized == middle
    assert result.unsummarized == 0
    # Each call fitted the summary model's window.
    for _system, prompt, max_tokens in provider.calls:
        assert ctx.tokens.count_text(prompt) * 1.15 + max_tokens <= 16_000
    assert "summary calls (parts of the middle, then a merge)" in result.reason


def test_a_middle_beyond_the_call_budget_is_reported_and_its_facts_kept() -> None:
    provider = ScriptedProvider(*[GOOD_SUMMARY] * 8, context_length=16_000)
    ctx = make_ctx(provider, context_length=200_000, protect_last_n=4, summary_max_calls=3)
    messages = _long_session(1_300)
    result = run(ctx, messages, "openai")
    assert result.compacted, result.reason
    assert len(provider.calls) <= 3
    assert result.unsummarized > 0
    assert f"the {result.unsummarized} oldest middle messages" in result.reason
    assert "were not summarised" in result.reason
    # The oldest messages were not shown to the model; the ledger still carries facts of theirs
    # (as many as its budget holds, and it says how many it left out).
    sent = "\n".join(prompt for _, prompt, _ in provider.calls)
    unshown = [k for k in range(1_300) if 1 + 2 * k < 1 + result.unsummarized]
    assert all(f"MARK{k:05d}" not in sent for k in unshown)
    carried = [k for k in unshown if f"MARK{k:05d}" in (result.summary or "")]
    assert len(carried) >= 10
    assert "omitted for space" in (result.summary or "")


def test_prose_secrets_never_reach_the_summary_or_the_summarizer() -> None:
    # Defect 7: "my db password is ..." passed redact() and was carried into summaries.
    provider = ScriptedProvider()
    ctx = make_ctx(provider, protect_last_n=2)
    messages = samples.openai_conversation(turns=12)
    # In the middle: after the kept head, before the kept tail.
    at = next(i for i in range(10, len(messages)) if messages[i]["role"] == "assistant")
    messages.insert(at, {"role": "assistant", "content": "Noted: the token was ab12cd34ef."})
    messages.insert(at, {"role": "user", "content": "my db password is hunter2, use it for db1."})
    result = run(ctx, messages, "openai")
    assert result.compacted
    sent = "\n".join(prompt for _, prompt, _ in provider.calls)
    assert "my db password is [REDACTED:password]" in sent
    for secret in ("hunter2", "ab12cd34ef"):
        assert secret not in sent
        assert secret not in (result.summary or "")
    digest = run(make_ctx(None, protect_last_n=2), messages, "openai")
    assert digest.compacted
    assert "hunter2" not in (digest.summary or "")
