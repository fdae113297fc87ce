"""The ``tool_turns`` layout: where its breakpoints go, the host's markers, TTL order, the budget
of four, idempotence and copy-on-write; and the plugin selected through the kernel."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest

import ctxengine
from ctxengine.messages import MAX_BREAKPOINTS, marker_positions
from ctxengine.testing.markers import marker_problems
from ctxengine_tool_turns.layout import apply_tool_turns, mark_tool_turns

SYSTEM = [
    {"type": "text", "text": "You are a coding agent. Follow the house rules."},
    {"type": "text", "text": "Today is Monday; cwd /repo."},
]


def anthropic_turns(transactions: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the tests."}]
    for n in range(transactions):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running step {n}."},
                    {"type": "tool_use", "id": f"t{n}", "name": "sh", "input": {"n": n}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"ok {n}"}],
            }
        )
    return messages


def openai_turns(transactions: int, parallel: int = 3) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the tests."},
    ]
    for n in range(transactions):
        calls = [
            {"id": f"c{n}_{k}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            for k in range(parallel)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": call["id"], "content": f"ok {n}"} for call in calls
        ]
    return messages


def positions(request: dict[str, Any]) -> list[str]:
    return [where for where, _ in marker_positions(request)]


def test_anthropic_native_route_uses_the_top_level_marker() -> None:
    request = {"model": "m", "system": SYSTEM, "messages": anthropic_turns(4)}
    out = apply_tool_turns(request, ttl="5m", native=True, automatic=True)
    assert out["cache_control"] == {"type": "ephemeral"}
    # Stable part and end of the system prompt, then the newest completed transaction before
    # the tail (the automatic marker covers the last one).
    assert positions(out) == ["system[0]", "system[1]", "messages[6].content[0]"]
    assert marker_problems(out) == []


def test_without_the_automatic_marker_the_tail_is_marked_explicitly() -> None:
    request = {"model": "m", "system": SYSTEM, "messages": anthropic_turns(4)}
    out = apply_tool_turns(request, ttl="1h", native=True)
    assert "cache_control" not in out
    assert positions(out) == [
        "system[0]",
        "system[1]",
        "messages[6].content[0]",
        "messages[8].content[0]",
    ]
    assert all(marker.get("ttl") == "1h" for _, marker in marker_positions(out))


def test_openai_parallel_results_get_one_marker_per_transaction() -> None:
    request = {"model": "m", "messages": openai_turns(3)}
    out = apply_tool_turns(request, ttl="5m", native=True)
    # system, two transaction ends (the last result of each group), the tail.
    assert positions(out) == [
        "messages[0].content[0]",
        "messages[5]",
        "messages[9]",
        "messages[13]",
    ]


def test_envelope_routes_never_mark_tool_messages() -> None:
    request = {"model": "m", "messages": openai_turns(3)}
    out = apply_tool_turns(request, ttl="5m", native=False)
    for where in positions(out):
        index = int(where.split("[")[1].split("]")[0])
        assert out["messages"][index]["role"] != "tool"
    # The assistant message after each completed transaction carries its end.
    assert "messages[6]" in positions(out) or "messages[10]" in positions(out)


def test_stable_ttl_first_and_host_tool_markers_are_kept() -> None:
    tools = [
        {"name": "a", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
        {"name": "b", "input_schema": {"type": "object"}},
    ]
    request = {"model": "m", "system": SYSTEM, "tools": tools, "messages": anthropic_turns(4)}
    out = apply_tool_turns(request, ttl="5m", stable_ttl="1h", native=True, automatic=True)
    # The host's 5m tool marker comes first, so nothing after it may be 1h.
    assert out["tools"] is tools
    assert all("ttl" not in marker for _, marker in marker_positions(out))
    assert len(marker_positions(out)) + 1 <= MAX_BREAKPOINTS
    assert marker_problems(out) == []
    hourly = [{**tools[0], "cache_control": {"type": "ephemeral", "ttl": "1h"}}, tools[1]]
    out = apply_tool_turns(
        {**request, "tools": hourly}, ttl="5m", stable_ttl="1h", native=True, automatic=True
    )
    ttls = [marker.get("ttl", "5m") for _, marker in marker_positions(out)]
    assert ttls == ["1h", "1h", "5m"] and marker_problems(out) == []  # tools, system, turn


def test_too_many_host_tool_markers_are_trimmed_to_leave_the_tail() -> None:
    tools = [
        {
            "name": f"t{k}",
            "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"},
        }
        for k in range(6)
    ]
    request = {"model": "m", "tools": tools, "messages": anthropic_turns(2)}
    out = apply_tool_turns(request, ttl="5m", native=True, automatic=True)
    kept = [t for t in out["tools"] if "cache_control" in t]
    assert [t["name"] for t in kept] == ["t3", "t4", "t5"]
    assert "cache_control" in out and marker_problems(out) == []
    assert tools[0]["cache_control"] == {"type": "ephemeral"}  # the caller's tool untouched


def test_idempotent_and_copy_on_write() -> None:
    messages = anthropic_turns(5)
    snapshot = copy.deepcopy(messages)
    request = {"model": "m", "system": SYSTEM, "messages": messages}
    once = apply_tool_turns(request, ttl="5m", native=True, automatic=True)
    assert apply_tool_turns(once, ttl="5m", native=True, automatic=True) == once
    assert messages == snapshot
    changed = [
        i for i, (a, b) in enumerate(zip(messages, once["messages"], strict=True)) if a is not b
    ]
    assert len(changed) <= 2


@pytest.mark.parametrize("automatic", [False, True])
@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("host_tool_markers", [0, 1, 5])
def test_the_count_reported_is_the_markers_the_request_carries(
    automatic: bool, native: bool, host_tool_markers: int
) -> None:
    marker = {"cache_control": {"type": "ephemeral"}}
    tools = [
        {
            "name": f"t{k}",
            "input_schema": {"type": "object"},
            **(marker if k < host_tool_markers else {}),
        }
        for k in range(6)
    ]
    requests: list[dict[str, Any]] = [
        {"model": "m", "system": SYSTEM, "tools": tools, "messages": anthropic_turns(4)},
        {"model": "m", "tools": tools, "messages": anthropic_turns(1)},
        {"model": "m", "messages": openai_turns(3)},
        {"model": "m", "messages": []},
    ]
    for request in requests:
        marked = mark_tool_turns(request, ttl="5m", native=native, automatic=automatic)
        assert marked.breakpoints == len(marker_positions(marked.request))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ttl": "2h"}, "cache ttl must be one of"),
        ({"ttl": "1h", "stable_ttl": "5m"}, "would put a 5m breakpoint before 1h ones"),
        ({"ttl": "5m", "fmt": "gemini"}, "fmt must be"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply_tool_turns({"messages": []}, native=True, **kwargs)


def test_selected_by_name_and_listed() -> None:
    kernel = ctxengine.load({"prompt_caching": {"strategy": "tool_turns"}}, env={})
    assert "tool_turns" in kernel.plugin_names
    assert "strategy tool_turns" in kernel.status_lines()[1]
    request = kernel.session("s").prepare(
        {"model": "m", "system": SYSTEM, "messages": anthropic_turns(3)}
    )
    assert request["cache_control"] == {"type": "ephemeral"}  # native Anthropic API
    listed = subprocess.run(
        [sys.executable, "-m", "ctxengine", "engines"], capture_output=True, text=True, check=True
    )
    line = next(line for line in listed.stdout.splitlines() if "tool_turns" in line)
    assert "cache_strategy" in line or "cache strategy" in line
