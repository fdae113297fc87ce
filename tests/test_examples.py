"""Every script in examples/ runs against the local fake API (no key, no network).

Each script runs on its own (``--fake``, or no key); the agent loop and the gateway are also
driven like the real API would drive them: ``ANTHROPIC_BASE_URL`` points the real ``anthropic``
SDK at :class:`ctxengine_fakeapi.FakeAPI`, which checks every request like the real API
does and answers with scripted replies.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxengine.testing import samples
from ctxengine_fakeapi import FakeAPI

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def test_there_is_an_example_per_wrapper_and_adapter() -> None:
    names = {p.stem for p in SCRIPTS}
    assert {"wrap_anthropic", "wrap_openai", "langchain_agent", "pydantic_ai_agent"} <= names
    assert {"agent_loop", "gateway"} <= names  # the README's explicit loop and gateway


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_runs_and_compacts(script: Path, tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith("CTXENGINE_")
    }
    env["CTXENGINE_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, str(script), "--fake"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "compacted=True" in out or any(f"{n} compaction(s)" in out for n in range(1, 10)), out


def example(
    name: str, *args: str, api: FakeAPI, home: Path, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={
            **os.environ,
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": api.base_url,
            "CTXENGINE_HOME": str(home),
            "CTXENGINE_SUMMARY_PROVIDER": "extractive",  # the scripted replies are the agent's
            "PYTHONIOENCODING": "utf-8",
            **env,
        },
        timeout=300,
        check=False,
    )


def test_the_readme_agent_loop_is_the_example() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### The explicit loop.*?```python\n(.*?)```", readme, re.S)
    assert block is not None
    code = (EXAMPLES / "agent_loop.py").read_text(encoding="utf-8")
    lines = {line.strip() for line in code.splitlines()}
    shown = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    missing = [line for line in shown if line not in lines and not line.startswith("...")]
    assert missing == []


def test_agent_loop_runs_tools_caches_and_compacts(isolated_home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "lib").mkdir(parents=True)
    (workspace / "lib" / "app.py").write_text(
        "def total(items):\n    return sum(items) + 1  # off by one\n" + "# padding\n" * 300
    )
    config = tmp_path / "config.yaml"
    # A small window, so the twelve file reads below trigger a real compaction.
    config.write_text("model:\n  context_length: 8000\ncompression:\n  protect_last_n: 6\n")
    with FakeAPI() as api:
        api.reply_blocks(
            [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_00",
                    "name": "list_files",
                    "input": {"folder": "."},
                },
            ]
        )
        for n in range(1, 12):
            api.reply_blocks(
                [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{n:02d}",
                        "name": "read_file",
                        "input": {"path": "lib/app.py"},
                    }
                ]
            )
        api.reply_text("total() adds 1 to the sum: remove the `+ 1`.")
        done = example(
            "agent_loop.py",
            "Why is total() wrong?",
            "--workspace",
            str(workspace),
            api=api,
            home=isolated_home,
            CTXENGINE_CONFIG=str(config),
        )
        requests = api.requests
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "🧠 Context engine: compressor (builtin)"
    assert lines[1].startswith("💾 Prompt caching: ENABLED")
    assert sum(line.startswith("💾 Cache: ") for line in lines) == 13
    assert any(line.startswith("compaction: compacted: ") for line in lines)
    assert "total() adds 1 to the sum: remove the `+ 1`." in lines
    assert lines[-2].startswith("💾 Session cache: 13 responses, ")
    assert lines[-1] == "1 compaction(s)" or re.fullmatch(r"[2-9] compaction\(s\)", lines[-1])
    assert len(requests) == 13  # every one accepted by the fake's request checks
    for request in requests:
        body = request.body
        assert [t["name"] for t in body["tools"]] == ["list_files", "read_file"]
        assert "cache_control" in json.dumps(body)
    # The second request carries the tool result of the first.
    results = [b for b in requests[1].body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert results[0]["tool_use_id"] == "toolu_00" and "lib/app.py" in results[0]["content"]
    sizes = [len(r.body["messages"]) for r in requests]
    assert any(b < a for a, b in itertools.pairwise(sizes)), sizes  # compaction shortened one


def test_gateway_compacts_an_oversized_chat_before_the_model_sees_it(
    isolated_home: Path, tmp_path: Path
) -> None:
    store = tmp_path / "chats"
    store.mkdir()
    # A chat that grew to ~100K tokens (40 turns of large tool outputs), as the gateway stored it.
    system, grown = samples.anthropic_conversation(turns=40, tool_output_chars=10_000)
    (store / "big.json").write_text(
        json.dumps({"system": system, "messages": grown, "last_prompt_tokens": None})
    )
    with FakeAPI() as api:
        api.reply_text("Here is where we are.").reply_text("Hello!")
        done = example(
            "gateway.py",
            "-",
            "--store",
            str(store),
            api=api,
            home=isolated_home,
            stdin="big\tWhere are we?\nnew\tHi\nnot a message\n",
            # The grown chat is over 85 % of this window.
            CTXENGINE_CONTEXT_LENGTH="100000",
        )
        requests = api.requests
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "big\tHere is where we are.",
        "new\tHello!",
        "1 compaction(s)",
    ]
    big = json.loads((store / "big.json").read_text())
    assert len(big["messages"]) < len(grown) / 3  # compacted, then the new turn appended
    assert big["messages"][-2:] == [
        {"role": "user", "content": "Where are we?"},
        {"role": "assistant", "content": "Here is where we are."},
    ]
    assert big["last_prompt_tokens"] > 0
    new = json.loads((store / "new.json").read_text())
    assert [m["content"] for m in new["messages"]] == ["Hi", "Hello!"]
    err = done.stderr
    assert re.search(r"gateway: hygiene for big: .*compact", err), err
    assert "gateway: hygiene for new: " in err
    assert "gateway: line 3 is not CHAT_ID<TAB>text; skipped" in err
    # The model saw the compacted history, not every stored message.
    assert len(requests) == 2
    assert len(requests[0].body["messages"]) == len(big["messages"]) - 1


@pytest.mark.parametrize("name", ["agent_loop.py", "gateway.py"])
def test_examples_explain_themselves(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert "usage:" in done.stdout
