"""Per-request overhead of the SDK wrappers (``ctxengine.wrap``) over the bare kernel calls.

One request through a wrapped client runs the whole loop: the history is resolved against what
was sent last time, ``should_compress``, the engine's tools are merged with the host's, ``prepare``
marks the request, the response's usage is recorded, its tool calls are looked at and a call
record is stored. The baseline is the same loop written by hand with the kernel:
``should_compress`` + ``prepare`` (with the host's tools and ``tool_schemas``) + ``update_usage``.
Both run on the largest bundled session, with a system prompt and host tools as an agent sends
them, and with the SDK's own response objects and no network: the SDK method is replaced by a
function returning a prebuilt response (or, streamed, a prebuilt list of the SDK's events), so
only ctxengine's work is timed.

Ways a host hands the history over, each timed for both SDKs:

- ``same list``: the same list object every turn;
- ``new list``: a new list of the same message dicts every turn;
- ``new dicts``: new dicts with new strings every turn (reloaded from a database, received over
  HTTP), two such copies used in turn, built before the timer starts;
- ``stream``: ``create(stream=True)`` on the same list, every event iterated; the baseline
  iterates the SDK's stream and records the usage of its final event.

Each figure is the wrapper's overhead in microseconds per request over the bare kernel calls
(budget: at most :data:`BUDGET_US`), the difference of medians over batches timed alternately
(``time.thread_time``: the CPU time of this thread, so time the process spends descheduled by
other load counts for neither side), with the ratio wrapper / bare kernel beside it. The
``wrapper_own_us`` lines time the same two loops with the session's
``should_compress`` / ``prepare`` / ``update_usage`` replaced by replays of their results: what
remains is the wrapper's own work, without the kernel's (which another benchmark times).

The ``control_vs_kernel`` lines time the loop by hand on a second session of its own against the
first, as the wrapper is timed: the same work, so they show what the method itself gives (1.00x
when it favours neither side).

The figures of one process depend on where its objects landed in memory and on its hash seed:
the same code measured 1.04x in one process and 1.28x in another. So the script runs the whole
measurement in :data:`PROCESSES` fresh processes, each with its own ``PYTHONHASHSEED``, and
prints the median over them with the lowest and highest.

Run: ``python benchmarks/bench_wrappers.py``. Prints ``name<TAB>value<TAB>budget`` lines.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from itertools import cycle
from pathlib import Path
from typing import Any, NamedTuple

import anthropic
import openai
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import TypeAdapter

import ctxengine
from ctxengine._messages.memo import MessageView
from ctxengine.testing.transcripts import TRANSCRIPTS

if not __package__:  # run as a script (nox -s bench): make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchSession, spread

PROCESSES = 3
BUDGET_US = 50
"""The wrapper's overhead per request over the bare kernel calls, in microseconds."""
REPEATS = 31
BATCH = 40
MODES = ("same list", "new list", "new dicts", "stream")
USAGE_ANTHROPIC = {
    "input_tokens": 1_200,
    "cache_read_input_tokens": 90_000,
    "cache_creation_input_tokens": 800,
    "output_tokens": 300,
}
USAGE_CHAT = {"prompt_tokens": 92_000, "completion_tokens": 300, "total_tokens": 92_300}
SYSTEM = "You are a coding agent working in a repository. " * 40
HOST_TOOLS = [
    {
        "name": f"host_tool_{i}",
        "description": f"A tool of the host's own (number {i}).",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"],
        },
    }
    for i in range(8)
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }
    for tool in HOST_TOOLS
]

Loop = Callable[[str], None]
"""One request in the given mode."""


class Case(NamedTuple):
    """One SDK's loops over the same history, and the sessions behind them."""

    through_wrapper: Loop
    by_hand: Loop
    control: Loop
    """The loop by hand again, on a session of its own: timed against ``by_hand`` it shows what
    the method gives for the same work (1.00x when it is not biased towards either side)."""
    sessions: list[ctxengine.Session]


def largest(fmt: str) -> BenchSession:
    path = TRANSCRIPTS / f"claude_code_spotter.{fmt}.jsonl"
    row = json.loads(max(path.read_text(encoding="utf-8").splitlines(), key=len))
    name = f"claude_code_spotter[{fmt}]"
    return BenchSession(
        name, "anthropic" if fmt == "anthropic" else "openai", SYSTEM, row["messages"]
    )


class Histories:
    """The history a host passes in each mode (the new-dicts copies built in advance)."""

    def __init__(self, session: BenchSession) -> None:
        self.messages = session.messages
        self._copies = cycle([session.fresh_messages(), session.fresh_messages()])

    def __call__(self, mode: str) -> list[dict[str, Any]]:
        if mode == "new list":
            return list(self.messages)
        if mode == "new dicts":
            return next(self._copies)
        return self.messages


class FakeStream:
    """What the SDK's ``create(stream=True)`` returns, over prebuilt events."""

    def __init__(self, events: list[Any]) -> None:
        self._events = events

    def __iter__(self) -> Iterator[Any]:
        return iter(self._events)

    def close(self) -> None:
        pass


def anthropic_case(kernel: ctxengine.Kernel) -> Case:
    histories = Histories(largest("anthropic"))
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
    start = {**response.model_dump(exclude_none=True), "content": [], "stop_reason": None}
    events = TypeAdapter(list[RawMessageStreamEvent]).validate_python(
        [
            {"type": "message_start", "message": start},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "ok"},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": USAGE_ANTHROPIC,
            },
            {"type": "message_stop"},
        ]
    )

    def send(**kwargs: Any) -> Any:
        return FakeStream(events) if kwargs.get("stream") else response

    client = anthropic.Anthropic(api_key="bench", base_url="http://127.0.0.1:9")
    client.messages.create = send  # type: ignore[method-assign]
    wrapped = ctxengine.wrap(client, kernel=kernel, session_id="bench-wrap-anthropic")
    wrapped.session.update_usage(USAGE_ANTHROPIC)
    bare = kernel.session("bench-bare-anthropic")
    bare.update_usage(USAGE_ANTHROPIC)
    second = kernel.session("bench-control-anthropic")
    second.update_usage(USAGE_ANTHROPIC)

    def through_wrapper(mode: str) -> None:
        arguments = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": histories(mode),
            "tools": HOST_TOOLS,
        }
        if mode == "stream":
            for _ in wrapped.messages.create(**arguments, stream=True):
                pass
        else:
            wrapped.messages.create(**arguments)

    def by_hand(session: ctxengine.Session, mode: str) -> None:
        messages = histories(mode)
        if session.should_compress(messages, SYSTEM):
            raise AssertionError("the benchmark must stay below the threshold")
        request = session.prepare(
            {
                "model": "claude-sonnet-4-6",
                "system": SYSTEM,
                "messages": messages,
                "tools": HOST_TOOLS + session.tool_schemas("anthropic"),
            }
        )
        if mode == "stream":
            usage = None
            for event in client.messages.create(max_tokens=1024, **request, stream=True):
                if event.type == "message_delta":
                    usage = event.usage
            session.update_usage(usage)
        else:
            session.update_usage(client.messages.create(max_tokens=1024, **request).usage)

    return Case(
        through_wrapper,
        partial(by_hand, bare),
        partial(by_hand, second),
        [wrapped.session, bare],
    )


def chat_case(kernel: ctxengine.Kernel) -> Case:
    session = largest("openai")
    session = BenchSession(
        session.name,
        session.format,
        None,
        [{"role": "system", "content": SYSTEM}, *session.messages],
    )
    histories = Histories(session)
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
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0}
    chunk["model"] = "claude-sonnet-4-6"
    chunks = [
        ChatCompletionChunk.model_validate(
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]}
        ),
        ChatCompletionChunk.model_validate(
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        ),
        ChatCompletionChunk.model_validate({**chunk, "choices": [], "usage": USAGE_CHAT}),
    ]

    def send(**kwargs: Any) -> Any:
        return FakeStream(chunks) if kwargs.get("stream") else response

    client = openai.OpenAI(api_key="bench", base_url="http://127.0.0.1:9/v1")
    client.chat.completions.create = send  # type: ignore[method-assign]
    wrapped = ctxengine.wrap(client, kernel=kernel, session_id="bench-wrap-chat")
    wrapped.session.update_usage(USAGE_CHAT)
    bare = kernel.session("bench-bare-chat")
    bare.update_usage(USAGE_CHAT)
    second = kernel.session("bench-control-chat")
    second.update_usage(USAGE_CHAT)

    def through_wrapper(mode: str) -> None:
        messages = histories(mode)
        if mode == "stream":
            stream = wrapped.chat.completions.create(
                model="claude-sonnet-4-6", messages=messages, tools=CHAT_TOOLS, stream=True
            )
            for _ in stream:
                pass
        else:
            wrapped.chat.completions.create(
                model="claude-sonnet-4-6", messages=messages, tools=CHAT_TOOLS
            )

    def by_hand(session: ctxengine.Session, mode: str) -> None:
        messages = histories(mode)
        if session.should_compress(messages):
            raise AssertionError("the benchmark must stay below the threshold")
        request = session.prepare(
            {
                "model": "claude-sonnet-4-6",
                "messages": messages,
                "tools": CHAT_TOOLS + session.tool_schemas("openai"),
            }
        )
        if mode == "stream":
            usage = None
            stream = client.chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True}
            )
            for event in stream:
                if event.usage is not None:
                    usage = event.usage
            session.update_usage(usage)
        else:
            session.update_usage(client.chat.completions.create(**request).usage)

    return Case(
        through_wrapper,
        partial(by_hand, bare),
        partial(by_hand, second),
        [wrapped.session, bare],
    )


def interleaved(first: Callable[[], object], second: Callable[[], object]) -> tuple[float, float]:
    """Median CPU seconds per call of ``first`` and ``second``, timed alternately in batches so
    that both see the same machine state (frequency, caches, other load); which of the two goes
    first alternates too, so that neither always runs after the other."""
    a: list[float] = []
    b: list[float] = []
    for repeat in range(REPEATS):
        pairs = ((first, a), (second, b))
        for run, out in pairs if repeat % 2 == 0 else reversed(pairs):
            start = time.thread_time()
            for _ in range(BATCH):
                run()
            out.append((time.thread_time() - start) / BATCH)
    return statistics.median(a), statistics.median(b)


def replay_kernel(session: ctxengine.Session) -> None:
    """Replace the session's per-request kernel calls by replays of their results (the marked
    copies of each history length and the memo's view of it are made once by the real calls)."""
    copies: dict[tuple[int, bool], dict[int, Any]] = {}
    usage = session.ctx.last_usage
    if usage is None:
        raise AssertionError("replay the kernel of a session that has recorded a usage")
    real_prepare = session.prepare

    def prepare(request: Any) -> dict[str, Any]:
        messages = request["messages"]
        key = (len(messages), "system" in request)
        if key not in copies:
            marked = real_prepare(request)["messages"]
            copies[key] = {i: new for i, new in enumerate(marked) if new is not messages[i]}
        # As a cache strategy does: a new list of the caller's messages but the marked copies.
        out = list(messages)
        for index, message in copies[key].items():
            out[index] = message
        return {**request, "messages": out}

    memo = session.ctx.memo
    real_view_of = memo.view_of
    views: dict[int, Any] = {}

    def view_of(messages: Any) -> Any:  # what should_compress leaves for prepare to reuse
        if len(messages) not in views:
            views[len(messages)] = real_view_of(messages)
        found = views[len(messages)]
        # A view of this very list, as the memo's is (its entries the same objects as before).
        return MessageView(messages, found.entries, found.snapshots, found.marked)

    memo.view_of = view_of  # type: ignore[method-assign]
    session.should_compress = lambda *args, **kwargs: False  # type: ignore[method-assign]
    session.prepare = prepare  # type: ignore[method-assign]
    session.update_usage = lambda *args, **kwargs: usage  # type: ignore[method-assign]


def each_mode(loop: Loop, by_hand: Loop) -> Iterator[tuple[str, float, float]]:
    """``(mode, loop seconds, bare seconds)`` per request for each mode, ``loop`` being the
    wrapper's (or the control's), after one untimed request of each (the wrapper has then sent
    this history before)."""
    for mode in MODES:
        loop(mode)
        by_hand(mode)
    for mode in MODES:
        timed, bare = interleaved(
            lambda run=loop, mode=mode: run(mode),  # type: ignore[misc]
            lambda run=by_hand, mode=mode: run(mode),  # type: ignore[misc]
        )
        yield mode, timed, bare


def measure() -> dict[str, tuple[float, float]]:
    """``{name: (wrapper seconds, bare seconds)}`` per request, every case and mode, in this
    process (``wrapper_own`` names: with the kernel's calls replayed)."""
    kernel = ctxengine.load(
        {
            "auxiliary": {"compression": {"provider": "extractive"}},
            "model": {"name": "claude-sonnet-4-6"},
            "prompt_caching": {"enabled": True},
        }
    )
    figures: dict[str, tuple[float, float]] = {}
    for name, case in (("anthropic.messages", anthropic_case), ("openai.chat", chat_case)):
        loops = case(kernel)
        for mode, wrapper, bare in each_mode(loops.through_wrapper, loops.by_hand):
            figures[f"wrapper_vs_kernel[{name}, {mode}]"] = (wrapper, bare)
        for mode, control, bare in each_mode(loops.control, loops.by_hand):
            figures[f"control_vs_kernel[{name}, {mode}]"] = (control, bare)
        for session in loops.sessions:
            replay_kernel(session)
        for mode, wrapper, bare in each_mode(loops.through_wrapper, loops.by_hand):
            figures[f"wrapper_own[{name}, {mode}]"] = (wrapper, bare)
    return figures


def in_processes(count: int) -> list[dict[str, tuple[float, float]]]:
    """:func:`measure` in ``count`` fresh processes, one after the other (each with its own hash
    seed), so that no two share the machine's cores."""
    runs = []
    for seed in range(1, count + 1):
        child = subprocess.run(
            [sys.executable, __file__, "--measure"],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            stdout=subprocess.PIPE,  # the figures; a failure's traceback goes to stderr as is
            text=True,
            check=True,
        )
        figures = json.loads(child.stdout)
        runs.append({name: (wrapper, bare) for name, (wrapper, bare) in figures.items()})
    return runs


def main() -> None:
    if sys.argv[1:] == ["--measure"]:
        print(json.dumps(measure()))
        return
    runs = in_processes(PROCESSES)
    for name in runs[0]:
        pairs = [run[name] for run in runs]
        extra = statistics.median((wrapper - bare) * 1e6 for wrapper, bare in pairs)
        if name.startswith("wrapper_own"):
            values = sorted((wrapper - bare) * 1e6 for wrapper, bare in pairs)
            print(
                f"{name.replace('wrapper_own', 'wrapper_own_us')}\t{extra:.1f} µs "
                f"({values[0]:.1f}-{values[-1]:.1f}; kernel calls replayed; median of "
                f"{len(pairs)} processes)\t-"
            )
            continue
        ratios = [wrapper / bare for wrapper, bare in pairs]
        extras = sorted((wrapper - bare) * 1e6 for wrapper, bare in pairs)
        wrapper = statistics.median(wrapper for wrapper, _ in pairs) * 1e6
        bare = statistics.median(bare for _, bare in pairs) * 1e6
        budget = "control: 0 µs" if name.startswith("control") else f"budget<={BUDGET_US} µs"
        print(
            f"{name}\t{extra:+.0f} µs ({extras[0]:+.0f} to {extras[-1]:+.0f}; {wrapper:.0f} µs "
            f"vs {bare:.0f} µs, {spread(ratios)}; median of {len(pairs)} processes)\t{budget}"
        )


if __name__ == "__main__":
    main()
