"""Converting an OpenAI chat list to the Anthropic Messages format: :func:`to_anthropic`.

It returns new dicts and lists and never mutates its input, but may share unchanged leaf
objects (a text block, an ``input`` dict) with it, so treat its result as read-only or copy what
you change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxengine._messages.conversation import Message, SystemPrompt
from ctxengine._messages.errors import MessageFormatError
from ctxengine._messages.read import OPENAI_ROLES, openai_tool_calls

__all__ = ["to_anthropic"]


def _image_to_anthropic(part: dict[str, Any], where: str) -> dict[str, Any]:
    ref = part.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str):
        raise MessageFormatError(f"{where}: image_url part needs a 'url' string")
    if url.startswith("data:"):
        header, sep, data = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding != "base64" or not media_type:
            raise MessageFormatError(
                f"{where}: data URL images must look like 'data:<media type>;base64,<data>'"
            )
        source: dict[str, Any] = {"type": "base64", "media_type": media_type, "data": data}
    elif url.startswith(("http://", "https://")):
        source = {"type": "url", "url": url}
    else:
        raise MessageFormatError(
            f"{where}: image URL must be a data: URL or an http(s) URL, got {url[:40]!r}"
        )
    block: dict[str, Any] = {"type": "image", "source": source}
    if "cache_control" in part:
        block["cache_control"] = part["cache_control"]
    return block


def _parts_to_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """OpenAI content (str / None / parts) as Anthropic blocks; empty text is dropped."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise MessageFormatError(
            f"{where}: content must be a string, a list of parts or null, "
            f"got {type(content).__name__}"
        )
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise MessageFormatError(f"{where}.content[{j}]: a part must be a dict")
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                # Keep only the keys Anthropic accepts on a text block.
                blocks.append(
                    {k: v for k, v in part.items() if k in ("type", "text", "cache_control")}
                )
        elif kind == "image_url":
            blocks.append(_image_to_anthropic(part, f"{where}.content[{j}]"))
        elif kind in ("input_audio", "file", "refusal"):
            raise MessageFormatError(
                f"{where}.content[{j}]: part type {kind!r} has no Anthropic equivalent "
                "(allowed: text, image_url)"
            )
        else:
            blocks.append(part)  # already an Anthropic block (image with source, document, ...)
    return blocks


def _with_cache_marker(blocks: list[dict[str, Any]], marker: Any) -> None:
    """Move a message-level ``cache_control`` onto the last block (replacing that block)."""
    if blocks and "cache_control" not in blocks[-1]:
        blocks[-1] = {**blocks[-1], "cache_control": marker}


def _tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"_raw_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": arguments}


def _openai_message_blocks(msg: Message, role: str, where: str) -> list[dict[str, Any]]:
    if role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", "")}
        content = msg.get("content")
        if isinstance(content, list):
            result["content"] = _parts_to_blocks(content, where)
        else:
            result["content"] = content if isinstance(content, str) else ""
        blocks = [result]
    else:
        blocks = []
        reasoning = msg.get("reasoning_content")
        if role == "assistant" and isinstance(reasoning, str) and reasoning:
            blocks.append({"type": "thinking", "thinking": reasoning})
        blocks.extend(_parts_to_blocks(msg.get("content"), where))
        if role == "assistant":
            for call in openai_tool_calls(msg):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": _tool_input(call.arguments),
                    }
                )
    if msg.get("cache_control") is not None:
        _with_cache_marker(blocks, msg["cache_control"])
    return blocks


def to_anthropic(messages: Sequence[Message]) -> tuple[SystemPrompt | None, list[Message]]:
    """Convert an OpenAI chat list to ``(system, messages)`` for the Anthropic Messages API.

    - ``system`` / ``developer`` messages (wherever they are) become the system prompt, in order:
      a string when there is one plain string, else a list of text blocks; ``None`` when absent.
    - ``tool`` messages become ``tool_result`` blocks of a user message; consecutive messages of
      the same role are merged (so parallel results and a following user text share one message,
      results first as they came).
    - ``tool_calls`` become ``tool_use`` blocks (arguments parsed; unparsable or non-object
      arguments are kept as ``{"_raw_arguments": text}``), ``reasoning_content`` a leading
      ``thinking`` block (without signature), ``image_url`` parts ``image`` blocks.
    - Empty text parts are dropped, and so are messages left with no content at all.
    - Message-level ``cache_control`` moves onto the message's last block.

    :raises MessageFormatError: for parts with no Anthropic equivalent or malformed images.
    """
    system_blocks: list[dict[str, Any]] = []
    merged: list[tuple[str, list[dict[str, Any]], str | None]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        role = msg.get("role")
        if role in ("system", "developer"):
            system_blocks.extend(_openai_message_blocks(msg, "system", where))
            continue
        if role not in ("user", "assistant", "tool"):
            raise MessageFormatError(
                f"{where}: unknown role {role!r}; allowed roles: {', '.join(OPENAI_ROLES)}"
            )
        blocks = _openai_message_blocks(msg, role, where)
        if not blocks:
            continue
        target = "user" if role == "tool" else role
        content = msg.get("content")
        # A lone plain string stays a string unless a marker or another block joins it.
        plain = None
        if role != "tool" and isinstance(content, str) and len(blocks) == 1:
            plain = content if set(blocks[0]) == {"type", "text"} else None
        if merged and merged[-1][0] == target:
            prev_role, prev_blocks, _ = merged[-1]
            merged[-1] = (prev_role, prev_blocks + blocks, None)
        else:
            merged.append((target, blocks, plain))
    out: list[Message] = [
        {"role": role, "content": plain if plain is not None else blocks}
        for role, blocks, plain in merged
    ]
    system: SystemPrompt | None
    if not system_blocks:
        system = None
    elif len(system_blocks) == 1 and set(system_blocks[0]) == {"type", "text"}:
        system = system_blocks[0]["text"]
    else:
        system = system_blocks
    return system, out
