"""Validation rules for OpenAI chat and Anthropic Messages requests (messages.validate)."""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ctxengine._messages.conversation import Format
from ctxengine._messages.errors import MessageFormatError, Problem
from ctxengine._messages.markers import MAX_BREAKPOINTS
from ctxengine._messages.read import detect_format
from ctxengine._messages.validate import validate
from ctxengine.testing.transcripts import load_sessions

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}

Msgs = list[Any]


def user(content: Any = "hi", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, **extra}


def asst(content: Any = "hello", **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def call(call_id: str, name: str = "f", arguments: Any = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(*items: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(items)}


def tool(call_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def use(call_id: str, name: str = "f", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}, **extra}


def result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def found(problems: list[Problem]) -> list[tuple[int | None, str, str]]:
    return [(p.index, p.rule, p.message) for p in problems]


# Each case: provider, messages, keyword arguments, expected (index, rule, message) triples.
Case = tuple[str, Any, dict[str, Any], list[tuple[int | None, str, str]]]

CASES: dict[str, Case] = {
    # --- shape: lists and messages ------------------------------------------------------
    "messages-type/openai": (
        "openai",
        "hi",
        {},
        [(None, "messages-type", "messages: must be a list of message dicts")],
    ),
    "messages-type/anthropic": (
        "anthropic",
        {"role": "user"},
        {},
        [(None, "messages-type", "messages: must be a list of message dicts")],
    ),
    "messages-empty/openai": (
        "openai",
        [],
        {},
        [(None, "messages-empty", "messages: at least one message is required")],
    ),
    "messages-empty/anthropic": (
        "anthropic",
        [],
        {},
        [(None, "messages-empty", "messages: at least one message is required")],
    ),
    "message-type/openai": (
        "openai",
        [user(), 7],
        {},
        [(1, "message-type", "messages[1]: must be a dict, got int")],
    ),
    "message-type/anthropic": (
        "anthropic",
        [user(), "oops"],
        {},
        [(1, "message-type", "messages[1]: must be a dict, got str")],
    ),
    "role-missing/openai": (
        "openai",
        [{"content": "x"}],
        {},
        [
            (
                0,
                "role-missing",
                "messages[0]: missing 'role'; allowed: system, developer, user, assistant, tool",
            )
        ],
    ),
    "role-missing/anthropic": (
        "anthropic",
        [{"content": "x"}],
        {},
        [(0, "role-missing", "messages[0]: missing 'role'; allowed: user, assistant")],
    ),
    "role-invalid/openai": (
        "openai",
        [{"role": "bot", "content": "x"}],
        {},
        [
            (
                0,
                "role-invalid",
                "messages[0]: unknown role 'bot'; allowed: system, developer, user, assistant, "
                "tool",
            )
        ],
    ),
    "role-invalid/anthropic": (
        "anthropic",
        [{"role": "system", "content": "x"}, user()],
        {},
        [
            (
                0,
                "role-invalid",
                "messages[0]: role 'system' is not allowed; allowed: user, assistant; pass the "
                "system prompt as system=",
            )
        ],
    ),
    # --- shape: content ---------------------------------------------------------------
    "content-type/openai-user-null": (
        "openai",
        [user(None)],
        {},
        [(0, "content-type", "messages[0]: a user message needs content: a string or parts")],
    ),
    "content-type/openai-assistant-null": (
        "openai",
        [user(), asst(None)],
        {},
        [(1, "content-type", "messages[1]: assistant content may be null only with tool_calls")],
    ),
    "content-type/openai-int": (
        "openai",
        [user(3)],
        {},
        [
            (
                0,
                "content-type",
                "messages[0]: content must be a string, a list of parts or null, got int",
            )
        ],
    ),
    "content-type/anthropic": (
        "anthropic",
        [user(None)],
        {},
        [
            (
                0,
                "content-type",
                "messages[0]: content must be a string or a list of blocks, got NoneType",
            )
        ],
    ),
    "part-shape/openai": (
        "openai",
        [user(["x"])],
        {},
        [
            (
                0,
                "part-shape",
                "messages[0].content[0]: a content part must be a dict with a 'type', got str",
            )
        ],
    ),
    "part-shape/anthropic-no-type": (
        "anthropic",
        [user([{"text": "hi"}])],
        {},
        [
            (
                0,
                "part-shape",
                "messages[0].content[0]: a content block must be a dict with a 'type'; this one "
                "has no 'type' field",
            )
        ],
    ),
    "part-shape/anthropic": (
        "anthropic",
        [user([{"type": "text", "text": 5}])],
        {},
        [(0, "part-shape", "messages[0].content[0]: a text block needs a string 'text'")],
    ),
    "part-type/openai-anthropic-block": (
        "openai",
        [user(), asst([{"type": "thinking", "thinking": "x"}])],
        {},
        [
            (
                1,
                "part-type",
                "messages[1].content[0]: 'thinking' is an Anthropic block; OpenAI uses "
                "tool_calls, tool messages and reasoning_content",
            )
        ],
    ),
    "part-type/openai-role": (
        "openai",
        [user(), asst([{"type": "image_url", "image_url": {"url": "https://x"}}])],
        {},
        [
            (
                1,
                "part-type",
                "messages[1].content[0]: part type 'image_url' is not allowed in assistant "
                "messages; allowed: text, refusal",
            )
        ],
    ),
    "part-type/anthropic": (
        "anthropic",
        [user([{"type": "image_url", "image_url": {"url": "https://x"}}])],
        {},
        [
            (
                0,
                "part-type",
                "messages[0].content[0]: 'image_url' is an OpenAI part; Anthropic uses image "
                "blocks with a 'source' and text blocks",
            )
        ],
    ),
    # --- shape: tool calls and results ------------------------------------------------
    "tool-call-shape/empty-list": (
        "openai",
        [user(), {"role": "assistant", "content": "x", "tool_calls": []}],
        {},
        [
            (
                1,
                "tool-call-shape",
                "messages[1].tool_calls: must be a non-empty list of tool calls (omit it "
                "otherwise), got an empty list",
            )
        ],
    ),
    "tool-call-shape/string": (
        "openai",
        [user(), {"role": "assistant", "content": None, "tool_calls": "f()"}],
        {},
        [
            (
                1,
                "tool-call-shape",
                "messages[1].tool_calls: must be a non-empty list of tool calls (omit it "
                "otherwise), got str",
            )
        ],
    ),
    "tool-call-shape/no-function": (
        "openai",
        [user(), calls({"id": "a", "type": "function"}), tool("a")],
        {},
        [
            (
                1,
                "tool-call-shape",
                "messages[1].tool_calls[0]: a tool call needs a 'function' object with a "
                "'name' (got nothing)",
            )
        ],
    ),
    "tool-call-shape/fields": (
        "openai",
        [user(), calls({"function": {"arguments": "{}"}}), tool("x")],
        {},
        [
            (
                1,
                "tool-call-shape",
                "messages[1].tool_calls[0]: a tool call needs an 'id' string, 'type': "
                "'function', 'function.name'",
            ),
            (
                2,
                "tool-result-orphan",
                "messages[2]: result for 'x' answers no tool call of messages[1] (results must "
                "answer a call of the assistant message right before them)",
            ),
        ],
    ),
    "tool-call-arguments/invalid-json": (
        "openai",
        [user(), calls(call("a", arguments="{oops")), tool("a")],
        {},
        [
            (
                1,
                "tool-call-json",
                "messages[1].tool_calls[0]: 'function.arguments' is not valid JSON (Expecting "
                "property name enclosed in double quotes at char 1)",
            )
        ],
    ),
    "tool-call-arguments/not-string": (
        "openai",
        [user(), calls(call("a", arguments={"x": 1})), tool("a")],
        {},
        [
            (
                1,
                "tool-call-arguments",
                "messages[1].tool_calls[0]: 'function.arguments' must be a JSON string, got dict",
            )
        ],
    ),
    "tool-call-role": (
        "openai",
        [user("x", tool_calls=[call("a")])],
        {},
        [(0, "tool-call-role", "messages[0]: tool_calls on a user message; only assistant")],
    ),
    "tool-message-shape": (
        "openai",
        [user(), calls(call("a")), {"role": "tool", "content": "x"}],
        {},
        # Call 'a' is still pending (only tool messages follow it), so only the result is wrong.
        [
            (2, "tool-message-shape", "messages[2]: a tool message needs a 'tool_call_id' string"),
            (
                2,
                "tool-result-orphan",
                "messages[2]: result for '' answers no tool call of messages[1] (results must "
                "answer a call of the assistant message right before them)",
            ),
        ],
    ),
    "tool-use-shape": (
        "anthropic",
        [user(), asst([{"type": "tool_use", "id": "a", "input": "x"}]), user([result("a")])],
        {},
        [
            (
                1,
                "tool-use-shape",
                "messages[1].content[0]: a tool_use block needs a 'name' string, an 'input' "
                "object (got str)",
            )
        ],
    ),
    "tool-result-shape": (
        "anthropic",
        [user(), asst([use("a")]), user([result("a", 5, is_error="yes")])],
        {},
        [
            (2, "tool-result-shape", "messages[2].content[0]: 'is_error' must be true or false"),
            (
                2,
                "tool-result-shape",
                "messages[2].content[0]: tool_result content must be a string or a list of "
                "blocks, got int",
            ),
        ],
    ),
    "tool-use-role": (
        "anthropic",
        [user([use("a")])],
        {},
        [
            (
                0,
                "tool-use-role",
                "messages[0].content[0]: tool_use blocks belong in assistant messages",
            )
        ],
    ),
    "tool-result-role": (
        "anthropic",
        [user(), asst([result("a")])],
        {},
        [
            (
                1,
                "tool-result-role",
                "messages[1].content[0]: tool_result blocks belong in user messages",
            )
        ],
    ),
    "tool-result-order": (
        "anthropic",
        [user(), asst([use("a")]), user([text("first"), result("a")])],
        {},
        [
            (
                2,
                "tool-result-order",
                "messages[2].content[1]: tool_result blocks must come before any other content "
                "in the message",
            )
        ],
    ),
    # --- request level ----------------------------------------------------------------
    "system-shape/type": (
        "anthropic",
        [user()],
        {"system": 5},
        [(None, "system-shape", "system: must be a string or a list of text blocks, got int")],
    ),
    "system-shape/block": (
        "anthropic",
        [user()],
        {"system": [{"type": "image"}]},
        [(None, "system-shape", "system[0]: system blocks must be text blocks")],
    ),
    "system-param": (
        "openai",
        [user()],
        {"system": "be nice"},
        [
            (
                None,
                "system-param",
                "system: OpenAI chat has no separate system prompt; put it in a leading system "
                "message",
            )
        ],
    ),
    "tools-shape/openai": (
        "openai",
        [user()],
        {"tools": "search"},
        [(None, "tools-shape", "tools: must be a list of tool definitions")],
    ),
    "tools-shape/anthropic": (
        "anthropic",
        [user()],
        {"tools": [{"name": "x"}, 3]},
        [(None, "tools-shape", "tools[1]: a tool definition must be a dict")],
    ),
    # --- order ------------------------------------------------------------------------
    "system-position": (
        "openai",
        [{"role": "system", "content": "a"}, user(), {"role": "developer", "content": "b"}],
        {},
        [
            (
                2,
                "system-position",
                "messages[2]: a developer message may only open the conversation (before any "
                "other role)",
            )
        ],
    ),
    "tool-message-position": (
        "openai",
        [user(), tool("a")],
        {},
        [
            (
                1,
                "tool-message-position",
                "messages[1]: a tool message must follow an assistant message with tool_calls "
                "(or another tool message answering it); it follows a user message",
            )
        ],
    ),
    "field-unknown/openai-nested": (
        "openai",
        [user("x", metadata={"a": {"b": {"c": [{"d": 1}]}}})],
        {},
        [
            (
                0,
                "field-unknown",
                "messages[0].metadata: unknown field, which the API rejects; allowed: "
                "annotations, audio, cache_control, content, function_call, name, prefix, "
                "reasoning, reasoning_content, reasoning_details, refusal, role, tool_call_id, "
                "tool_calls",
            )
        ],
    ),
    "field-unknown/anthropic": (
        "anthropic",
        [user("x", id="m1")],
        {},
        [
            (
                0,
                "field-unknown",
                "messages[0].id: unknown field, which the API rejects; allowed: cache_control, "
                "content, role",
            )
        ],
    ),
    "field-unknown/openai-call": (
        "openai",
        [user(), calls({**call("a"), "extra": 1}), tool("a")],
        {},
        [
            (
                1,
                "field-unknown",
                "messages[1].tool_calls[0].extra: unknown field, which the API rejects; "
                "allowed: function, id, index, type",
            )
        ],
    ),
    "first-role/openai-strict": (
        "openai",
        [{"role": "system", "content": "s"}, asst(), user()],
        {"profile": "strict"},
        [
            (
                1,
                "first-role",
                "messages[1]: the first message after the system prompt must be 'user' on "
                "strict routes (Claude on Amazon Bedrock and gateways in front of it), got "
                "'assistant'",
            )
        ],
    ),
    "role-alternation/openai-strict": (
        "openai",
        [user(), asst(), asst("again"), user(), user("twice")],
        {"profile": "strict"},
        [
            (
                2,
                "role-alternation",
                "messages[2]: two assistant messages in a row; strict routes need user and "
                "assistant turns to alternate (merge them)",
            ),
            (
                4,
                "role-alternation",
                "messages[4]: two user messages in a row; strict routes need user and "
                "assistant turns to alternate (merge them)",
            ),
        ],
    ),
    "first-role": (
        "anthropic",
        [asst(), user()],
        {},
        [(0, "first-role", "messages[0]: the first message must be 'user', got 'assistant'")],
    ),
    "first-role/compaction-opens": (
        "anthropic",
        [asst([{"type": "compaction", "content": "summary", "encrypted_content": "e"}]), user()],
        {},
        [],
    ),
    "compaction-role": (
        "anthropic",
        [user([{"type": "compaction", "content": "summary"}]), asst()],
        {},
        [
            (
                0,
                "compaction-role",
                "messages[0].content[0]: compaction blocks belong in assistant messages",
            )
        ],
    ),
    "compaction-shape/anthropic": (
        "anthropic",
        [asst([{"type": "compaction", "content": ""}, text("go on")]), user()],
        {},
        [
            (
                0,
                "compaction-shape",
                "messages[0].content[0]: a compaction block's content must be the summary as "
                "returned (a non-empty string) or null for a failed compaction",
            )
        ],
    ),
    "compaction-shape/openai": (
        "openai",
        [user(), asst([{"type": "compaction", "id": "cmp_1"}]), user("next")],
        {},
        [
            (
                1,
                "compaction-shape",
                "messages[1].content[0]: a Responses compaction item needs its "
                "'encrypted_content' string, as returned",
            )
        ],
    ),
    "context-edit-shape": (
        "anthropic",
        [user(), asst()],
        {"context_management": {"edits": [{"type": "clear_everything"}]}},
        [
            (
                None,
                "context-edit-shape",
                "context_management.edits[0].type: unknown edit 'clear_everything'; known: "
                "compact_20260112, clear_tool_uses_20250919, clear_thinking_20251015",
            )
        ],
    ),
    "cache-control-cleared": (
        "anthropic",
        [
            user("q"),
            asst([use("a")]),
            user([result("a", cache_control=EPH)]),
            asst([use("b")]),
            user([result("b")]),
        ],
        {
            "context_management": {
                "edits": [
                    {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 1}}
                ]
            }
        },
        [
            (
                2,
                "cache-control-cleared",
                "messages[2].content[0]: cache_control on a block the request's context edits "
                "may clear; the cached prefix would not be repeated once the server clears it "
                "(mark a block that stays)",
            )
        ],
    ),
    "role-alternation": (
        "anthropic",
        [user(), user("again")],
        {},
        [
            (
                1,
                "role-alternation",
                "messages[1]: two user messages in a row; roles must alternate user/assistant "
                "(merge them)",
            )
        ],
    ),
    # --- emptiness --------------------------------------------------------------------
    "content-empty/string": (
        "anthropic",
        [user(""), asst()],
        {},
        [
            (
                0,
                "content-empty",
                'messages[0]: empty content ""; only a final assistant message may be empty',
            )
        ],
    ),
    "content-empty/list": (
        "anthropic",
        [user(), asst([]), user()],
        {},
        [
            (
                1,
                "content-empty",
                "messages[1]: empty content []; only a final assistant message may be empty",
            )
        ],
    ),
    "text-empty": (
        "anthropic",
        [user([text("")])],
        {},
        [(0, "text-empty", 'messages[0].content[0]: text block with empty text ""; drop it')],
    ),
    # --- tool pairing -----------------------------------------------------------------
    "tool-call-unanswered/openai": (
        "openai",
        [user(), calls(call("a", "ls"), call("b", "cat")), tool("a"), user("more")],
        {},
        [
            (
                1,
                "tool-call-unanswered",
                "messages[1]: tool call 'b' (cat) has no result; it needs a tool message with "
                "its tool_call_id right after this assistant message",
            )
        ],
    ),
    "tool-call-unanswered/anthropic": (
        "anthropic",
        [user(), asst([use("a", "Bash")]), user("no")],
        {},
        [
            (
                1,
                "tool-call-unanswered",
                "messages[1]: tool_use 'a' (Bash) has no result; it needs a tool_result block "
                "in the next user message",
            )
        ],
    ),
    "tool-call-unanswered/anthropic-partial-at-end": (
        "anthropic",
        [user(), asst([use("a"), use("b", "g")]), user([result("a")])],
        {},
        [
            (
                1,
                "tool-call-unanswered",
                "messages[1]: tool_use 'b' (g) has no result; it needs a tool_result block in "
                "the next user message",
            )
        ],
    ),
    "tool-call-unanswered/pending-not-allowed": (
        "openai",
        [user(), calls(call("a", "ls"))],
        {"allow_pending_tool_call": False},
        [
            (
                1,
                "tool-call-unanswered",
                "messages[1]: tool call 'a' (ls) has no result; it needs a tool message with "
                "its tool_call_id right after this assistant message",
            )
        ],
    ),
    "tool-result-orphan/openai": (
        "openai",
        [user(), calls(call("a")), tool("a"), tool("zzz")],
        {},
        [
            (
                3,
                "tool-result-orphan",
                "messages[3]: result for 'zzz' answers no tool call of messages[1] (results "
                "must answer a call of the assistant message right before them)",
            )
        ],
    ),
    "tool-result-orphan/anthropic-no-call": (
        "anthropic",
        [user(), asst("plain"), user([result("a")])],
        {},
        [
            (
                2,
                "tool-result-orphan",
                "messages[2]: tool_result for 'a' has no tool_use in the assistant message "
                "right before it",
            )
        ],
    ),
    "tool-result-orphan/anthropic-wrong-id": (
        "anthropic",
        [user(), asst([use("a")]), user([result("a"), result("b")])],
        {},
        [
            (
                2,
                "tool-result-orphan",
                "messages[2]: result for 'b' answers no tool_use of messages[1] (results must "
                "answer a call of the assistant message right before them)",
            )
        ],
    ),
    "tool-result-duplicate/openai": (
        "openai",
        [user(), calls(call("a")), tool("a"), tool("a")],
        {},
        [
            (
                3,
                "tool-result-duplicate",
                "messages[3]: a second result for tool call 'a' of messages[1]; each call gets "
                "exactly one result",
            )
        ],
    ),
    "tool-result-duplicate/anthropic": (
        "anthropic",
        [user(), asst([use("a")]), user([result("a"), result("a")])],
        {},
        [
            (
                2,
                "tool-result-duplicate",
                "messages[2]: a second result for tool_use 'a' of messages[1]; each call gets "
                "exactly one result",
            )
        ],
    ),
    "tool-call-duplicate-id/openai": (
        "openai",
        [user(), calls(call("a"), call("a")), tool("a"), tool("a")],
        {},
        [
            (
                1,
                "tool-call-duplicate-id",
                "messages[1]: tool call id 'a' is used 2 times in one message; ids must be "
                "unique within a message",
            )
        ],
    ),
    "tool-call-duplicate-id/anthropic": (
        "anthropic",
        [user(), asst([use("a"), use("a")]), user([result("a"), result("a")])],
        {},
        [
            (
                1,
                "tool-call-duplicate-id",
                "messages[1]: tool_use id 'a' is used 2 times in one message; ids must be "
                "unique within a message",
            )
        ],
    ),
    # --- caching ----------------------------------------------------------------------
    "cache-control-shape/openai": (
        "openai",
        [user([text("x", cache_control={"type": "persistent"})])],
        {},
        [
            (
                0,
                "cache-control-shape",
                "messages[0].content[0]: cache_control must be {'type': 'ephemeral'}, optionally "
                "with 'ttl': '5m' or '1h'; got {'type': 'persistent'}",
            )
        ],
    ),
    "cache-control-shape/anthropic": (
        "anthropic",
        [user("x")],
        {"system": [text("s", cache_control={"type": "ephemeral", "ttl": "2h"})]},
        [
            (
                None,
                "cache-control-shape",
                "system[0]: cache_control must be {'type': 'ephemeral'}, optionally with 'ttl': "
                "'5m' or '1h'; got {'type': 'ephemeral', 'ttl': '2h'}",
            )
        ],
    ),
    "cache-control-empty-text/openai": (
        "openai",
        [user([text("", cache_control=EPH)])],
        {},
        [
            (
                0,
                "cache-control-empty-text",
                "messages[0].content[0]: cache_control on an empty text block (the API rejects "
                "it); mark a non-empty block or the message instead",
            )
        ],
    ),
    "cache-control-empty-text/anthropic": (
        "anthropic",
        [user([text("x"), text("", cache_control=EPH)])],
        {},
        [
            (0, "text-empty", 'messages[0].content[1]: text block with empty text ""; drop it'),
            (
                0,
                "cache-control-empty-text",
                "messages[0].content[1]: cache_control on an empty text block (the API rejects "
                "it); mark a non-empty block or the message instead",
            ),
        ],
    ),
    "cache-control-thinking/anthropic": (
        "anthropic",
        [
            user("q"),
            asst([{"type": "thinking", "thinking": "t", "signature": "s", "cache_control": EPH}]),
            user("more"),
        ],
        {},
        [
            (
                1,
                "cache-control-thinking",
                "messages[1].content[0]: cache_control on a thinking block",
            )
        ],
    ),
    "cache-control-limit/openai": (
        "openai",
        [
            {"role": "system", "content": [text("s", cache_control=EPH)]},
            user([text("a", cache_control=EPH)]),
            calls(call("c")) | {"cache_control": EPH},
            tool("c") | {"cache_control": EPH},
            asst("x", cache_control=EPH),
        ],
        {},
        [
            (
                None,
                "cache-control-limit",
                "request: 5 cache_control breakpoints (messages[0].content[0], "
                "messages[1].content[0], messages[2], messages[3], messages[4]); at most 4 are "
                "allowed",
            )
        ],
    ),
    "cache-control-limit/anthropic": (
        "anthropic",
        [
            user([text("a", cache_control=EPH)]),
            asst([use("c", cache_control=EPH)]),
            user([result("c", [text("r", cache_control=EPH)])]),
        ],
        {"tools": [{"name": "c", "cache_control": EPH}], "system": [text("s", cache_control=EPH)]},
        [
            (
                None,
                "cache-control-limit",
                "request: 5 cache_control breakpoints (tools[0], system[0], "
                "messages[0].content[0], messages[1].content[0], "
                "messages[2].content[0].content[0]); at most 4 are allowed",
            )
        ],
    ),
    "cache-control-ttl-order/openai": (
        "openai",
        [user([text("a", cache_control=EPH)]), asst([text("b", cache_control=EPH_1H)])],
        {},
        [
            (
                1,
                "cache-control-ttl-order",
                "messages[1].content[0]: a 1h cache_control after the 5m one at "
                "messages[0].content[0]; longer TTLs must come first (in the order tools, "
                "system, messages)",
            )
        ],
    ),
    "cache-control-ttl-order/anthropic": (
        "anthropic",
        [user([text("a", cache_control=EPH_1H)])],
        {"tools": [{"name": "t", "cache_control": EPH}]},
        [
            (
                0,
                "cache-control-ttl-order",
                "messages[0].content[0]: a 1h cache_control after the 5m one at tools[0]; longer "
                "TTLs must come first (in the order tools, system, messages)",
            )
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES), ids=sorted(CASES))
def test_rule(case: str) -> None:
    provider, messages, kw, expected = CASES[case]
    before = copy.deepcopy((messages, kw))
    assert found(validate(messages, provider, **kw)) == expected  # type: ignore[arg-type]
    assert (messages, kw) == before  # validation only reads


def test_every_rule_has_a_case() -> None:
    import ctxengine._messages.validate as module
    from ctxengine._messages import markers, pairing

    documented = {
        word.strip("`,;().")
        for word in (module.__doc__ or "").split()
        if word.startswith("``") and "-" in word
    }
    covered = {rule for *_, expected in CASES.values() for _, rule, _ in expected}
    assert documented - covered == set()
    # And every rule the code can emit is documented.
    # (the tool pairing rules are checked in their own module).
    source = "".join(Path(m.__file__ or "").read_text(encoding="utf-8") for m in (module, pairing))
    emitted = set(re.findall(r'(?:check|self)\.add\(\s*[^,]+,\s*"([a-z-]+)"', source))
    # The cache_control rules are the shared marker rule set the validator reports.
    marker_source = Path(markers.__file__ or "").read_text(encoding="utf-8")
    emitted |= set(re.findall(r'"(cache-control-[a-z-]+)"', marker_source))
    assert len(emitted) == len(documented)
    assert emitted - documented == set()


# ------------------------------------------------------------------------------------------
# what is allowed


@pytest.mark.parametrize(
    ("provider", "messages", "kw"),
    [
        ("openai", [user(), calls(call("a"), call("b")), tool("a")], {}),
        ("anthropic", [user(), asst([text("\n\n"), use("a")])], {}),
        ("anthropic", [user(), asst("")], {}),
        ("anthropic", [user([text("\n\n"), text("x")]), asst([text(" ")])], {}),
        ("openai", [user([text("")])], {}),
        (
            "openai",
            [{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}, user()],
            {},
        ),
        (
            "anthropic",
            [user([text("a", cache_control=EPH)]), asst([text("b", cache_control=EPH)])],
            {
                "tools": [{"name": "t", "cache_control": EPH_1H}],
                "system": [text("s", cache_control=EPH_1H)],
            },
        ),
        (
            "openai",
            [user(), calls(call("same")), tool("same"), calls(call("same")), tool("same")],
            {},
        ),
        ("anthropic", [user("x", cache_control=None)], {"system": "plain"}),
    ],
    ids=[
        "openai-partial-parallel-pending",
        "anthropic-pending-with-whitespace-text",
        "anthropic-final-assistant-empty",
        "anthropic-whitespace-text-blocks",
        "openai-empty-text-part",
        "openai-leading-system-and-developer",
        "four-breakpoints-1h-first",
        "reused-ids-across-turns",
        "cache-control-none-is-absent",
    ],
)
def test_valid_requests(provider: str, messages: Msgs, kw: dict[str, Any]) -> None:
    assert validate(messages, provider, **kw) == []  # type: ignore[arg-type]


def test_unknown_provider_is_an_error() -> None:
    with pytest.raises(ValueError, match="provider must be 'openai' or 'anthropic', got 'gemini'"):
        validate([user()], "gemini")  # type: ignore[arg-type]


def test_breakpoint_limit_is_four() -> None:
    assert MAX_BREAKPOINTS == 4
    four = [user([text(str(k), cache_control=EPH) for k in range(4)])]
    assert validate(four, "anthropic") == []


# ------------------------------------------------------------------------------------------
# real transcripts


@cache
def _load(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_sessions(name))


TRANSCRIPT_FILES = [
    "claude_code_spotter.openai.jsonl",
    "claude_code_spotter.anthropic.jsonl",
    "tau_bench_airline_gpt4o.openai.jsonl",
    "openhands_multiswebench_llama4.openai.jsonl",
]


@pytest.mark.parametrize("name", TRANSCRIPT_FILES)
def test_real_transcripts_validate_cleanly(name: str) -> None:
    expected_format = "anthropic" if ".anthropic." in name else "openai"
    for session in _load(name):
        messages, system = session["messages"], session.get("system")
        assert detect_format(messages, system) == expected_format, session["id"]
        assert validate(messages, expected_format, system=system) == [], session["id"]


def test_real_pending_calls_are_only_at_the_end() -> None:
    pending = []
    for name in TRANSCRIPT_FILES:
        fmt = "anthropic" if ".anthropic." in name else "openai"
        for session in _load(name):
            messages = session["messages"]
            problems = validate(messages, fmt, allow_pending_tool_call=False)  # type: ignore[arg-type]
            for problem in problems:
                assert problem.rule == "tool-call-unanswered"
                assert problem.index == len(messages) - 1
                pending.append(session["id"])
    assert sorted(pending) == [
        "openhands/multi-swe-bench/ponylang__ponyc-4593",
        "openhands/multi-swe-bench/ponylang__ponyc-4595",
    ]


def test_breaking_a_real_transcript_is_caught() -> None:
    session = _load("claude_code_spotter.anthropic.jsonl")[0]
    messages = list(session["messages"])
    # Drop the first tool-result message: its calls lose their results and roles stop alternating.
    del messages[2]
    assert {p.rule for p in validate(messages, "anthropic")} == {
        "tool-call-unanswered",
        "role-alternation",
    }
    # Move a result message away from its calls: it becomes an orphan.
    messages = list(session["messages"])
    messages[2], messages[4] = messages[4], messages[2]
    assert "tool-result-orphan" in {p.rule for p in validate(messages, "anthropic")}


# ------------------------------------------------------------------------------------------
# the strict route profile and the shape-only check


def test_strict_profile_accepts_tool_results_followed_by_the_user() -> None:
    # Tool results are the user's side of the conversation: every converter merges them with
    # the user text that follows into one user turn.
    messages = [
        {"role": "system", "content": "s"},
        user(),
        calls(call("a"), call("b")),
        tool("a"),
        tool("b"),
        user("and now?"),
        asst(),
    ]
    assert validate(messages, "openai", profile="strict") == []


def test_provider_profile_leaves_openai_order_alone() -> None:
    # OpenAI's own API takes an assistant-first list; only the strict profile refuses it.
    messages = [{"role": "system", "content": "s"}, asst(), user()]
    assert validate(messages, "openai") == []
    assert [p.rule for p in validate(messages, "openai", profile="strict")] == ["first-role"]


def test_unknown_profile_is_an_error() -> None:
    with pytest.raises(ValueError, match="profile must be 'provider' or 'strict', got 'loose'"):
        validate([user()], "openai", profile="loose")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", TRANSCRIPT_FILES)
def test_real_transcripts_pass_the_strict_profile(name: str) -> None:
    fmt: Format = "anthropic" if ".anthropic." in name else "openai"
    for session in _load(name):
        problems = validate(
            session["messages"], fmt, system=session.get("system"), profile="strict"
        )
        assert problems == [], session["id"]


# The seven malformed shapes that once went through compaction unnoticed.
MALFORMED: dict[str, tuple[str, Msgs, str, str]] = {
    "tool_calls as a string": (
        "openai",
        [user(), {"role": "assistant", "content": None, "tool_calls": "f()"}],
        "messages[1].tool_calls",
        "tool-call-shape",
    ),
    "arguments as a dict": (
        "openai",
        [user(), calls(call("a", arguments={"x": 1})), tool("a")],
        "messages[1].tool_calls[0]",
        "tool-call-arguments",
    ),
    "a call without function": (
        "openai",
        [user(), calls({"id": "a", "type": "function"}), tool("a")],
        "messages[1].tool_calls[0]",
        "tool-call-shape",
    ),
    "a content part that is not a dict": (
        "openai",
        [user(["hello"])],
        "messages[0].content[0]",
        "part-shape",
    ),
    "a block without type": (
        "anthropic",
        [user([{"text": "hello"}])],
        "messages[0].content[0]",
        "part-shape",
    ),
    "tool_use.input as a string": (
        "anthropic",
        [user(), asst([{"type": "tool_use", "id": "a", "name": "f", "input": "{}"}])],
        "messages[1].content[0]",
        "tool-use-shape",
    ),
    "deeply nested unknown fields": (
        "openai",
        [user("x", meta={"a": {"b": {"c": {"d": [{"e": {"f": 1}}]}}}})],
        "messages[0].meta",
        "field-unknown",
    ),
}


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_each_malformed_shape_is_named_with_index_and_field(shape: str) -> None:
    from ctxengine._messages.validate import ensure_well_formed

    fmt, messages, where, rule = MALFORMED[shape]
    with pytest.raises(MessageFormatError) as err:
        ensure_well_formed(messages, fmt)  # type: ignore[arg-type]
    assert [p.rule for p in err.value.problems] == [rule]
    assert err.value.problems[0].message.startswith(f"{where}: ")
    assert f"malformed {fmt} messages" in str(err.value)


def test_well_formed_check_ignores_order_pairing_and_markers() -> None:
    from ctxengine._messages.validate import ensure_well_formed

    # An orphan result, two users in a row, an empty text block: repairable, not malformed.
    ensure_well_formed([user([result("gone")]), user(""), asst([text("")])], "anthropic")
    ensure_well_formed([], "openai")
    # Cut-off JSON arguments are unsendable but readable: engines keep working with them.
    ensure_well_formed([user(), calls(call("a", arguments="{oops")), tool("a")], "openai")
