"""Property-based tests: for generated conversations in both formats, compaction output is valid
for the provider, keeps the system prompt and the tail byte-for-byte and never grows the prompt."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ctxengine._messages.conversation import Format, Message, SystemPrompt
from ctxengine._messages.convert import to_anthropic
from ctxengine._messages.validate import validate
from ctxengine_compressor.assemble import SUMMARY_PREFIX, SYSTEM_NOTE

from .helpers import ScriptedProvider, make_ctx, run

IMAGE = {
    "type": "image_url",
    "image_url": {
        "url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42"
        "mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    },
}
WORDS = st.sampled_from(
    [
        "fix",
        "lib/app.py",
        "pytest -q",
        "error: boom",
        "ok",
        "the",
        "build",
        "src/main.c",
        "exit code: 1",
    ]
)


def _text(min_words: int = 1, max_words: int = 60) -> st.SearchStrategy[str]:
    return st.lists(WORDS, min_size=min_words, max_size=max_words).map(" ".join)


@st.composite
def user_content(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["str", "parts", "image"]))
    text = draw(_text())
    if kind == "str":
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if kind == "image":
        parts.append(IMAGE)
    return parts


@st.composite
def tool_output(draw: st.DrawFn) -> Any:
    size = draw(st.sampled_from([0, 1, 50, 400, 3_000]))
    text = ("line of output from the tool\n" * (size // 29 + 1))[:size]
    if size == 0:
        return ""
    if draw(st.booleans()):
        return [{"type": "text", "text": text}]
    return text


@st.composite
def openai_conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(_text(3, 20))})
    # Reused ids (the same few ids every step, as tau-bench agents do) or unique ones.
    reuse = draw(st.booleans())
    counter = 0
    for _turn in range(draw(st.integers(1, 7))):
        messages.append({"role": "user", "content": draw(user_content())})
        for _step in range(draw(st.integers(0, 4))):
            calls = []
            for k in range(draw(st.integers(1, 3))):
                counter += 1
                call_id = f"call_{k}" if reuse else f"call_{counter}"
                args = (
                    {"command": draw(_text(1, 8))}
                    if draw(st.booleans())
                    else {"path": "a" * draw(st.sampled_from([5, 900]))}
                )
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "terminal", "arguments": json.dumps(args)},
                    }
                )
            content = draw(st.sampled_from([None, "", "calling tools"]))
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            messages.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": draw(tool_output())}
                for c in calls
            )
        messages.append({"role": "assistant", "content": draw(_text())})
    if draw(st.booleans()):
        messages.append({"role": "user", "content": draw(_text())})
        if draw(st.booleans()):
            call = {
                "id": "pending_1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "make"}'},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    return messages


def _system_of(messages: list[Message], system: SystemPrompt | None, fmt: Format) -> Any:
    if fmt == "anthropic":
        return system
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else None


def _check(
    messages: list[Message], fmt: Format, system: SystemPrompt | None, provider: object
) -> None:
    assume(validate(messages, fmt, system=system) == [])
    ctx = make_ctx(provider, context_length=4_000, protect_last_n=3, protect_first_n=2)
    snapshot = json.dumps([system, messages])
    result = run(ctx, messages, fmt, system)
    assert json.dumps([system, messages]) == snapshot, "input mutated"
    assert result.tokens_after <= result.tokens_before
    if result.status != "compacted":
        assert result.messages is messages or result.messages == messages
        assert result.system == system
        return
    out = result.messages
    assert validate(out, fmt, system=result.system) == [], result.reason
    assert ctx.tokens.count(out, result.system) <= ctx.tokens.count(messages, system)
    # The system prompt is kept byte-for-byte, at most followed by the one-time note.
    before, after = _system_of(messages, system, fmt), _system_of(out, result.system, fmt)
    if before is not None:
        assert after in (before, f"{before}\n\n{SYSTEM_NOTE}") or (
            isinstance(before, list) and after[: len(before)] == before
        )
    # Everything after the summary message is the input's tail, the same objects.
    summary_at = max(i for i, m in enumerate(out) if SUMMARY_PREFIX in json.dumps(m))
    tail = out[summary_at + 1 :]
    assert tail, "nothing follows the summary"
    assert all(a is b for a, b in zip(tail, messages[len(messages) - len(tail) :], strict=True))


COMMON = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


@COMMON
@given(openai_conversations())
def test_openai_extractive(messages: list[Message]) -> None:
    _check(messages, "openai", None, None)


@COMMON
@given(openai_conversations())
def test_anthropic_extractive(messages: list[Message]) -> None:
    system, converted = to_anthropic(messages)
    _check(converted, "anthropic", system, None)


@COMMON
@given(openai_conversations(), st.sampled_from(["openai", "anthropic"]))
def test_model_summary_both_formats(messages: list[Message], fmt: Format) -> None:
    system: SystemPrompt | None = None
    if fmt == "anthropic":
        system, messages = to_anthropic(messages)
    _check(messages, fmt, system, ScriptedProvider())
