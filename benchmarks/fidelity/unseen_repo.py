"""The made-up repositories of the unseen sessions (:mod:`.unseen`), and what their files,
commands and failing runs look like in each language.

Python: pytest failures with tracebacks through the sources, ruff diagnostics, a fatal segfault
in a C extension. TypeScript: jest failures, ``tsc`` errors, a Node ``TypeError``. Go:
``go test`` failures, build errors, a nil-pointer panic. Rust: failing ``cargo test``, borrow
checker errors, a segfault behind FFI. Everything is drawn from the caller's seeded
:class:`random.Random`.
"""

from __future__ import annotations

import random
import uuid

import attrs

__all__ = [
    "EXT",
    "LANGUAGES",
    "NOUNS",
    "VERBS",
    "Failure",
    "Repo",
    "build_command",
    "build_failure",
    "crash",
    "failing_test",
    "hex_id",
    "make_repo",
    "new_uuid",
    "passing_test",
    "source",
    "test_command",
]

LANGUAGES = ("python", "typescript", "go", "rust")


@attrs.frozen
class Repo:
    """A made-up repository: its language, files and the names a story draws on."""

    name: str
    lang: str
    package: str
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    functions: tuple[str, ...]
    env_vars: tuple[str, ...]
    ticket: str
    port: int
    module: str


NOUNS = (
    "invoice",
    "ledger",
    "quota",
    "segment",
    "cursor",
    "manifest",
    "lease",
    "batch",
    "tariff",
    "header",
    "shard",
    "ticket",
    "voucher",
    "payload",
    "replica",
    "digest",
    "window",
    "bucket",
    "route",
    "webhook",
    "tenant",
    "schedule",
    "snapshot",
    "coupon",
)
VERBS = (
    "parse",
    "apply",
    "resolve",
    "flush",
    "merge",
    "render",
    "encode",
    "settle",
    "reconcile",
    "throttle",
    "drain",
    "rotate",
    "split",
    "verify",
    "hydrate",
    "prune",
)
REPO_WORDS = (
    "tidewater",
    "quillmark",
    "harbor",
    "lantern",
    "quarry",
    "beacon",
    "ringlog",
    "tessera",
    "marlin",
    "juniper",
    "copperline",
    "fjord",
    "kestrel",
    "saffron",
    "driftwood",
    "obsidian",
)
EXT = {"python": "py", "typescript": "ts", "go": "go", "rust": "rs"}


def _name(rng: random.Random, lang: str) -> str:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    if lang in ("python", "rust"):
        return f"{verb}_{noun}_{rng.choice(('rows', 'entry', 'window', 'chunk', 'state'))}"
    if lang == "go":
        return f"{verb.capitalize()}{noun.capitalize()}"
    return f"{verb}{noun.capitalize()}{rng.choice(('Total', 'Set', 'Map', 'Queue'))}"


def make_repo(rng: random.Random, lang: str, taken: set[str]) -> Repo:
    """A repository in ``lang`` whose name is not in ``taken`` (added to it)."""
    name = rng.choice([w for w in REPO_WORDS if w not in taken])
    taken.add(name)
    ext = EXT[lang]
    nouns = rng.sample(NOUNS, 8)
    if lang == "python":
        sources = tuple(f"src/{name}/{n}.py" for n in nouns)
        tests = tuple(f"tests/test_{n}.py" for n in nouns[:5])
        module = name
    elif lang == "typescript":
        sources = tuple(f"src/{n}/{n}{rng.choice(('Service', 'Store', ''))}.ts" for n in nouns)
        tests = tuple(s.replace(".ts", ".test.ts") for s in sources[:5])
        module = f"@{name}/web"
    elif lang == "go":
        sources = (
            *(f"internal/{n}/{n}.go" for n in nouns[:6]),
            f"cmd/{name}d/main.go",
            f"pkg/api/{nouns[6]}.go",
        )
        tests = tuple(s.replace(".go", "_test.go") for s in sources[:5])
        module = f"github.com/{rng.choice(('acme', 'northwind', 'orbital'))}/{name}"
    else:
        sources = (*(f"src/{n}.{ext}" for n in nouns[:6]), "src/lib.rs", "src/ffi.rs")
        tests = tuple(f"tests/{n}_it.rs" for n in nouns[:3])
        module = name
    functions = tuple(dict.fromkeys(_name(rng, lang) for _ in range(14)))
    upper = name.upper()
    env_vars = (
        f"{upper}_{rng.choice(('DB_URL', 'CACHE_DIR', 'REGION'))}",
        f"{upper}_{rng.choice(('FEATURE_FLAGS', 'MAX_WORKERS', 'LOG_LEVEL'))}",
        f"{rng.choice(('STRIPE', 'SENTRY', 'OTEL'))}_{rng.choice(('API_KEY', 'DSN', 'ENDPOINT'))}",
    )
    ticket = f"{rng.choice(('PAY', 'OPS', 'CORE', 'PLAT', 'INFRA'))}-{rng.randint(1000, 9899)}"
    return Repo(
        name,
        lang,
        name,
        sources,
        tests,
        functions,
        env_vars,
        ticket,
        rng.choice((5432, 6380, 8081, 9091, 7443, 50051)) + rng.randint(0, 9),
        module,
    )


def hex_id(rng: random.Random, n: int = 40) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def new_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# --- file contents and outputs, per language -----------------------------------------------------


def source(rng: random.Random, repo: Repo, path: str, lines: int) -> str:
    """Plausible content of ``path``: function definitions using the repo's names."""
    out: list[str] = []
    lang = repo.lang
    while len(out) < lines:
        fn = rng.choice(repo.functions)
        arg, other = rng.choice(NOUNS), rng.choice(NOUNS)
        if lang == "python":
            out += [
                f"def {fn}({arg}, *, {other}=None):",
                f'    """Return the {arg} after {rng.choice(VERBS)}ing its {other}."""',
                f"    if {other} is None:",
                f"        {other} = load_{other}({arg}.id)",
                f"    total = sum(x.amount for x in {arg}.{other}s)",
                f"    return {rng.choice(repo.functions)}(total, {other})",
                "",
            ]
        elif lang == "typescript":
            out += [
                f"export function {fn}({arg}: {arg.capitalize()}, {other}?: string): number {{",
                f"  const items = {arg}.{other}s ?? [];",
                f"  if (!{other}) return items.length;",
                f"  return items.reduce((acc, x) => acc + x.{rng.choice(NOUNS)}, 0);",
                "}",
                "",
            ]
        elif lang == "go":
            out += [
                f"// {fn} {rng.choice(VERBS)}s the {arg} of a {other}.",
                f"func (q *{arg.capitalize()}) {fn}(ctx context.Context, {other} string) error {{",
                f"\tif q.{other}s == nil {{",
                f'\t\treturn fmt.Errorf("{fn}: no {other}s")',
                "\t}",
                f"\treturn q.store.Put(ctx, {other})",
                "}",
                "",
            ]
        else:
            out += [
                f"pub fn {fn}(&mut self, {arg}: &{arg.capitalize()}) -> Result<usize, Error> {{",
                f"    let n = self.{other}s.len();",
                f"    self.{other}s.push({arg}.clone());",
                "    Ok(n)",
                "}",
                "",
            ]
    return "\n".join(out[:lines])


def test_command(repo: Repo, test: str, name: str) -> str:
    """The command that runs one test file of ``repo`` (``name`` selects a test)."""
    if repo.lang == "python":
        return f"python -m pytest {test} -q -k {name}"
    if repo.lang == "typescript":
        return f"npx jest {test} -t '{name}'"
    if repo.lang == "go":
        package = test.rsplit("/", 1)[0]
        return f"go test ./{package}/ -run {name} -count=1"
    return f"cargo test {name} -- --nocapture"


def build_command(repo: Repo) -> str:
    return {
        "python": "ruff check src tests",
        "typescript": "npx tsc --noEmit -p tsconfig.json",
        "go": "go build ./...",
        "rust": "cargo build --all-targets",
    }[repo.lang]


def _passing(rng: random.Random, repo: Repo, count: int) -> list[str]:
    lines = []
    for k in range(count):
        fn = rng.choice(repo.functions)
        test = rng.choice(repo.tests)
        if repo.lang == "python":
            lines.append(f"{test}::test_{fn}_{k} PASSED{' ' * 20}[{100 * k // max(count, 1):3d}%]")
        elif repo.lang == "typescript":
            lines.append(f"    ✓ {fn} handles case {k} ({rng.randint(1, 40)} ms)")
        elif repo.lang == "go":
            lines.append(f"--- PASS: Test{fn}{k} (0.0{rng.randint(0, 9)}s)")
        else:
            lines.append(f"test {test.split('/')[-1][:-3]}::{fn}_{k} ... ok")
    return lines


@attrs.frozen
class Failure:
    """A failing run: its output, exit status, and the error lines a reader must catch."""

    output: str
    status: int


def failing_test(
    rng: random.Random, repo: Repo, root: str, test: str, fn: str, ident: str
) -> Failure:
    """A long failing test run of ``test`` whose failure is in ``fn`` and names ``ident``."""
    passed = _passing(rng, repo, rng.randint(40, 120))
    src = rng.choice(repo.sources)
    line = rng.randint(20, 400)
    if repo.lang == "python":
        exc = rng.choice(
            (
                "KeyError: 'region'",
                f"ValueError: unknown tariff {ident}",
                "TypeError: unsupported operand type(s) for +: 'Decimal' and 'float'",
                f"AttributeError: 'NoneType' object has no attribute '{fn}'",
            )
        )
        body = [
            "============================= test session starts ==============================",
            "platform linux -- Python 3.11.9, pytest-8.2.1, pluggy-1.5.0",
            f"rootdir: {root}",
            "configfile: pyproject.toml",
            f"collected {len(passed) + 1} items",
            "",
            *passed,
            "",
            "=================================== FAILURES ===================================",
            f"____________________________ test_{fn} ____________________________",
            "",
            f"    def test_{fn}(fixture_rows):",
            f'        rows = fixture_rows("{ident}")',
            f">       {fn}(rows)",
            "",
            f"{test}:{line // 4}: ",
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
            f"{src}:{line}: in {fn}",
            f"    return {rng.choice(repo.functions)}(total, rows)",
            f"E   {exc}",
            "",
            "=========================== short test summary info ============================",
            f"FAILED {test}::test_{fn} - {exc}",
            f"========================= 1 failed, {len(passed)} passed in "
            f"3.{rng.randint(10, 99)}s =========================",
        ]
        return Failure("\n".join(body), 1)
    if repo.lang == "typescript":
        expected, received = rng.randint(10, 99), rng.randint(100, 199)
        body = [f" PASS  {t}" for t in repo.tests if t != test] + [
            f" FAIL  {test}",
            f"  ● {fn} › keeps {ident} in the result",
            "",
            "    expect(received).toBe(expected) // Object.is equality",
            "",
            f"    Expected: {expected}",
            f"    Received: {received}",
            "",
            f"      {line} |     const out = {fn}(fixture, '{ident}');",
            f"    > {line + 1} |     expect(out.total).toBe({expected});",
            "",
            f"      at Object.<anonymous> ({test}:{line + 1}:{rng.randint(5, 40)})",
            "",
            *passed,
            "",
            f"Test Suites: 1 failed, {len(repo.tests) - 1} passed, {len(repo.tests)} total",
            f"Tests:       1 failed, {len(passed)} passed, {len(passed) + 1} total",
            "Snapshots:   0 total",
            f"Time:        {rng.randint(2, 9)}.{rng.randint(100, 999)} s",
        ]
        return Failure("\n".join(body), 1)
    if repo.lang == "go":
        package = f"{repo.module}/{test.rsplit('/', 1)[0]}"
        body = [
            *[f"=== RUN   {p[9:].split(' ')[0]}\n{p}" for p in passed[:30]],
            f"=== RUN   Test{fn}",
            f"--- FAIL: Test{fn} (0.0{rng.randint(1, 9)}s)",
            f"    {test.rsplit('/', 1)[1]}:{line // 3}: {fn}({ident!r}) = {rng.randint(1, 9)}, "
            f"want {rng.randint(10, 19)}",
            "FAIL",
            f"FAIL\t{package}\t0.{rng.randint(100, 999)}s",
            *[
                f"ok  \t{repo.module}/{s.rsplit('/', 1)[0]}\t0.{rng.randint(10, 99)}s"
                for s in repo.sources[:4]
            ],
            "FAIL",
        ]
        return Failure("\n".join(body), 1)
    name = f"{test.rsplit('/', maxsplit=1)[-1][:-3]}::{fn}"
    body = [
        f"   Compiling {repo.name} v0.{rng.randint(1, 9)}.{rng.randint(0, 9)} ({root})",
        "    Finished `test` profile [unoptimized + debuginfo] target(s) in "
        f"{rng.randint(2, 40)}.{rng.randint(10, 99)}s",
        f"     Running unittests src/lib.rs (target/debug/deps/{repo.name}-{hex_id(rng, 16)})",
        "",
        f"running {len(passed) + 1} tests",
        *passed,
        f"test {name} ... FAILED",
        "",
        "failures:",
        "",
        f"---- {name} stdout ----",
        "",
        f"thread '{name}' panicked at {src}:{line}:{rng.randint(5, 30)}:",
        "assertion `left == right` failed",
        f"  left: {rng.randint(1, 9)}",
        f" right: {rng.randint(10, 19)}",
        f"  case: {ident}",
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        "",
        "failures:",
        f"    {name}",
        "",
        f"test result: FAILED. {len(passed)} passed; 1 failed; 0 ignored; 0 measured; 0 filtered "
        f"out; finished in 0.{rng.randint(10, 99)}s",
        "",
        "error: test failed, to rerun pass `--lib`",
    ]
    return Failure("\n".join(body), 101)


def passing_test(rng: random.Random, repo: Repo, count: int) -> str:
    lines = _passing(rng, repo, count)
    tail = {
        "python": f"{count} passed in 2.{rng.randint(10, 99)}s",
        "typescript": f"Tests:       {count} passed, {count} total",
        "go": f"ok  \t{repo.module}/internal\t0.{rng.randint(100, 999)}s",
        "rust": f"test result: ok. {count} passed; 0 failed; 0 ignored; 0 measured",
    }
    return "\n".join([*lines, tail[repo.lang]])


def build_failure(rng: random.Random, repo: Repo, src: str, fn: str) -> Failure:
    """A compiler or linter error in ``src`` naming ``fn``."""
    line, col = rng.randint(10, 300), rng.randint(2, 40)
    if repo.lang == "python":
        out = (
            f"{src}:{line}:{col}: F821 Undefined name `{fn}`\n"
            f"{src}:{line + 7}:{col}: F841 Local variable `total` is assigned to but never used\n"
            "Found 2 errors."
        )
        return Failure(out, 1)
    if repo.lang == "typescript":
        code = rng.choice(("TS2345", "TS2322", "TS2339", "TS7006"))
        out = (
            f"{src}({line},{col}): error {code}: Argument of type 'string | undefined' is not "
            f"assignable to parameter of type 'string'.\n"
            f"{src}({line + 12},{col + 2}): error TS2339: Property '{fn}' does not exist on type "
            "'Readonly<Props>'.\n\nFound 2 errors in the same file, starting at: "
            f"{src}:{line}"
        )
        return Failure(out, 2)
    if repo.lang == "go":
        out = (
            f"# {repo.module}/{src.rsplit('/', 1)[0]}\n"
            f"{src}:{line}:{col}: undefined: {fn}\n"
            f"{src}:{line + 9}:2: declared and not used: deadline"
        )
        return Failure(out, 1)
    code = rng.choice(("E0502", "E0308", "E0425", "E0599"))
    out = (
        f"   Compiling {repo.name} v0.3.1\n"
        f"error[{code}]: cannot borrow `self.slots` as mutable because it is also borrowed as "
        "immutable\n"
        f"  --> {src}:{line}:{col}\n   |\n{line - 2:>3} |         let head = "
        "&self.slots[self.head];\n"
        "   |                     ---------- immutable borrow occurs here\n"
        f"{line:>3} |         self.{fn}(entry);\n   |         ^^^^^^^^^^^^^^^^^^^^^^ mutable "
        "borrow occurs here\n\n"
        f"For more information about this error, try `rustc --explain {code}`.\n"
        f"error: could not compile `{repo.name}` (lib) due to 1 previous error"
    )
    return Failure(out, 101)


def crash(rng: random.Random, repo: Repo, root: str, fn: str, ident: str) -> tuple[str, Failure]:
    """A command that crashes (segfault or panic) and its output."""
    src = rng.choice(repo.sources)
    line = rng.randint(30, 500)
    if repo.lang == "python":
        cmd = f"python scripts/replay.py --request {ident}"
        out = (
            f"loading {root}/data/replay/{ident}.jsonl\nFatal Python error: Segmentation fault\n\n"
            f"Current thread 0x00007f{hex_id(rng, 10)} (most recent call first):\n"
            f'  File "{root}/{src}", line {line} in {fn}\n'
            f'  File "{root}/scripts/replay.py", line 44 in main\nSegmentation fault (core dumped)'
        )
        return cmd, Failure(out, 139)
    if repo.lang == "go":
        cmd = f"go run ./cmd/{repo.name}d --replay {ident}"
        out = (
            "panic: runtime error: invalid memory address or nil pointer dereference\n"
            f"[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x{hex_id(rng, 6)}]\n\n"
            f"goroutine {rng.randint(7, 90)} "
            f"[running]:\n{repo.module}/{src.rsplit('/', 1)[0]}.(*Queue).{fn}(0x0, "
            f"{{0x{hex_id(rng, 6)}, 0xc0001{hex_id(rng, 5)}}})\n"
            f"\t{root}/{src}:{line} +0x1d\nexit status 2"
        )
        return cmd, Failure(out, 1)
    if repo.lang == "rust":
        cmd = f"./target/debug/{repo.name} replay --id {ident}"
        out = (
            f"[INFO] replaying {ident}\n[INFO] mapped 3 segments via ffi::{fn}\n"
            "Segmentation fault (core dumped)"
        )
        return cmd, Failure(out, 139)
    cmd = f"node dist/cli.js replay {ident}"
    out = (
        f"{root}/dist/{src[4:-3]}.js:{line}\n    return state.{fn}.get(key);\n                 "
        "^\n\n"
        f"TypeError: Cannot read properties of undefined (reading 'get')\n"
        f"    at {fn} ({root}/dist/{src[4:-3]}.js:{line}:18)\n    at processTicksAndRejections "
        "(node:internal/process/task_queues:95:5)\n\n"
        "Node.js v20.12.2"
    )
    return cmd, Failure(out, 1)
