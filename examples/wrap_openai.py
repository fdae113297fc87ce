"""An agent loop on the OpenAI SDK with ctxengine, on chat completions and on Responses.

Run: ``python examples/wrap_openai.py`` (uses the real API when OPENAI_API_KEY is set, a local
fake otherwise). The async client is wrapped the same way; this example uses it for Responses.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
from _endpoint import FILLER, endpoint

import ctxengine

MODEL = "gpt-4o-mini"


def chat(kernel: ctxengine.Kernel, client_args: dict[str, Any]) -> None:
    client = ctxengine.wrap(openai.OpenAI(**client_args), kernel=kernel, session_id="chat")
    messages: list[Any] = [{"role": "system", "content": "You are terse."}]
    for turn in range(6):
        messages.append({"role": "user", "content": f"Turn {turn}: what failed? {FILLER}"})
        completion = client.chat.completions.create(model=MODEL, messages=messages)
        messages.append(completion.choices[0].message)
        record = client.last_record
        assert record is not None
        print(
            f"chat turn {turn}: compacted={record.compacted}; "
            f"prompt tokens={record.usage.prompt_tokens}"
        )


async def responses(kernel: ctxengine.Kernel, client_args: dict[str, Any]) -> None:
    client = ctxengine.wrap(openai.AsyncOpenAI(**client_args), kernel=kernel, session_id="resp")
    items: list[Any] = []
    for turn in range(6):
        items.append({"role": "user", "content": f"Turn {turn}: what failed? {FILLER}"})
        stream = await client.responses.create(
            model=MODEL, instructions="You are terse.", input=items, stream=True
        )
        final = None
        async for event in stream:
            if event.type == "response.completed":
                final = event.response
        assert final is not None
        items.extend(final.output)
        record = client.last_record
        assert record is not None
        print(
            f"responses turn {turn}: compacted={record.compacted}; "
            f"prompt tokens={record.usage.prompt_tokens}"
        )


def main() -> None:
    with endpoint("OPENAI_API_KEY", openai=True) as where:
        config = where.config and {**where.config, "model": {"name": MODEL, "context_length": 8000}}
        kernel = ctxengine.load(config)
        chat(kernel, where.client_args())
        asyncio.run(responses(kernel, where.client_args()))
        kernel.close()


if __name__ == "__main__":
    main()
