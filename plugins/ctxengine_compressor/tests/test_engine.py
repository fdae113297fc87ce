"""compress(): the phases together, the summary call, the failure policy and the result record."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import ctxengine_compressor as plugin
from ctxengine import SUMMARY_HEADINGS, SummaryError, TokenCounter, TokenEstimate
from ctxengine.messages import redact, validate
from ctxengine.testing import samples
from ctxengine_compressor.assemble import SUMMARY_PREFIX, SUMMARY_SUFFIX, SYSTEM_NOTE
from ctxengine_compressor.digest import redacted
from ctxengine_compressor.state import REMEMBERED_SUMMARIES, get_state
from ctxengine_compressor.summary import SYSTEM_PROMPT, summary_budget

from .helpers import GOOD_SUMMARY, Clock, ScriptedProvider, all_text, make_ctx, run

known = TokenEstimate.known
"""A prompt size known exactly (the engine's decisions are tested on exact sizes)."""

FORMATS = ("openai", "anthropic")


def _sample(fmt: str, turns: int = 24):  # type: ignore[no-untyped-def]
    return samples.conversation(fmt, turns=turns)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMATS)
def test_compaction_with_a_model_summary(fmt: str) -> None:
    provider = ScriptedProvider()
    ctx = make_ctx(provider)
    system, messages = _sample(fmt)
    snapshot = copy.deepcopy((system, messages))
    result = run(ctx, messages, fmt, system)  # type: ignore[arg-type]
    assert result.status == "compacted", result.reason
    assert (system, messages) == snapshot
    assert result.engine == "compressor"
    assert result.provider == "scripted"
    assert result.fallback_used is False
    assert result.summary is not None and result.summary.startswith(GOOD_SUMMARY)
    assert result.tokens_after < result.tokens_before
    assert result.messages_before == len(messages)
    assert result.messages_after == len(result.messages)
    assert result.duration_s >= 0
    assert validate(result.messages, fmt, system=result.system) == []  # type: ignore[arg-type]
    wrapped = [m for m in result.messages if SUMMARY_PREFIX in json.dumps(m)]
    assert len(wrapped) == 1
    assert SUMMARY_SUFFIX in json.dumps(wrapped[0])
    # The tail is the caller's objects, unchanged.
    assert result.messages[-1] is messages[-1]
    # One model call, with the template and no reasoning.
    ((sys_prompt, prompt, max_tokens),) = provider.calls
    assert sys_prompt == SYSTEM_PROMPT
    for heading in ("## Goal", "### In Progress", "## Critical Context"):
        assert heading in prompt
    assert max_tokens == summary_budget(10**9, 800)  # 16K window -> 5 % = 800 tokens


@pytest.mark.parametrize("fmt", FORMATS)
def test_system_note_is_added_once(fmt: str) -> None:
    ctx = make_ctx(ScriptedProvider())
    system, messages = _sample(fmt)
    first = run(ctx, messages, fmt, system)  # type: ignore[arg-type]
    note_holder = json.dumps(first.system if fmt == "anthropic" else first.messages[0])
    assert note_holder.count(SYSTEM_NOTE) == 1
    _, more = _sample(fmt, turns=12)
    grown = first.messages + [m for m in more if m.get("role") != "system"]
    second = run(ctx, grown, fmt, first.system)  # type: ignore[arg-type]
    assert second.status == "compacted", second.reason
    holder = json.dumps(second.system if fmt == "anthropic" else second.messages[0])
    assert holder.count(SYSTEM_NOTE) == 1
    assert validate(second.messages, fmt, system=second.system) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMATS)
def test_second_compaction_updates_the_previous_summary(fmt: str) -> None:
    first_summary = GOOD_SUMMARY.replace("Module fixes.", "Fixing module_3.py (unique-marker-42).")
    provider = ScriptedProvider(first_summary, GOOD_SUMMARY)
    ctx = make_ctx(provider)
    system, messages = _sample(fmt)
    first = run(ctx, messages, fmt, system)  # type: ignore[arg-type]
    _, more = _sample(fmt, turns=12)
    grown = first.messages + [m for m in more if m.get("role") != "system"]
    second = run(ctx, grown, fmt, first.system)  # type: ignore[arg-type]
    assert second.status == "compacted", second.reason
    prompt = provider.calls[1][1]
    assert "UPDATE that summary" in prompt
    assert "<previous-summary>" in prompt and "unique-marker-42" in prompt
    # The old summary is given once, not again inside the transcript.
    assert prompt.count("unique-marker-42") == 1
    assert sum(SUMMARY_PREFIX in json.dumps(m) for m in second.messages) == 1
    # Later compactions keep the head the first one kept: the user's first task stays in place.
    body = 1 if fmt == "openai" else 0
    assert second.messages[body] == first.messages[body]
    assert second.messages[body]["role"] == "user"
    assert get_state(ctx).compactions == 2


def test_summarizer_input_is_the_original_content_without_reasoning_and_redacted() -> None:
    provider = ScriptedProvider()
    ctx = make_ctx(provider)
    _, messages = _sample("openai")
    messages = [dict(m) for m in messages]
    tools = [i for i, m in enumerate(messages) if m["role"] == "tool"][4:6]
    messages[tools[0]] = {**messages[tools[0]], "content": "ORIGINAL-OUTPUT " + "z" * 9_000}
    messages[tools[0] - 1] = {**messages[tools[0] - 1], "reasoning_content": "SECRET-THOUGHTS"}
    key = "export ANTHROPIC_API_KEY=sk-ant-api03-" + "a" * 90
    messages[tools[1]] = {**messages[tools[1]], "content": key}
    run(ctx, messages, "openai")
    prompt = provider.calls[0][1]
    assert "ORIGINAL-OUTPUT" in prompt
    assert "SECRET-THOUGHTS" not in prompt
    assert "sk-ant-api03-aaaa" not in prompt
    assert "[REDACTED" in prompt
    assert "characters omitted" in prompt  # long message clipped head + tail


def test_summary_output_is_redacted() -> None:
    leaked = GOOD_SUMMARY + "\npassword=hunter2hunter2"
    ctx = make_ctx(ScriptedProvider(leaked))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.summary is not None
    assert "hunter2hunter2" not in result.summary
    assert "hunter2hunter2" not in json.dumps(result.messages)


def test_input_is_shrunk_to_fit_a_small_summary_model() -> None:
    provider = ScriptedProvider(context_length=6_000)
    ctx = make_ctx(provider, context_length=64_000)
    _, messages = _sample("openai", turns=40)
    result = run(ctx, messages, "openai")
    assert result.status == "compacted", result.reason
    system, prompt, max_tokens = provider.calls[0]
    used = ctx.tokens.count_text(system) + ctx.tokens.count_text(prompt)
    assert used + max_tokens <= 6_000


def test_summary_model_too_small_falls_back_to_the_digest() -> None:
    provider = ScriptedProvider(context_length=2_500)
    ctx = make_ctx(provider, context_length=64_000)
    _, messages = _sample("openai", turns=40)
    result = run(ctx, messages, "openai")
    assert provider.calls == []
    assert result.status == "compacted"
    assert result.fallback_used is True
    assert "summary failed (too_small)" in result.reason


@pytest.mark.parametrize("kind", ["auth", "network", "timeout", "rate_limit"])
def test_abort_kinds_abort_with_cooldown(kind: str) -> None:
    clock = Clock()
    ctx = make_ctx(ScriptedProvider(SummaryError.of(kind, "scripted", "boom")), clock=clock)
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "aborted"
    assert result.messages is messages
    assert result.tokens_after == result.tokens_before
    assert f"summary failed ({kind})" in result.reason
    assert "paused for 60 s" in result.reason
    import ctxengine_compressor as plugin

    assert plugin.should_compress(ctx, known(10**6), "agent", False) is False
    clock.now += 61
    assert plugin.should_compress(ctx, known(10**6), "agent", False) is True


@pytest.mark.parametrize("kind", ["empty", "server", "unparsable", "context_length", "other"])
def test_fallback_kinds_use_the_digest(kind: str) -> None:
    ctx = make_ctx(ScriptedProvider(SummaryError.of(kind, "scripted", "boom")))
    _, messages = _sample("anthropic")
    system = samples.SYSTEM_PROMPT
    result = run(ctx, messages, "anthropic", system)
    assert result.status == "compacted", result.reason
    assert result.fallback_used is True
    assert result.provider == "scripted"
    assert f"local digest after summary failed ({kind})" in result.reason
    assert validate(result.messages, "anthropic", system=result.system) == []


def test_abort_on_summary_failure_aborts_every_failure() -> None:
    ctx = make_ctx(
        ScriptedProvider(SummaryError.of("server", "scripted", "500")),
        abort_on_failure=True,
    )
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "aborted"
    assert "summary failed (server)" in result.reason


def test_unexpected_provider_exception_falls_back() -> None:
    ctx = make_ctx(ScriptedProvider(RuntimeError("bug in provider")))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "compacted"
    assert result.fallback_used
    assert "RuntimeError: bug in provider" in result.reason


def test_extractive_provider_uses_the_digest_without_fallback_flag() -> None:
    ctx = make_ctx(None)
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "compacted", result.reason
    assert result.provider == "extractive"
    assert result.fallback_used is False


def test_critical_context_is_carried_into_the_summary() -> None:
    ctx = make_ctx(ScriptedProvider())  # the scripted summary names no file and no command
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.summary is not None
    assert "lib/app/module_9.py" in result.summary
    assert "pytest -q tests/test_mod5.py" in result.summary
    assert "Good. Now look at module 5." in result.summary  # user asks are carried too
    # A file a kept tail message still shows is not repeated in the summary.
    assert "lib/app/module_6.py" not in result.summary
    assert any("lib/app/module_6.py" in json.dumps(m) for m in result.messages)


def test_a_summary_that_does_not_pay_is_a_noop() -> None:
    huge = GOOD_SUMMARY + "\n" + "filler words " * 20_000
    ctx = make_ctx(ScriptedProvider(huge))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "noop"
    assert result.reason.startswith("compaction would not pay")
    assert result.messages is messages
    state = get_state(ctx)
    assert state.guard.recent_savings == []  # a noop is not a compaction: no anti-thrash
    assert state.retry_above_tokens is not None
    # Automatic compaction waits until the prompt has grown past the retry mark...
    assert plugin.should_compress(ctx, known(state.retry_above_tokens - 1), "agent", False) is False
    assert plugin.should_compress(ctx, known(state.retry_above_tokens), "agent", False) is True
    # ...and a forced one does not wait.
    assert plugin.should_compress(ctx, known(9_000), "agent", True) is True


def test_the_retry_mark_is_on_the_provider_scale_of_the_prompt_it_is_compared_with() -> None:
    """should_compress compares the retry mark with the prompt in provider tokens (measured
    usage, or local counts times the learned ratio); a provider that counts 30 % more than
    tiktoken must not make the wait 30 % shorter."""
    huge = GOOD_SUMMARY + "\n" + "filler words " * 20_000
    plain, calibrated = make_ctx(ScriptedProvider(huge)), make_ctx(ScriptedProvider(huge))
    plain.tokens, calibrated.tokens = TokenCounter(), TokenCounter()  # not the shared one
    for _ in range(3):
        calibrated.tokens.observe(10_000, 13_000)
    _, messages = _sample("openai")
    marks = []
    for ctx in (plain, calibrated):
        assert run(ctx, messages, "openai").status == "noop"
        mark = get_state(ctx).retry_above_tokens
        assert mark is not None
        marks.append(mark)
    assert plain.tokens.point_ratio == 1.0
    assert calibrated.tokens.point_ratio == pytest.approx(1.3)
    assert marks[1] == round(marks[0] * 1.3)


def test_short_conversation_is_an_honest_noop() -> None:
    ctx = make_ctx(ScriptedProvider())
    system, messages = samples.short_conversation("openai")
    result = run(ctx, messages, "openai", system)
    assert result.status == "noop"
    assert result.reason.startswith("nothing to compact")
    assert result.messages is messages


def test_disabled_compression_is_a_noop_unless_forced() -> None:
    ctx = make_ctx(ScriptedProvider(), compaction=False)
    _, messages = _sample("openai")
    assert run(ctx, messages, "openai", force=False).status == "noop"
    assert run(ctx, messages, "openai", force=True).status == "compacted"


def test_focus_is_passed_to_the_summarizer() -> None:
    provider = ScriptedProvider()
    ctx = make_ctx(provider)
    _, messages = _sample("openai")
    run(ctx, messages, "openai", focus="the database migration")
    assert "Keep the most detail about: the database migration" in provider.calls[0][1]


class RaisingProvider:
    """A host's own provider that raises plain Python errors, not SummaryError."""

    name = "host"
    model = "host-model"
    context_length = 128_000

    def __init__(self, error: BaseException | None = None, reply: str = "") -> None:
        self.error = error
        self.reply = reply

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        if self.error is not None:
            raise self.error
        return self.reply

    async def acomplete(self, system: str, prompt: str, max_tokens: int) -> str:
        return self.complete(system, prompt, max_tokens)


@pytest.mark.parametrize("error", [TimeoutError("slow"), ConnectionError("down")])
def test_a_host_providers_network_errors_abort(error: BaseException) -> None:
    ctx = make_ctx(RaisingProvider(error))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "aborted", result.reason
    assert result.messages is messages


def test_a_host_providers_reasoning_never_becomes_the_summary() -> None:
    reply = "<think>secret plan: rm -rf everything</think>\n" + GOOD_SUMMARY
    ctx = make_ctx(RaisingProvider(reply=reply))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "compacted", result.reason
    assert result.summary is not None
    assert "secret plan" not in result.summary


def test_a_turn_the_summary_was_merged_into_is_not_a_pure_summary() -> None:
    from ctxengine_compressor.assemble import is_pure_summary_message, wrap_summary

    summary_only = {"role": "user", "content": wrap_summary("## Goal\nfix it")}
    merged = {"role": "user", "content": "ok, now the parser\n\n" + wrap_summary("## Goal\nfix")}
    plain = {"role": "user", "content": "hello"}
    assert is_pure_summary_message(summary_only) is True
    # The user's own words make it the latest ask, kept verbatim on the next compaction.
    assert is_pure_summary_message(merged) is False
    assert is_pure_summary_message(plain) is False


def test_a_reply_that_ignores_the_template_falls_back_to_the_digest() -> None:
    ctx = make_ctx(ScriptedProvider("Sure! The user worked on some files and ran tests."))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "compacted", result.reason
    assert result.fallback_used is True
    assert result.summary is not None
    for heading in SUMMARY_HEADINGS:
        assert heading in result.summary


def test_a_reply_missing_some_headings_gets_them_all_in_order() -> None:
    partial = "## Goal\nfix tests\n## Progress\n### Done\n- fixed module_3\n## Next Steps\n- ship"
    ctx = make_ctx(ScriptedProvider(partial))
    _, messages = _sample("openai")
    result = run(ctx, messages, "openai")
    assert result.status == "compacted", result.reason
    assert result.fallback_used is False
    assert result.summary is not None
    positions = [result.summary.index(heading) for heading in SUMMARY_HEADINGS]
    assert positions == sorted(positions)
    assert "- fixed module_3" in result.summary


def _edit_summary(messages: list[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """``messages`` with ``old`` replaced by ``new`` in the text of the summary message (new
    dicts: the host rewrote its stored history)."""
    edited = []
    for msg in messages:
        text = json.dumps(msg)
        if SUMMARY_PREFIX in text:
            assert old in text
        edited.append(json.loads(text.replace(old, new)) if SUMMARY_PREFIX in text else msg)
    return edited


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_own_digest_read_back_is_not_redacted_again_but_an_edited_one_is(fmt: str) -> None:
    ctx = make_ctx(None)  # the extractive provider: the local digest
    system, messages = _sample(fmt)
    first = run(ctx, messages, fmt, system)  # type: ignore[arg-type]
    assert first.status == "compacted", first.reason
    assert get_state(ctx).redacted_summaries == (first.summary,)
    _, more = _sample(fmt, turns=12)
    later = [m for m in more if m.get("role") != "system"]
    # Unchanged, the summary is one the engine knows is redacted: the same result as when it
    # is scanned again (a session that forgot it).
    second = run(ctx, first.messages + later, fmt, first.system)  # type: ignore[arg-type]
    assert second.status == "compacted", second.reason
    assert get_state(ctx).redacted_summaries == (first.summary, second.summary)
    scanned = make_ctx(None)
    again = run(scanned, messages, fmt, system)  # type: ignore[arg-type]
    get_state(scanned).redacted_summaries = ()
    again = run(scanned, again.messages + later, fmt, again.system)  # type: ignore[arg-type]
    assert (again.summary, again.messages) == (second.summary, second.messages)
    # The host edits the summary in its history: the edited text is scanned for secrets.
    ctx = make_ctx(None)
    first = run(ctx, messages, fmt, system)  # type: ignore[arg-type]
    heading = "## Critical Context\\n"
    edited = _edit_summary(first.messages, heading, heading + "- db password=hunter2hunter2\\n")
    third = run(ctx, edited + later, fmt, first.system)  # type: ignore[arg-type]
    assert third.status == "compacted", third.reason
    assert third.summary is not None and "db password=[REDACTED:password]" in third.summary
    assert "hunter2hunter2" not in all_text(third.messages, third.system)


def test_the_remembered_own_summaries_are_bounded() -> None:
    ctx = make_ctx(None)
    system, messages = _sample("openai")
    result = run(ctx, messages, "openai", system)
    for turns in range(6, 6 + 2 * REMEMBERED_SUMMARIES, 2):
        _, more = _sample("openai", turns=turns)
        grown = result.messages + [m for m in more if m.get("role") != "system"]
        result = run(ctx, grown, "openai", result.system)
        assert result.status == "compacted", result.reason
    remembered = get_state(ctx).redacted_summaries
    assert len(remembered) == REMEMBERED_SUMMARIES
    assert remembered[-1] == result.summary


def test_redacted_skips_only_texts_known_to_be_redacted() -> None:
    text = "- db password=hunter2hunter2"
    assert redacted(text) == "- db password=[REDACTED:password]"
    assert redacted(text, ("other text",)) == "- db password=[REDACTED:password]"
    clean = redact(text)
    assert redacted(clean, (clean,)) is clean
