"""Request checks of :class:`~ctxengine_fakeapi.FakeAPI`: every reason the Anthropic Messages
API (:func:`check_anthropic_request`) or an OpenAI-compatible chat completions server
(:func:`check_openai_request`) would reject a request body.

The checks are written here, independently of :mod:`ctxengine.messages`, on purpose: the fake is
the oracle those helpers are tested against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ctxengine.messages import validate

_USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCKS = frozenset(
    {
        "text",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "thinking",
        "redacted_thinking",
        "compaction",
    }
)
_ALL_BLOCKS = sorted(_USER_BLOCKS | _ASSISTANT_BLOCKS)
_NO_CACHE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def check_anthropic_request(body: Any, *, endpoint: str = "messages") -> list[str]:
    """Every reason the Anthropic API would reject this request body, in the API's wording style.

    ``endpoint="count_tokens"`` skips ``max_tokens``. An empty list means the request is valid.
    """
    if not isinstance(body, Mapping):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    breakpoints: list[tuple[str, str]] = []
    model = body.get("model")
    if "model" not in body:
        problems.append("model: Field required")
    elif not isinstance(model, str) or not model:
        problems.append("model: Input should be a non-empty string")
    if endpoint == "messages":
        max_tokens = body.get("max_tokens")
        if "max_tokens" not in body:
            problems.append("max_tokens: Field required")
        elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            problems.append("max_tokens: Input should be an integer greater than or equal to 1")
    _check_tools(body.get("tools"), problems, breakpoints)
    _check_system(body.get("system"), problems, breakpoints)
    messages = body.get("messages")
    if "messages" not in body:
        problems.append("messages: Field required")
    elif not isinstance(messages, list):
        problems.append("messages: Input should be a valid list")
    elif not messages:
        problems.append("messages: at least one message is required")
    else:
        _check_messages(messages, problems, breakpoints)
    # Top-level automatic caching marks the last cacheable block: last in the TTL order.
    _check_cache_control(body, "request", problems, breakpoints)
    _check_diagnostics(body, problems)
    if len(breakpoints) > 4:
        problems.append(
            f"A maximum of 4 blocks with cache_control may be provided. Found {len(breakpoints)}."
        )
    seen_5m = False
    for where, ttl in breakpoints:
        if ttl == "5m":
            seen_5m = True
        elif seen_5m:
            problems.append(
                f"{where}.cache_control: a ttl='1h' cache_control block must not come after "
                "a ttl='5m' cache_control block (order: tools, system, messages)"
            )
    if not problems:
        problems.extend(_shared_validator_problems(body))
    return problems


def _check_diagnostics(body: Mapping[str, Any], problems: list[str]) -> None:
    if "diagnostics" not in body or body["diagnostics"] is None:
        return
    diagnostics = body["diagnostics"]
    if not isinstance(diagnostics, Mapping):
        problems.append("diagnostics: Input should be an object")
        return
    unknown = sorted(set(diagnostics) - {"previous_message_id"})
    if unknown:
        problems.append(f"diagnostics.{unknown[0]}: Extra inputs are not permitted")
    previous = diagnostics.get("previous_message_id")
    if previous is not None and not isinstance(previous, str):
        problems.append("diagnostics.previous_message_id: Input should be a valid string")


def _shared_validator_problems(body: Mapping[str, Any]) -> list[str]:
    """What :func:`ctxengine.messages.validate` finds in a request the checks above accept.

    The fake's own checks stay the oracle; the library validator is consulted as well, so a
    rule it enforces that the fake lacks cannot go unnoticed (the 400 names the rule id).
    """
    tools = body.get("tools")
    found = validate(
        body["messages"],
        "anthropic",
        system=body.get("system"),
        tools=tools if isinstance(tools, list) else None,
        allow_pending_tool_call=False,
        cache_control=body.get("cache_control"),
        context_management=body.get("context_management"),
    )
    return [f"{p.message} [ctxengine.messages rule {p.rule}]" for p in found]


def _check_cache_control(
    obj: Mapping[str, Any],
    where: str,
    problems: list[str],
    breakpoints: list[tuple[str, str]],
    *,
    empty_text: bool = False,
) -> None:
    if "cache_control" not in obj or obj["cache_control"] is None:
        return
    marker = obj["cache_control"]
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        problems.append(f"{where}.cache_control.type: Input should be 'ephemeral'")
        return
    ttl = marker.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        problems.append(f"{where}.cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
        return
    if empty_text:
        problems.append(f"{where}: cache_control cannot be set for empty text blocks")
    breakpoints.append((where, str(ttl)))


def _check_tools(tools: Any, problems: list[str], breakpoints: list[tuple[str, str]]) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        problems.append("tools: Input should be a valid list")
        return
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, Mapping):
            problems.append(f"{where}: Input should be an object")
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if tool.get("type") in (None, "custom") and not isinstance(
            tool.get("input_schema"), Mapping
        ):
            problems.append(f"{where}.input_schema: Field required")
        _check_cache_control(tool, where, problems, breakpoints)


def _check_system(system: Any, problems: list[str], breakpoints: list[tuple[str, str]]) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        problems.append("system: Input should be a valid string or a list of text blocks")
        return
    for i, block in enumerate(system):
        where = f"system.{i}"
        if not isinstance(block, Mapping) or block.get("type") != "text":
            problems.append(f"{where}.type: Input should be 'text'")
            continue
        text = block.get("text")
        if not isinstance(text, str):
            problems.append(f"{where}.text: Input should be a valid string")
            continue
        empty = not text.strip()
        if empty:
            problems.append(f"{where}.text: system text blocks must contain non-whitespace text")
        _check_cache_control(block, where, problems, breakpoints, empty_text=empty)


def _check_messages(
    messages: list[Any], problems: list[str], breakpoints: list[tuple[str, str]]
) -> None:
    previous_role: object = None
    seen_tool_ids: set[str] = set()
    last = len(messages) - 1
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: Input should be an object")
            previous_role = None
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            hint = " (use the top-level `system` parameter)" if role == "system" else ""
            problems.append(f"{where}.role: Input should be 'user' or 'assistant'{hint}")
        elif i == 0 and role != "user" and not _opens_with_compaction(message):
            problems.append(f"{where}.role: the first message must use the 'user' role")
        elif role == previous_role:
            problems.append(
                f"{where}.role: roles must alternate between 'user' and 'assistant', "
                f"but messages.{i - 1} is also '{role}'"
            )
        previous_role = role
        content = message.get("content")
        final_assistant = i == last and role == "assistant"
        if isinstance(content, str):
            if not content.strip() and not final_assistant:
                problems.append(
                    f"{where}.content: all messages must have non-empty content except for the "
                    "optional final assistant message"
                )
            continue
        if not isinstance(content, list):
            problems.append(f"{where}.content: Input should be a string or a list of blocks")
            continue
        if not content and not final_assistant:
            problems.append(
                f"{where}.content: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        seen_other = False
        for j, block in enumerate(content):
            _check_block(block, f"{where}.content.{j}", str(role), problems, breakpoints)
            is_result = isinstance(block, Mapping) and block.get("type") == "tool_result"
            if is_result and seen_other:
                problems.append(
                    f"{where}.content.{j}: `tool_result` blocks must come first in the user "
                    "message, before any other content"
                )
            seen_other = seen_other or not is_result
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                tool_id = block.get("id")
                if isinstance(tool_id, str) and tool_id in seen_tool_ids:
                    problems.append(
                        f"{where}.content.{j}: `tool_use` ids must be unique: {tool_id}"
                    )
                if isinstance(tool_id, str):
                    seen_tool_ids.add(tool_id)
    _check_tool_pairing(messages, problems)


def _opens_with_compaction(message: Mapping[str, Any]) -> bool:
    """A compaction block opening the first message stands for the conversation before it."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, list)
        and bool(content)
        and isinstance(content[0], Mapping)
        and content[0].get("type") == "compaction"
    )


def _block_ids(message: Any, block_type: str, key: str) -> list[tuple[int, str]]:
    if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
        return []
    return [
        (j, str(block.get(key)))
        for j, block in enumerate(message["content"])
        if isinstance(block, Mapping) and block.get("type") == block_type
    ]


def _check_tool_pairing(messages: list[Any], problems: list[str]) -> None:
    for i, message in enumerate(messages):
        calls = _block_ids(message, "tool_use", "id")
        if calls:
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = {rid for _, rid in _block_ids(following, "tool_result", "tool_use_id")}
            missing = [cid for _, cid in calls if cid not in answered]
            if missing:
                problems.append(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        results = _block_ids(message, "tool_result", "tool_use_id")
        if results:
            previous = messages[i - 1] if i > 0 else None
            offered = {cid for _, cid in _block_ids(previous, "tool_use", "id")}
            seen: set[str] = set()
            for j, rid in results:
                if rid in seen:
                    problems.append(
                        f"messages.{i}.content.{j}: duplicate `tool_result` for `tool_use_id` "
                        f"{rid}; each `tool_use` block gets exactly one `tool_result` block."
                    )
                seen.add(rid)
                if rid not in offered:
                    problems.append(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {rid}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )


def _check_block(
    block: Any,
    where: str,
    role: str,
    problems: list[str],
    breakpoints: list[tuple[str, str]],
) -> None:
    if not isinstance(block, Mapping):
        problems.append(f"{where}: Input should be an object")
        return
    kind = block.get("type")
    if kind not in _USER_BLOCKS and kind not in _ASSISTANT_BLOCKS:
        allowed = ", ".join(f"'{t}'" for t in _ALL_BLOCKS)
        problems.append(
            f"{where}.type: Input tag {kind!r} found using 'type' does not match any of the "
            f"expected tags: {allowed}"
        )
        return
    allowed_here = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    if role in ("user", "assistant") and kind not in allowed_here:
        problems.append(f"{where}: `{kind}` blocks are not allowed in `{role}` messages")
    if kind == "tool_result":
        _check_tool_result(block, where, problems, breakpoints)
    else:
        _BLOCK_CHECKS.get(str(kind), _no_fields)(block, where, problems)
    if kind in _NO_CACHE_BLOCKS:
        if block.get("cache_control") is not None:
            problems.append(f"{where}: cache_control cannot be set for {kind} blocks")
        return
    empty_text = kind == "text" and isinstance(block.get("text"), str) and not block["text"].strip()
    _check_cache_control(block, where, problems, breakpoints, empty_text=empty_text)


def _no_fields(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    """A block type whose fields the fake does not check."""


def _check_text(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    text = block.get("text")
    if not isinstance(text, str):
        problems.append(f"{where}.text: Input should be a valid string")
    elif not text.strip():
        problems.append(f"{where}.text: text content blocks must contain non-whitespace text")


def _check_document(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    if not isinstance(block.get("source"), Mapping):
        problems.append(f"{where}.source: Field required")


def _check_tool_use(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    for key in ("id", "name"):
        value = block.get(key)
        if not isinstance(value, str) or not value:
            problems.append(f"{where}.{key}: Input should be a non-empty string")
    if not isinstance(block.get("input"), Mapping):
        problems.append(f"{where}.input: Input should be a valid dictionary")


def _check_thinking(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    for key in ("thinking", "signature"):
        if not isinstance(block.get(key), str):
            problems.append(f"{where}.{key}: Field required")


def _check_redacted_thinking(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    if not isinstance(block.get("data"), str):
        problems.append(f"{where}.data: Field required")


def _check_compaction(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    content = block.get("content")
    if content is not None and (not isinstance(content, str) or not content):
        problems.append(f"{where}.content: Input should be a non-empty string or null")
    for key in ("encrypted_content", "signature"):
        if block.get(key) is not None and not isinstance(block.get(key), str):
            problems.append(f"{where}.{key}: Input should be a valid string")


def _check_image_block(block: Mapping[str, Any], where: str, problems: list[str]) -> None:
    _check_image(block.get("source"), where, problems)


_BLOCK_CHECKS = {
    "text": _check_text,
    "image": _check_image_block,
    "document": _check_document,
    "tool_use": _check_tool_use,
    "server_tool_use": _check_tool_use,
    "thinking": _check_thinking,
    "redacted_thinking": _check_redacted_thinking,
    "compaction": _check_compaction,
}
"""The fields each block type must carry (``tool_result`` is checked with its inner blocks)."""


def _check_image(source: Any, where: str, problems: list[str]) -> None:
    if not isinstance(source, Mapping):
        problems.append(f"{where}.source: Field required")
        return
    kind = source.get("type")
    if kind == "base64":
        if source.get("media_type") not in _IMAGE_TYPES:
            allowed = ", ".join(f"'{t}'" for t in sorted(_IMAGE_TYPES))
            problems.append(f"{where}.source.media_type: Input should be {allowed}")
        if not isinstance(source.get("data"), str) or not source.get("data"):
            problems.append(f"{where}.source.data: Field required")
    elif kind == "url":
        if not isinstance(source.get("url"), str):
            problems.append(f"{where}.source.url: Field required")
    elif kind == "file":
        if not isinstance(source.get("file_id"), str):
            problems.append(f"{where}.source.file_id: Field required")
    else:
        problems.append(f"{where}.source.type: Input should be 'base64', 'url' or 'file'")


def _check_tool_result(
    block: Mapping[str, Any],
    where: str,
    problems: list[str],
    breakpoints: list[tuple[str, str]],
) -> None:
    if not isinstance(block.get("tool_use_id"), str) or not block.get("tool_use_id"):
        problems.append(f"{where}.tool_use_id: Field required")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        problems.append(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        problems.append(f"{where}.content: Input should be a string or a list of blocks")
        return
    for k, inner in enumerate(content):
        inner_where = f"{where}.content.{k}"
        if not isinstance(inner, Mapping) or inner.get("type") not in (
            "text",
            "image",
            "document",
            "search_result",
        ):
            problems.append(
                f"{inner_where}.type: tool_result content must be 'text', 'image', "
                "'document' or 'search_result' blocks"
            )
            continue
        _check_block(inner, inner_where, "user", problems, breakpoints)


def check_openai_request(body: Any) -> list[str]:
    """The main reasons an OpenAI-compatible server rejects a chat completions body."""
    if not isinstance(body, Mapping):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("'messages' must be a non-empty array")
        return problems
    open_calls: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            problems.append(f"messages[{i}]: must be an object")
            continue
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            problems.append(
                f"messages[{i}].role: Invalid value {role!r}; supported values are 'system', "
                "'developer', 'user', 'assistant', 'tool' and 'function'"
            )
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                problems.append(
                    f"messages[{i}].role: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            else:
                open_calls.remove(call_id)
            continue
        if open_calls:
            problems.append(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}"
            )
            open_calls = []
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    open_calls.append(str(call.get("id")))
    return problems
