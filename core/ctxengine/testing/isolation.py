"""A pytest fixture that keeps a test away from the user's own ctxengine setup.

Use it from a ``conftest.py`` (``from ctxengine.testing.isolation import isolated_home``, or
wrap it in an ``autouse`` fixture of your own): each test gets an empty ``$CTXENGINE_HOME`` and no
``CTXENGINE_*`` variable from the environment, so a config file, plugin folder or store of the
machine running the tests never changes what a test sees.
"""

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
