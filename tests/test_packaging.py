"""The distributions as pip would get them: wheels and sdists built from this checkout.

Built once per run with ``python -m build --no-isolation`` (hatchling from the test
environment, no network), then read like an installer would read them.
"""

from __future__ import annotations

import ast
import email.parser
import importlib
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import ctxengine

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
WHEEL_PACKAGES = {
    "ctxengine",
    "ctxengine_cli",  # the command line, beside the kernel
    "ctxengine_compressor",
    "ctxengine_caching",
    "ctxengine_tool_turns",
    "ctxengine_hygiene",
    "ctxengine_native",
}


def _build(source: Path, out: Path) -> tuple[Path, Path]:
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, Path]]]:
    """Distribution name -> (wheel, sdist), for the root and every package under packages/."""
    out = tmp_path_factory.mktemp("dist")
    found = {"ctxengine": _build(ROOT, out / "root")}
    for package in PACKAGES:
        wheel, sdist = _build(package, out / package.name)
        found[_metadata(wheel)["Name"]] = (wheel, sdist)
    yield found


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_every_package_in_the_wheels_is_typed(built: dict[str, tuple[Path, Path]]) -> None:
    # Once: only ctxengine had py.typed; the compressor, caching, hygiene and lcm did not.
    assert {"ctxengine", "ctxengine-lcm"} <= set(built)
    for dist, (wheel, _) in built.items():
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
        top = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
        if dist == "ctxengine":
            assert top == WHEEL_PACKAGES
        assert top and {f"{p}/py.typed" for p in top} <= set(names), dist
        assert not [n for n in names if "/tests/" in n]  # the suites stay in the repository
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), dist


def test_versions_have_one_source_and_the_dependencies_are_versioned(
    built: dict[str, tuple[Path, Path]],
) -> None:
    versions = {dist: _metadata(wheel)["Version"] for dist, (wheel, _) in built.items()}
    assert versions["ctxengine"] == ctxengine.__version__
    for dist, (wheel, _) in built.items():
        module = importlib.import_module(dist.replace("-", "_"))
        assert versions[dist] == module.__version__, dist
        # Once: ctxengine-lcm required any ctxengine at all. Every requirement on a
        # distribution of this repository (extras included) names the versions it works with.
        for line in _metadata(wheel).get_all("Requires-Dist") or []:
            requirement = Requirement(line)
            if requirement.name in versions:
                assert str(requirement.specifier), f"{dist}: {line}"
                assert requirement.specifier.contains(versions[requirement.name]), f"{dist}: {line}"
    root = _metadata(built["ctxengine"][0]).get_all("Requires-Dist") or []
    assert {"ctxengine-lcm"} <= {Requirement(r).name for r in root}


def test_the_metadata_names_licence_and_project_urls(built: dict[str, tuple[Path, Path]]) -> None:
    for dist in built:
        metadata = _metadata(built[dist][0])
        assert metadata["License-Expression"] == "MIT"
        urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
        assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(urls), dist
        assert "Typing :: Typed" in (metadata.get_all("Classifier") or []), dist


def _demo_command() -> tuple[str, ...]:
    """``DEMO_COMMAND`` of the noxfile (a literal tuple; read without importing nox)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DEMO_COMMAND":
            value: tuple[str, ...] = ast.literal_eval(node.value)
            return value
    raise AssertionError("noxfile.py defines no DEMO_COMMAND")


def test_the_sdist_runs_the_demo(
    built: dict[str, tuple[Path, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once: the sdist lacked the demo's session file (and its licence, and the examples).
    sdist = built["ctxengine"][1]
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "sdist", filter="data")
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    command = _demo_command()
    session_file = next(a for a in command if a.endswith(".jsonl"))
    for needed in (
        session_file,
        "examples/sessions/claude_code_spotter.LICENSE",
        "examples/agent_loop.py",
        "examples/gateway.py",
        "noxfile.py",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "docs/configuration.md",
    ):
        assert needed in names, needed
    [unpacked] = list((tmp_path / "sdist").iterdir())
    env = {**os.environ, "CTXENGINE_HOME": str(tmp_path / "home"), "CTXENGINE_CONFIG": ""}
    done = subprocess.run(
        [sys.executable, "-m", "ctxengine", *command[1:], "--json"],
        cwd=unpacked,
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (unpacked / "replay.html").stat().st_size > 10_000
    assert (unpacked / "replay.png").read_bytes().startswith(b"\x89PNG")


def test_the_replay_wheel_carries_the_html_reports_assets(
    built: dict[str, tuple[Path, Path]],
) -> None:
    # The demo's replay.html inlines these two files; the command is ctxengine-replay's.
    with zipfile.ZipFile(built["ctxengine-replay"][0]) as wheel:
        names = set(wheel.namelist())
    assert {"ctxengine_replay/report.html", "ctxengine_replay/report.js"} <= names


def test_each_package_sdist_has_its_licence_readme_and_tests(
    built: dict[str, tuple[Path, Path]],
) -> None:
    for dist, (_, sdist) in built.items():
        if dist == "ctxengine":
            continue
        with tarfile.open(sdist) as archive:
            names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
        module = dist.replace("-", "_")
        assert {"LICENSE", "README.md", f"src/{module}/py.typed"} <= names, dist
        assert any(n.startswith("tests/test_") for n in names), dist
