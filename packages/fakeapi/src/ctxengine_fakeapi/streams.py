"""Server-sent event streams for :class:`~ctxengine_fakeapi.FakeAPI`.

Each function turns one complete, non-streaming response body into the event sequence the real
API sends for it with ``stream: true``, so a streamed reply and an unstreamed one carry exactly
the same content and usage. The event shapes follow the SDKs' own type definitions:

- Anthropic Messages (``RawMessageStreamEvent``): ``message_start`` (the message with empty
  content and the input usage), a ``ping``, per content block ``content_block_start`` /
  ``content_block_delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta`` then
  ``signature_delta``) / ``content_block_stop``, ``message_delta`` (stop reason and the final,
  cumulative usage) and ``message_stop``;
- OpenAI chat completions (``ChatCompletionChunk``): a first chunk with the role, content and
  ``tool_calls`` deltas, a chunk with the ``finish_reason`` and, only when the request asked for
  ``stream_options.include_usage``, a last chunk with empty ``choices`` and the usage; then
  ``data: [DONE]``;
- OpenAI Responses (``ResponseStreamEvent``): ``response.created`` and ``response.in_progress``,
  per output item ``response.output_item.added``, its content or argument deltas and
  ``.done`` events, ``response.output_item.done``, and ``response.completed`` carrying the whole
  response with its usage.

Texts are cut into several deltas so that a client really has to accumulate them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

DELTA_CHARS = 24
"""Characters per text or argument delta."""

SSEvent = tuple[str | None, Mapping[str, Any] | str]
"""One server-sent event: its ``event:`` name (``None`` for none) and its data."""


def encode(events: list[SSEvent]) -> bytes:
    """The wire form of ``events`` (``event:`` and ``data:`` lines, a blank line after each)."""
    out: list[str] = []
    for name, data in events:
        if name is not None:
            out.append(f"event: {name}\n")
        payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out.append(f"data: {payload}\n\n")
    return "".join(out).encode()


def _pieces(text: str) -> Iterator[str]:
    for start in range(0, len(text), DELTA_CHARS):
        yield text[start : start + DELTA_CHARS]


# -- Anthropic Messages ------------------------------------------------------------------------


def anthropic_events(message: Mapping[str, Any]) -> list[SSEvent]:
    """The Messages API event stream for ``message`` (a complete ``Message`` body)."""
    usage = dict(message["usage"])
    start_usage = {**usage, "output_tokens": 1}
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    events: list[SSEvent] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        events.extend(_anthropic_block_events(index, block))
    final_usage = {
        key: usage[key]
        for key in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
            "iterations",
        )
        if key in usage
    }
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message.get("stop_reason"),
                    "stop_sequence": message.get("stop_sequence"),
                },
                "usage": final_usage,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _anthropic_block_events(index: int, block: Mapping[str, Any]) -> list[SSEvent]:
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        opening: dict[str, Any] = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
    elif kind in ("tool_use", "server_tool_use"):
        opening = {**block, "input": {}}
        arguments = json.dumps(block.get("input") or {})
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments)]
    elif kind == "thinking":
        opening = {**block, "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:  # redacted thinking and anything else arrive whole
        opening = dict(block)
    events: list[SSEvent] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
    ]
    events.extend(
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in deltas
    )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


# -- OpenAI chat completions -------------------------------------------------------------------


def chat_chunks(completion: Mapping[str, Any], *, include_usage: bool) -> list[SSEvent]:
    """The chat completions chunk stream for ``completion`` (a complete ``ChatCompletion``)."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> SSEvent:
        body = {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return (None, body)

    events: list[SSEvent] = [chunk({"role": "assistant", "content": "", "refusal": None})]
    reasoning = message.get("reasoning_content")
    if reasoning:
        events.extend(chunk({"reasoning_content": piece}) for piece in _pieces(reasoning))
    events.extend(chunk({"content": piece}) for piece in _pieces(message.get("content") or ""))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        opening = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        events.append(chunk({"tool_calls": [opening]}))
        events.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(function["arguments"])
        )
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append((None, {**base, "choices": [], "usage": completion["usage"]}))
    events.append((None, "[DONE]"))
    return events


# -- OpenAI Responses --------------------------------------------------------------------------


def responses_events(response: Mapping[str, Any]) -> list[SSEvent]:
    """The Responses API event stream for ``response`` (a complete ``Response``)."""
    sequence = 0
    events: list[SSEvent] = []

    def emit(kind: str, **fields: Any) -> None:
        nonlocal sequence
        events.append((kind, {"type": kind, "sequence_number": sequence, **fields}))
        sequence += 1

    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        _responses_item_events(index, item, emit)
    emit("response.completed", response=response)
    return events


def _responses_item_events(index: int, item: Mapping[str, Any], emit: Any) -> None:
    kind = item.get("type")
    item_id = item.get("id")
    if kind == "message":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        for part_index, part in enumerate(item["content"]):
            where = {"item_id": item_id, "output_index": index, "content_index": part_index}
            _text_part_events(part, where, emit)
    elif kind == "function_call":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        where = {"item_id": item_id, "output_index": index}
        for piece in _pieces(item["arguments"]):
            emit("response.function_call_arguments.delta", delta=piece, **where)
        emit(
            "response.function_call_arguments.done",
            arguments=item["arguments"],
            **where,
        )
    elif kind == "reasoning":
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        for summary_index, part in enumerate(item.get("summary") or []):
            where = {"item_id": item_id, "output_index": index, "summary_index": summary_index}
            _summary_part_events(part, where, emit)
    else:
        emit("response.output_item.added", output_index=index, item=item)
    emit("response.output_item.done", output_index=index, item=item)


def _text_part_events(part: Mapping[str, Any], where: Mapping[str, Any], emit: Any) -> None:
    """One output text part of a message item: added, its deltas, done."""
    emit("response.content_part.added", part={**part, "text": ""}, **where)
    for piece in _pieces(part.get("text", "")):
        emit("response.output_text.delta", delta=piece, logprobs=[], **where)
    emit("response.output_text.done", text=part.get("text", ""), logprobs=[], **where)
    emit("response.content_part.done", part=part, **where)


def _summary_part_events(part: Mapping[str, Any], where: Mapping[str, Any], emit: Any) -> None:
    """One summary part of a reasoning item: added, its deltas, done."""
    emit("response.reasoning_summary_part.added", part={**part, "text": ""}, **where)
    for piece in _pieces(part.get("text", "")):
        emit("response.reasoning_summary_text.delta", delta=piece, **where)
    emit("response.reasoning_summary_text.done", text=part.get("text", ""), **where)
    emit("response.reasoning_summary_part.done", part=part, **where)
