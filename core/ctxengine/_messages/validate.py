"""Checking a request's messages against the provider's rules before it is sent.

:func:`validate` returns every finding as a :class:`~ctxengine.messages.Problem` with a stable
``rule`` id and only reads its input. The checks are one pass over the messages plus one over
the tool groups.

Rule ids (provider in brackets where only one applies):

- shape: ``messages-type``, ``messages-empty``, ``message-type``, ``role-missing``,
  ``role-invalid``, ``content-type``, ``part-shape``, ``part-type``, ``field-unknown``,
  ``tool-call-shape`` / ``tool-call-arguments`` / ``tool-call-json`` / ``tool-call-role`` /
  ``tool-message-shape`` [openai], ``tool-use-shape`` / ``tool-result-shape`` /
  ``tool-use-role`` / ``tool-result-role`` / ``tool-result-order`` [anthropic],
  ``system-shape`` [anthropic], ``system-param`` [openai], ``tools-shape``;
- order: ``system-position`` / ``tool-message-position`` [openai], ``first-role`` /
  ``role-alternation`` [anthropic; openai with ``profile="strict"``];
- emptiness [anthropic]: ``content-empty`` (empty string or list, except a final assistant
  message), ``text-empty`` (a text block whose text is ``""``; whitespace is allowed);
- tool pairing: ``tool-call-unanswered``, ``tool-result-orphan``, ``tool-result-duplicate``,
  ``tool-call-duplicate-id``;
- caching (the rule set of :mod:`.markers`): ``cache-control-shape``,
  ``cache-control-empty-text``, ``cache-control-thinking``, ``cache-control-limit``,
  ``cache-control-ttl-order``;
- server-side context management (the rules of :mod:`.editing`): ``compaction-role`` (a
  compaction block outside an assistant message), ``compaction-shape`` (its ``content`` must be a
  non-empty string or null; a Responses compaction item needs its ``encrypted_content``),
  ``context-edit-shape`` (an edit the API does not take), ``cache-control-cleared`` (a breakpoint
  on a block the request's context edits may clear).

Profiles. ``"provider"`` (the default) checks the rules of the format's own API. ``"strict"``
adds what the strictest routes (Claude on Amazon Bedrock and what forwards to it) enforce on any
format: the first message after the system prompt is the user's, and user and assistant turns
alternate. In OpenAI format a run of ``tool`` messages counts as the user's turn (converters put
tool results into the next user message). Anthropic-format lists are held to these two rules by
both profiles. In both formats an assistant message that opens with a compaction block may come
first: it stands for the turns before it.

:data:`SHAPE_RULES` are the findings that make a list unreadable rather than merely unsendable
(wrong types, missing or unknown fields); :func:`ensure_well_formed` raises on those alone, for
engines and hosts that repair order and pairing themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ctxengine._messages.conversation import Format, Message, SystemPrompt
from ctxengine._messages.editing import (
    clearable_blocks,
    edit_problems,
    is_compaction_block,
    opens_with_compaction,
)
from ctxengine._messages.errors import MessageFormatError, Problem
from ctxengine._messages.markers import marker_findings
from ctxengine._messages.pairing import pairing_problems
from ctxengine._messages.read import ANTHROPIC_BLOCK_TYPES, OPENAI_PART_TYPES, OPENAI_ROLES

__all__ = [
    "PROFILES",
    "SHAPE_RULES",
    "Profile",
    "ensure_well_formed",
    "validate",
]

Profile = Literal["provider", "strict"]
"""Which rules :func:`validate` applies: the format's own API, or the strictest routes too."""

PROFILES: tuple[Profile, ...] = ("provider", "strict")

SHAPE_RULES = frozenset(
    {
        "messages-type",
        "message-type",
        "role-missing",
        "role-invalid",
        "content-type",
        "part-shape",
        "part-type",
        "field-unknown",
        "tool-call-shape",
        "tool-call-arguments",
        "tool-call-role",
        "tool-message-shape",
        "tool-use-shape",
        "tool-result-shape",
        "tool-use-role",
        "tool-result-role",
        "system-shape",
        "system-param",
        "tools-shape",
    }
)
"""Rules about the shape of each message (types and fields), as opposed to their order, their
pairing, empty contents and cache markers."""

# The message fields each format's API takes. OpenAI's list includes the fields OpenAI-compatible
# servers and gateways add (reasoning of DeepSeek, vLLM and OpenRouter; OpenRouter's markers).
_OPENAI_FIELDS = frozenset(
    {
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "refusal",
        "audio",
        "function_call",
        "annotations",
        "prefix",
        "reasoning_content",
        "reasoning",
        "reasoning_details",
        "cache_control",
    }
)
_ANTHROPIC_FIELDS = frozenset({"role", "content", "cache_control"})
_OPENAI_CALL_FIELDS = frozenset({"id", "type", "function", "index"})
_OPENAI_FUNCTION_FIELDS = frozenset({"name", "arguments"})

# Part types OpenAI chat accepts, per role.
_OPENAI_PARTS = {
    "system": ("text",),
    "developer": ("text",),
    "tool": ("text",),
    "user": ("text", "image_url", "input_audio", "file"),
    # Plus "compaction" (checked on its own): a Responses compaction item in its chat form.
    "assistant": ("text", "refusal"),
}

_Marker = tuple[str, int | None, Mapping[str, Any]]  # where, message index, the marked dict


class _Checker:
    """Collects problems and cache markers during one validation run."""

    def __init__(self, *, shape_only: bool = False) -> None:
        # Only SHAPE_RULES findings are wanted: checks of other rules that cost real work
        # (decoding every call's JSON arguments) are skipped.
        self.shape_only = shape_only
        self.problems: list[Problem] = []
        self.markers: list[_Marker] = []
        # OpenAI: set by the first non-system message; later system messages are misplaced.
        self.started = False
        # OpenAI, strict profile: the previous message's side ("user", "tool", "assistant").
        self.turn: str | None = None

    def add(self, index: int | None, rule: str, where: str, text: str) -> None:
        self.problems.append(Problem(index, rule, f"{where}: {text}"))

    def marker(self, obj: Mapping[str, Any], where: str, index: int | None) -> None:
        if obj.get("cache_control") is not None:
            self.markers.append((where, index, obj))

    def text_block(
        self, block: Mapping[str, Any], where: str, index: int | None, fmt: Format
    ) -> None:
        text = block.get("text")
        if not isinstance(text, str):
            self.add(index, "part-shape", where, "a text block needs a string 'text'")
            return
        if text == "" and fmt == "anthropic":
            self.add(index, "text-empty", where, 'text block with empty text ""; drop it')


def validate(
    messages: Sequence[Message],
    provider: Format,
    *,
    system: SystemPrompt | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    allow_pending_tool_call: bool = True,
    cache_control: object = None,
    context_management: object = None,
    profile: Profile = "provider",
) -> list[Problem]:
    """Every way the request breaks ``provider``'s rules, ordered by message index.

    ``system`` is Anthropic's top-level system prompt (OpenAI lists carry it as a message; giving
    it for ``"openai"`` is a ``system-param`` problem). ``tools`` only matter for counting and
    checking ``cache_control`` breakpoints, counted over tools, then system, then messages. With
    ``allow_pending_tool_call`` a tool call at the very end of the list that has no result yet is
    not a problem (the agent is about to run it). ``cache_control`` is the request's top-level
    automatic marker, when it has one: it counts towards the breakpoint limit and, as it marks the
    last cacheable block, comes last in the TTL order. ``context_management`` is the request's
    context management configuration (Anthropic), when it has one: its edits are checked and no
    breakpoint may sit on a block they may clear. ``profile`` ``"strict"`` adds the first-role
    and alternation rules of the strictest routes (see the module docstring);
    ``ctxengine.Kernel.validation_profile`` is the one for the configured route.

    :raises ValueError: when ``provider`` is neither ``"openai"`` nor ``"anthropic"``, or
        ``profile`` is not one of :data:`PROFILES`.
    """
    check, dicts = _check_messages(messages, provider, system=system, tools=tools, profile=profile)
    if dicts is not None:
        check.problems += pairing_problems(dicts, provider, allow_pending=allow_pending_tool_call)
        for index, rule, where, text in marker_findings(check.markers, cache_control):
            check.add(index, rule, where, text)
        if context_management is not None:
            _check_context_management(check, dicts, context_management)
    return _by_index(check.problems)


def _check_messages(
    messages: Sequence[Message],
    provider: Format,
    *,
    system: SystemPrompt | None,
    tools: Sequence[Mapping[str, Any]] | None,
    profile: Profile,
    shape_only: bool = False,
) -> tuple[_Checker, list[Message] | None]:
    """The request-level and per-message checks, and the messages (``{}`` for a message that
    is no dict; None when ``messages`` is no list, which ends the checks)."""
    if provider not in ("openai", "anthropic"):
        raise ValueError(f"provider must be 'openai' or 'anthropic', got {provider!r}")
    if profile not in PROFILES:
        raise ValueError(f"profile must be 'provider' or 'strict', got {profile!r}")
    check = _Checker(shape_only=shape_only)
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        check.add(None, "messages-type", "messages", "must be a list of message dicts")
        return check, None
    if not messages:
        check.add(None, "messages-empty", "messages", "at least one message is required")
    _check_tools(check, tools)
    if system is not None:
        if provider == "openai":
            check.add(
                None,
                "system-param",
                "system",
                "OpenAI chat has no separate system prompt; put it in a leading system message",
            )
        else:
            _check_system(check, system)
    dicts: list[Message] = []
    items: Sequence[object] = messages  # callers may hand in anything; check before trusting
    for i, msg in enumerate(items):
        if not isinstance(msg, dict):
            check.add(
                i, "message-type", f"messages[{i}]", f"must be a dict, got {type(msg).__name__}"
            )
            dicts.append({})
            continue
        dicts.append(msg)
        if provider == "openai":
            _check_openai_message(check, dicts, i, strict=profile == "strict")
        else:
            _check_anthropic_message(check, dicts, i, len(messages))
    return check, dicts


def ensure_well_formed(
    messages: Sequence[Message], provider: Format, *, system: SystemPrompt | None = None
) -> None:
    """Raise :class:`MessageFormatError` listing the :data:`SHAPE_RULES` findings: values of the
    wrong type, missing required fields, unknown fields, each with the message index and the
    offending field. Order, pairing, empty contents and cache markers are not judged (engines
    repair those); an empty list passes.

    :raises ValueError: when ``provider`` is neither ``"openai"`` nor ``"anthropic"``.
    """
    check, _ = _check_messages(
        messages, provider, system=system, tools=None, profile="provider", shape_only=True
    )
    problems = _by_index([p for p in check.problems if p.rule in SHAPE_RULES])
    if problems:
        lines = "\n".join(f"- {p}" for p in problems)
        raise MessageFormatError(
            f"{len(problems)} problem(s) in malformed {provider} messages:\n{lines}", problems
        )


def _by_index(problems: list[Problem]) -> list[Problem]:
    """Request-level findings first, then by message; stable, so rule order per message is
    kept."""
    return sorted(problems, key=lambda p: -1 if p.index is None else p.index)


# --------------------------------------------------------------------------------------------
# Request level


def _check_tools(check: _Checker, tools: Sequence[Mapping[str, Any]] | None) -> None:
    if tools is None:
        return
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        check.add(None, "tools-shape", "tools", "must be a list of tool definitions")
        return
    items: Sequence[object] = tools
    for k, tool in enumerate(items):
        if not isinstance(tool, Mapping):
            check.add(None, "tools-shape", f"tools[{k}]", "a tool definition must be a dict")
        else:
            check.marker(tool, f"tools[{k}]", None)


def _check_system(check: _Checker, system: object) -> None:
    if isinstance(system, str):
        return
    if not isinstance(system, list):
        check.add(
            None,
            "system-shape",
            "system",
            f"must be a string or a list of text blocks, got {type(system).__name__}",
        )
        return
    for k, block in enumerate(system):
        where = f"system[{k}]"
        if not isinstance(block, dict) or block.get("type") != "text":
            check.add(None, "system-shape", where, "system blocks must be text blocks")
            continue
        check.marker(block, where, None)
        check.text_block(block, where, None, "anthropic")


def _check_context_management(check: _Checker, msgs: list[Message], value: object) -> None:
    if not isinstance(value, Mapping):
        check.add(None, "context-edit-shape", "context_management", "must be an object")
        return
    edits = value.get("edits", [])
    problems = edit_problems(edits)
    for text in problems:
        where, _, rule = text.partition(": ")
        if not rule:
            where, rule = "context_management", text
        check.add(None, "context-edit-shape", where, rule)
    if problems:
        return
    cleared = clearable_blocks(msgs, edits)
    for where, index, _marked in check.markers:
        if index is None or not where.startswith(f"messages[{index}].content["):
            continue
        block = int(where[len(f"messages[{index}].content[") :].split("]", 1)[0])
        if (index, block) in cleared:
            check.add(
                index,
                "cache-control-cleared",
                where,
                "cache_control on a block the request's context edits may clear; the cached "
                "prefix would not be repeated once the server clears it (mark a block that stays)",
            )


def _check_compaction(
    check: _Checker, block: Mapping[str, Any], where: str, i: int, role: object, fmt: Format
) -> None:
    if role != "assistant":
        check.add(i, "compaction-role", where, "compaction blocks belong in assistant messages")
    if fmt == "openai":
        if not isinstance(block.get("encrypted_content"), str):
            check.add(
                i,
                "compaction-shape",
                where,
                "a Responses compaction item needs its 'encrypted_content' string, as returned",
            )
        return
    content = block.get("content")
    if content is not None and (not isinstance(content, str) or not content):
        check.add(
            i,
            "compaction-shape",
            where,
            "a compaction block's content must be the summary as returned (a non-empty string) "
            "or null for a failed compaction",
        )
    encrypted = block.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        check.add(i, "compaction-shape", where, "'encrypted_content' must be sent back as returned")


# --------------------------------------------------------------------------------------------
# OpenAI messages


def _check_fields(
    check: _Checker, obj: Mapping[Any, Any], allowed: frozenset[str], where: str, i: int
) -> None:
    """One ``field-unknown`` finding per key the API does not take; its value is never read
    (the API rejects an unknown field whatever it holds, however deeply nested)."""
    for key in obj:
        if key in allowed:
            continue
        name = key if isinstance(key, str) and len(key) <= 60 else None
        shown = f"{where}.{name}" if name is not None else where
        what = "" if name is not None else f" {repr(key)[:60]}"
        check.add(
            i,
            "field-unknown",
            shown,
            f"unknown field{what}, which the API rejects; allowed: {', '.join(sorted(allowed))}",
        )


def _check_openai_turn(check: _Checker, msg: Message, role: str, where: str, i: int) -> None:
    """The strict profile's first-role and alternation rules (tool results are the user's
    side of the conversation, see the module docstring)."""
    previous, check.turn = check.turn, role
    if previous is None:
        if role != "user" and not (role == "assistant" and opens_with_compaction(msg)):
            check.add(
                i,
                "first-role",
                where,
                f"the first message after the system prompt must be 'user' on strict routes "
                f"(Claude on Amazon Bedrock and gateways in front of it), got {role!r}",
            )
        return
    if role == previous and role in ("user", "assistant"):
        check.add(
            i,
            "role-alternation",
            where,
            f"two {role} messages in a row; strict routes need user and assistant turns to "
            "alternate (merge them)",
        )


def _check_openai_message(check: _Checker, msgs: list[Message], i: int, *, strict: bool) -> None:
    msg = msgs[i]
    where = f"messages[{i}]"
    role = msg.get("role")
    check.marker(msg, where, i)
    _check_fields(check, msg, _OPENAI_FIELDS, where, i)
    if role is None:
        check.add(i, "role-missing", where, f"missing 'role'; allowed: {', '.join(OPENAI_ROLES)}")
        return
    if role not in OPENAI_ROLES:
        check.add(
            i, "role-invalid", where, f"unknown role {role!r}; allowed: {', '.join(OPENAI_ROLES)}"
        )
        return
    if role not in ("system", "developer"):
        check.started = True
        if strict:
            _check_openai_turn(check, msg, role, where, i)
    elif check.started:
        check.add(
            i,
            "system-position",
            where,
            f"a {role} message may only open the conversation (before any other role)",
        )
    calls = msg.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            check.add(i, "tool-call-role", where, f"tool_calls on a {role} message; only assistant")
        else:
            _check_openai_calls(check, calls, where, i)
    if role == "tool":
        call_id = msg.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            check.add(
                i, "tool-message-shape", where, "a tool message needs a 'tool_call_id' string"
            )
    _check_openai_content(check, msg.get("content"), role, bool(calls), where, i)


def _check_openai_content(
    check: _Checker, content: object, role: str, calls: bool, where: str, i: int
) -> None:
    if content is None:
        if role != "assistant":
            check.add(
                i, "content-type", where, f"a {role} message needs content: a string or parts"
            )
        elif not calls:
            check.add(
                i, "content-type", where, "assistant content may be null only with tool_calls"
            )
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        check.add(
            i,
            "content-type",
            where,
            f"content must be a string, a list of parts or null, got {type(content).__name__}",
        )
        return
    for j, part in enumerate(content):
        part_where = f"{where}.content[{j}]"
        if _is_block(check, part, part_where, i, "content part"):
            _check_openai_part(check, part, role, part_where, i)


def _check_openai_part(
    check: _Checker, part: Mapping[str, Any], role: str, where: str, i: int
) -> None:
    kind = part["type"]
    if kind == "text":
        check.text_block(part, where, i, "openai")
    elif is_compaction_block(part):
        _check_compaction(check, part, where, i, role, "openai")
    elif kind in ANTHROPIC_BLOCK_TYPES:
        check.add(
            i,
            "part-type",
            where,
            f"{kind!r} is an Anthropic block; OpenAI uses tool_calls, tool messages and "
            "reasoning_content",
        )
    elif kind not in _OPENAI_PARTS[role]:
        check.add(
            i,
            "part-type",
            where,
            f"part type {kind!r} is not allowed in {role} messages; allowed: "
            f"{', '.join(_OPENAI_PARTS[role])}",
        )


def _is_block(check: _Checker, value: object, where: str, i: int, what: str) -> bool:
    """Whether ``value`` is a content part/block (a dict with a string ``type``); a
    ``part-shape`` finding saying why not when it is not, and its marker noted when it is."""
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        check.marker(value, where, i)
        return True
    if not isinstance(value, dict):
        why = f"a {what} must be a dict with a 'type', got {type(value).__name__}"
    elif "type" not in value:
        why = f"a {what} must be a dict with a 'type'; this one has no 'type' field"
    else:
        why = f"a {what} must be a dict with a 'type' string, got {type(value['type']).__name__}"
    check.add(i, "part-shape", where, why)
    return False


def _check_openai_calls(check: _Checker, calls: Any, where: str, i: int) -> None:
    if not isinstance(calls, list) or not calls:
        got = type(calls).__name__ if not isinstance(calls, list) else "an empty list"
        check.add(
            i,
            "tool-call-shape",
            f"{where}.tool_calls",
            f"must be a non-empty list of tool calls (omit it otherwise), got {got}",
        )
        return
    for k, call in enumerate(calls):
        call_where = f"{where}.tool_calls[{k}]"
        if not isinstance(call, dict):
            check.add(i, "tool-call-shape", call_where, "a tool call must be a dict")
        else:
            _check_openai_call(check, call, call_where, i)


def _check_openai_call(check: _Checker, call: Mapping[str, Any], where: str, i: int) -> None:
    _check_fields(check, call, _OPENAI_CALL_FIELDS, where, i)
    fn = call.get("function")
    missing = []
    if not isinstance(call.get("id"), str) or not call.get("id"):
        missing.append("an 'id' string")
    if call.get("type") != "function":
        missing.append("'type': 'function'")
    if not isinstance(fn, dict):
        got = type(fn).__name__ if "function" in call else "nothing"
        missing.append(f"a 'function' object with a 'name' (got {got})")
    elif not isinstance(fn.get("name"), str) or not fn.get("name"):
        missing.append("'function.name'")
    if missing:
        check.add(i, "tool-call-shape", where, f"a tool call needs {', '.join(missing)}")
    if not isinstance(fn, dict):
        return
    _check_fields(check, fn, _OPENAI_FUNCTION_FIELDS, f"{where}.function", i)
    args = fn.get("arguments")
    if not isinstance(args, str):
        check.add(
            i,
            "tool-call-arguments",
            where,
            f"'function.arguments' must be a JSON string, got {type(args).__name__}",
        )
        return
    if check.shape_only:
        return  # "tool-call-json" is not a shape rule: no need to decode the arguments
    try:
        json.loads(args)
    except json.JSONDecodeError as exc:
        # Models do emit cut-off JSON; the API refuses it, engines can still read the call.
        check.add(
            i,
            "tool-call-json",
            where,
            f"'function.arguments' is not valid JSON ({exc.msg} at char {exc.pos})",
        )


# --------------------------------------------------------------------------------------------
# Anthropic messages


def _check_anthropic_message(check: _Checker, msgs: list[Message], i: int, n: int) -> None:
    msg = msgs[i]
    where = f"messages[{i}]"
    role = msg.get("role")
    check.marker(msg, where, i)
    _check_fields(check, msg, _ANTHROPIC_FIELDS, where, i)
    if role is None:
        check.add(i, "role-missing", where, "missing 'role'; allowed: user, assistant")
        return
    if role not in ("user", "assistant"):
        hint = "; pass the system prompt as system=" if role == "system" else ""
        check.add(
            i,
            "role-invalid",
            where,
            f"role {role!r} is not allowed; allowed: user, assistant{hint}",
        )
        return
    if i == 0 and role != "user" and not (role == "assistant" and opens_with_compaction(msg)):
        check.add(i, "first-role", where, f"the first message must be 'user', got {role!r}")
    if i > 0 and msgs[i - 1].get("role") == role:
        check.add(
            i,
            "role-alternation",
            where,
            f"two {role} messages in a row; roles must alternate user/assistant (merge them)",
        )
    content = msg.get("content")
    if not isinstance(content, (str, list)):
        check.add(
            i,
            "content-type",
            where,
            f"content must be a string or a list of blocks, got {type(content).__name__}",
        )
    elif not content:
        if not (role == "assistant" and i == n - 1):
            empty = '""' if isinstance(content, str) else "[]"
            check.add(
                i,
                "content-empty",
                where,
                f"empty content {empty}; only a final assistant message may be empty",
            )
    elif isinstance(content, list):
        _check_anthropic_blocks(check, content, role, where, i)


def _check_anthropic_blocks(
    check: _Checker, content: list[Any], role: str, where: str, i: int
) -> None:
    seen_other = False
    for j, block in enumerate(content):
        block_where = f"{where}.content[{j}]"
        if not _is_block(check, block, block_where, i, "content block"):
            continue
        kind = block["type"]
        if kind != "tool_result":
            seen_other = True
            _check_anthropic_block(check, block, role, block_where, i)
            continue
        if role != "user":
            check.add(
                i, "tool-result-role", block_where, "tool_result blocks belong in user messages"
            )
        elif seen_other:
            check.add(
                i,
                "tool-result-order",
                block_where,
                "tool_result blocks must come before any other content in the message",
            )
        _check_tool_result(check, block, block_where, i)


def _check_anthropic_block(
    check: _Checker, block: Mapping[str, Any], role: str, where: str, i: int
) -> None:
    """A block other than ``tool_result`` (those are checked with their order)."""
    kind = block["type"]
    if kind == "text":
        check.text_block(block, where, i, "anthropic")
    elif kind == "compaction":
        _check_compaction(check, block, where, i, role, "anthropic")
    elif kind == "tool_use":
        if role != "assistant":
            check.add(i, "tool-use-role", where, "tool_use blocks belong in assistant messages")
        _check_tool_use(check, block, where, i)
    elif kind in OPENAI_PART_TYPES:
        check.add(
            i,
            "part-type",
            where,
            f"{kind!r} is an OpenAI part; Anthropic uses image blocks with a 'source' and "
            "text blocks",
        )


def _check_tool_use(check: _Checker, block: Mapping[str, Any], where: str, i: int) -> None:
    missing = []
    if not isinstance(block.get("id"), str) or not block.get("id"):
        missing.append("an 'id' string")
    if not isinstance(block.get("name"), str) or not block.get("name"):
        missing.append("a 'name' string")
    if not isinstance(block.get("input"), dict):
        got = type(block.get("input")).__name__ if "input" in block else "nothing"
        missing.append(f"an 'input' object (got {got})")
    if missing:
        check.add(i, "tool-use-shape", where, f"a tool_use block needs {', '.join(missing)}")


def _check_tool_result(check: _Checker, block: Mapping[str, Any], where: str, i: int) -> None:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        check.add(i, "tool-result-shape", where, "a tool_result block needs a 'tool_use_id' string")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        check.add(i, "tool-result-shape", where, "'is_error' must be true or false")
    content = block.get("content", "")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        check.add(
            i,
            "tool-result-shape",
            where,
            f"tool_result content must be a string or a list of blocks, got "
            f"{type(content).__name__}",
        )
        return
    for k, inner in enumerate(content):
        inner_where = f"{where}.content[{k}]"
        if _is_block(check, inner, inner_where, i, "content block") and inner["type"] == "text":
            check.text_block(inner, inner_where, i, "anthropic")
