"""A pydantic-ai agent with ctxengine as a capability (``pip install 'ctxengine[pydantic-ai]'``).

Run: ``python examples/pydantic_ai_agent.py`` (the real Anthropic API when ANTHROPIC_API_KEY is
set, a local fake otherwise). ``result.all_messages()`` is the compacted history.
"""

from __future__ import annotations

from typing import Any

from _endpoint import FILLER, endpoint
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

import ctxengine
from ctxengine_pydantic_ai import Ctxengine


def main() -> None:
    with endpoint("ANTHROPIC_API_KEY") as where:
        kernel = ctxengine.load(where.config)
        capability = Ctxengine(kernel, session_id="example")
        model = AnthropicModel(
            "claude-sonnet-4-6", provider=AnthropicProvider(**where.client_args())
        )
        agent = Agent(model, instructions="You are terse.", capabilities=[capability])
        history: list[Any] = []
        for turn in range(8):
            result = agent.run_sync(f"Turn {turn}: what failed? {FILLER}", message_history=history)
            history = result.all_messages()
            compacted = sum(r.compacted for r in capability.compactions)
            print(
                f"turn {turn}: {len(history)} messages in the history; "
                f"{compacted} compaction(s) so far"
            )
        kernel.close()


if __name__ == "__main__":
    main()
