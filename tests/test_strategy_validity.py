"""Both built-in cache strategies on every bundled session: every request an agent would have sent,
in both formats, on both kinds of route, with and without markers the host placed itself, passes
the validator (at most four breakpoints counting a top-level marker, longer TTLs first, no marker
on empty text or thinking blocks); Anthropic-format ones also pass the fake Messages API's own
checks."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ctxengine._messages.conversation import Format
from ctxengine._messages.markers import MAX_BREAKPOINTS, marked_items
from ctxengine._messages.read import detect_format, is_tool_message
from ctxengine._messages.validate import validate
from ctxengine.testing.transcripts import transcript_files
from ctxengine_caching.strategy import apply_system_and_3
from ctxengine_caching.tests.test_caching_transcripts import (
    load,
    request_points,
    without_blank_text,
)
from ctxengine_fakeapi import check_anthropic_request
from ctxengine_tool_turns.layout import apply_tool_turns

MODEL = "claude-sonnet-4-6"
FILES = [path.name for path in transcript_files()]
TTLS = (("5m", "5m"), ("5m", "1h"), ("1h", "1h"))
"""(ttl, stable_ttl) pairs a request may get; auto TTL hands out any of them."""

Strategy = Callable[..., dict[str, Any]]


def system_and_3(request: dict[str, Any], ttl: str, stable: str, native: bool) -> dict[str, Any]:
    return apply_system_and_3(request, ttl=ttl, stable_ttl=stable, native=native)


def tool_turns(request: dict[str, Any], ttl: str, stable: str, native: bool) -> dict[str, Any]:
    # The top-level automatic marker goes to the native Anthropic API only.
    return apply_tool_turns(request, ttl=ttl, stable_ttl=stable, native=native, automatic=native)


STRATEGIES: dict[str, Callable[[dict[str, Any], str, str, bool], dict[str, Any]]] = {
    "system_and_3": system_and_3,
    "tool_turns": tool_turns,
}

HOST_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
    },
    {
        "name": "terminal",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        "cache_control": {"type": "ephemeral"},
    },
]


def with_host_markers(request: dict[str, Any], fmt: Format) -> dict[str, Any]:
    """What a host that caches by itself sends: its own markers on tools (Anthropic), on the
    system prompt, on old messages (left from earlier turns, mixed TTLs) and a top-level one."""
    messages = list(request["messages"])
    for index in range(0, len(messages), 7):
        msg = messages[index]
        content = msg.get("content")
        ttl = {"type": "ephemeral", "ttl": "1h"} if index % 2 else {"type": "ephemeral"}
        if isinstance(content, str) and content.strip():
            messages[index] = {
                **msg,
                "content": [{"type": "text", "text": content, "cache_control": ttl}],
            }
        elif fmt == "openai":
            messages[index] = {**msg, "cache_control": ttl}
    out = {**request, "messages": messages}
    if fmt == "anthropic":
        out["tools"] = HOST_TOOLS
        out["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
        system = request.get("system")
        if isinstance(system, str):
            out["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
    return out


def requests(name: str) -> Iterator[tuple[str, int, dict[str, Any], Format]]:
    """``(session id, end, request, format)`` for every request point of a file."""
    for session in load(name):
        messages = session["messages"]
        system = session.get("system")
        fmt = detect_format(messages, system)
        if fmt == "anthropic":
            messages = without_blank_text(messages)
        for end in request_points(messages):
            request: dict[str, Any] = {"model": MODEL, "messages": messages[: end + 1]}
            if fmt == "anthropic":
                request["max_tokens"] = 64
                if system is not None:
                    request["system"] = system
            yield session["id"], end, request, fmt


@pytest.mark.parametrize("host", [False, True], ids=["unmarked", "host-markers"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "envelope"])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("name", FILES)
def test_every_request_passes_the_validator(
    name: str, strategy: str, native: bool, host: bool
) -> None:
    apply = STRATEGIES[strategy]
    ttls = itertools.cycle(TTLS)
    checked = 0
    for session_id, end, plain, fmt in requests(name):
        request = with_host_markers(plain, fmt) if host else plain
        ttl, stable = next(ttls)
        marked = apply(request, ttl, stable, native)
        top = marked.get("cache_control")
        problems = validate(
            marked["messages"],
            fmt,
            system=marked.get("system"),
            tools=marked.get("tools"),
            cache_control=top,
        )
        assert problems == [], (session_id, end, [p.message for p in problems[:3]])
        count = len(marked_items(marked)) + (top is not None)
        assert 1 <= count <= MAX_BREAKPOINTS, (session_id, end, count)
        if fmt == "anthropic":
            assert check_anthropic_request(marked) == [], (session_id, end)
        if not native:
            assert top is None
            for where, index, _ in marked_items(marked):
                if index is not None:
                    message = marked["messages"][index]
                    assert not is_tool_message(message, only_results=True), (session_id, end, where)
        checked += 1
    assert checked > 0
