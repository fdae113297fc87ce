"""``system_and_3`` on the real sessions in ``tests/data/transcripts``.

Every request an agent would have sent during each session (one per point where the model was
asked to answer: after a user turn or a complete group of tool results) is marked and must pass
the kernel's strict validator; Anthropic-format ones must also pass the fake Messages API's
checks, and a sample of them is sent through the real ``anthropic`` SDK to that fake on
127.0.0.1, whose simulated prompt cache must then report the reads and writes accounting expects.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ctxengine import SessionCacheStats, cache_line, lookup_model, normalize_usage
from ctxengine.messages import marker_positions, to_anthropic, validate
from ctxengine.testing.transcripts import TRANSCRIPTS
from ctxengine_caching.strategy import apply_system_and_3
from ctxengine_fakeapi import FakeAPI, check_anthropic_request

DATA = TRANSCRIPTS

OPENAI_FILES = (
    "claude_code_spotter.openai.jsonl",
    "tau_bench_airline_gpt4o.openai.jsonl",
    "openhands_multiswebench_llama4.openai.jsonl",
)
ANTHROPIC_FILE = "claude_code_spotter.anthropic.jsonl"
MODEL = "claude-sonnet-4-5"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"transcripts not found at {DATA}")


def load(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def request_points(messages: list[dict[str, Any]]) -> Iterator[int]:
    """Indices after which the agent asked the model for its next turn."""
    for index, msg in enumerate(messages):
        if msg.get("role") not in ("user", "tool"):
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is not None and following.get("role") == "tool":
            continue  # the tool-result group is not complete yet
        yield index


def without_blank_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcripts keep whitespace-only text blocks ("\\n\\n" before thinking) that the
    Messages API rejects whatever the markers; drop them (copies) to test the markers alone."""
    out = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            kept = [
                b
                for b in content
                if not (b.get("type") == "text" and not str(b.get("text", "")).strip())
            ]
            if len(kept) != len(content):
                out.append({**msg, "content": kept})
                continue
        out.append(msg)
    return out


def marked_positions(request: dict[str, Any]) -> list[str]:
    return [where for where, _ in marker_positions(request)]


@pytest.mark.parametrize("name", OPENAI_FILES)
@pytest.mark.parametrize("native", [False, True], ids=["openrouter", "gateway"])
def test_openai_requests_pass_the_strict_validator(name: str, native: bool) -> None:
    sessions = load(name)
    checked = 0
    for session in sessions:
        messages = session["messages"]
        snapshot = json.dumps(messages, sort_keys=True)
        for end in request_points(messages):
            request = {"model": MODEL, "messages": messages[: end + 1]}
            marked = apply_system_and_3(request, ttl="5m", native=native)
            problems = validate(marked["messages"], "openai")
            assert problems == [], (session["id"], end, problems[:3])
            positions = marked_positions(marked)
            assert 1 <= len(positions) <= 4
            if not native:
                assert not any(
                    marked["messages"][int(p.split("[")[1].split("]")[0])]["role"] == "tool"
                    for p in positions
                )
            checked += 1
        assert json.dumps(messages, sort_keys=True) == snapshot, "the caller's messages changed"
    assert checked > len(sessions)


def test_openai_markers_survive_conversion_to_anthropic() -> None:
    """What an OpenAI-envelope router does with the markers: converted to a Messages request,
    the marked request has exactly the problems the unmarked one has (the converted transcripts
    carry unsigned thinking blocks the real API would refuse either way), none about caching."""

    def converted(messages: list[dict[str, Any]]) -> dict[str, Any]:
        system, blocks = to_anthropic(messages)
        body: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": blocks}
        if system is not None:
            body["system"] = system
        return body

    for session in load("claude_code_spotter.openai.jsonl"):
        messages = session["messages"]
        points = list(request_points(messages))
        for end in points[:: max(1, len(points) // 10)] + points[-1:]:
            request = {"messages": messages[: end + 1]}
            marked = apply_system_and_3(request, ttl="1h", native=False)
            body = converted(marked["messages"])
            problems = check_anthropic_request(body)
            assert problems == check_anthropic_request(converted(request["messages"]))
            assert not [p for p in problems if "cache_control" in p], (session["id"], end)
            assert 1 <= len(marked_positions(body)) <= 4


@pytest.mark.parametrize("native", [True, False], ids=["anthropic", "envelope"])
def test_anthropic_requests_pass_both_validators(native: bool) -> None:
    sessions = load(ANTHROPIC_FILE)
    checked = 0
    for session in sessions:
        messages = without_blank_text(session["messages"])
        system = session.get("system")
        for end in request_points(messages):
            request: dict[str, Any] = {
                "model": MODEL,
                "max_tokens": 64,
                "messages": messages[: end + 1],
            }
            if system is not None:
                request["system"] = system
            marked = apply_system_and_3(request, ttl="1h", native=native)
            problems = validate(marked["messages"], "anthropic", system=marked.get("system"))
            assert problems == [], (session["id"], end, problems[:3])
            assert check_anthropic_request(marked) == [], (session["id"], end)
            assert 1 <= len(marked_positions(marked)) <= 4
            checked += 1
    assert checked > len(sessions)


def send(client: Any, request: dict[str, Any], ttl: str) -> Any:
    marked = apply_system_and_3(request, ttl=ttl, native=True)
    return client.messages.create(**marked)


def anthropic_request(session: dict[str, Any], end: int) -> dict[str, Any]:
    messages = without_blank_text(session["messages"])
    request: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": messages[: end + 1]}
    if session.get("system") is not None:
        request["system"] = session["system"]
    return request


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_session_through_the_sdk() -> None:
    """Real SDK, local Messages API: the marked request at each session's first, middle and last
    request point is accepted (400 would raise)."""
    anthropic = pytest.importorskip("anthropic")
    sessions = load(ANTHROPIC_FILE)
    with FakeAPI() as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        sent = 0
        for session in sessions:
            points = list(request_points(session["messages"]))
            for end in sorted({points[0], points[len(points) // 2], points[-1]}):
                response = send(client, anthropic_request(session, end), "5m")
                assert response.content, session["id"]
                sent += 1
        bodies = [r.body for r in api.requests]
    assert len(bodies) == sent
    assert all(1 <= len(marked_positions(body)) <= 4 for body in bodies)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_rolling_window_reads_back_the_previous_prompt() -> None:
    """Replaying the last turns of the largest session from a cold cache: the first request
    writes its whole prefix, each later one reads back exactly the previous prompt (its
    breakpoints include the previous request's last message) and writes only the new turn."""
    anthropic = pytest.importorskip("anthropic")
    largest = max(load(ANTHROPIC_FILE), key=lambda s: len(json.dumps(s["messages"])))
    model = lookup_model(MODEL)
    stats = SessionCacheStats()
    usages = []
    with FakeAPI() as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        for end in list(request_points(largest["messages"]))[-6:]:
            usage = normalize_usage(send(client, anthropic_request(largest, end), "1h").usage)
            stats.add(usage, model)
            usages.append(usage)
    first = usages[0]
    assert (first.cache_read_tokens, first.cache_write_1h_tokens) == (0, first.prompt_tokens)
    for previous, usage in itertools.pairwise(usages):
        assert usage.cache_read_tokens == previous.prompt_tokens, cache_line(usage)
        assert usage.cache_write_1h_tokens == usage.prompt_tokens - previous.prompt_tokens
        assert usage.input_tokens == 0
    assert stats.usage.cache_write_5m_tokens == 0
    assert stats.hit_ratio > 0.8
    assert stats.cost.total < 0.5 * stats.cost.uncached_total
