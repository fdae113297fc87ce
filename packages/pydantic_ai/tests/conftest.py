"""Fixtures: a fake Anthropic API on 127.0.0.1 and a kernel on the lcm engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxengine
import ctxengine_lcm
from ctxengine.kernel import Kernel
from ctxengine.resolve import register_engine, unregister_engine
from ctxengine.testing.fake_api import FakeAPI
from ctxengine_lcm.testing import lcm_config


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    """lcm with a small window (a few turns reach its threshold) and caching on."""
    register_engine("lcm", ctxengine_lcm)
    config = lcm_config(tmp_path / "lcm.db", context_length=8000)
    config["prompt_caching"] = {"enabled": True}
    loaded = ctxengine.load(config, env={"CTXENGINE_HOME": str(tmp_path / "home")})
    try:
        yield loaded
    finally:
        loaded.close()
        unregister_engine("lcm")
