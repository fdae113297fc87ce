"""An agent loop on the Anthropic SDK with ctxengine: ``ctxengine.wrap`` runs the whole loop.

Run: ``python examples/wrap_anthropic.py`` (uses the real API when ANTHROPIC_API_KEY is set,
a local fake otherwise). Each turn prints what the wrapper did.
"""

from __future__ import annotations

import anthropic
from _endpoint import FILLER, endpoint

import ctxengine


def main() -> None:
    with endpoint("ANTHROPIC_API_KEY") as where:
        kernel = ctxengine.load(where.config)
        print("\n".join(kernel.status_lines()))
        client = ctxengine.wrap(anthropic.Anthropic(**where.client_args()), kernel=kernel)

        messages: list[dict[str, object]] = []
        for turn in range(8):
            messages.append({"role": "user", "content": f"Turn {turn}: what failed? {FILLER}"})
            if turn % 2:
                # Streaming keeps streaming; usage comes from the stream's final event.
                with client.messages.stream(
                    model="claude-sonnet-4-6",
                    max_tokens=512,
                    system="You are terse.",
                    messages=messages,
                ) as stream:
                    text = "".join(stream.text_stream)
                    reply = stream.get_final_message()
            else:
                reply = client.messages.create(
                    model="claude-sonnet-4-6",
                    max_tokens=512,
                    system="You are terse.",
                    messages=messages,
                )
                text = "".join(b.text for b in reply.content if b.type == "text")
            messages.append({"role": "assistant", "content": reply.content})
            record = client.last_record
            assert record is not None
            print(
                f"turn {turn}: {len(text)} chars; compacted={record.compacted}; "
                f"rounds={len(record.rounds)}; {ctxengine.cache_line(record.usage)}"
            )
        kernel.close()


if __name__ == "__main__":
    main()
