"""The distributions as pip would get them: wheels and sdists built from this checkout.

Built once per run with ``python -m build --no-isolation`` (hatchling from the test
environment, no network), then read like an installer would read them.
"""

from __future__ import annotations

import ast
import email.parser
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
LCM = ROOT / "packages" / "lcm"


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
    out = tmp_path_factory.mktemp("dist")
    yield {"ctxengine": _build(ROOT, out / "root"), "ctxengine-lcm": _build(LCM, out / "lcm")}


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def _requirements(metadata: Message) -> dict[str, Requirement]:
    return {Requirement(r).name: Requirement(r) for r in metadata.get_all("Requires-Dist") or []}


def test_every_package_in_the_wheels_is_typed(built: dict[str, tuple[Path, Path]]) -> None:
    # Once: only ctxengine had py.typed; the compressor, caching, hygiene and lcm did not.
    expected = {
        "ctxengine": {
            "ctxengine",
            "ctxengine_compressor",
            "ctxengine_caching",
            "ctxengine_hygiene",
        },
        "ctxengine-lcm": {"ctxengine_lcm"},
    }
    for dist, packages in expected.items():
        with zipfile.ZipFile(built[dist][0]) as archive:
            names = archive.namelist()
        top = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
        assert top == packages
        assert {f"{p}/py.typed" for p in packages} <= set(names)
        assert not [n for n in names if "/tests/" in n]  # the suites stay in the repository
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_versions_have_one_source_and_the_dependencies_are_versioned(
    built: dict[str, tuple[Path, Path]],
) -> None:
    import ctxengine_lcm

    root, lcm = _metadata(built["ctxengine"][0]), _metadata(built["ctxengine-lcm"][0])
    assert root["Version"] == ctxengine.__version__
    assert lcm["Version"] == ctxengine_lcm.__version__
    # Once: ctxengine-lcm required any ctxengine at all.
    needs_kernel = _requirements(lcm)["ctxengine"]
    assert str(needs_kernel.specifier) and needs_kernel.specifier.contains(root["Version"])
    extra = _requirements(root)["ctxengine-lcm"]
    assert extra.marker is not None and "lcm" in str(extra.marker)
    assert str(extra.specifier) and extra.specifier.contains(lcm["Version"])


def test_the_metadata_names_licence_and_project_urls(built: dict[str, tuple[Path, Path]]) -> None:
    for dist in built:
        metadata = _metadata(built[dist][0])
        assert metadata["License-Expression"] == "MIT"
        urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
        assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(urls)
        assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])


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
        "core/ctxengine/_cli/report.js",
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


def test_the_lcm_sdist_has_its_licence_readme_and_tests(
    built: dict[str, tuple[Path, Path]],
) -> None:
    with tarfile.open(built["ctxengine-lcm"][1]) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "src/ctxengine_lcm/py.typed", "tests/test_conformance.py"} <= (
        names
    )
