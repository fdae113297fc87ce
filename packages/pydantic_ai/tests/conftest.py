"""Fixtures: a fake Anthropic API on 127.0.0.1 and a kernel on the lcm engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI
from ctxengine_lcm.testing import lcm_kernel


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    """lcm with a small window (a few turns reach its threshold) and caching on."""
    with lcm_kernel(tmp_path / "lcm.db") as loaded:
        yield loaded
