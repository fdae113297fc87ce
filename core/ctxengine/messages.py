"""The message SDK: reading, validating, converting, redacting and marking message lists.

Everything an engine or a cache strategy needs to work on OpenAI chat and Anthropic Messages
lists without converting or mutating them. The message types (``Message``, ``Conversation``,
``Format``, ``Stage``, ``SystemPrompt``) and :class:`ctxengine.MessageFormatError` are in
:mod:`ctxengine`. This module is part of the declared SDK (see ``docs/sdk.md``); the modules it
re-exports from are private and may move.

- reading (lenient, never raises on odd shapes): :func:`visible_text`, :func:`message_text`,
  :func:`tool_calls`, :func:`tool_results`, :func:`tool_group`, :func:`cut_points`, ...;
- judging shape: :func:`validate` (every finding as a :class:`Problem` with a stable rule id,
  for the format's own API or, with ``profile="strict"``, the strictest routes);
- converting: :func:`to_anthropic`;
- redacting secrets: :func:`redact`;
- cache breakpoints, one rule set for every strategy: :data:`MAX_BREAKPOINTS`,
  :func:`mark_message`, :func:`strip_cache_markers`, :func:`marker_positions`, ...;
- server-side context management: compaction blocks (:func:`is_compaction_block`), Anthropic's
  context edits in a request (:func:`request_edits`);
- OpenAI Responses items in the chat form engines read: :class:`ItemsConverter`.
"""

from __future__ import annotations

from ctxengine._messages.convert import to_anthropic
from ctxengine._messages.editing import (
    COMPACT_BETA,
    COMPACT_EDIT,
    is_compaction_block,
    request_edits,
)
from ctxengine._messages.errors import Problem
from ctxengine._messages.markers import (
    MAX_BREAKPOINTS,
    MarkedMessages,
    breakpoint_ttls,
    cache_marker,
    can_carry_marker,
    carries_marker,
    detect_request_format,
    mark_message,
    marker_positions,
    strip_cache_markers,
)
from ctxengine._messages.read import (
    ToolCall,
    cut_points,
    is_real_user_message,
    is_tool_message,
    message_text,
    tool_calls,
    tool_group,
    tool_results,
    visible_text,
)
from ctxengine._messages.redact import redact
from ctxengine._messages.responses_items import ItemsConverter
from ctxengine._messages.validate import validate

__all__ = [
    "COMPACT_BETA",
    "COMPACT_EDIT",
    "MAX_BREAKPOINTS",
    "ItemsConverter",
    "MarkedMessages",
    "Problem",
    "ToolCall",
    "breakpoint_ttls",
    "cache_marker",
    "can_carry_marker",
    "carries_marker",
    "cut_points",
    "detect_request_format",
    "is_compaction_block",
    "is_real_user_message",
    "is_tool_message",
    "mark_message",
    "marker_positions",
    "message_text",
    "redact",
    "request_edits",
    "strip_cache_markers",
    "to_anthropic",
    "tool_calls",
    "tool_group",
    "tool_results",
    "validate",
    "visible_text",
]
