"""The message SDK: reading, converting, validating, repairing and marking message lists.

Everything an engine or a cache strategy needs to work on OpenAI chat and Anthropic Messages
lists without converting or mutating them. This module is part of the declared SDK (see
``docs/architecture.md``); the modules it re-exports from are private and may move.

- reading (lenient, never raises on odd shapes): :func:`detect_format`, :func:`visible_text`,
  :func:`message_text`, :func:`tool_calls`, :func:`tool_results`, :func:`tool_groups`,
  :func:`cut_points`, ...;
- judging shape: :func:`validate` (every finding as a :class:`Problem` with a stable rule id) and
  :func:`ensure_valid` (raises :class:`MessageFormatError`);
- converting: :func:`to_anthropic`, :func:`to_openai`;
- repairing what a compaction broke: :func:`sanitize_tool_pairs`;
- redacting secrets: :func:`redact`;
- cache breakpoints, one rule set for every strategy: :data:`MAX_BREAKPOINTS`,
  :func:`mark_message`, :func:`strip_cache_markers`, :func:`marker_problems`, ...;
- server-side context management: compaction blocks (:func:`is_compaction_block`,
  :func:`latest_compaction`), Anthropic's context edits in a request (:func:`with_edits`,
  :func:`request_edits`, :func:`clearable_blocks`, :func:`keep_markers_off_cleared`);
- OpenAI Responses items in the chat form engines read: :class:`ItemsConverter`.
"""

from __future__ import annotations

from ctxengine._messages.conversation import Conversation, Format, Message, Stage, SystemPrompt
from ctxengine._messages.convert import to_anthropic, to_openai
from ctxengine._messages.editing import (
    CLEAR_THINKING_EDIT,
    CLEAR_TOOL_USES_EDIT,
    COMPACT_BETA,
    COMPACT_EDIT,
    COMPACTION_BLOCK,
    CONTEXT_MANAGEMENT_BETA,
    DEFAULT_KEEP_TOOL_USES,
    EDIT_BETAS,
    clearable_blocks,
    compaction_blocks,
    edit_problems,
    is_compaction_block,
    keep_markers_off_cleared,
    latest_compaction,
    request_betas,
    request_edits,
    with_edits,
)
from ctxengine._messages.errors import MessageFormatError, Problem
from ctxengine._messages.markers import (
    MAX_BREAKPOINTS,
    TTL,
    TTLS,
    MarkedMessages,
    MarkerFinding,
    breakpoint_ttls,
    cache_marker,
    can_carry_marker,
    carries_marker,
    detect_request_format,
    is_tool_message,
    mark_message,
    mark_system,
    marked_items,
    marker_findings,
    marker_positions,
    marker_problems,
    strip_cache_markers,
)
from ctxengine._messages.memo import (
    MemoEntry,
    MessageMemo,
    MessageView,
    NotAMessageError,
    snapshot,
)
from ctxengine._messages.opening import COMPACTED_OPENING, user_first
from ctxengine._messages.read import (
    ANTHROPIC_BLOCK_TYPES,
    ANTHROPIC_ROLES,
    OPENAI_PART_TYPES,
    OPENAI_ROLES,
    ToolCall,
    ToolGroup,
    ToolResult,
    cut_points,
    detect_format,
    dumps_arguments,
    has_visible_assistant_text,
    is_real_user_content,
    is_real_user_message,
    is_tool_result_message,
    match_results,
    message_text,
    openai_tool_calls,
    text_size,
    tool_call_ids,
    tool_calls,
    tool_groups,
    tool_result_ids,
    tool_results,
    visible_text,
)
from ctxengine._messages.redact import REDACTION_PREFIX, redact
from ctxengine._messages.responses_items import ItemsConverter, item_kind
from ctxengine._messages.sanitize import sanitize_tool_pairs
from ctxengine._messages.validate import ensure_valid, validate

__all__ = [
    "ANTHROPIC_BLOCK_TYPES",
    "ANTHROPIC_ROLES",
    "CLEAR_THINKING_EDIT",
    "CLEAR_TOOL_USES_EDIT",
    "COMPACTED_OPENING",
    "COMPACTION_BLOCK",
    "COMPACT_BETA",
    "COMPACT_EDIT",
    "CONTEXT_MANAGEMENT_BETA",
    "DEFAULT_KEEP_TOOL_USES",
    "EDIT_BETAS",
    "MAX_BREAKPOINTS",
    "OPENAI_PART_TYPES",
    "OPENAI_ROLES",
    "REDACTION_PREFIX",
    "TTL",
    "TTLS",
    "Conversation",
    "Format",
    "ItemsConverter",
    "MarkedMessages",
    "MarkerFinding",
    "MemoEntry",
    "Message",
    "MessageFormatError",
    "MessageMemo",
    "MessageView",
    "NotAMessageError",
    "Problem",
    "Stage",
    "SystemPrompt",
    "ToolCall",
    "ToolGroup",
    "ToolResult",
    "breakpoint_ttls",
    "cache_marker",
    "can_carry_marker",
    "carries_marker",
    "clearable_blocks",
    "compaction_blocks",
    "cut_points",
    "detect_format",
    "detect_request_format",
    "dumps_arguments",
    "edit_problems",
    "ensure_valid",
    "has_visible_assistant_text",
    "is_compaction_block",
    "is_real_user_content",
    "is_real_user_message",
    "is_tool_message",
    "is_tool_result_message",
    "item_kind",
    "keep_markers_off_cleared",
    "latest_compaction",
    "mark_message",
    "mark_system",
    "marked_items",
    "marker_findings",
    "marker_positions",
    "marker_problems",
    "match_results",
    "message_text",
    "openai_tool_calls",
    "redact",
    "request_betas",
    "request_edits",
    "sanitize_tool_pairs",
    "snapshot",
    "strip_cache_markers",
    "text_size",
    "to_anthropic",
    "to_openai",
    "tool_call_ids",
    "tool_calls",
    "tool_groups",
    "tool_result_ids",
    "tool_results",
    "user_first",
    "validate",
    "visible_text",
    "with_edits",
]
