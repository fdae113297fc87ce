"""Sessions the compressor was not tuned to, and their split into a tune and a held-back half.

A second, independent generator (it shares nothing with :mod:`.generate`): each session is a
story of :mod:`.unseen_story` (a repository in Python, TypeScript, Go or Rust, a task and what
the agent did) rendered in the message shapes of one agent's public trajectories:

- ``swe_agent``: SWE-agent's text interface: a ``DISCUSSION`` and one fenced command per turn
  (``open``, ``edit N:M`` … ``end_of_edit``, ``search_dir``, ``create``, shell commands,
  ``submit``); the next user message is the output followed by ``(Open file: …)``,
  ``(Current directory: …)`` and ``bash-$``;
- ``mini_swe_agent``: ``THOUGHT:`` and one fenced ``bash`` block; observations
  ``<returncode>N</returncode>`` with ``<output>``, or for long outputs a ``<warning>`` and
  ``<output_head>``/``<elided_chars>``/``<output_tail>``; edits through heredocs and scripts;
- ``openhands``: ``execute_bash``/``str_replace_editor``/``think``/``finish`` function tools,
  content as text parts, outputs ending in the exit-code and working-directory lines;
- ``codex``: ``shell`` with ``["bash", "-lc", …]`` and ``workdir``, ``apply_patch`` (as an argv
  in one session, as a function tool with an ``input`` in the other), ``update_plan``; outputs as
  JSON with ``metadata.exit_code`` in one session and as ``Exit code:``/``Wall time:``/``Output:``
  text in the other; ``<user_instructions>`` and ``<environment_context>`` user messages;
- ``aider``: no tools: edits as SEARCH/REPLACE blocks under their file's path, shell commands
  proposed in ``bash`` blocks, user messages carrying files added to the chat and the output of
  commands the user ran;
- ``claude_code``: ``Task`` calls whose results are a sub-agent's final report, and
  ``Read``/``Edit``/``Write``/``Bash``/``Grep``/``Glob``/``TodoWrite`` with Claude Code's argument
  names, in the Anthropic format (two sessions) and the OpenAI format (two);
- ``tau_bench``: airline and retail customer-service function tools with JSON results.

Seeded: every run builds the same bytes. :func:`split` puts one session of each pair (same
style, format and domain) in ``tune`` and the other in ``held_back``, by a seeded coin per pair.
The held-back half must not be used to tune the compressor.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

from benchmarks.fidelity.harness import Session
from benchmarks.fidelity.unseen_repo import LANGUAGES, Repo, make_repo
from benchmarks.fidelity.unseen_story import Op, story
from benchmarks.fidelity.unseen_tau import tau_messages

from ctxengine import Format, Message

__all__ = ["HALVES", "split", "unseen_sessions"]

HALVES = ("tune", "held_back")

_FENCE_LANG = {"python": "python", "typescript": "typescript", "go": "go", "rust": "rust"}


class _Chat:
    """An OpenAI-format message list; call ids shaped like ``id_style``'s."""

    def __init__(self, rng: random.Random, id_prefix: str) -> None:
        self.messages: list[Message] = []
        self.rng = rng
        self.prefix = id_prefix

    def new_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        return self.prefix + "".join(self.rng.choice(alphabet) for _ in range(24))

    def call(self, text: str | None, name: str, arguments: dict[str, Any], result: str) -> None:
        cid = self.new_id()
        function = {"name": name, "arguments": json.dumps(arguments)}
        self.messages.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [{"id": cid, "type": "function", "function": function}],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})

    def add(self, role: str, content: Any) -> None:
        self.messages.append({"role": role, "content": content})


def _numbered(text: str, style: str) -> str:
    lines = text.splitlines()
    if style == "claude":
        return "\n".join(f"{k + 1:>6}→{line}" for k, line in enumerate(lines))
    if style == "swe":
        return "\n".join(f"{k + 1}:{line}" for k, line in enumerate(lines))
    return "\n".join(f"{k + 1:>6}\t{line}" for k, line in enumerate(lines))


def _says(ops: list[Op]) -> list[tuple[str, Op]]:
    """Ops with every ``say`` folded into the thought of the next action (for agents that act
    on every turn); a trailing ``say`` stays a ``say``."""
    out: list[tuple[str, Op]] = []
    pending: list[str] = []
    for op in ops:
        if op.kind == "say":
            pending.append(op.thought)
            continue
        out.append(("\n\n".join([*pending, op.thought]).strip(), op))
        pending = []
    if pending:
        out.append(("", Op("say", "\n\n".join(pending))))
    return out


_SUBMITTED = "diff --git a/CHANGELOG.md b/CHANGELOG.md\n--- a/CHANGELOG.md\n+++ b/CHANGELOG.md"
"""What SWE-agent's ``submit`` shows: the head of the submitted patch."""


# --- SWE-agent (text interface) ------------------------------------------------------------------


def _swe_agent(rng: random.Random, repo: Repo, ops: list[Op], root: str) -> list[Message]:
    chat = _Chat(rng, "")
    chat.add(
        "system",
        "SETTING: you work in a shell with a file viewer that shows 100 lines at a time. Besides "
        "bash you can use: open <path> [<line>], goto <line>, scroll_down, create <path>, "
        "search_dir <term> [<dir>], search_file <term> [<file>], find_file <name> [<dir>], "
        "edit <start>:<end> followed by the new lines and end_of_edit, and submit.\n"
        "Answer with a DISCUSSION and exactly one command in a fenced block.",
    )
    opened = "n/a"
    task = next(op.text for op in ops if op.kind == "ask")
    chat.add(
        "user",
        f"We're solving this issue in the repository at {root}.\nISSUE:\n{task}\n\n"
        f"INSTRUCTIONS: work on your own; the repository is checked out in {root}.\n"
        f"(Open file: {opened})\n(Current directory: {root})\nbash-$",
    )

    def turn(thought: str, command: str, output: str) -> None:
        chat.add("assistant", f"DISCUSSION\n{thought}\n\n```\n{command}\n```")
        shown = (
            output
            if output.strip()
            else "Your command ran successfully and did not produce any output."
        )
        chat.add("user", f"{shown}\n(Open file: {opened})\n(Current directory: {root})\nbash-$")

    for thought, op in _says(ops[1:]):
        path = f"{root}/{op.path}"
        if op.kind == "read":
            opened = path
            total = len(op.output.splitlines()) or 1
            body = _numbered("\n".join(op.output.splitlines()[:100]), "swe")
            more = f"\n({total - 100} more lines below)" if total > 100 else ""
            turn(thought, f"open {path}", f"[File: {path} ({total} lines total)]\n{body}{more}")
        elif op.kind == "edit":
            opened_now = opened != path
            if opened_now:
                opened = path
                turn(
                    thought, f"open {path}", f"[File: {path} ({rng.randint(80, 400)} lines total)]"
                )
            line = rng.randint(10, 200)
            window = _numbered(op.new, "swe").replace("1:", f"{line}:", 1)
            turn(
                "Now the edit." if opened_now else thought,
                f"edit {line}:{line}\n{op.new}\nend_of_edit",
                f"[File: {path}]\n{window}\nFile updated. Please review the changes and make "
                "sure they are correct (indentation, duplicate lines). Edit again if needed.",
            )
        elif op.kind == "create":
            opened = path
            turn(thought, f"create {path}", f"[File: {path} (1 lines total)]\n1:")
            turn(
                "Writing the test.",
                f"edit 1:1\n{op.new}\nend_of_edit",
                f"[File: {path}]\nFile updated.",
            )
        elif op.kind == "search":
            files = sorted({h.split(":", 1)[0] for h in op.output.splitlines()})
            found = "\n".join(f"{root}/{f} ({rng.randint(1, 4)} matches)" for f in files)
            turn(
                thought,
                f'search_dir "{op.pattern}"',
                f'Found {len(op.output.splitlines())} matches for "{op.pattern}" in {root}:\n'
                f'{found}\nEnd of matches for "{op.pattern}" in {root}',
            )
        elif op.kind == "shell":
            turn(thought, op.command, op.output)
        elif op.kind == "say":
            turn(op.thought, "submit", _SUBMITTED)
    return chat.messages


# --- mini-SWE-agent ------------------------------------------------------------------------------


def _observation(status: int, output: str) -> str:
    if len(output) < 10_000:
        return f"<returncode>{status}</returncode>\n<output>\n{output}\n</output>"
    head, tail = output[:5000], output[-5000:]
    return (
        f"<returncode>{status}</returncode>\n<warning>\nThe output of your last command was too "
        "long.\nPlease try a different command that produces less output.\n</warning>"
        f"<output_head>\n{head}\n</output_head>\n<elided_chars>\n{len(output) - 10_000} "
        f"characters elided\n</elided_chars>\n<output_tail>\n{tail}\n</output_tail>"
    )


def _mini_command(op: Op) -> tuple[str, str]:
    """(command, output) of an op as a mini-SWE-agent shell command."""
    if op.kind == "read":
        return f"nl -ba {op.path} | sed -n '1,240p'", _numbered(op.output, "tab")
    if op.kind == "search":
        return f'grep -rn "{op.pattern}" --include="*" .', op.output
    if op.kind == "edit":
        script = (
            f"python - <<'PY'\nfrom pathlib import Path\np = Path({op.path!r})\n"
            f"s = p.read_text()\np.write_text(s.replace({op.old!r}, {op.new!r}, 1))\nPY"
        )
        return script, ""
    if op.kind == "create":
        return f"cat <<'EOF' > {op.path}\n{op.new}\nEOF", ""
    return op.command, op.output


def _mini_swe_agent(rng: random.Random, repo: Repo, ops: list[Op], root: str) -> list[Message]:
    chat = _Chat(rng, "")
    chat.add(
        "system",
        "You are a helpful assistant that can interact with a computer shell. Reply with a "
        "THOUGHT and exactly one bash code block. Each command runs in a fresh subshell.",
    )
    task = next(op.text for op in ops if op.kind == "ask")
    chat.add(
        "user",
        f"<pr_description>\n{task}\n</pr_description>\n<instructions>\nThe repository is in "
        f"{root}. Make the change, verify it, then finish with `echo "
        "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.\n</instructions>",
    )
    for thought, op in _says(ops[1:]):
        if op.kind == "ask":
            continue
        if op.kind == "say":
            chat.add(
                "assistant",
                f"THOUGHT: {op.thought}\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT "
                "&& git add -A && git diff --cached\n```",
            )
            continue
        command, output = _mini_command(op)
        chat.add("assistant", f"THOUGHT: {thought}\n\n```bash\n{command}\n```")
        chat.add("user", _observation(op.status, output))
    return chat.messages


# --- OpenHands -----------------------------------------------------------------------------------


def _openhands(rng: random.Random, repo: Repo, ops: list[Op], root: str) -> list[Message]:
    chat = _Chat(rng, "toolu_")
    chat.add(
        "system",
        [
            {
                "type": "text",
                "text": "You are OpenHands agent, a helpful AI assistant that can "
                "interact with a computer to solve tasks. Use execute_bash for shell commands, "
                "str_replace_editor to view and edit files, think to reason, finish when done.",
            }
        ],
    )

    def bash(thought: str, command: str, output: str, status: int) -> None:
        tail = (
            f"\n[The command completed with exit code {status}.]\n"
            f"[Current working directory: {root}]\n"
            "[Python interpreter: /openhands/micromamba/envs/openhands/bin/python]"
        )
        chat.call(thought, "execute_bash", {"command": command, "is_input": "false"}, output + tail)

    for thought, op in _says(ops):
        path = f"{root}/{op.path}"
        if op.kind == "ask":
            chat.add("user", [{"type": "text", "text": op.text}])
        elif op.kind == "read":
            chat.call(
                thought,
                "str_replace_editor",
                {"command": "view", "path": path},
                f"Here's the result of running `cat -n` on {path}:\n{_numbered(op.output, 'tab')}",
            )
        elif op.kind == "edit":
            arguments = {
                "command": "str_replace",
                "path": path,
                "old_str": op.old,
                "new_str": op.new,
            }
            chat.call(
                thought,
                "str_replace_editor",
                arguments,
                f"The file {path} has been edited. Here's the result of running `cat -n` on "
                f"a snippet of {path}:\n{_numbered(op.new, 'tab')}\nReview the changes and "
                "make sure they are as expected. Edit the file again if necessary.",
            )
        elif op.kind == "create":
            arguments = {"command": "create", "path": path, "file_text": op.new}
            chat.call(
                thought, "str_replace_editor", arguments, f"File created successfully at: {path}"
            )
        elif op.kind == "search":
            bash(thought, f"grep -rn '{op.pattern}' {root}", op.output, 0)
        elif op.kind == "shell":
            bash(thought, f"cd {root} && {op.command}", op.output, op.status)
        elif op.kind == "say":
            chat.call(None, "finish", {"message": op.thought, "task_completed": "true"}, "")
        if thought and op.kind != "ask" and rng.random() < 0.1:
            chat.call(None, "think", {"thought": thought}, "Your thought has been logged.")
    return chat.messages


# --- Codex CLI -----------------------------------------------------------------------------------


def _codex(rng: random.Random, repo: Repo, ops: list[Op], root: str, variant: int) -> list[Message]:
    chat = _Chat(rng, "call_")
    chat.add(
        "system",
        "You are a coding agent running in the Codex CLI. Keep going until the "
        "task is done; use apply_patch to edit files.",
    )
    chat.add(
        "user",
        f"<user_instructions>\nRun `{repo.lang}` tests before committing. Never edit "
        "generated files.\n</user_instructions>",
    )
    chat.add(
        "user",
        f"<environment_context>\n  <cwd>{root}</cwd>\n  <approval_policy>on-request"
        "</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <shell>zsh"
        "</shell>\n</environment_context>",
    )

    def shell(thought: str, command: str, output: str, status: int) -> None:
        seconds = round(rng.uniform(0.1, 30.0), 1)
        if variant == 0:
            result = json.dumps(
                {"output": output, "metadata": {"exit_code": status, "duration_seconds": seconds}}
            )
        else:
            result = f"Exit code: {status}\nWall time: {seconds} seconds\nOutput:\n{output}"
        arguments = {"command": ["bash", "-lc", command], "workdir": root, "timeout_ms": 120000}
        chat.call(thought or None, "shell", arguments, result)

    def patch(thought: str, body: str, changed: str) -> None:
        text = f"*** Begin Patch\n{body}\n*** End Patch\n"
        done = f"Success. Updated the following files:\n{changed}\n"
        if variant == 0:
            shell_args = {"command": ["apply_patch", text], "workdir": root}
            chat.call(
                thought,
                "shell",
                shell_args,
                json.dumps({"output": done, "metadata": {"exit_code": 0}}),
            )
        else:
            chat.call(thought, "apply_patch", {"input": text}, done)

    planned = False
    for thought, op in _says(ops):
        if op.kind == "ask":
            chat.add("user", op.text)
            if not planned:
                planned = True
                plan = [
                    {"step": s, "status": "pending"} for s in ("Reproduce", "Fix", "Test", "Commit")
                ]
                chat.call(None, "update_plan", {"plan": plan}, "Plan updated")
        elif op.kind == "read":
            shell(thought, f"sed -n '1,260p' {op.path}", op.output, 0)
        elif op.kind == "search":
            shell(thought, f"rg -n '{op.pattern}'", op.output, 0)
        elif op.kind == "edit":
            body = f"*** Update File: {op.path}\n@@\n-{op.old}\n+{op.new}"
            patch(thought, body, f"M {op.path}")
        elif op.kind == "create":
            lines = "\n".join(f"+{line}" for line in op.new.splitlines())
            patch(thought, f"*** Add File: {op.path}\n{lines}", f"A {op.path}")
        elif op.kind == "shell":
            shell(thought, op.command, op.output, op.status)
        elif op.kind == "say":
            chat.add("assistant", op.thought)
    return chat.messages


# --- Aider ---------------------------------------------------------------------------------------


def _aider(rng: random.Random, repo: Repo, ops: list[Op], root: str) -> list[Message]:
    chat = _Chat(rng, "")
    chat.add(
        "system",
        "You are an expert software developer. Propose every change as a SEARCH/REPLACE block: the "
        "file's path alone on a line, then a fenced block with <<<<<<< SEARCH, the exact existing "
        "lines, =======, the new lines, >>>>>>> REPLACE. Suggest shell commands in ```bash "
        "blocks. Ask the user to add files to the chat before you edit them.",
    )
    fence = _FENCE_LANG[repo.lang]
    pending: list[str] = []

    def assistant(text: str) -> None:
        pending.append(text)

    def flush() -> None:
        if pending:
            chat.add("assistant", "\n\n".join(pending))
            pending.clear()

    for thought, op in _says(ops):
        if op.kind == "ask":
            flush()
            chat.add("user", op.text)
        elif op.kind == "read":
            assistant(f"{thought} Please add {op.path} to the chat.")
            flush()
            chat.add(
                "user",
                f"I added these files to the chat: {op.path}\n\n{op.path}\n```\n{op.output}\n```",
            )
            assistant("Ok, I have the current contents.")
        elif op.kind in ("edit", "create"):
            search = "" if op.kind == "create" else op.old + "\n"
            assistant(
                f"{thought}\n\n{op.path}\n```{fence}\n<<<<<<< SEARCH\n{search}=======\n"
                f"{op.new}\n>>>>>>> REPLACE\n```"
            )
        elif op.kind in ("shell", "search"):
            command = op.command if op.kind == "shell" else f"grep -rn {op.pattern} ."
            assistant(f"{thought}\n\n```bash\n{command}\n```")
            flush()
            chat.add(
                "user", f"I ran this command:\n\n{command}\n\nAnd got this output:\n\n{op.output}"
            )
        elif op.kind == "say":
            assistant(op.thought)
    flush()
    return chat.messages


# --- Claude Code ---------------------------------------------------------------------------------


class _Blocks:
    """Claude Code turns as Anthropic content blocks."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Message] = []

    def new_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        return "toolu_01" + "".join(self.rng.choice(alphabet) for _ in range(22))

    def call(
        self, text: str, name: str, arguments: dict[str, Any], result: Any, error: bool = False
    ) -> None:
        cid = self.new_id()
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks.append({"type": "tool_use", "id": cid, "name": name, "input": arguments})
        self.messages.append({"role": "assistant", "content": blocks})
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": result}
        if error:
            block["is_error"] = True
        self.messages.append({"role": "user", "content": [block]})


def _claude_code(rng: random.Random, repo: Repo, ops: list[Op], root: str) -> list[Message]:
    out = _Blocks(rng)
    first = True
    for thought, op in _says(ops):
        path = f"{root}/{op.path}"
        if op.kind == "ask":
            blocks = [{"type": "text", "text": op.text}]
            if first:
                reminder = (
                    f"<system-reminder>\nContext from CLAUDE.md: run the {repo.lang} tests "
                    "before saying a change works.\n</system-reminder>"
                )
                blocks.insert(0, {"type": "text", "text": reminder})
            out.messages.append({"role": "user", "content": blocks})
            if first:
                todos = [
                    {"content": c, "status": "pending", "activeForm": a}
                    for c, a in (
                        ("Reproduce the failure", "Reproducing the failure"),
                        ("Fix the totals", "Fixing the totals"),
                        ("Add a regression test", "Adding a regression test"),
                    )
                ]
                out.call(
                    "", "TodoWrite", {"todos": todos}, "Todos have been modified successfully."
                )
            first = False
        elif op.kind == "read":
            out.call(thought, "Read", {"file_path": path}, _numbered(op.output, "claude"))
        elif op.kind == "edit":
            arguments: dict[str, Any] = {
                "file_path": path,
                "old_string": op.old,
                "new_string": op.new,
            }
            out.call(
                thought,
                "Edit",
                arguments,
                f"The file {path} has been updated. Here's the result "
                "of running `cat -n` on a snippet of the edited "
                f"file:\n{_numbered(op.new, 'claude')}",
            )
        elif op.kind == "create":
            out.call(
                thought,
                "Write",
                {"file_path": path, "content": op.new},
                f"File created successfully at: {path}",
            )
        elif op.kind == "search":
            arguments = {
                "pattern": op.pattern,
                "path": root,
                "output_mode": "content",
                "-n": True,
            }
            out.call(thought, "Grep", arguments, op.output)
        elif op.kind == "delegate":
            arguments = {
                "description": op.text,
                "prompt": op.command,
                "subagent_type": "general-purpose",
            }
            out.call(thought, "Task", arguments, [{"type": "text", "text": op.output}])
        elif op.kind == "shell":
            if op.command.startswith("git ls-files"):
                listing = "\n".join(f"{root}/{line}" for line in op.output.splitlines())
                out.call(thought, "Glob", {"pattern": "**/*"}, listing)
                continue
            arguments = {"command": op.command, "description": thought[:60]}
            if op.status:
                out.call(
                    thought, "Bash", arguments, f"Exit code {op.status}\n{op.output}", error=True
                )
            else:
                out.call(thought, "Bash", arguments, op.output or "(No content)")
        elif op.kind == "say":
            out.messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": op.thought}]}
            )
    return out.messages


def _as_openai(messages: list[Message]) -> list[Message]:
    """Anthropic-format Claude Code turns as OpenAI chat messages."""
    out: list[Message] = []
    for msg in messages:
        blocks = msg["content"]
        if msg["role"] == "assistant":
            text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
                }
                for b in blocks
                if b["type"] == "tool_use"
            ]
            item: Message = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = calls
            out.append(item)
            continue
        for block in blocks:
            if block["type"] == "tool_result":
                content = block["content"]
                if isinstance(content, list):
                    content = "\n".join(c["text"] for c in content)
                out.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": content}
                )
        texts = [b["text"] for b in blocks if b["type"] == "text"]
        if texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


# --- sessions ------------------------------------------------------------------------------------

Renderer = Callable[[random.Random, Repo, list[Op], str], list[Message]]

_ROOTS = {
    "swe_agent": "/repo",
    "mini_swe_agent": "/testbed",
    "openhands": "/workspace/{name}",
    "codex": "/Users/ana/code/{name}",
    "aider": "/home/kim/src/{name}",
    "claude_code": "/home/dev/{name}",
}

_PAIRS: tuple[tuple[str, Format, tuple[int, int]], ...] = (
    ("swe_agent", "openai", (140_000, 260_000)),
    ("mini_swe_agent", "openai", (150_000, 300_000)),
    ("openhands", "openai", (130_000, 280_000)),
    ("codex", "openai", (160_000, 240_000)),
    ("aider", "openai", (120_000, 260_000)),
    ("claude_code", "anthropic", (150_000, 280_000)),
    ("claude_code", "openai", (130_000, 240_000)),
)
"""(style, format, characters of output per session of the pair)."""


def _render(
    style: str, rng: random.Random, repo: Repo, ops: list[Op], root: str, number: int
) -> list[Message]:
    if style == "swe_agent":
        return _swe_agent(rng, repo, ops, root)
    if style == "mini_swe_agent":
        return _mini_swe_agent(rng, repo, ops, root)
    if style == "openhands":
        return _openhands(rng, repo, ops, root)
    if style == "codex":
        return _codex(rng, repo, ops, root, number)
    if style == "aider":
        return _aider(rng, repo, ops, root)
    return _claude_code(rng, repo, ops, root)


def unseen_sessions() -> list[Session]:
    """Every unseen session (18), the same bytes on every run."""
    sessions: list[Session] = []
    taken: set[str] = set()
    for pair, (style, fmt, sizes) in enumerate(_PAIRS):
        for number, chars in enumerate(sizes):
            rng = random.Random(f"unseen:{style}:{fmt}:{number}")
            lang = LANGUAGES[(2 * pair + number) % len(LANGUAGES)]
            repo = make_repo(rng, lang, taken)
            root = _ROOTS[style].format(name=repo.name)
            ops = story(rng, repo, root, chars, delegate=style == "claude_code")
            messages = _render(style, rng, repo, ops, root, number)
            system: str | None = None
            if style == "claude_code":
                system = (
                    "You are Claude Code, an interactive CLI coding agent. Use the Task tool "
                    "to delegate broad searches to a sub-agent."
                )
                if fmt == "openai":
                    messages = [{"role": "system", "content": system}, *_as_openai(messages)]
                    system = None
            name = (
                f"unseen_{style}_{fmt}#{number}"
                if style == "claude_code"
                else f"unseen_{style}#{number}"
            )
            sessions.append(Session(name, style, fmt, system, messages))
    for domain in ("airline", "retail"):
        for number, chars in enumerate((110_000, 200_000)):
            rng = random.Random(f"unseen:tau:{domain}:{number}")
            messages = tau_messages(rng, domain, chars)
            sessions.append(
                Session(f"unseen_tau_{domain}#{number}", "tau_bench", "openai", None, messages)
            )
    return sessions


def split(sessions: list[Session]) -> dict[str, list[Session]]:
    """The sessions in two halves, ``tune`` and ``held_back``: of each pair (names equal up to
    ``#N``), a seeded coin per pair picks the one held back."""
    pairs: dict[str, list[Session]] = {}
    for session in sessions:
        pairs.setdefault(session.name.split("#")[0], []).append(session)
    halves: dict[str, list[Session]] = {half: [] for half in HALVES}
    for key, members in sorted(pairs.items()):
        held = random.Random(f"split:{key}").randrange(len(members))
        for k, session in enumerate(members):
            halves["held_back" if k == held else "tune"].append(session)
    return halves
