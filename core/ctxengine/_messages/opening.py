"""How a compacted OpenAI-format history opens: :func:`user_first`."""

from __future__ import annotations

from collections.abc import Sequence

from ctxengine._messages.conversation import Message

COMPACTED_OPENING = "(Earlier turns of this conversation were compacted; their summary follows.)"
"""The user message :func:`user_first` puts before a leading assistant message."""


def user_first(messages: Sequence[Message]) -> list[Message]:
    """``messages`` (OpenAI chat format) made to open, after any system messages, with a user.

    OpenAI accepts a conversation whose first non-system message is the assistant's (a
    compacted history that starts with its summary), but Anthropic, Gemini and many
    OpenAI-compatible servers do not. Hosts that hand a compacted OpenAI-format history to any
    provider put :data:`COMPACTED_OPENING` before such a message; nothing else changes.
    """
    out = list(messages)
    first = next(
        (i for i, m in enumerate(out) if m.get("role") not in ("system", "developer")), None
    )
    if first is not None and out[first].get("role") == "assistant":
        out.insert(first, {"role": "user", "content": COMPACTED_OPENING})
    return out
