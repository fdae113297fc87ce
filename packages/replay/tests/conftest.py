"""Every test runs with its own CTXENGINE_HOME and no stray CTXENGINE_* variables."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh ``$CTXENGINE_HOME``; configuration only from what the test writes."""
    for name in list(os.environ):
        if name.startswith("CTXENGINE_"):
            monkeypatch.delenv(name)
    home = tmp_path / "ctxengine-home"
    home.mkdir()
    monkeypatch.setenv("CTXENGINE_HOME", str(home))
    yield home
