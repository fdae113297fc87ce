"""Server-side context management as :class:`~ctxengine_fakeapi.FakeAPI` serves it.

Simulated from the shapes the ``anthropic`` and ``openai`` SDKs define:

- **Anthropic compaction** (``context_management.edits`` with ``compact_20260112``, beta
  ``compact-2026-01-12``): once the prompt reaches the edit's ``trigger`` (default 150,000 input
  tokens) the fake writes a deterministic summary into a ``compaction`` block (``content``,
  ``encrypted_content``). With ``pause_after_compaction`` the response is that block alone,
  ``stop_reason: "compaction"``; otherwise the reply follows it, written over the compacted
  context. The compaction's cost is a ``usage.iterations`` entry of type ``compaction``, left out
  of the top-level usage. A request carrying compaction blocks is read from its last block with a
  summary on (a ``null`` block is a no-op). :meth:`FakeAPI.fail_compaction` scripts a compaction
  whose ``content`` is ``null``.
- **Anthropic context editing** (beta ``context-management-2025-06-27``):
  ``clear_tool_uses_20250919`` replaces the results (with ``clear_tool_inputs``, the inputs) of
  the oldest tool uses beyond ``keep`` (default 3), except ``exclude_tools``, once the prompt
  reaches ``trigger`` (default 100,000 input tokens) and at least ``clear_at_least`` tokens can
  go; ``clear_thinking_20251015`` drops the thinking blocks of all but the last ``keep`` thinking
  turns (default 1). The response's ``context_management.applied_edits`` says what went.
- **The Models API** (``GET /v1/models/{id}``): a model's ``capabilities``, with
  ``context_management`` and ``compaction`` support as the fake's ``native_models`` say.
- **OpenAI Responses compaction**: ``POST /v1/responses/compact`` returns the input's user
  messages followed by one ``compaction`` item whose ``encrypted_content`` carries the summary;
  ``context_management: [{"type": "compaction", "compact_threshold": N}]`` on
  ``/v1/responses`` compacts in the same way inside the response, the item first in ``output``.

A model outside ``native_models`` (when the fake is given a set) is refused with the API's
``400``: Anthropic's ``invalid_request_error``, OpenAI's error with ``param: "model"``. The
checks here are written independently of :mod:`ctxengine.messages`, like the rest of the fake.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from ctxengine import (
    EMPTY_SECTION,
    SUMMARY_HEADINGS,
    estimate_tokens,
    rough_conversation_tokens,
)

COMPACT = "compact_20260112"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
BETAS = {
    COMPACT: "compact-2026-01-12",
    CLEAR_TOOL_USES: "context-management-2025-06-27",
    CLEAR_THINKING: "context-management-2025-06-27",
}
DEFAULT_COMPACT_TRIGGER = 150_000
DEFAULT_CLEAR_TRIGGER = 100_000
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_KEEP_THINKING = 1
CLEARED_RESULT = "[tool result cleared by context management]"
ENCRYPTED_PREFIX = "fakeenc:"
"""How the fake's opaque compaction content starts (the Responses item carries the summary)."""


class Counter(Protocol):
    """The per-piece counts the fake prices with (``RoughCounter`` or ``TokenCounter``)."""

    def count_message(self, msg: dict[str, Any]) -> int: ...

    def count_system(self, system: Any) -> int: ...

    def count_tools(self, tools: Any) -> int: ...


class RoughCounter:
    """Per-piece rough counts (:func:`ctxengine.estimate_tokens`, as the kernel estimates), so
    the fake never loads a tokenizer; the same interface as :class:`ctxengine.TokenCounter`'s
    per-piece methods."""

    def count_message(self, msg: dict[str, Any]) -> int:
        return rough_conversation_tokens([msg])

    def count_system(self, system: Any) -> int:
        return rough_conversation_tokens([], system) if system else 0

    def count_tools(self, tools: Any) -> int:
        # The JSON text the kernel counts tool definitions as.
        return (
            estimate_tokens(json.dumps(list(tools), ensure_ascii=False, default=str))
            if tools
            else 0
        )


def prompt_tokens(body: Mapping[str, Any], counter: Counter) -> int:
    """The prompt of a Messages request: tools, system and messages."""
    return (
        counter.count_tools(body.get("tools"))
        + counter.count_system(body.get("system"))
        + sum(counter.count_message(m) for m in body.get("messages") or [] if isinstance(m, dict))
    )


def text_tokens(text: str, counter: Counter) -> int:
    return counter.count_message({"role": "assistant", "content": text})


# --- request checks ------------------------------------------------------------------------------


def edits_of(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    management = body.get("context_management")
    if not isinstance(management, Mapping):
        return []
    edits = management.get("edits")
    return [e for e in edits if isinstance(e, Mapping)] if isinstance(edits, list) else []


def betas_of(headers: Mapping[str, str]) -> set[str]:
    value = headers.get("anthropic-beta", "")
    return {part.strip() for part in value.split(",") if part.strip()}


def _has_compaction(body: Mapping[str, Any]) -> bool:
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "compaction" for b in content
        ):
            return True
    return False


def check_native(
    body: Mapping[str, Any], headers: Mapping[str, str], supports: Callable[[str], bool]
) -> list[str]:
    """Why the Messages API would refuse this request's context management, one line each."""
    problems: list[str] = []
    management = body.get("context_management")
    betas = betas_of(headers)
    if management is not None:
        if not isinstance(management, Mapping) or not isinstance(management.get("edits", []), list):
            return ["context_management.edits: Input should be a valid list"]
        for k, edit in enumerate(edits_of(body)):
            kind = edit.get("type")
            where = f"context_management.edits.{k}"
            if kind not in BETAS:
                problems.append(f"{where}.type: Input tag {kind!r} does not match any edit type")
                continue
            if BETAS[str(kind)] not in betas:
                problems.append(
                    f"{where}: the {kind} edit requires the anthropic-beta header "
                    f"{BETAS[str(kind)]!r}"
                )
            if kind == CLEAR_THINKING and k > 0:
                problems.append(f"{where}: {CLEAR_THINKING} must be the first edit")
            if not supports(str(body.get("model"))):
                problems.append(
                    f"model: {body.get('model')} does not support context management "
                    f"strategy {kind}"
                )
    if _has_compaction(body) and BETAS[COMPACT] not in betas:
        problems.append(
            f"messages: compaction blocks require the anthropic-beta header {BETAS[COMPACT]!r}"
        )
    return problems


# --- what the server reads --------------------------------------------------------------------


def server_view(messages: Sequence[Any]) -> list[Any]:
    """The messages the server reads: from the last compaction block that holds a summary on
    (that block and what follows it in its message, then the later messages)."""
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content") if isinstance(messages[i], Mapping) else None
        if not isinstance(content, list):
            continue
        for j in range(len(content) - 1, -1, -1):
            block = content[j]
            if isinstance(block, Mapping) and block.get("type") == "compaction":
                if block.get("content") is None:
                    continue
                first = {**messages[i], "content": list(content[j:])}
                return [first, *messages[i + 1 :]]
    return list(messages)


@attrs.frozen
class Clearing:
    """The request after context editing, and what the response reports."""

    body: dict[str, Any]
    applied: list[dict[str, Any]]


def _trigger_reached(edit: Mapping[str, Any], body: Mapping[str, Any], counter: Counter) -> bool:
    trigger = edit.get("trigger")
    default = DEFAULT_COMPACT_TRIGGER if edit.get("type") == COMPACT else DEFAULT_CLEAR_TRIGGER
    if isinstance(trigger, Mapping) and trigger.get("type") == "tool_uses":
        uses = sum(len(_tool_uses(m)) for m in body.get("messages") or [])
        return uses >= int(trigger.get("value") or 0)
    value = trigger.get("value") if isinstance(trigger, Mapping) else None
    limit = int(value) if isinstance(value, int) else default
    return prompt_tokens(body, counter) >= limit


def _tool_uses(message: Any) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list) or message.get("role") != "assistant":
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]


def apply_clearing(body: Mapping[str, Any], counter: Counter) -> Clearing:
    """``body`` after its ``clear_*`` edits, as the server applies them (see the module doc)."""
    out: dict[str, Any] = dict(body)
    applied: list[dict[str, Any]] = []
    for edit in edits_of(body):
        if edit.get("type") == CLEAR_THINKING:
            out, entry = _clear_thinking(out, edit, counter)
        elif edit.get("type") == CLEAR_TOOL_USES and _trigger_reached(edit, out, counter):
            out, entry = _clear_tool_uses(out, edit, counter)
        else:
            continue
        if entry is not None:
            applied.append(entry)
    return Clearing(out, applied)


def _clear_tool_uses(
    body: dict[str, Any], edit: Mapping[str, Any], counter: Counter
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    messages = [dict(m) if isinstance(m, Mapping) else m for m in body.get("messages") or []]
    uses = [(i, b) for i, m in enumerate(messages) for b in _tool_uses(m)]
    keep = edit.get("keep")
    kept = int(keep["value"]) if isinstance(keep, Mapping) else DEFAULT_KEEP_TOOL_USES
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs")
    targets = [(i, b) for i, b in uses[: max(0, len(uses) - kept)] if b.get("name") not in excluded]
    before = prompt_tokens(body, counter)
    cleared_ids = {str(b.get("id")) for _, b in targets}
    clear_inputs = {
        str(b.get("id"))
        for _, b in targets
        if inputs is True or (isinstance(inputs, list) and b.get("name") in inputs)
    }
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):
            cleared_blocks = [_cleared_block(b, cleared_ids, clear_inputs) for b in content]
            messages[i] = {**message, "content": cleared_blocks}
    out = {**body, "messages": messages}
    cleared = max(0, before - prompt_tokens(out, counter))
    minimum = edit.get("clear_at_least")
    if not targets or (isinstance(minimum, Mapping) and cleared < int(minimum.get("value", 0))):
        return body, None
    entry = {
        "type": CLEAR_TOOL_USES,
        "cleared_input_tokens": cleared,
        "cleared_tool_uses": len(targets),
    }
    return out, entry


def _cleared_block(block: Any, cleared_ids: set[str], clear_inputs: set[str]) -> Any:
    """``block`` as the server sends it on: a cleared tool result's content replaced, a tool use
    whose input is cleared with ``input: {}``, anything else as it was."""
    if not isinstance(block, Mapping):
        return block
    if block.get("type") == "tool_result" and block.get("tool_use_id") in cleared_ids:
        return {
            "type": "tool_result",
            "tool_use_id": block["tool_use_id"],
            "content": CLEARED_RESULT,
        }
    if block.get("type") == "tool_use" and block.get("id") in clear_inputs:
        return {**block, "input": {}}
    return block


def _clear_thinking(
    body: dict[str, Any], edit: Mapping[str, Any], counter: Counter
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    keep = edit.get("keep")
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return body, None
    kept = int(keep["value"]) if isinstance(keep, Mapping) else DEFAULT_KEEP_THINKING
    messages = list(body.get("messages") or [])

    def thinking(block: object) -> bool:
        return isinstance(block, Mapping) and block.get("type") in (
            "thinking",
            "redacted_thinking",
        )

    turns = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, Mapping)
        and m.get("role") == "assistant"
        and isinstance(m.get("content"), list)
        and any(thinking(b) for b in m["content"])
    ]
    old = turns[: max(0, len(turns) - kept)]
    if not old:
        return body, None
    before = prompt_tokens(body, counter)
    for i in old:
        messages[i] = {
            **messages[i],
            "content": [b for b in messages[i]["content"] if not thinking(b)],
        }
    out = {**body, "messages": messages}
    entry = {
        "type": CLEAR_THINKING,
        "cleared_input_tokens": max(0, before - prompt_tokens(out, counter)),
        "cleared_thinking_turns": len(old),
    }
    return out, entry


# --- compaction ---------------------------------------------------------------------------------


def _user_texts(messages: Sequence[Any]) -> list[str]:
    texts = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            text = " ".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, Mapping) and b.get("type") in ("text", "input_text")
            ).strip()
            if text:
                texts.append(text)
    return texts


def summary_text(messages: Sequence[Any], tokens: int, api: str) -> str:
    """The fake's compaction summary: the summary template, naming what it replaced and quoting
    the first and last thing the user said (deterministic)."""
    texts = [" ".join(t.split()) for t in _user_texts(messages)]
    goal = (
        f"- Server-side compaction by FakeAPI ({api}) of {len(messages)} messages "
        f"({tokens:,} tokens)."
    )
    context = [f"- The user began: {texts[0][:160]}", f"- The user last said: {texts[-1][:160]}"]
    return template_text(goal, context if texts else [])


def template_text(goal: str, context: Sequence[str]) -> str:
    """The summary template with ``goal`` under "## Goal", ``context`` under "## Critical
    Context" and ``EMPTY_SECTION`` everywhere else (the fake's deterministic replies)."""
    lines: list[str] = []
    for heading in SUMMARY_HEADINGS:
        lines.append(heading)
        if heading == "## Goal":
            lines.append(goal)
        elif heading == "## Critical Context" and context:
            lines.extend(context)
        else:
            lines.append(EMPTY_SECTION)
    return "\n".join(lines)


def opaque(messages: Sequence[Any]) -> str:
    """Deterministic stand-in for the server's encrypted compaction state."""
    digest = hashlib.sha256(json.dumps(list(messages), sort_keys=True, default=str).encode())
    return ENCRYPTED_PREFIX + digest.hexdigest()[:32]


@attrs.frozen
class Compaction:
    """One server-side compaction of a Messages request.

    :ivar block: the ``compaction`` block (``content`` ``None`` when it failed).
    :ivar usage: the ``usage.iterations`` entry of type ``compaction``.
    :ivar body: the request as the model reads it afterwards (unchanged when it failed).
    """

    block: dict[str, Any]
    usage: dict[str, Any]
    body: dict[str, Any]
    pause: bool


def compact_edit(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((e for e in edits_of(body) if e.get("type") == COMPACT), None)


def compact(body: Mapping[str, Any], counter: Counter, *, fail: bool = False) -> Compaction | None:
    """The compaction the request's ``compact_20260112`` edit asks for, or ``None`` when it has
    none or the prompt is below its trigger."""
    edit = compact_edit(body)
    if edit is None or not _trigger_reached(edit, body, counter):
        return None
    messages = list(body.get("messages") or [])
    tokens = prompt_tokens(body, counter)
    summary = summary_text(messages, tokens, "anthropic")
    block: dict[str, Any] = {
        "type": "compaction",
        "content": None if fail else summary,
        "encrypted_content": None if fail else opaque(messages),
    }
    usage = {
        "type": "compaction",
        "input_tokens": tokens,
        "output_tokens": 0 if fail else text_tokens(summary, counter),
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    after = (
        dict(body) if fail else {**body, "messages": [{"role": "assistant", "content": [block]}]}
    )
    return Compaction(block, usage, after, bool(edit.get("pause_after_compaction")))


# --- the Models API ----------------------------------------------------------------------------


def model_info(model: str, supported: bool) -> dict[str, Any]:
    """``GET /v1/models/{model}`` as ``BetaModelInfo``: capabilities with context management and
    compaction support set to ``supported``, everything else supported."""
    yes = {"supported": True}
    flag = {"supported": supported}
    return {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": "2026-01-01T00:00:00Z",
        "lifecycle": "active",
        "capabilities": {
            "batch": yes,
            "citations": yes,
            "code_execution": yes,
            "compaction": {"supported": supported, "summarize": flag},
            "context_management": {
                "supported": supported,
                "clear_thinking_20251015": flag,
                "clear_tool_uses_20250919": flag,
                "compact_20260112": flag,
            },
            "effort": {"supported": True, "low": yes, "medium": yes, "high": yes, "max": yes},
            "image_input": yes,
            "pdf_input": yes,
            "server_tools": {"supported": True, "code_execution": yes, "web_search": yes},
            "structured_outputs": yes,
            "thinking": {
                "supported": True,
                "types": {"adaptive": yes, "between_tools": yes, "disabled": yes, "enabled": yes},
            },
        },
    }


# --- OpenAI Responses --------------------------------------------------------------------------


def responses_tokens(body: Mapping[str, Any]) -> int:
    """The fake's rough size of a Responses input (the JSON of instructions, input and tools)."""
    text = json.dumps(
        [body.get("instructions"), body.get("input"), body.get("tools")], ensure_ascii=False
    )
    return -(-len(text) // 4)


def compaction_item(items: Sequence[Any], number: int, tokens: int) -> dict[str, Any]:
    """The Responses API's compaction item for ``items`` (``tokens`` of input), numbered
    ``number``; its ``encrypted_content`` carries the fake's deterministic summary."""
    summary = summary_text(items, tokens, "openai")
    return {
        "type": "compaction",
        "id": f"cmp_fake{number:04d}",
        "encrypted_content": ENCRYPTED_PREFIX + summary,
        "created_by": "fake",
    }


def responses_compact_body(
    body: Mapping[str, Any], number: int, *, fail: bool = False
) -> dict[str, Any]:
    """The ``CompactedResponse`` for ``POST /v1/responses/compact``: every user message of the
    input, then one compaction item (none when ``fail``)."""
    raw = body.get("input")
    items: list[Any] = (
        [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    )
    tokens = responses_tokens(body)
    output: list[dict[str, Any]] = []
    for k, item in enumerate(items):
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                content = [{"type": "input_text", "text": content}]
            output.append(
                {
                    "type": "message",
                    "id": f"msg_fake{number:04d}_{k}",
                    "role": "user",
                    "status": "completed",
                    "content": content,
                }
            )
    if not fail:
        output.append(compaction_item(items, number, tokens))
    summary_tokens = -(-len(str(output[-1].get("encrypted_content", ""))) // 4) if not fail else 0
    return {
        "id": f"resp_fake{number:04d}",
        "object": "response.compaction",
        "created_at": 1_700_000_000,
        "output": output,
        "usage": {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": summary_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + summary_tokens,
        },
    }


def responses_threshold(body: Mapping[str, Any]) -> int | None:
    """The ``compact_threshold`` of a Responses request's ``context_management``, if any."""
    entries = body.get("context_management")
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("type") == "compaction":
            value = entry.get("compact_threshold")
            return int(value) if isinstance(value, int) else 0
    return None


def check_responses_native(body: Mapping[str, Any]) -> list[str]:
    """Shape problems of a Responses ``context_management`` list."""
    entries = body.get("context_management")
    if entries is None:
        return []
    if not isinstance(entries, list):
        return ["Invalid type for 'context_management': expected an array."]
    problems = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or entry.get("type") != "compaction":
            problems.append(
                f"Invalid value for 'context_management[{k}].type': only 'compaction' is supported."
            )
        elif not isinstance(entry.get("compact_threshold", 0), int | None):
            problems.append(f"Invalid type for 'context_management[{k}].compact_threshold'.")
    return problems
