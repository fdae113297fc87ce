"""A LangChain v1 agent with ctxengine as middleware (``pip install 'ctxengine[langchain]'``).

Run: ``python examples/langchain_agent.py`` (the real Anthropic API when ANTHROPIC_API_KEY is
set, a local fake otherwise). The agent's checkpointed history is compacted in place.
"""

from __future__ import annotations

from _endpoint import FILLER, endpoint
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

import ctxengine
from ctxengine_langchain import CtxengineMiddleware


def main() -> None:
    with endpoint("ANTHROPIC_API_KEY") as where:
        kernel = ctxengine.load(where.config)
        middleware = CtxengineMiddleware(kernel)
        model = ChatAnthropic(model_name="claude-sonnet-4-6", max_retries=0, **where.client_args())
        agent = create_agent(
            model,
            tools=[],
            system_prompt="You are terse.",
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config: RunnableConfig = {"configurable": {"thread_id": "example"}}
        for turn in range(8):
            message = HumanMessage(f"Turn {turn}: what failed? {FILLER}")
            state = agent.invoke({"messages": [message]}, config)
            compacted = sum(result.compacted for result in middleware.compactions)
            print(
                f"turn {turn}: {len(state['messages'])} messages in the agent's state; "
                f"{compacted} compaction(s) so far"
            )
        kernel.close()


if __name__ == "__main__":
    main()
