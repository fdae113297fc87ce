"""Fixtures for the SDK wrapper tests: a fake API and kernels on the lcm engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
def lcm_kernel(tmp_path: Path) -> Iterator[Callable[..., Kernel]]:
    """Kernels on the lcm engine with a small window, so a few turns reach the threshold."""
    kernels: list[Kernel] = []
    register_engine("lcm", ctxengine_lcm)

    def make(*, caching: bool | str = True, **options: Any) -> Kernel:
        config = lcm_config(tmp_path / f"lcm{len(kernels)}.db", context_length=8000, **options)
        config["prompt_caching"] = {"enabled": caching}
        kernel = ctxengine.load(config, env={"CTXENGINE_HOME": str(tmp_path / "home")})
        kernels.append(kernel)
        return kernel

    try:
        yield make
    finally:
        for kernel in kernels:
            kernel.close()
        unregister_engine("lcm")
