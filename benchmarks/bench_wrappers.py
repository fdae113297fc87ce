"""Per-request overhead of the SDK wrappers (``ctxengine.wrap``) over the bare kernel calls.

One request through a wrapped client runs the whole loop: the history is resolved against what
was sent last time, ``should_compress``, the engine's tools are merged, ``prepare`` marks the
request, the response's usage is recorded, its tool calls are looked at and a call record is
stored. The baseline is the same loop written by hand with the kernel: ``should_compress`` +
``prepare`` (with ``tool_schemas``) + ``update_usage``. Both run on the largest real session
with the SDK's own response object and no network: the SDK method is replaced by a function
returning a prebuilt response, so only ctxengine's work is timed. Reported as the ratio
wrapper / bare kernel, as medians of batches timed alternately, for two ways a host hands the
history over: the same list every turn, and a new list of the same dicts (target <= 1.1x).

Run: ``python benchmarks/bench_wrappers.py``. Prints ``name<TAB>value<TAB>target`` lines.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import anthropic
import openai
from anthropic.types import Message
from openai.types.chat import ChatCompletion

import ctxengine
from ctxengine.testing.transcripts import TRANSCRIPTS

REPEATS = 31
BATCH = 50
USAGE_ANTHROPIC = {
    "input_tokens": 1_200,
    "cache_read_input_tokens": 90_000,
    "cache_creation_input_tokens": 800,
    "output_tokens": 300,
}
USAGE_CHAT = {"prompt_tokens": 92_000, "completion_tokens": 300, "total_tokens": 92_300}


def largest(fmt: str) -> dict[str, Any]:
    path = TRANSCRIPTS / f"claude_code_spotter.{fmt}.jsonl"
    best = max(path.read_text(encoding="utf-8").splitlines(), key=len)
    return dict(json.loads(best))


def interleaved(first: Callable[[], object], second: Callable[[], object]) -> tuple[float, float]:
    """Median seconds per call of ``first`` and ``second``, timed alternately in batches so
    that both see the same machine state (frequency, caches, other load)."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(REPEATS):
        for run, out in ((first, a), (second, b)):
            start = time.perf_counter()
            for _ in range(BATCH):
                run()
            out.append((time.perf_counter() - start) / BATCH)
    return statistics.median(a), statistics.median(b)


def anthropic_case(kernel: ctxengine.Kernel) -> tuple[Callable[[bool], None], Callable[[], None]]:
    row = largest("anthropic")
    messages, system = row["messages"], row.get("system")
    response = Message.model_validate(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": USAGE_ANTHROPIC,
        }
    )
    client = anthropic.Anthropic(api_key="bench", base_url="http://127.0.0.1:9")
    client.messages.create = lambda **_: response  # type: ignore[method-assign,assignment]
    wrapped = ctxengine.wrap(client, kernel=kernel, session_id="bench-wrap-anthropic")
    wrapped.session.update_usage(USAGE_ANTHROPIC)
    bare = kernel.session("bench-bare-anthropic")
    bare.update_usage(USAGE_ANTHROPIC)
    tools: list[dict[str, Any]] = []

    def through_wrapper(new_list: bool) -> None:
        history = list(messages) if new_list else messages
        wrapped.messages.create(
            model="claude-sonnet-4-6", max_tokens=1024, system=system, messages=history
        )

    def by_hand() -> None:
        if bare.should_compress(messages, system):
            raise AssertionError("the benchmark must stay below the threshold")
        request = bare.prepare(
            {
                "model": "claude-sonnet-4-6",
                "system": system,
                "messages": messages,
                "tools": tools + bare.tool_schemas("anthropic"),
            }
        )
        result = client.messages.create(max_tokens=1024, **request)
        bare.update_usage(result.usage)

    return through_wrapper, by_hand


def chat_case(kernel: ctxengine.Kernel) -> tuple[Callable[[bool], None], Callable[[], None]]:
    messages = largest("openai")["messages"]
    response = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "claude-sonnet-4-6",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"},
                }
            ],
            "usage": USAGE_CHAT,
        }
    )
    client = openai.OpenAI(api_key="bench", base_url="http://127.0.0.1:9/v1")
    client.chat.completions.create = lambda **_: response  # type: ignore[method-assign,assignment]
    wrapped = ctxengine.wrap(client, kernel=kernel, session_id="bench-wrap-chat")
    wrapped.session.update_usage(USAGE_CHAT)
    bare = kernel.session("bench-bare-chat")
    bare.update_usage(USAGE_CHAT)

    def through_wrapper(new_list: bool) -> None:
        history = list(messages) if new_list else messages
        wrapped.chat.completions.create(model="claude-sonnet-4-6", messages=history)

    def by_hand() -> None:
        if bare.should_compress(messages):
            raise AssertionError("the benchmark must stay below the threshold")
        request = bare.prepare(
            {
                "model": "claude-sonnet-4-6",
                "messages": messages,
                "tools": bare.tool_schemas("openai"),
            }
        )
        result = client.chat.completions.create(**request)
        bare.update_usage(result.usage)

    return through_wrapper, by_hand


def main() -> None:
    kernel = ctxengine.load(
        {
            "auxiliary": {"compression": {"provider": "extractive"}},
            "model": {"name": "claude-sonnet-4-6"},
            "prompt_caching": {"enabled": True},
        }
    )
    for name, case in (("anthropic.messages", anthropic_case), ("openai.chat", chat_case)):
        through_wrapper, by_hand = case(kernel)
        through_wrapper(False)  # warm: the wrapper has sent this history before
        by_hand()
        for label, new_list in (("same list", False), ("new list", True)):
            wrapper, bare = interleaved(
                lambda run=through_wrapper, new_list=new_list: run(new_list),  # type: ignore[misc]
                by_hand,
            )
            print(
                f"wrapper_vs_kernel[{name}, {label}]\t{wrapper / bare:.2f}x "
                f"({wrapper * 1e3:.3f} ms vs {bare * 1e3:.3f} ms)\ttarget<=1.1x"
            )


if __name__ == "__main__":
    main()
