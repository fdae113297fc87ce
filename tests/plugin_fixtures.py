"""Helpers that build real plugin folders and real (installed-looking) distributions on disk."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


def write_directory_plugin(root: Path, name: str, body: str) -> Path:
    """A plugin folder ``root/<name>/__init__.py`` holding ``body``."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(body))
    return folder


def install_fake_distribution(
    site: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    dist: str,
    version: str,
    entry_points: dict[str, str],
    modules: dict[str, str],
    group: str = "ctxengine",
) -> None:
    """Make a distribution visible to ``importlib_metadata`` the way pip would install it.

    Writes ``<dist>-<version>.dist-info`` with METADATA and entry_points.txt (the entry points in
    ``group``) plus the modules into ``site`` and puts ``site`` on ``sys.path``.
    """
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = [f"[{group}]", *(f"{name} = {target}" for name, target in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(site))
