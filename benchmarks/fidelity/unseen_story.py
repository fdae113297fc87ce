"""The stories behind the unseen sessions (:mod:`.unseen`): a repository, a task and what the
agent did about it, as agent-neutral :class:`Op` records that each style renders its own way.

Every story is drawn from a seeded :class:`random.Random`, so the same seed gives the same ops.
Four languages, each with its own layout, commands and failure output: Python (pytest
tracebacks, a script traceback, a fatal segfault in a C extension), TypeScript (jest failures,
``tsc`` errors), Go (``go test`` failures, a nil-pointer panic, build errors) and Rust (borrow
checker errors, failing ``cargo test``, a segfault behind FFI). Identifiers of many kinds are
given by the user or by outputs and used again later by the agent: commit hashes, UUIDs, ticket
ids, PR numbers, ports, environment variable names and function names.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import attrs
from benchmarks.fidelity.unseen_repo import (
    EXT,
    NOUNS,
    REPO_WORDS,
    VERBS,
    Repo,
    build_command,
    build_failure,
    crash,
    failing_test,
    hex_id,
    new_uuid,
    passing_test,
    source,
    test_command,
)

__all__ = ["Op", "story"]


@attrs.frozen
class Op:
    """One thing that happened, before any agent's conventions are applied.

    ``kind`` is ``ask`` (a user request), ``say`` (assistant text only), ``shell`` (a command,
    its output and exit status), ``read`` (a file's content), ``search`` (a pattern and its
    hits), ``edit`` (a replacement in a file), ``create`` (a new file) or ``delegate`` (a task
    handed to a sub-agent, whose final report is ``output``). ``thought`` is the assistant's
    text before the action. Paths are relative to the repository root.
    """

    kind: str
    thought: str = ""
    text: str = ""
    command: str = ""
    output: str = ""
    status: int = 0
    path: str = ""
    old: str = ""
    new: str = ""
    pattern: str = ""


# --- the story -----------------------------------------------------------------------------------


def _log(rng: random.Random, repo: Repo, n: int) -> tuple[str, list[str]]:
    hashes = [hex_id(rng, 7) for _ in range(n)]
    lines = [
        f"{h} {rng.choice(VERBS)} {rng.choice(NOUNS)} handling (#{rng.randint(100, 4999)})"
        for h in hashes
    ]
    return "\n".join(lines), hashes


def _config(rng: random.Random, repo: Repo) -> tuple[str, str, str]:
    """(path, content, a UUID of the content) of the repo's local settings file."""
    tenant = new_uuid(rng)
    path = {
        "python": ".env.example",
        "typescript": "config/default.json",
        "go": "deploy/local.yaml",
        "rust": "config/dev.toml",
    }[repo.lang]
    pairs = [
        (repo.env_vars[0], f"postgres://dev@localhost:{repo.port}/{repo.name}"),
        (repo.env_vars[1], rng.choice(("info", "8", "strict,fast_path"))),
        (repo.env_vars[2], "replace-me"),
        ("DEFAULT_TENANT_ID", tenant),
        *[
            (f"{rng.choice(NOUNS)}_{rng.choice(NOUNS)}", str(rng.randint(1, 500)))
            for _ in range(20)
        ],
    ]
    if repo.lang == "typescript":
        return path, json.dumps(dict(pairs), indent=2), tenant
    sep = {"python": "=", "go": ": ", "rust": " = "}[repo.lang]
    return path, "\n".join(f"{k}{sep}{v}" for k, v in pairs), tenant


Unit = Callable[[random.Random, Repo, str, list[Op]], None]


def _unit_test_fix(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    fn = rng.choice(repo.functions)
    src, test = rng.choice(repo.sources), rng.choice(repo.tests)
    ident = rng.choice(
        (
            new_uuid(rng),
            f"fx-{hex_id(rng, 8)}",
            f"{repo.ticket.split('-')[0]}-{rng.randint(100, 9999)}",
        )
    )
    ops.append(
        Op(
            "read",
            f"Reading {src} to see how `{fn}` is used.",
            path=src,
            output=source(rng, repo, src, rng.randint(80, 220)),
        )
    )
    fail = failing_test(rng, repo, root, test, fn, ident)
    command = test_command(repo, test, fn)
    ops.append(
        Op(
            "shell",
            f"Running the {fn} tests.",
            command=command,
            output=fail.output,
            status=fail.status,
        )
    )
    old = f"    return {fn}(total, rows)" if repo.lang == "python" else f"  return {fn}(items);"
    new = old.replace("total, rows", "total, rows or []").replace("(items)", "(items ?? [])")
    ops.append(
        Op(
            "edit",
            f"The case `{ident}` fails inside `{fn}`; guarding the empty input in {src}.",
            path=src,
            old=old,
            new=new,
        )
    )
    ops.append(
        Op(
            "shell",
            f"Re-running the test for {ident}.",
            command=command,
            output=passing_test(rng, repo, rng.randint(20, 80)),
        )
    )


def _unit_build(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    fn = rng.choice(repo.functions)
    src = rng.choice(repo.sources)
    fail = build_failure(rng, repo, src, fn)
    ops.append(
        Op(
            "shell",
            "Checking that everything still compiles.",
            command=build_command(repo),
            output=fail.output,
            status=fail.status,
        )
    )
    ops.append(
        Op(
            "edit",
            f"`{fn}` is not visible in {src}; importing it.",
            path=src,
            old=f"use crate::{fn};" if repo.lang == "rust" else f"// uses {fn}",
            new=f"use crate::{{self, {fn}}};"
            if repo.lang == "rust"
            else f"// uses {fn} (imported)",
        )
    )
    ops.append(
        Op(
            "shell",
            "Again.",
            command=build_command(repo),
            output=""
            if repo.lang != "rust"
            else f"   Compiling {repo.name} v0.3.1\n    Finished `dev` profile in 7.21s",
        )
    )


def _unit_crash(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    fn = rng.choice(repo.functions)
    ident = new_uuid(rng)
    command, fail = crash(rng, repo, root, fn, ident)
    ops.append(
        Op(
            "shell",
            "Reproducing the crash from the ticket with the recorded request.",
            command=command,
            output=fail.output,
            status=fail.status,
        )
    )
    ops.append(
        Op(
            "search",
            f"It dies in `{fn}`. Where else is it called?",
            pattern=fn,
            output="\n".join(
                f"{rng.choice(repo.sources)}:{rng.randint(1, 400)}:    {fn}(state, "
                f"{rng.choice(NOUNS)})"
                for _ in range(rng.randint(6, 25))
            ),
        )
    )
    ops.append(
        Op(
            "shell",
            f"Replaying request {ident} once more after the nil check.",
            command=command,
            output=f"replayed {ident}: ok ({rng.randint(10, 900)} events)",
        )
    )


def _unit_git(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    log, hashes = _log(rng, repo, rng.randint(20, 45))
    ops.append(
        Op(
            "shell",
            "Looking for the change that introduced this.",
            command=f"git log --oneline -n {len(hashes)} -- {rng.choice(repo.sources)}",
            output=log,
        )
    )
    suspect = rng.choice(hashes[:10])
    diff = "\n".join(
        [
            f"commit {suspect}{hex_id(rng, 33)}",
            f"Author: {rng.choice(REPO_WORDS).title()} <dev@example.com>",
            "",
            f"    {rng.choice(VERBS)} {rng.choice(NOUNS)}",
            "",
            *[
                f" {s} | {rng.randint(1, 60)} {'+' * rng.randint(1, 12)}{'-' * rng.randint(0, 6)}"
                for s in repo.sources[:5]
            ],
        ]
    )
    ops.append(
        Op(
            "shell",
            f"{suspect} touches the same code path; showing it.",
            command=f"git show --stat {suspect}",
            output=diff,
        )
    )


def _unit_nav(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    src = rng.choice(repo.sources)
    folder = src.rsplit("/", 1)[0]
    old, new = rng.sample(NOUNS, 2)
    ops.append(
        Op(
            "shell",
            f"Listing {folder}.",
            command=f"cd {folder} && ls -la",
            output="\n".join(
                f"-rw-r--r-- 1 dev dev {rng.randint(200, 90000):>6} Mar {rng.randint(1, 28):>2} "
                f"{s.rsplit('/', 1)[1]}"
                for s in repo.sources
                if s.startswith(folder)
            )
            or "total 0",
        )
    )
    ops.append(
        Op(
            "shell",
            f"Renaming the `{old}` option to `{new}` in {src}.",
            command=f"sed -i 's/{old}_limit/{new}_limit/g' {src}",
            output="",
        )
    )
    env = rng.choice(repo.env_vars[:2])
    ops.append(
        Op(
            "shell",
            f"Checking how {env} is read.",
            command=f"grep -rn {env} {folder}",
            output=f'{src}:{rng.randint(3, 40)}:    value = os.environ.get("{env}")',
        )
    )


def _unit_new_test(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    fn = rng.choice(repo.functions)
    test = repo.tests[0].rsplit("/", 1)[0] + f"/regression_{rng.randint(100, 999)}.{EXT[repo.lang]}"
    ops.append(
        Op(
            "create",
            f"Adding a regression test for `{fn}`.",
            path=test,
            new=source(rng, repo, test, rng.randint(20, 60)),
        )
    )
    ops.append(
        Op(
            "shell",
            "Running it.",
            command=test_command(repo, test, fn),
            output=passing_test(rng, repo, rng.randint(3, 10)),
        )
    )
    scratch = f"scratch_{rng.randint(10, 99)}.log"
    ops.append(
        Op("shell", "Removing the scratch file from the earlier run.", command=f"rm -f {scratch}")
    )


def _unit_dead_end(rng: random.Random, repo: Repo, root: str, ops: list[Op]) -> None:
    """A command that fails and is never run again: the error stays unresolved."""
    port = repo.port + rng.randint(1, 9)
    doc = f"docs/{rng.choice(NOUNS)}-{rng.choice(('design', 'runbook', 'notes'))}.md"
    command, output, status, after = rng.choice(
        (
            (
                "make lint",
                "make: *** No rule to make target 'lint'.  Stop.",
                2,
                "No lint target in the Makefile; the linters run through the build step.",
            ),
            (
                f"psql {repo.env_vars[0].lower()} -p {port} -c 'select 1'",
                f'psql: error: connection to server at "localhost" (127.0.0.1), port {port} '
                "failed: Connection refused\n\tIs the server running on that host and accepting "
                "TCP/IP connections?",
                2,
                f"No database on {port} here; the integration tests stay skipped.",
            ),
            (
                f"cat {doc}",
                f"cat: {doc}: No such file or directory",
                1,
                f"{doc} does not exist; going by the code instead.",
            ),
            (
                "docker compose up -d db",
                "bash: docker: command not found",
                127,
                "No docker in this environment.",
            ),
            (
                f"git push origin HEAD:fix/{repo.ticket.lower()}",
                "fatal: could not read Username for 'https://github.com': terminal prompts "
                "disabled",
                128,
                "Pushing needs credentials; leaving the branch local.",
            ),
        )
    )
    ops.append(
        Op(
            "shell",
            "Trying the project's own check.",
            command=command,
            output=output,
            status=status,
        )
    )
    ops.append(Op("say", after))


_UNITS: tuple[Unit, ...] = (
    _unit_test_fix,
    _unit_test_fix,
    _unit_build,
    _unit_crash,
    _unit_git,
    _unit_nav,
    _unit_new_test,
    _unit_dead_end,
)


def _follow_up(rng: random.Random, repo: Repo, pr: int) -> str:
    fn, src, tenant = rng.choice(repo.functions), rng.choice(repo.sources), new_uuid(rng)
    return rng.choice(
        (
            f"While you're in there: keep the public signature of `{fn}` unchanged, other "
            f"services import it. Reviewers on PR #{pr} asked for that.",
            f"Please don't touch {src}; it is owned by another team. Also read the port from "
            f"{repo.env_vars[0]} instead of hard-coding {repo.port}.",
            f"Can you also add a changelog entry referencing {repo.ticket}? And run the linters "
            "before you commit.",
            f"The staging run with {repo.env_vars[1]}=strict still fails for tenant {tenant}. "
            "Can you check that path too?",
        )
    )


def story(rng: random.Random, repo: Repo, root: str, target_chars: int, delegate: bool) -> list[Op]:
    """The ops of one session: a task, exploration, work units until about ``target_chars``
    characters of output were produced, follow-up asks, a diff and a commit. ``delegate``
    adds sub-agent tasks (Claude Code's ``Task`` tool)."""
    pr = rng.randint(1200, 8800)
    fn = repo.functions[0]
    ops = [
        Op(
            "ask",
            text=(
                f"{repo.ticket}: `{fn}` returns wrong totals since last week's release and the "
                "replay job crashes on some requests. Fix it, add a regression test and open the "
                f"change against PR #{pr}. The service listens on port {repo.port} locally; "
                f"{repo.env_vars[0]} must be set for the integration tests."
            ),
        )
    ]
    listing = "\n".join(sorted(repo.sources + repo.tests))
    if delegate:
        report = _report(rng, repo, fn)
        ops.append(
            Op(
                "delegate",
                "Delegating the survey of the code base.",
                text="Survey the code base",
                command=f"Find every caller of {fn} and how {repo.env_vars[0]} is read.",
                output=report,
            )
        )
    else:
        ops.append(
            Op(
                "shell",
                "Getting the lay of the land.",
                command="git ls-files | head -200",
                output=listing,
            )
        )
    ops.append(
        Op(
            "search",
            f"Finding `{fn}`.",
            pattern=fn,
            output="\n".join(
                f"{s}:{rng.randint(1, 300)}:{' ' * 4}{fn}(x)" for s in rng.sample(repo.sources, 5)
            ),
        )
    )
    path, content, tenant = _config(rng, repo)
    ops.append(Op("read", "Reading the local settings.", path=path, output=content))
    ops.append(
        Op("say", f"The default tenant is {tenant} and the database is on port {repo.port}.")
    )
    size, asks = 0, 0
    while size < target_chars:
        unit = rng.choice(_UNITS)
        before = len(ops)
        unit(rng, repo, root, ops)
        size += sum(len(o.output) + len(o.new) for o in ops[before:])
        if size > (asks + 1) * target_chars / 4:
            asks += 1
            ops.append(Op("say", f"Progress: {rng.randint(2, 6)} fixes in, tests green locally."))
            ops.append(Op("ask", text=_follow_up(rng, repo, pr)))
            if delegate and asks == 2:
                ops.append(
                    Op(
                        "delegate",
                        "Asking a reviewer sub-agent to check the change.",
                        text="Review the diff",
                        command=f"Review the uncommitted diff for {repo.ticket}.",
                        output=_report(rng, repo, rng.choice(repo.functions)),
                    )
                )
    diff = _diff(rng, repo)
    ops.append(Op("shell", "Final diff.", command="git diff --stat && git diff", output=diff))
    commit = hex_id(rng, 7)
    ops.append(
        Op(
            "shell",
            "Committing.",
            command=f'git commit -am "{repo.ticket}: fix {fn} totals"',
            output=(
                f"[fix/{repo.ticket.lower()} {commit}] {repo.ticket}: fix {fn} totals\n"
                " 6 files changed, 88 insertions(+), 21 deletions(-)"
            ),
        )
    )
    ops.append(
        Op(
            "say",
            f"Done: commit {commit} on PR #{pr} fixes {repo.ticket}; the crash for "
            f"tenant {tenant} is covered by the new regression test.",
        )
    )
    return ops


def _report(rng: random.Random, repo: Repo, fn: str) -> str:
    hits = rng.sample(repo.sources, 4)
    lines = [
        f"## Findings for {fn}",
        "",
        *[
            f"- `{h}:{rng.randint(10, 300)}` calls `{fn}` with a {rng.choice(NOUNS)} that may be "
            "empty"
            for h in hits
        ],
        f"- `{repo.env_vars[0]}` is read once at start-up in `{hits[0]}`; the fallback port is "
        f"{repo.port}.",
        f"- Related helpers: {', '.join(f'`{f}`' for f in rng.sample(repo.functions, 4))}.",
        f'- The last change to this path was {hex_id(rng, 7)} ("{rng.choice(VERBS)} '
        f'{rng.choice(NOUNS)}").',
        "",
        "## Risks",
        *[
            f"- {rng.choice(VERBS)}ing {rng.choice(NOUNS)}s concurrently is untested "
            f"({rng.choice(repo.tests)})"
            for _ in range(6)
        ],
    ]
    return "\n".join(lines)


def _diff(rng: random.Random, repo: Repo) -> str:
    out: list[str] = []
    for src in rng.sample(repo.sources, 4):
        out += [
            f"diff --git a/{src} b/{src}",
            f"index {hex_id(rng, 7)}..{hex_id(rng, 7)} 100644",
            f"--- a/{src}",
            f"+++ b/{src}",
            f"@@ -{rng.randint(5, 200)},7 +{rng.randint(5, 200)},9 @@",
        ]
        for _ in range(rng.randint(8, 30)):
            fn = rng.choice(repo.functions)
            out.append(f"{rng.choice(' +-')}    {fn}({rng.choice(NOUNS)}, {rng.choice(NOUNS)})")
    return "\n".join(out)
