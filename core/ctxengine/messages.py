"""The message SDK: reading, converting, validating, repairing and marking message lists.

Everything an engine or a cache strategy needs to work on OpenAI chat and Anthropic Messages
lists without converting or mutating them. The message types (``Message``, ``Conversation``,
``Format``, ``Stage``, ``SystemPrompt``) are in :mod:`ctxengine`. This module is part of the
declared SDK (see ``docs/sdk.md``); the modules it re-exports from are private and may move.

- reading (lenient, never raises on odd shapes): :func:`visible_text`, :func:`message_text`,
  :func:`tool_calls`, :func:`tool_results`, :func:`cut_points`, ...;
- judging shape: :func:`validate` (every finding as a :class:`Problem` with a stable rule id,
  for the format's own API or, with ``profile="strict"``, the strictest routes); the kernel
  raises :class:`MessageFormatError` for a list it cannot work on;
- converting: :func:`to_anthropic`, :func:`to_openai`;
- redacting secrets: :func:`redact`;
- cache breakpoints, one rule set for every strategy: :data:`MAX_BREAKPOINTS`,
  :func:`mark_message`, :func:`strip_cache_markers`, :func:`marker_problems`, ...;
- server-side context management: compaction blocks (:func:`is_compaction_block`,
  :func:`latest_compaction`), Anthropic's context edits in a request (:func:`request_edits`);
- OpenAI Responses items in the chat form engines read: :class:`ItemsConverter`.
"""

from __future__ import annotations

from ctxengine._messages.convert import to_anthropic, to_openai
from ctxengine._messages.editing import (
    COMPACT_BETA,
    COMPACT_EDIT,
    DEFAULT_KEEP_TOOL_USES,
    is_compaction_block,
    latest_compaction,
    request_edits,
)
from ctxengine._messages.errors import MessageFormatError, Problem
from ctxengine._messages.markers import (
    MAX_BREAKPOINTS,
    TTL,
    TTLS,
    MarkedMessages,
    breakpoint_ttls,
    cache_marker,
    can_carry_marker,
    carries_marker,
    detect_request_format,
    is_tool_message,
    mark_message,
    mark_system,
    marked_items,
    marker_positions,
    marker_problems,
    strip_cache_markers,
    top_level_ttl,
)
from ctxengine._messages.memo import snapshot
from ctxengine._messages.read import (
    ToolCall,
    ToolResult,
    cut_points,
    has_visible_assistant_text,
    is_real_user_content,
    is_real_user_message,
    is_tool_result_message,
    match_results,
    message_text,
    openai_tool_calls,
    tool_call_ids,
    tool_calls,
    tool_result_ids,
    tool_results,
    visible_text,
)
from ctxengine._messages.redact import redact
from ctxengine._messages.responses_items import ItemsConverter
from ctxengine._messages.validate import validate

__all__ = [
    "COMPACT_BETA",
    "COMPACT_EDIT",
    "DEFAULT_KEEP_TOOL_USES",
    "MAX_BREAKPOINTS",
    "TTL",
    "TTLS",
    "ItemsConverter",
    "MarkedMessages",
    "MessageFormatError",
    "Problem",
    "ToolCall",
    "ToolResult",
    "breakpoint_ttls",
    "cache_marker",
    "can_carry_marker",
    "carries_marker",
    "cut_points",
    "detect_request_format",
    "has_visible_assistant_text",
    "is_compaction_block",
    "is_real_user_content",
    "is_real_user_message",
    "is_tool_message",
    "is_tool_result_message",
    "latest_compaction",
    "mark_message",
    "mark_system",
    "marked_items",
    "marker_positions",
    "marker_problems",
    "match_results",
    "message_text",
    "openai_tool_calls",
    "redact",
    "request_edits",
    "snapshot",
    "strip_cache_markers",
    "to_anthropic",
    "to_openai",
    "tool_call_ids",
    "tool_calls",
    "tool_result_ids",
    "tool_results",
    "top_level_ttl",
    "validate",
    "visible_text",
]
