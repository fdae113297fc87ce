"""The conversation value handed to engines: a message list plus, for Anthropic, the system prompt.

Messages stay plain dicts in the caller's own format (OpenAI chat or Anthropic Messages); nothing
here converts or copies them. For OpenAI-format lists the system prompt is the first message and
``system`` is ``None``; for Anthropic-format lists it lives beside the messages in ``system``.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

Message = dict[str, Any]
"""One message, exactly as the provider's API takes it."""

SystemPrompt = str | list[dict[str, Any]]
"""Anthropic's top-level ``system``: a string or a list of text blocks."""

Format = Literal["openai", "anthropic"]
Stage = Literal["agent", "gateway"]


@attrs.frozen
class Conversation:
    """A conversation as an engine sees it.

    ``messages`` is never mutated by the kernel or a conforming engine; a new ``Conversation`` is
    returned instead. ``format`` says which wire format ``messages`` use.
    """

    messages: list[Message]
    format: Format
    system: SystemPrompt | None = None

    def with_messages(
        self, messages: list[Message], system: SystemPrompt | object | None = ...
    ) -> Conversation:
        """A copy holding ``messages`` (and ``system`` when given); the format is kept."""
        new_system = self.system if system is ... else system
        return Conversation(messages=messages, format=self.format, system=new_system)  # type: ignore[arg-type]
