"""The summary model's view of a message: one transcript entry per message.

Shared by the bounded summary input (:mod:`.summary`) and the cache-aware call's hint of where
the kept tail begins (:mod:`.cache_aware`).
"""

from __future__ import annotations

from ctxengine import Format, Message
from ctxengine.messages import tool_calls, tool_results, visible_text
from ctxengine_compressor.assemble import SUMMARY_PREFIX, SUMMARY_SUFFIX

__all__ = ["render_message"]


def render_message(msg: Message, fmt: Format) -> str:
    """One message as transcript text: visible text, tool calls and tool results. Reasoning
    (``reasoning_content``, ``thinking`` blocks) is never included; images read as a marker."""
    role = str(msg.get("role", "?"))
    pieces: list[str] = []
    text = visible_text(msg)
    if text.strip():
        pieces.append(_without_old_summary(text))
    content = msg.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("image", "image_url") for b in content
    ):
        pieces.append("[image]")
    for call in tool_calls(msg, fmt):
        pieces.append(f"-> tool call {call.name}({call.arguments}) [id {call.id}]")
    for result in tool_results(msg, fmt):
        label = "tool error" if result.is_error else "tool result"
        pieces.append(f"<- {label} [id {result.call_id}]: {result.text}")
    return f"{role}: " + "\n".join(pieces) if pieces else f"{role}: (empty)"


def _without_old_summary(text: str) -> str:
    start = text.find(SUMMARY_PREFIX)
    if start < 0:
        return text
    end = text.find(SUMMARY_SUFFIX, start)
    end = len(text) if end < 0 else end + len(SUMMARY_SUFFIX)
    return f"{text[:start]}[previous summary: given separately]{text[end:]}"
