"""The OpenAI Responses API (``POST /v1/responses``) as :class:`~ctxengine_fakeapi.FakeAPI`
serves it: request checks and the response body.

The checks are the main reasons the real API answers ``400``: a missing ``model``, an ``input``
that is neither a string nor a list of items, items of unknown types or roles, function tools
without a ``name``, a ``function_call_output`` whose ``call_id`` no earlier ``function_call`` in
the same input made (unless ``previous_response_id`` points at stored state), a ``function_call``
left without its output before a new user turn, and ``cache_control`` keys (which the Responses
API does not take). Like the rest of the fake, they are written independently of
:mod:`ctxengine.messages`.

Scripted replies are Anthropic content blocks (see :meth:`FakeAPI.reply_blocks`); here ``text``
blocks become one assistant ``message`` item, ``thinking`` a ``reasoning`` item with a summary,
and each ``tool_use`` a ``function_call`` item whose ``call_id`` is the block's ``id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxengine import estimate_tokens

_ROLES = ("user", "assistant", "system", "developer")
_CONTENT_TYPES = frozenset(
    {"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"}
)
# Item types a stateless input may carry that these checks do not look into.
_OTHER_ITEMS = frozenset(
    {
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "web_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "item_reference",
        "compaction",
    }
)


def check_responses_request(body: Any) -> list[str]:
    """Every reason found for the Responses API to reject ``body``; empty when it is valid."""
    if not isinstance(body, Mapping):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("Missing required parameter: 'model'.")
    _check_tools(body.get("tools"), problems)
    items = body.get("input")
    if items is None and body.get("previous_response_id") is None:
        problems.append("Missing required parameter: 'input'.")
    elif isinstance(items, list):
        _check_items(items, problems, stateful=body.get("previous_response_id") is not None)
    elif items is not None and not isinstance(items, str):
        problems.append("Invalid type for 'input': expected a string or an array of items.")
    if "cache_control" in json.dumps(body):
        problems.append("Unknown parameter: 'cache_control'.")
    return problems


def _check_tools(tools: Any, problems: list[str]) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        problems.append("Invalid type for 'tools': expected an array.")
        return
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            problems.append(f"Invalid type for 'tools[{i}]': expected an object.")
        elif tool.get("type") == "function":
            if not isinstance(tool.get("name"), str) or not tool.get("name"):
                problems.append(f"Missing required parameter: 'tools[{i}].name'.")
            if "function" in tool:
                problems.append(
                    f"Unknown parameter: 'tools[{i}].function' (Responses function tools are "
                    "flat: name, description, parameters)."
                )


class _Calls:
    """The function calls of an input so far: every call id seen, and those still waiting for
    their output (``stateful``: the earlier calls are on the server, so an output may answer
    one this input does not hold)."""

    def __init__(self, *, stateful: bool) -> None:
        self.open: list[str] = []
        self.seen: set[str] = set()
        self.stateful = stateful


def _check_message_item(
    item: Mapping[str, Any], where: str, problems: list[str], calls: _Calls
) -> None:
    role = item.get("role")
    if role not in _ROLES:
        problems.append(
            f"Invalid value: {role!r}. Supported values are: 'user', 'assistant', "
            f"'system' and 'developer'. ({where}.role)"
        )
    _check_content(item.get("content"), where, problems)
    if role == "user" and calls.open:
        problems.append(f"No tool output found for function call {calls.open[0]} (before {where}).")
        calls.open.clear()


def _check_call_item(
    item: Mapping[str, Any], where: str, problems: list[str], calls: _Calls
) -> None:
    call_id = item.get("call_id")
    for key in ("call_id", "name", "arguments"):
        if not isinstance(item.get(key), str):
            problems.append(f"Missing required parameter: '{where}.{key}'.")
    if isinstance(call_id, str):
        calls.open.append(call_id)
        calls.seen.add(call_id)


def _check_output_item(
    item: Mapping[str, Any], where: str, problems: list[str], calls: _Calls
) -> None:
    call_id = item.get("call_id")
    if not isinstance(item.get("output"), (str, list)):
        problems.append(f"Missing required parameter: '{where}.output'.")
    if call_id in calls.open:
        calls.open.remove(call_id)
    elif call_id not in calls.seen and not calls.stateful:
        problems.append(
            f"No tool call found for function call output with call_id {call_id}. ({where})"
        )


def _check_reasoning_item(
    item: Mapping[str, Any], where: str, problems: list[str], calls: _Calls
) -> None:
    if not isinstance(item.get("summary"), list):
        problems.append(f"Missing required parameter: '{where}.summary'.")


_ITEM_CHECKS = {
    "message": _check_message_item,
    "function_call": _check_call_item,
    "function_call_output": _check_output_item,
    "reasoning": _check_reasoning_item,
}
"""What each input item type must carry (other known types are not checked)."""


def _check_items(items: Sequence[Any], problems: list[str], *, stateful: bool) -> None:
    calls = _Calls(stateful=stateful)
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"Invalid type for '{where}': expected an object.")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        check = _ITEM_CHECKS.get(kind) if isinstance(kind, str) else None
        if check is not None:
            check(item, where, problems, calls)
        elif kind not in _OTHER_ITEMS:
            problems.append(f"Invalid value: {kind!r} for '{where}.type'.")


def _check_content(content: Any, where: str, problems: list[str]) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        problems.append(f"Invalid type for '{where}.content': expected a string or an array.")
        return
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in _CONTENT_TYPES:
            problems.append(f"Invalid value: {kind!r} for '{where}.content[{j}].type'.")


def _input_text(body: Mapping[str, Any]) -> str:
    """Everything the request sends, as JSON text (for the rough token count)."""
    return json.dumps(
        [body.get("instructions"), body.get("input"), body.get("tools")], ensure_ascii=False
    )


def responses_body(
    body: Mapping[str, Any], blocks: Sequence[Mapping[str, Any]], number: int
) -> dict[str, Any]:
    """The ``Response`` object answering ``body`` with ``blocks``; ``number`` makes the ids."""
    output: list[dict[str, Any]] = []
    reasoning = "".join(str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking")
    if reasoning:
        output.append(
            {
                "type": "reasoning",
                "id": f"rs_fake{number:04d}",
                "summary": [{"type": "summary_text", "text": reasoning}],
            }
        )
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    if text:
        output.append(
            {
                "type": "message",
                "id": f"msg_fake{number:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for k, block in enumerate(b for b in blocks if b.get("type") == "tool_use"):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_fake{number:04d}_{k}",
                "call_id": str(block.get("id")),
                "name": str(block.get("name")),
                "arguments": json.dumps(block.get("input") or {}),
                "status": "completed",
            }
        )
    prompt = estimate_tokens(_input_text(body))
    arguments = "".join(str(o["arguments"]) for o in output if o["type"] == "function_call")
    completion = estimate_tokens(text + reasoning + arguments)
    return {
        "id": f"resp_fake{number:04d}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": body.get("model"),
        "instructions": body.get("instructions"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "previous_response_id": body.get("previous_response_id"),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": estimate_tokens(reasoning)},
            "total_tokens": prompt + completion,
        },
    }
