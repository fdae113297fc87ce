"""Tools that engines offer the agent, and the registry that keeps their names unique."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

ToolHandler = Callable[[Mapping[str, Any]], Any]
"""Called with the tool's JSON arguments; returns something JSON-serialisable (or a string)."""


class ToolError(Exception):
    """A tool refused its input; the message is meant for the agent and is safe to show it."""


ECHO_CHARS = 80
"""How much of an argument a tool's answer may quote back by default."""


def bounded_repr(value: object, limit: int = ECHO_CHARS) -> str:
    """``repr(value)`` of at most about ``limit`` characters, for quoting an argument back in a
    tool's answer or error: a long value keeps its start and end around ``…(N chars)…``, so a
    megabyte-long id never travels back into the agent's context whole."""
    text = repr(value) if not isinstance(value, str) or len(value) <= limit * 4 else None
    if text is not None and len(text) <= limit:
        return text
    raw = value if isinstance(value, str) else text or ""
    size = len(raw)
    head = max(8, limit * 2 // 3)
    tail = max(4, limit - head - 16)
    return f"{raw[:head]!r}…({size:,} chars)…{raw[-tail:]!r}"


class DuplicateToolError(ValueError):
    """Two plugins offered a tool with the same name."""


@attrs.frozen
class Tool:
    """A tool an engine offers: its name, a description for the model, and a JSON schema."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: ToolHandler = attrs.field(eq=False, repr=False)

    def anthropic_schema(self) -> dict[str, Any]:
        """The tool as Anthropic's ``tools`` parameter takes it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }

    def openai_schema(self) -> dict[str, Any]:
        """The tool as OpenAI chat's ``tools`` parameter takes it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.input_schema),
            },
        }


@attrs.frozen
class RegisteredTool:
    """A tool stamped with the plugin that provided it."""

    tool: Tool
    provider: str


class ToolRegistry:
    """Tools collected from every plugin, by name; rejects duplicates naming both providers."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}

    def add(self, tool: Tool, provider: str) -> None:
        """Register ``tool`` as offered by ``provider``.

        :raises DuplicateToolError: when another plugin already offers a tool of that name.
        """
        existing = self._tools.get(tool.name)
        if existing is not None:
            raise DuplicateToolError(
                f"tool {tool.name!r} is offered by two plugins: {existing.provider!r} and "
                f"{provider!r}; rename one of them or select only one engine"
            )
        self._tools[tool.name] = RegisteredTool(tool=tool, provider=provider)

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
