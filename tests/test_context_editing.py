"""Anthropic's context editing in prepared requests: the ``context_editing`` settings, the
helpers of ``ctxengine.messages`` behind them, and every bundled session prepared with clearing
on (valid for the API, no breakpoint where the server may clear)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

import ctxengine
from ctxengine import read_conversations
from ctxengine._messages.editing import (
    clearable_blocks,
    edit_problems,
    markers_kept_off_cleared,
    request_betas,
    with_edits,
)
from ctxengine._messages.markers import marked_items
from ctxengine.messages import marker_positions, request_edits, to_anthropic, validate
from ctxengine.testing.transcripts import transcript_files
from ctxengine_caching.strategy import apply_system_and_3
from ctxengine_fakeapi import FakeAPI, check_anthropic_request
from ctxengine_fakeapi.native import check_native

EPH = {"type": "ephemeral"}
CLEAR = {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 1}}


def use(call_id: str, name: str = "read") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"path": call_id}}


def result(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": f"out {call_id}", **extra}


def tool_chat(*names: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, name in enumerate(names):
        messages.append({"role": "assistant", "content": [use(f"c{i}", name)]})
        messages.append({"role": "user", "content": [result(f"c{i}")]})
    return messages


# --- the SDK helpers ---------------------------------------------------------------------------


def test_with_edits_uses_extra_body_and_the_beta_header_for_plain_requests() -> None:
    request = {"model": "m", "messages": [], "extra_headers": {"anthropic-beta": "x-1"}}
    out = with_edits(request, [CLEAR])
    assert out["extra_body"] == {"context_management": {"edits": [CLEAR]}}
    assert out["extra_headers"] == {"anthropic-beta": "x-1,context-management-2025-06-27"}
    assert request == {"model": "m", "messages": [], "extra_headers": {"anthropic-beta": "x-1"}}
    assert request_edits(out) == [CLEAR]
    assert request_betas(out) == {"x-1", "context-management-2025-06-27"}


def test_with_edits_keeps_the_beta_clients_own_arguments_and_never_duplicates() -> None:
    own = {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 5}}
    request = {
        "messages": [],
        "betas": ["context-management-2025-06-27"],
        "context_management": {"edits": [own]},
    }
    compact = {"type": "compact_20260112"}
    out = with_edits(request, [CLEAR, compact])
    assert out["context_management"] == {"edits": [own, compact]}
    assert out["betas"] == ["context-management-2025-06-27", "compact-2026-01-12"]
    assert "extra_body" not in out and "extra_headers" not in out


def test_clearable_blocks_cover_older_tool_uses_except_the_kept_and_excluded() -> None:
    messages = tool_chat("read", "grep", "read", "read")
    edit = {**CLEAR, "exclude_tools": ["grep"], "clear_tool_inputs": True}
    # Four tool uses, the last one kept; grep (the second) is excluded.
    assert clearable_blocks(messages, [edit]) == {(1, 0), (2, 0), (5, 0), (6, 0)}
    assert clearable_blocks(messages, [{"type": "clear_tool_uses_20250919"}]) == {(2, 0)}


def test_clearable_thinking_spares_the_last_turns() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "1"}]},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "2"}]},
    ]
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    assert clearable_blocks(messages, [edit]) == {(1, 0)}
    assert clearable_blocks(messages, [{**edit, "keep": "all"}]) == set()


def test_markers_move_off_cleared_blocks_to_the_nearest_safe_block() -> None:
    messages = tool_chat("read", "read", "read")
    messages[2] = {
        "role": "user",
        "content": [result("c0", cache_control=EPH), {"type": "text", "text": "note"}],
    }
    messages[4] = {"role": "user", "content": [result("c1", cache_control=EPH)]}
    request = {"messages": messages, "context_management": {"edits": [CLEAR]}}
    out = markers_kept_off_cleared(request)
    positions = [where for where, _ in marker_positions(out)]
    # c1's marker goes back to c1's tool_use (not cleared without clear_tool_inputs); c0's
    # marker goes back to its own call too: nothing between them is marked.
    assert positions == ["messages[1].content[0]", "messages[3].content[0]"]
    assert (
        validate(out["messages"], "anthropic", context_management=request["context_management"])
        == []
    )
    assert messages[4]["content"][0]["cache_control"] == EPH  # the input is untouched


def test_a_marker_with_no_safe_block_before_it_is_dropped() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": EPH}]},
        {"role": "assistant", "content": [use("c0")]},
        {"role": "user", "content": [result("c0", cache_control=EPH)]},
        {"role": "assistant", "content": [use("c1")]},
        {"role": "user", "content": [result("c1")]},
    ]
    edit = {**CLEAR, "clear_tool_inputs": True}
    out = markers_kept_off_cleared({"messages": messages, "context_management": {"edits": [edit]}})
    # c0's use is clearable too, and the block before it is marked already.
    assert [where for where, _ in marker_positions(out)] == ["messages[0].content[0]"]


def test_edit_problems_name_the_edit_and_the_rule() -> None:
    assert edit_problems(
        [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}]
    ) == ["context_management.edits[1]: clear_thinking_20251015 must be the first edit"]
    assert edit_problems([{**CLEAR, "keep": 3}]) == [
        "context_management.edits[0].keep: must be {'type': 'tool_uses', 'value': <int >= 0>}, "
        "got 3"
    ]
    assert edit_problems("all") == ["context_management.edits must be a list, got str"]


# --- the kernel's settings ----------------------------------------------------------------------


def _kernel(**editing: Any) -> ctxengine.Kernel:
    return ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 200_000},
            "auxiliary": {"compression": {"provider": "extractive"}},
            "context_editing": {"clear_tool_uses": True, **editing},
        },
        env={},
    )


def test_prepare_adds_the_configured_clearing() -> None:
    with _kernel(
        trigger=0.25, keep_tool_uses=2, clear_at_least_tokens=5000, exclude_tools=["grep"]
    ) as k:
        prepared = k.session("s").prepare({"model": "m", "messages": tool_chat("read")})
    assert request_edits(prepared) == [
        {
            "type": "clear_tool_uses_20250919",
            "keep": {"type": "tool_uses", "value": 2},
            "trigger": {"type": "input_tokens", "value": 50_000},
            "clear_at_least": {"type": "input_tokens", "value": 5000},
            "exclude_tools": ["grep"],
        }
    ]
    assert prepared["extra_headers"] == {"anthropic-beta": "context-management-2025-06-27"}


def test_thinking_is_cleared_only_when_the_request_thinks() -> None:
    with _kernel(clear_thinking=True, keep_thinking_turns=2) as k:
        session = k.session("s")
        plain = session.prepare({"model": "m", "messages": tool_chat("read")})
        thinking = session.prepare(
            {
                "model": "m",
                "messages": tool_chat("read"),
                "thinking": {"type": "enabled", "budget_tokens": 2048},
            }
        )
    assert [e["type"] for e in request_edits(plain)] == ["clear_tool_uses_20250919"]
    assert [e["type"] for e in request_edits(thinking)] == [
        "clear_thinking_20251015",
        "clear_tool_uses_20250919",
    ]


def test_no_edits_on_routes_that_do_not_take_them_or_for_openai_requests() -> None:
    config = {
        "model": {"name": "claude-sonnet-4-6", "base_url": "https://openrouter.ai/api/v1"},
        "context_editing": {"clear_tool_uses": True},
    }
    with ctxengine.load(config, env={}) as k:
        assert request_edits(k.session("s").prepare({"messages": tool_chat("read")})) == []
    with _kernel() as k:
        openai_request = {
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        }
        prepared = k.session("s").prepare(openai_request)
    assert request_edits(prepared) == []
    assert "extra_headers" not in prepared


def test_a_request_opening_with_a_compaction_block_declares_it() -> None:
    block = {"type": "compaction", "content": "summary", "encrypted_content": "e"}
    messages = [{"role": "assistant", "content": [block]}, {"role": "user", "content": "next"}]
    with ctxengine.load({"model": {"name": "claude-sonnet-4-6"}}, env={}) as k:
        prepared = k.session("s").prepare({"model": "m", "system": "s", "messages": messages})
    assert request_edits(prepared) == [
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 200_000}}
    ]
    assert request_betas(prepared) == {"compact-2026-01-12"}
    # The block itself is never changed (a breakpoint may go on it).
    assert prepared["messages"][0]["content"][0]["encrypted_content"] == "e"


# --- every bundled session ----------------------------------------------------------------------


def _conflicts_without_composition(request: dict[str, Any], edits: list[Any]) -> int:
    """Breakpoints ``system_and_3`` alone would put on blocks the edits may clear."""
    marked = apply_system_and_3(request, ttl="5m", native=True)
    cleared = clearable_blocks(marked["messages"], edits)
    found = 0
    for where, index, _ in marked_items(marked):
        prefix = f"messages[{index}].content["
        if index is not None and where.startswith(prefix):
            block = int(where[len(prefix) :].split("]", 1)[0])
            found += (index, block) in cleared
    return found


FILES = transcript_files()


def _anthropic_sessions(path: Path) -> list[tuple[Any, list[dict[str, Any]]]]:
    sessions = []
    for record in read_conversations(path):
        if record.format == "anthropic":
            sessions.append((record.system, record.messages))
        else:
            system, messages = to_anthropic(record.messages)
            sessions.append((system, messages))
    return sessions


THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_bundled_session_prepares_valid_requests_with_clearing(path: Path) -> None:
    moved = 0
    thought = 0
    settings = {"keep_tool_uses": 1, "clear_tool_inputs": True, "trigger": 0.1}
    with _kernel(**settings, clear_thinking=True, keep_thinking_turns=1) as k:
        for n, (system, messages) in enumerate(_anthropic_sessions(path)):
            session = k.session(f"s{n}")
            for end in range(1, len(messages) + 1):
                if messages[end - 1].get("role") != "user":
                    continue
                request: dict[str, Any] = {
                    "model": "claude-sonnet-4-6",
                    "max_tokens": 2048,
                    "messages": messages[:end],
                }
                if system is not None:
                    request["system"] = system
                # Every other request thinks, so both edits and tool clearing alone are sent.
                thinks = end % 4 == 1
                if thinks:
                    request["thinking"] = THINKING
                prepared = session.prepare(request)
                edits = request_edits(prepared)
                kinds = ["clear_tool_uses_20250919"]
                if thinks:
                    kinds.insert(0, "clear_thinking_20251015")
                assert [e["type"] for e in edits] == kinds
                if thinks and clearable_blocks(prepared["messages"], edits[:1]):
                    thought += 1
                management = {"edits": edits}
                problems = validate(
                    prepared["messages"],
                    "anthropic",
                    system=prepared.get("system"),
                    context_management=management,
                )
                assert problems == [], (end, problems)
                # The fake API (the oracle) finds nothing the recording does not have already
                # (some recorded turns hold whitespace-only text blocks the API refuses).
                body = {k2: v for k2, v in prepared.items() if not k2.startswith("extra_")}
                body["context_management"] = management
                headers = {"anthropic-beta": prepared["extra_headers"]["anthropic-beta"]}
                assert set(check_anthropic_request(body)) <= set(check_anthropic_request(request))
                assert check_native(body, headers, lambda model: True) == []
                moved += _conflicts_without_composition(request, edits)
                # The session reads each message's blocks from its memo; the markers end up
                # where the stateless composition of the same steps puts them.
                alone = apply_system_and_3(request, ttl="5m", native=True)
                expected = markers_kept_off_cleared({**alone, "context_management": management})
                assert marker_positions(prepared) == marker_positions(expected), end
    # The composition was needed: the strategy alone would have marked blocks that get cleared.
    assert moved > 0
    if path.name.startswith("claude_code_spotter.anthropic"):
        assert thought > 0  # its recorded thinking blocks were clearable


def test_an_in_place_edit_changes_what_the_session_keeps_markers_off() -> None:
    # The session remembers each message's clearable blocks with its memo entry: a block edited
    # in place is a new content, read again. Here everything but the opening turn may be
    # cleared, so the breakpoints have nowhere to go; once an older result is edited into plain
    # text in place (a message the strategy does not mark), it is the safe block they move to.
    edit = {
        "type": "clear_tool_uses_20250919",
        "keep": {"type": "tool_uses", "value": 0},
        "clear_tool_inputs": True,
    }
    messages = tool_chat("read", "read", "read")
    request = {"model": "claude-sonnet-4-6", "messages": messages}
    with _kernel() as k:
        session = k.session("s")
        first = session.prepare({**request, "context_management": {"edits": [edit]}})
        assert marker_positions(first) == []
        messages[2]["content"][0] = {"type": "text", "text": "plain"}
        second = session.prepare({**request, "context_management": {"edits": [edit]}})
    assert marker_positions(second) == [("messages[2].content[0]", EPH)]
    assert second["messages"] == markers_kept_off_cleared(second)["messages"]


def test_the_hosts_own_edits_keep_markers_off_what_they_clear() -> None:
    # No context_editing configured: the edits are the host's, and still no breakpoint may sit
    # on a block they clear (the server would drop it with the block).
    edit = {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 0}}
    messages = tool_chat("read", "read", "read")
    request = {"model": "claude-sonnet-4-6", "messages": messages}
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6"},
            "auxiliary": {"compression": {"provider": "extractive"}},
        },
        env={},
    )
    with kernel:
        plain = kernel.session("a").prepare(request)
        edited = kernel.session("b").prepare({**request, "context_management": {"edits": [edit]}})
    assert ("messages[6].content[0]", EPH) in marker_positions(plain)  # a tool result
    cleared = clearable_blocks(edited["messages"], [edit])
    assert cleared and not any(
        (int(where[9 : where.index("]")]), int(where.rsplit("[", 1)[1][:-1])) in cleared
        for where, _ in marker_positions(edited)
    )


def test_applied_edits_reach_the_usage_record() -> None:
    messages = tool_chat(*["read"] * 8)
    messages = [
        m
        if m["role"] != "user" or isinstance(m["content"], str)
        else {"role": "user", "content": [{**m["content"][0], "content": "x" * 4000}]}
        for m in messages
    ]
    with FakeAPI() as api, _kernel(keep_tool_uses=2, trigger=0.01) as k:
        session = k.session("s")
        client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
        request = session.prepare(
            {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": messages}
        )
        response = client.messages.create(**request)
        usage = session.update_usage(response)
    assert usage.cleared_tool_uses == 6
    assert usage.cleared_input_tokens > 5000
    assert session.cache_stats.usage.cleared_tool_uses == 6
