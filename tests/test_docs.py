"""The repository's documentation stays in step with the code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ctxengine_cli.reference import MARKER, current_reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_configuration_reference_matches_the_declared_settings(tmp_path: Path) -> None:
    document = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert MARKER in document
    written = MARKER + document.split(MARKER, 1)[1]
    assert written == current_reference(tmp_path), "run `nox -s docs` to regenerate it"


def test_the_readme_links_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("architecture.md", "sdk.md", "writing-an-engine.md", "configuration.md"):
        assert f"docs/{page}" in readme, page


def test_relative_links_in_the_docs_resolve() -> None:
    broken = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md"), *ROOT.glob("packages/*/README.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_no_file_points_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    offenders = []
    # Spelled in pieces so this file does not match itself.
    pattern = re.compile("|".join([r"\.\./" + "shared", "SPEC" + " §", "shared" + "/data/"]))
    for name in tracked:
        path = ROOT / name
        if path.suffix in (".jsonl", ".png") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if pattern.search(text):
            offenders.append(name)
    assert offenders == []


def test_paths_named_in_the_readmes_exist() -> None:
    # Once: the lcm README named `ctxengine_lcm/__init__.py` and `tests/data/transcripts`,
    # neither of which is beside it. A path in a README is read from the README's folder;
    # a path that is the text of a link is checked through the link instead.
    path = re.compile(r"(?<!\[)`([A-Za-z0-9_.][A-Za-z0-9_./-]*/[A-Za-z0-9_./-]*)`(?!\]\()")
    readmes = [ROOT / "README.md", *ROOT.glob("packages/*/README.md")]
    readmes += ROOT.glob("examples/*/README.md")
    missing = [
        f"{page.relative_to(ROOT)}: {name}"
        for page in readmes
        for name in path.findall(page.read_text(encoding="utf-8"))
        if not (page.parent / name).exists()
    ]
    assert missing == []
