"""The README's explicit agent loop, runnable: a small coding agent on the Anthropic SDK.

    python examples/agent_loop.py "Why does the test in tests/test_app.py fail?" --workspace .

The agent can list and read the files under ``--workspace`` (and use whatever tools the selected
engine offers, such as the lossless engine's ``lcm_grep``). Every turn, ctxengine decides whether
to compact the conversation, marks the request for prompt caching and accounts for the usage the
API reports; the cache line after each response shows what caching saved.

With ``ANTHROPIC_API_KEY`` set it talks to the API the ``anthropic`` SDK is configured for
(``ANTHROPIC_BASE_URL`` for a gateway), and ctxengine's settings come from ``config.yaml`` as
usual (``ctxengine config`` shows them). Without a key, or with ``--fake``, it runs against the
local fake API (``ctxengine_fakeapi``: no key, no network) with a small window, which
answers like a model that reads a few files, so compaction shows within a few turns.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
from _endpoint import endpoint

import ctxengine
from ctxengine import SystemPrompt, cache_line

if TYPE_CHECKING:
    from ctxengine_fakeapi import FakeAPI

MAX_FILE_CHARS = 20_000
"""Longest file content handed to the model in one tool result."""

my_tools: list[dict[str, Any]] = [
    {
        "name": "list_files",
        "description": "List the files under a folder of the workspace (recursively).",
        "input_schema": {
            "type": "object",
            "properties": {"folder": {"type": "string", "description": "relative path"}},
            "required": ["folder"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file of the workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "relative path"}},
            "required": ["path"],
        },
    },
]


def _inside(workspace: Path, relative: str) -> Path:
    path = (workspace / relative).resolve()
    if not path.is_relative_to(workspace.resolve()):
        raise ValueError(f"{relative!r} is outside the workspace")
    return path


def run_my_tool(workspace: Path, name: str, arguments: dict[str, Any]) -> str:
    """Run one of :data:`my_tools`; problems come back as text the model can read."""
    try:
        if name == "list_files":
            folder = _inside(workspace, str(arguments.get("folder", ".")))
            files = sorted(str(p.relative_to(workspace)) for p in folder.rglob("*") if p.is_file())
            return "\n".join(files) or "(no files)"
        path = _inside(workspace, str(arguments["path"]))
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_FILE_CHARS:
            return text[:MAX_FILE_CHARS] + f"\n... ({len(text) - MAX_FILE_CHARS} more characters)"
        return text
    except (OSError, ValueError, KeyError) as exc:
        return f"Error: {exc}"


def run_tools(
    session: ctxengine.Session, workspace: Path, content: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A ``tool_result`` block for every ``tool_use`` block of the assistant's reply."""
    engine_tools = {entry.tool.name for entry in session.tools()}
    results = []
    for block in content:
        if block["type"] != "tool_use":
            continue
        if block["name"] in engine_tools:
            output = session.call_tool(block["name"], block["input"])
        else:
            output = run_my_tool(workspace, block["name"], block["input"])
        results.append({"type": "tool_result", "tool_use_id": block["id"], "content": output})
    return results


def run_agent(
    client: anthropic.Anthropic,
    kernel: ctxengine.Kernel,
    task: str,
    workspace: Path,
    max_turns: int = 30,
) -> int:
    """The agent loop (the README shows it); returns how many compactions happened."""
    print("\n".join(kernel.status_lines()))  # engine and prompt-caching status
    session = kernel.session("chat-42")  # one per conversation; state is never shared

    system: SystemPrompt | None = "You are a helpful coding agent."
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    compactions = 0
    for _ in range(max_turns):
        if session.should_compress(messages, system):
            result = session.compress(messages, system)  # never mutates `messages`
            messages, system = result.messages, result.system
            compactions += result.compacted
            print(f"compaction: {result.status}: {result.reason}")
        request = session.prepare(
            {
                "model": kernel.model.name,
                "system": system,
                "messages": messages,
                "tools": my_tools + session.tool_schemas("anthropic"),
            }
        )  # adds cache_control breakpoints
        response = client.messages.create(max_tokens=4096, **request)
        usage = session.update_usage(response.usage)  # real token counts, cache accounting
        print(cache_line(usage))  # 💾 Cache: 41,200/43,900 tokens (94% hit, 2,700 written)
        content = [block.model_dump(exclude_none=True) for block in response.content]
        messages.append({"role": "assistant", "content": content})
        if response.stop_reason != "tool_use":
            print("".join(block.get("text", "") for block in content))
            break
        messages.append({"role": "user", "content": run_tools(session, workspace, content)})
    else:
        print(f"stopped after {max_turns} turns", file=sys.stderr)
    print(session.cache_stats.line())
    return compactions


def script_fake_agent(fake: FakeAPI) -> None:
    """What the local fake API answers, standing in for a model: it looks around the examples
    folder, reads files (enough to fill the small window twice) and answers."""
    reads = ["agent_loop.py", "gateway.py", "_endpoint.py", "wrap_anthropic.py"] * 3
    fake.reply_blocks(
        [
            {"type": "text", "text": "Let me look around."},
            {"type": "tool_use", "id": "toolu_ls", "name": "list_files", "input": {"folder": "."}},
        ]
    )
    for n, name in enumerate(reads):
        fake.reply_blocks(
            [
                {
                    "type": "tool_use",
                    "id": f"toolu_{n:02d}",
                    "name": "read_file",
                    "input": {"path": name},
                }
            ]
        )
    fake.reply_text("Each example runs against this fake API when no key is set.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "task",
        nargs="?",
        default="What do the examples in this folder show?",
        help="what the agent should do",
    )
    parser.add_argument(
        "--workspace",
        default=str(Path(__file__).parent),
        help="folder the agent may read (default: the examples folder)",
    )
    parser.add_argument("--max-turns", type=int, default=30, help="stop after this many turns")
    parser.add_argument(
        "--fake", action="store_true", help="use the local fake API even when a key is set"
    )
    args = parser.parse_args(argv)
    with endpoint("ANTHROPIC_API_KEY") as where:
        if where.fake is not None:
            script_fake_agent(where.fake)
        client = anthropic.Anthropic(**where.client_args())
        kernel = ctxengine.load(where.config)  # config.yaml lookup (None), or a dict / path
        compactions = run_agent(client, kernel, args.task, Path(args.workspace), args.max_turns)
        kernel.close()
    print(f"{compactions} compaction(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
