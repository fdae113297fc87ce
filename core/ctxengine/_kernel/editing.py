"""The kernel's side of server-side context management: which edits a prepared request carries.

:meth:`Session.prepare <ctxengine.Session.prepare>` adds :func:`wanted_edits` before the cache
strategy and :func:`markers_kept_off_cleared` after it, so a request goes out
with

- the clearing the ``context_editing`` settings ask for (``clear_tool_uses_20250919``, and
  ``clear_thinking_20251015`` on requests that enable extended thinking: without thinking there
  is nothing to clear), on routes that take Anthropic's Messages API as is;
- a ``compact_20260112`` edit declaring the compaction block a request opens with (where an engine
  puts the block it got back; the blocks are a beta feature, and the server reads them under the
  edit that made them), with its trigger at the model's whole context length so the server never
  compacts on its own before ctxengine does (a host that asks for compaction inside its own
  requests declares the edit itself);
- no cache breakpoint on a block those edits may clear.

Edits the host wrote itself are kept and never duplicated (:func:`ctxengine.messages.with_edits`).
OpenAI-format requests are left alone: the Responses API's compaction needs nothing declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxengine._config.core import ContextEditingSettings
from ctxengine._kernel.cache_settings import NATIVE_ROUTES
from ctxengine._messages.editing import (
    CLEAR_THINKING_EDIT,
    CLEAR_TOOL_USES_EDIT,
    COMPACT_EDIT,
    opens_with_compaction,
)
from ctxengine._messages.markers import detect_request_format
from ctxengine._plugin.context import Route


def clearing_edits(
    settings: ContextEditingSettings, window: int, *, thinking: bool
) -> list[dict[str, Any]]:
    """The edits ``settings`` ask for, in the order the API applies them (thinking first).

    :param window: the usable window, which ``settings.trigger`` is a fraction of.
    :param thinking: whether the request enables extended thinking.
    """
    edits: list[dict[str, Any]] = []
    if settings.clear_thinking and thinking:
        edits.append(
            {
                "type": CLEAR_THINKING_EDIT,
                "keep": {"type": "thinking_turns", "value": settings.keep_thinking_turns},
            }
        )
    if settings.clear_tool_uses:
        edit: dict[str, Any] = {
            "type": CLEAR_TOOL_USES_EDIT,
            "keep": {"type": "tool_uses", "value": settings.keep_tool_uses},
        }
        if settings.trigger is not None:
            edit["trigger"] = {"type": "input_tokens", "value": int(settings.trigger * window)}
        if settings.clear_at_least_tokens is not None:
            edit["clear_at_least"] = {
                "type": "input_tokens",
                "value": settings.clear_at_least_tokens,
            }
        if settings.exclude_tools:
            edit["exclude_tools"] = list(settings.exclude_tools)
        if settings.clear_tool_inputs:
            edit["clear_tool_inputs"] = True
        edits.append(edit)
    return edits


def declaring_edit(context_length: int) -> dict[str, Any]:
    """The ``compact_20260112`` edit that declares carried compaction blocks without asking the
    server to compact again (its trigger is the model's whole window)."""
    return {"type": COMPACT_EDIT, "trigger": {"type": "input_tokens", "value": context_length}}


def thinking_enabled(request: Mapping[str, Any]) -> bool:
    """Whether the request turns extended thinking on (``thinking.type`` other than
    ``disabled``, as a keyword argument or in ``extra_body``)."""
    value = request.get("thinking")
    extra = request.get("extra_body")
    if value is None and isinstance(extra, Mapping):
        value = extra.get("thinking")
    return isinstance(value, Mapping) and value.get("type") not in (None, "disabled")


def wanted_edits(
    request: Mapping[str, Any],
    settings: ContextEditingSettings,
    *,
    route: Route | None,
    window: int,
    context_length: int,
) -> list[dict[str, Any]]:
    """Every edit :meth:`Session.prepare <ctxengine.Session.prepare>` adds to ``request`` (none
    for OpenAI-format requests and on routes outside
    :data:`~ctxengine._kernel.cache_settings.NATIVE_ROUTES`, which take the Messages API as is)."""
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return []
    opens_compacted = opens_with_compaction(messages[0])
    if not (settings.enabled or opens_compacted):
        return []
    if detect_request_format(request) != "anthropic" and _openai_signs(messages):
        return []
    if route is not None and route not in NATIVE_ROUTES:
        return []
    edits = clearing_edits(settings, window, thinking=thinking_enabled(request))
    if opens_compacted:
        edits.append(declaring_edit(context_length))
    return edits


def _openai_signs(messages: list[Any]) -> bool:
    """Whether a request whose format is not decided by its shape shows OpenAI chat features
    (plain user/assistant strings read the same in both formats and count as Anthropic here)."""
    return any(
        isinstance(m, Mapping)
        and (
            m.get("role") in ("system", "developer", "tool")
            or "tool_calls" in m
            or "tool_call_id" in m
            or "reasoning_content" in m
        )
        for m in messages
    )
