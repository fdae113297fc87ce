"""Generated sessions in the agent styles the bundled transcripts lack.

The bundled data has Claude Code, an OpenHands variant without exit-status lines and tau-bench
airline sessions far below a 64K window. These generators write long sessions (seeded, so every
run measures the same bytes) in the conventions of other agents:

- ``openhands``: ``execute_bash`` / ``str_replace_editor`` calls, outputs ending in
  ``[The command completed with exit code N.]`` and ``[Current working directory: ...]``;
- ``mini_swe_agent``: no function tools; each assistant message ends in one fenced ``bash``
  block and the next *user* message is ``<returncode>N</returncode><output>...</output>``;
- ``swe_agent``: ``bash`` / ``str_replace_editor`` / ``submit`` function tools, outputs prefixed
  ``OBSERVATION:``, no exit status on success;
- ``codex``: the ``shell`` tool with an argv (``["bash", "-lc", script]``) and ``workdir``, JSON
  outputs with ``metadata.exit_code``, edits through ``apply_patch``; the newer ``exec_command``
  form (``cmd`` string, ``Process exited with code N`` output) in odd-numbered sessions;
- ``tau_bench``: customer-service function tools (airline and retail), ids given by the user or
  returned by tools and passed back as arguments, ``Error: ...`` results.

A coding session is one story told in each style: a task naming an issue number, exploration,
views, failing and passing test runs (tracebacks, ``FAILED`` lines, non-zero exits), edits,
created and deleted files, a missing module, a missing command, a build error, commit hashes and
ports read from outputs and reused, follow-up asks with constraints.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any, Literal

import attrs
from benchmarks.fidelity.harness import Session

from ctxengine import Message

__all__ = ["CODING_STYLES", "generated_sessions"]

CODING_STYLES = ("openhands", "mini_swe_agent", "swe_agent", "codex")

_WORDS = [
    "alpha",
    "amber",
    "anchor",
    "arrow",
    "atlas",
    "badge",
    "banner",
    "beacon",
    "binder",
    "bloom",
    "border",
    "bracket",
    "bridge",
    "buffer",
    "cable",
    "canvas",
    "cargo",
    "carrier",
    "cedar",
    "chain",
    "channel",
    "charter",
    "cipher",
    "circuit",
    "cluster",
    "cobalt",
    "column",
    "comet",
    "compass",
    "cursor",
    "dagger",
    "delta",
    "digest",
    "docket",
    "domain",
    "draft",
    "ember",
    "engine",
    "falcon",
    "fiber",
    "filter",
    "flag",
    "fleet",
    "forge",
    "frame",
    "galaxy",
    "garnet",
    "gateway",
    "glyph",
    "harbor",
    "helix",
    "herald",
    "index",
    "iris",
    "jasper",
    "kernel",
    "ladder",
    "lantern",
    "ledger",
    "lever",
    "linen",
    "locus",
    "lumen",
    "matrix",
    "meadow",
    "mesh",
    "meter",
    "nectar",
    "needle",
    "nexus",
    "nova",
    "oak",
    "orbit",
    "packet",
    "panel",
    "parcel",
    "pilot",
    "pivot",
    "plinth",
    "prism",
    "quartz",
    "quill",
    "radar",
    "raven",
    "relay",
    "ribbon",
    "rivet",
    "saddle",
    "sage",
    "scalar",
    "schema",
    "sentry",
    "shard",
    "signal",
    "socket",
    "spindle",
    "sprocket",
    "stanza",
    "summit",
    "tablet",
    "tally",
    "tempo",
    "thread",
    "timber",
    "token",
    "tower",
    "tracer",
    "trellis",
    "vector",
    "velvet",
    "vertex",
    "voyage",
    "wafer",
    "willow",
    "zenith",
]
_VERBS = [
    "load",
    "parse",
    "render",
    "merge",
    "split",
    "resolve",
    "encode",
    "decode",
    "fetch",
    "store",
    "flush",
    "build",
    "scan",
]
_EXCEPTIONS = (
    "KeyError",
    "ValueError",
    "TypeError",
    "AttributeError",
    "IndexError",
    "RuntimeError",
    "AssertionError",
    "ZeroDivisionError",
)

Kind = Literal["shell", "view", "edit", "create", "delete"]


@attrs.frozen
class Action:
    """One abstract step of a coding agent, rendered by each style in its own conventions."""

    kind: Kind
    thought: str
    command: str = ""
    output: str = ""
    exit: int | None = 0
    path: str = ""
    old: str = ""
    new: str = ""


@attrs.frozen
class Ask:
    """A user message in the middle of the work."""

    text: str


Event = Action | Ask


class _Project:
    """A made-up Python project: modules with functions, tests, a Makefile."""

    def __init__(self, rng: random.Random, root: str) -> None:
        self.rng = rng
        self.root = root
        self.pkg = rng.choice(_WORDS) + rng.choice(("kit", "lib", "core", "tools", "hub"))
        names = rng.sample(_WORDS, 24)
        self.modules = [f"src/{self.pkg}/{name}.py" for name in names]
        self.tests = [f"tests/test_{name}.py" for name in names]
        self.functions: dict[str, list[str]] = {
            path: [f"{rng.choice(_VERBS)}_{rng.choice(_WORDS)}" for _ in range(rng.randint(4, 9))]
            for path in self.modules
        }
        self.port = rng.randint(3000, 9800)
        self.issue = rng.randint(1000, 9999)
        self.ticket = f"{rng.choice(('OPS', 'CORE', 'PLAT', 'DATA'))}-{rng.randint(100, 9999)}"

    def source(self, path: str) -> str:
        """A listing of ``path``: imports, a constant or two, functions with bodies."""
        rng = random.Random(f"{self.pkg}:{path}")
        lines = [f'"""The {path.rsplit("/", 1)[-1][:-3]} module of {self.pkg}."""', ""]
        lines += ["from __future__ import annotations", "", "import json", "import os", ""]
        lines.append(f"DEFAULT_PORT = {self.port}")
        lines.append(f'SCHEMA_VERSION = "{rng.randint(1, 9)}.{rng.randint(0, 20)}"')
        lines.append("")
        for fn in self.functions.get(path, ["main"]):
            arg = rng.choice(_WORDS)
            lines += [
                "",
                f"def {fn}({arg}: dict[str, object], *, strict: bool = False) -> dict[str, "
                f"object]:",
                f'    """{fn.replace("_", " ").capitalize()} the {arg} record."""',
                f"    if not {arg}:",
                f'        raise ValueError("empty {arg}")',
                f"    result = dict({arg})",
            ]
            for _ in range(rng.randint(4, 14)):
                key = rng.choice(_WORDS)
                lines.append(f'    result["{key}"] = {arg}.get("{key}", {rng.randint(0, 500)})')
            lines += ["    if strict:", '        result["checked"] = True', "    return result"]
        return "\n".join(lines) + "\n"

    def listing(self, path: str, start: int = 1, end: int | None = None) -> str:
        lines = self.source(path).splitlines()
        end = len(lines) if end is None else min(end, len(lines))
        return "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(start, end + 1))


def _hash(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(7))


def _pytest_failure(
    rng: random.Random, project: _Project, test: str, module: str
) -> tuple[str, str]:
    """(output, the distinctive error line) of a failing pytest run."""
    fn = rng.choice(project.functions[module])
    exc = rng.choice(_EXCEPTIONS)
    key = f"{rng.choice(_WORDS)}_{rng.randint(1, 99)}"
    message = {
        "KeyError": f"'{key}'",
        "ValueError": f"invalid literal for int() with base 10: '{key}'",
        "TypeError": f"{fn}() got an unexpected keyword argument '{key}'",
        "AttributeError": f"'NoneType' object has no attribute '{key}'",
        "IndexError": f"list index out of range (index {rng.randint(5, 60)})",
        "RuntimeError": f"{key} is not initialised",
        "AssertionError": f"assert {rng.randint(2, 99)} == {rng.randint(100, 999)}",
        "ZeroDivisionError": "division by zero",
    }[exc]
    case = f"test_{fn}_{rng.choice(_WORDS)}"
    passed = rng.randint(3, 40)
    body = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.8, pytest-8.1.1, pluggy-1.4.0",
        f"rootdir: {project.root}",
        f"collected {passed + 1} items",
        "",
        f"{test} {'.' * passed}F",
        "",
        "=================================== FAILURES ===================================",
        f"_________________________ {case} _________________________",
        "",
        "    def " + case + "():",
        f"        record = {{'{rng.choice(_WORDS)}': {rng.randint(1, 9)}}}",
        f">       assert {fn}(record)",
        "",
        f"{module}:{rng.randint(20, 120)}: in {fn}",
        f"    raise {exc}({message!r})" if exc != "AssertionError" else "    assert result",
        f"E   {exc}: {message}",
        "",
        "=========================== short test summary info ============================",
        f"FAILED {test}::{case} - {exc}: {message}",
        f"========================= 1 failed, {passed} passed in {rng.uniform(0.1, 4):.2f}s "
        f"==========================",
    ]
    return "\n".join(body), f"FAILED {test}::{case} - {exc}: {message}"


def _coding_events(rng: random.Random, project: _Project, target_chars: int) -> Iterator[Event]:
    """The story of one coding session, about ``target_chars`` characters of output long."""
    size = 0
    touched: list[str] = []
    failing: list[tuple[str, str]] = []  # (test command, module) that failed and is not fixed
    hashes = [_hash(rng) for _ in range(5)]
    while size < target_chars:
        module = rng.choice(project.modules)
        test = project.tests[project.modules.index(module)]
        roll = rng.random()
        events: list[Event] = []
        if roll < 0.10:
            folder = module.rsplit("/", 1)[0]
            names = "\n".join(
                f"-rw-r--r-- 1 dev dev {rng.randint(200, 9000):5} Mar {rng.randint(1, 28):2} "
                f"10:{rng.randint(10, 59)} {m.rsplit('/', 1)[-1]}"
                for m in project.modules
                if m.startswith(folder)
            )
            events.append(
                Action("shell", f"Let me look at what is in {folder}.", f"ls -la {folder}", names)
            )
        elif roll < 0.18:
            word = rng.choice(project.functions[module])
            hits = "\n".join(
                f"{m}:{rng.randint(10, 200)}:    result = {word}(record, strict=True)"
                for m in rng.sample(project.modules, 4)
            )
            events.append(
                Action("shell", f"Where is `{word}` used?", f'grep -rn "{word}" src/ tests/', hits)
            )
        elif roll < 0.38:
            start = rng.choice((1, 1, 20, 40))
            events.append(
                Action(
                    "view",
                    f"I'll read {module} to understand the {rng.choice(_VERBS)} logic.",
                    path=module,
                    output=project.listing(module, start, start + rng.randint(60, 160)),
                )
            )
            touched.append(module)
        elif roll < 0.55:
            command = f"python -m pytest {test} -x -q"
            if failing and rng.random() < 0.5:
                command, module = failing.pop(0)
                passed = rng.randint(5, 40)
                events.append(
                    Action(
                        "shell",
                        "Re-running the tests after the fix.",
                        command,
                        f"{'.' * passed}\n{passed} passed in {rng.uniform(0.2, 3):.2f}s",
                    )
                )
            else:
                output, _line = _pytest_failure(rng, project, test, module)
                events.append(
                    Action("shell", f"Running the tests for {module}.", command, output, 1)
                )
                failing.append((command, module))
        elif roll < 0.70 and touched:
            path = rng.choice(touched)
            fn = rng.choice(project.functions.get(path, ["main"]))
            key = rng.choice(_WORDS)
            old = f'    result["{key}"] = record.get("{key}", 0)'
            new = f'    result["{key}"] = record.get("{key}") or {rng.randint(1, 99)}'
            snippet = project.listing(path, 10, 30)
            events.append(
                Action(
                    "edit",
                    f"The bug is in `{fn}`: the default for `{key}` is wrong. Fixing it.",
                    path=path,
                    old=old,
                    new=new,
                    output=snippet,
                )
            )
        elif roll < 0.76:
            name = rng.choice(_WORDS)
            path = f"tests/test_{name}_regression.py"
            content = "\n".join(
                [f"from {project.pkg}.{name} import *", "", ""]
                + [
                    f"def test_{name}_{k}():\n    assert {k} + 1 == {k + 1}"
                    for k in range(rng.randint(3, 8))
                ]
            )
            events.append(
                Action("create", f"Adding a regression test in {path}.", path=path, new=content)
            )
            touched.append(path)
        elif roll < 0.79:
            path = f"/tmp/debug_{rng.choice(_WORDS)}_{rng.randint(1, 99)}.py"
            events.append(Action("shell", "Removing the scratch file.", f"rm -f {path}", ""))
        elif roll < 0.83:
            key = f"{rng.choice(_WORDS)}_{rng.randint(1, 99)}"
            exc = rng.choice(_EXCEPTIONS[:4])
            script = f"reproduce_{rng.choice(_WORDS)}.py"
            output = "\n".join(
                [
                    "Traceback (most recent call last):",
                    f'  File "{project.root}/{script}", line {rng.randint(3, 30)}, in <module>',
                    "    main()",
                    f'  File "{project.root}/{module}", line {rng.randint(20, 200)}, in '
                    f"{rng.choice(project.functions[module])}",
                    f"    value = record[{key!r}]",
                    f"{exc}: {key!r} missing from the {rng.choice(_WORDS)} table",
                ]
            )
            events.append(
                Action(
                    "shell",
                    "Reproducing the issue with a small script.",
                    f"python {script}",
                    output,
                    1,
                )
            )
        elif roll < 0.86:
            missing = rng.choice(("yaml", "toml", "requests", "attrs", "rich", "httpx"))
            events.append(
                Action(
                    "shell",
                    f"Checking whether {missing} is installed.",
                    f'python -c "import {missing}; print({missing}.__version__)"',
                    'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
                    f"ModuleNotFoundError: No module named '{missing}'",
                    1,
                )
            )
            events.append(
                Action(
                    "shell",
                    "Installing it.",
                    f"pip install {missing} 2>&1 | tail -1",
                    f"Successfully installed "
                    f"{missing}-{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
                )
            )
        elif roll < 0.89:
            tool = rng.choice(("black", "ruff", "mypy", "shellcheck", "hadolint"))
            events.append(
                Action(
                    "shell",
                    f"Checking the style with {tool}.",
                    f"{tool} src/{project.pkg}",
                    f"bash: {tool}: command not found",
                    127,
                )
            )
        elif roll < 0.91:
            target = rng.choice(("build", "dist", "docs", "wheel"))
            line = rng.randint(5, 80)
            events.append(
                Action(
                    "shell",
                    "Building the package.",
                    f"make {target}",
                    f"python -m build --{target}\nerror: invalid command "
                    f"'{target}_{rng.choice(_WORDS)}'\n"
                    f"make: *** [Makefile:{line}: {target}] Error 2",
                    2,
                )
            )
        elif roll < 0.94:
            log = "\n".join(
                f"{h} {rng.choice(('Fix', 'Add', 'Refactor', 'Update'))} {rng.choice(_WORDS)} "
                f"{rng.choice(_VERBS)}"
                for h in hashes
            )
            events.append(
                Action("shell", "Looking at recent history.", "git log --oneline -5", log)
            )
            pick = rng.choice(hashes)
            events.append(
                Action(
                    "shell",
                    f"Commit {pick} touched this area; checking what it changed.",
                    f"git show {pick} --stat",
                    f"commit {pick}{_hash(rng)}{_hash(rng)}\nAuthor: Dev <dev@example.com>\n\n"
                    f" {module} | {rng.randint(2, 40)} ++--\n 1 file changed",
                )
            )
        elif roll < 0.96:
            events.append(
                Action(
                    "shell",
                    "Starting the dev server to check the endpoint.",
                    f"python -m {project.pkg}.server --port {project.port} > /tmp/server.log 2>&1 "
                    f"&",
                    f"[1] {rng.randint(1000, 60000)}",
                )
            )
            events.append(
                Action(
                    "shell",
                    f"The server listens on {project.port}; querying it.",
                    f"curl -s localhost:{project.port}/health",
                    json.dumps(
                        {"status": "ok", "build": _hash(rng), "uptime_ms": rng.randint(10, 9999)}
                    ),
                )
            )
        else:
            events.append(
                Ask(
                    rng.choice(
                        (
                            f"Also, please don't change the public signature of "
                            f"`{rng.choice(project.functions[module])}`; other teams import it.",
                            f"When you commit, reference ticket {project.ticket} in the message.",
                            f"Make sure the tests in {test} pass before you move on, and never "
                            f"push to main.",
                            f"Can you check whether {module} still needs the "
                            f"`{rng.choice(_WORDS)}` branch?",
                            f"The staging box uses port {project.port + 1}; use that one for the "
                            f"manual check.",
                        )
                    )
                )
            )
        for event in events:
            size += len(event.output) + len(event.new) + 200 if isinstance(event, Action) else 200
            yield event
    commit = f"Fix #{project.issue}: {rng.choice(_VERBS)} {rng.choice(_WORDS)} ({project.ticket})"
    yield Action(
        "shell",
        "Committing the fix.",
        f'git commit -am "{commit}"',
        f"[fix-{project.issue} {_hash(rng)}] {commit}\n 3 files changed",
    )


def _task(project: _Project) -> str:
    return (
        f"Please fix issue #{project.issue} in the {project.pkg} repository at {project.root}: "
        f"records with an empty section make the loader crash. Keep the change small, do not "
        f"modify the tests that already pass, and run the affected test files when you are done."
    )


# --- renderers: one per agent style --------------------------------------------------------------


class _Writer:
    """Builds an OpenAI-format message list with unique call ids."""

    def __init__(self, prefix: str) -> None:
        self.messages: list[Message] = []
        self.prefix = prefix
        self.count = 0

    def call_id(self) -> str:
        self.count += 1
        return f"{self.prefix}_{self.count:04d}"

    def call(self, thought: str, name: str, arguments: dict[str, Any], result: str) -> None:
        cid = self.call_id()
        self.messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})

    def say(self, role: str, text: str) -> None:
        self.messages.append({"role": role, "content": text})


def _editor_call(out: _Writer, project: _Project, event: Action, prefix: str, after: str) -> None:
    """A view, edit or create through ``str_replace_editor`` (OpenHands and SWE-agent share
    the tool); ``prefix`` starts its output, ``after`` ends an edit's."""
    path = event.path if event.path.startswith("/") else f"{project.root}/{event.path}"
    if event.kind == "view":
        arguments: dict[str, Any] = {"command": "view", "path": path}
        result = f"Here's the result of running `cat -n` on {path}:\n{event.output}"
    elif event.kind == "edit":
        arguments = {
            "command": "str_replace",
            "path": path,
            "old_str": event.old,
            "new_str": event.new,
        }
        result = (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a "
            f"snippet of {path}:\n{event.output}{after}"
        )
    else:
        arguments = {"command": "create", "path": path, "file_text": event.new}
        result = f"File created successfully at: {path}"
    out.call(event.thought, "str_replace_editor", arguments, prefix + result)


def _openhands(project: _Project, events: list[Event], session: int) -> list[Message]:
    out = _Writer("toolu")
    out.say(
        "system",
        "You are OpenHands agent, a helpful AI assistant that can interact with a computer to "
        "solve tasks.",
    )
    out.say("user", f"<uploaded_files>\n{project.root}\n</uploaded_files>\n{_task(project)}")
    cwd = f"[Current working directory: {project.root}]\n[Python interpreter: /usr/bin/python]"
    for event in events:
        if isinstance(event, Ask):
            out.say("assistant", "Understood.")
            out.say("user", event.text)
            continue
        if event.kind == "shell":
            done = f"[The command completed with exit code {event.exit}.]"
            if session % 2:
                done = f"[Command finished with exit code {event.exit}]"
            body = f"{event.output}\n{done}\n{cwd}" if event.output else f"{done}\n{cwd}"
            out.call(event.thought, "execute_bash", {"command": event.command}, body)
        else:
            _editor_call(
                out,
                project,
                event,
                "",
                " Review the changes and make sure they are "
                "as expected. Edit the file again if necessary.",
            )
    out.say("assistant", "The fix is committed and the affected tests pass.")
    return out.messages


def _mini_swe_agent(project: _Project, events: list[Event], session: int) -> list[Message]:
    out = _Writer("unused")
    out.say(
        "system",
        "You are a helpful assistant that can interact with a computer. Your response must "
        "contain exactly ONE bash code block with ONE command.",
    )
    out.say(
        "user",
        f"<pr_description>\n{_task(project)}\n</pr_description>\n\n<instructions>Work in "
        f"{project.root}.</instructions>",
    )
    for event in events:
        if isinstance(event, Ask):
            # Interactive mode: the agent stops for input and the person types a message.
            out.say("assistant", "THOUGHT: I have a question before I continue; waiting for input.")
            out.say("user", event.text)
            continue
        if event.kind == "shell":
            command, output = event.command, event.output
        elif event.kind == "view":
            command = f"nl -ba {event.path} | sed -n '1,{event.output.count(chr(10)) + 1}p'"
            output = event.output
        elif event.kind == "edit":
            old = event.old.strip().replace("/", r"\/")
            new = event.new.strip().replace("/", r"\/")
            command, output = f"sed -i 's/{old}/{new}/' {event.path}", ""
        else:
            command, output = f"cat <<'EOF' > {event.path}\n{event.new}\nEOF", ""
        out.say("assistant", f"THOUGHT: {event.thought}\n\n```bash\n{command}\n```")
        out.say("user", f"<returncode>{event.exit}</returncode>\n<output>\n{output}\n</output>")
    out.say(
        "assistant",
        "THOUGHT: Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && "
        "git diff --cached\n```",
    )
    return out.messages


def _swe_agent(project: _Project, events: list[Event], session: int) -> list[Message]:
    out = _Writer("call")
    out.say(
        "system",
        "SETTING: You are an autonomous programmer, and you're working directly in the command "
        "line with a special interface.",
    )
    out.say(
        "user",
        f"<uploaded_files>\n{project.root}\n</uploaded_files>\nI've uploaded a python code "
        f"repository in the directory {project.root}. {_task(project)}",
    )
    for event in events:
        if isinstance(event, Ask):
            out.say("assistant", "I'll take that into account.")
            out.say("user", event.text)
            continue
        if event.kind == "shell":
            body = event.output or "Your command ran successfully and did not produce any output."
            out.call(event.thought, "bash", {"command": event.command}, f"OBSERVATION:\n{body}")
        else:
            _editor_call(out, project, event, "OBSERVATION:\n", "")
    out.call("Submitting.", "submit", {}, "OBSERVATION:\ndiff --git a/x b/x")
    return out.messages


def _codex(project: _Project, events: list[Event], session: int) -> list[Message]:
    out = _Writer("call")
    out.say("system", "You are Codex, a coding agent. You and the user share the same workspace.")
    out.say("user", _task(project))
    newer = session % 2 == 1
    for event in events:
        if isinstance(event, Ask):
            out.say("assistant", "Noted.")
            out.say("user", event.text)
            continue
        if event.kind in ("edit", "create"):
            if event.kind == "edit":
                patch = (
                    f"*** Begin Patch\n*** Update File: {event.path}\n@@\n"
                    f"-{event.old}\n+{event.new}\n*** End Patch"
                )
                summary = f"M {event.path}"
            else:
                body = "\n".join("+" + line for line in event.new.splitlines())
                patch = f"*** Begin Patch\n*** Add File: {event.path}\n{body}\n*** End Patch"
                summary = f"A {event.path}"
            result = {
                "output": f"Success. Updated the following files:\n{summary}\n",
                "metadata": {"exit_code": 0, "duration_seconds": 0.0},
            }
            if newer:
                out.call(
                    event.thought,
                    "apply_patch",
                    {"input": patch},
                    f"Success. Updated the following files:\n{summary}\n",
                )
            else:
                out.call(
                    event.thought,
                    "shell",
                    {"command": ["apply_patch", patch], "workdir": project.root},
                    json.dumps(result),
                )
            continue
        command = event.command if event.kind == "shell" else f"sed -n '1,200p' {event.path}"
        if newer:
            body = (
                f"Chunk ID: {out.count:06x}\nWall time: 0.{out.count % 10} seconds\n"
                f"Process exited with code {event.exit}\nOriginal token count: "
                f"{len(event.output) // 4}\n"
                f"Output:\n{event.output}"
            )
            out.call(
                event.thought,
                "exec_command",
                {"cmd": command, "workdir": project.root, "yield_time_ms": 10000},
                body,
            )
        else:
            result = {
                "output": event.output,
                "metadata": {"exit_code": event.exit, "duration_seconds": 0.4},
            }
            out.call(
                event.thought,
                "shell",
                {
                    "command": ["bash", "-lc", command],
                    "workdir": project.root,
                    "timeout_ms": 120000,
                },
                json.dumps(result),
            )
    out.say("assistant", "Committed the fix; the affected tests pass.")
    return out.messages


_RENDERERS: dict[str, Callable[[_Project, list[Event], int], list[Message]]] = {
    "openhands": _openhands,
    "mini_swe_agent": _mini_swe_agent,
    "swe_agent": _swe_agent,
    "codex": _codex,
}


# --- tau-bench style customer service ------------------------------------------------------------


def _code(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(n))


def _tau_session(rng: random.Random, target_chars: int, domain: str) -> list[Message]:
    out = _Writer("call")
    policy = (
        "# Airline Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST. Before taking any "
        "action that updates the booking database you must list the details and obtain explicit "
        "user confirmation (yes)."
        if domain == "airline"
        else "# Retail agent policy\n\nYou can help users cancel or modify pending orders, "
        "return or exchange delivered orders. Authenticate the user by email or name and zip "
        "code first."
    )
    out.say("system", policy)
    size = 0
    first = True
    while size < target_chars:
        first_name, last_name = rng.choice(_WORDS).capitalize(), rng.choice(_WORDS).capitalize()
        user_id = f"{first_name.lower()}_{last_name.lower()}_{rng.randint(1000, 9999)}"
        hello = (
            "Hi!" if first else "Thanks. I also have another request for a family member's account."
        )
        first = False
        out.say(
            "user",
            f"{hello} My user id is {user_id}. I need help with my "
            f"{'reservations' if domain == 'airline' else 'orders'}.",
        )
        if domain == "airline":
            ids = [_code(rng) for _ in range(rng.randint(2, 5))]
            card = f"credit_card_{rng.randint(1000000, 9999999)}"
            details = {
                "name": {"first_name": first_name, "last_name": last_name},
                "payment_methods": {
                    card: {
                        "source": "credit_card",
                        "last_four": str(rng.randint(1000, 9999)),
                        "id": card,
                    }
                },
                "reservations": ids,
                "membership": rng.choice(("gold", "silver", "regular")),
            }
            out.call("", "get_user_details", {"user_id": user_id}, json.dumps(details))
            out.say(
                "assistant",
                f"I found your profile with {len(ids)} reservations. Which one is it about?",
            )
            target = rng.choice(ids)
            out.say(
                "user",
                f"The one with reservation id {target}. I want to change the flight to a later "
                f"date.",
            )
            for rid in ids:
                flight = f"HAT{rng.randint(1, 299):03d}"
                res = {
                    "reservation_id": rid,
                    "user_id": user_id,
                    "origin": rng.choice(("JFK", "SEA", "ORD", "LAX", "BOS")),
                    "destination": rng.choice(("MIA", "DEN", "ATL", "SFO", "PHX")),
                    "flights": [
                        {
                            "flight_number": flight,
                            "date": f"2024-05-{rng.randint(16, 30)}",
                            "price": rng.randint(80, 900),
                        }
                    ],
                    "cabin": rng.choice(("economy", "business", "basic_economy")),
                    "payment_history": [{"payment_id": card, "amount": rng.randint(80, 900)}],
                }
                out.call("", "get_reservation_details", {"reservation_id": rid}, json.dumps(res))
            new_flight = f"HAT{rng.randint(1, 299):03d}"
            date = f"2024-05-{rng.randint(16, 30)}"
            found = [
                {
                    "flight_number": f"HAT{rng.randint(1, 299):03d}",
                    "origin": "JFK",
                    "destination": "SEA",
                    "status": "available",
                    "prices": {"economy": rng.randint(90, 400)},
                    "available_seats": {"economy": rng.randint(0, 20)},
                }
                for _ in range(rng.randint(3, 8))
            ]
            found.append(
                {
                    "flight_number": new_flight,
                    "status": "available",
                    "prices": {"economy": rng.randint(90, 400)},
                }
            )
            out.call(
                "",
                "search_direct_flight",
                {"origin": "JFK", "destination": "SEA", "date": date},
                json.dumps(found),
            )
            out.say(
                "assistant",
                f"Flight {new_flight} on {date} is available. Shall I move reservation {target} "
                f"to it? (yes/no)",
            )
            out.say("user", "yes")
            if rng.random() < 0.4:
                out.call(
                    "",
                    "update_reservation_flights",
                    {
                        "reservation_id": target,
                        "cabin": "economy",
                        "flights": [{"flight_number": new_flight, "date": date}],
                        "payment_id": card,
                    },
                    f"Error: not enough seats on flight {new_flight}",
                )
                alt = f"HAT{rng.randint(1, 299):03d}"
                out.say(
                    "assistant",
                    f"That flight just sold out. {alt} is the next option; shall I book it?",
                )
                out.say("user", "Yes, go ahead.")
                new_flight = alt
            out.call(
                "",
                "update_reservation_flights",
                {
                    "reservation_id": target,
                    "cabin": "economy",
                    "flights": [{"flight_number": new_flight, "date": date}],
                    "payment_id": card,
                },
                json.dumps(
                    {
                        "reservation_id": target,
                        "flights": [{"flight_number": new_flight, "date": date}],
                        "status": "updated",
                    }
                ),
            )
            out.say(
                "assistant",
                f"Done: reservation {target} now flies {new_flight} on {date}, paid with {card}.",
            )
        else:
            orders = [f"#W{rng.randint(1000000, 9999999)}" for _ in range(rng.randint(2, 4))]
            out.call(
                "",
                "get_user_details",
                {"user_id": user_id},
                json.dumps({"orders": orders, "email": f"{user_id}@example.com"}),
            )
            target = rng.choice(orders)
            out.say("assistant", f"I see {len(orders)} orders: {', '.join(orders)}. Which one?")
            out.say("user", f"Order {target}, please. I want to return one item.")
            items = [str(rng.randint(1000000000, 9999999999)) for _ in range(rng.randint(2, 5))]
            for oid in orders:
                out.call(
                    "",
                    "get_order_details",
                    {"order_id": oid},
                    json.dumps(
                        {
                            "order_id": oid,
                            "status": rng.choice(("delivered", "pending")),
                            "items": [{"item_id": i, "price": rng.randint(10, 900)} for i in items],
                        }
                    ),
                )
            item = rng.choice(items)
            gift = f"gift_card_{rng.randint(1000000, 9999999)}"
            if rng.random() < 0.4:
                out.call(
                    "",
                    "return_delivered_order_items",
                    {"order_id": target, "item_ids": [item], "payment_method_id": "paypal_0000000"},
                    "Error: payment method not found",
                )
            out.call(
                "",
                "return_delivered_order_items",
                {"order_id": target, "item_ids": [item], "payment_method_id": gift},
                json.dumps({"order_id": target, "status": "return requested", "refund_to": gift}),
            )
            out.say(
                "assistant",
                f"The return of item {item} from order {target} is requested; the refund goes to "
                f"{gift}.",
            )
        out.say(
            "user",
            rng.choice(
                (
                    "Thanks, that's all for that one.",
                    "Great, thank you. Please don't cancel anything else.",
                    "OK. Make sure no extra fees are charged.",
                )
            ),
        )
        size = sum(len(json.dumps(m)) for m in out.messages)
    return out.messages


# --- entry point ---------------------------------------------------------------------------------

# (approximate size in characters of tool output) per generated session: one session above each
# window's threshold, so every window has something to compact in every style.
_CODING_SIZES = (150_000, 300_000, 560_000)
_TAU_SIZES = (150_000, 300_000)


def generated_sessions(scale: float = 1.0) -> list[Session]:
    """Every generated session (deterministic). ``scale`` shrinks them, for fast tests."""
    sessions: list[Session] = []
    for style in CODING_STYLES:
        for number, chars in enumerate(_CODING_SIZES):
            rng = random.Random(f"{style}:{number}")
            project = _Project(rng, f"/workspace/{rng.choice(_WORDS)}-{rng.choice(_WORDS)}")
            events = list(_coding_events(rng, project, int(chars * scale)))
            messages = _RENDERERS[style](project, events, number)
            sessions.append(Session(f"generated_{style}#{number}", style, "openai", None, messages))
    for number, chars in enumerate(_TAU_SIZES):
        for domain in ("airline", "retail"):
            rng = random.Random(f"tau:{domain}:{number}")
            messages = _tau_session(rng, int(chars * scale), domain)
            sessions.append(
                Session(f"generated_tau_{domain}#{number}", "tau_bench", "openai", None, messages)
            )
    return sessions
