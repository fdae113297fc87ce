"""Shared fixtures: kernels with the lcm engine registered, on a temporary store."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxengine
import ctxengine_lcm
from ctxengine._kernel.kernel import Kernel
from ctxengine._kernel.resolve import register_engine, unregister_engine
from ctxengine_lcm.testing import lcm_config

KernelFactory = Callable[..., Kernel]


@pytest.fixture
def make_kernel(tmp_path: Path) -> Iterator[KernelFactory]:
    """Builds kernels on ``tmp_path / "lcm.db"`` (keyword options go to ``engines.lcm``)."""
    kernels: list[Kernel] = []
    register_engine("lcm", ctxengine_lcm)

    def make(
        *, main_summarizer: Any = None, context_length: int = 16_000, **options: Any
    ) -> Kernel:
        env = {**os.environ, "CTXENGINE_HOME": str(tmp_path / "home")}
        env.pop("CTXENGINE_CONFIG", None)
        kernel = ctxengine.load(
            lcm_config(tmp_path / "lcm.db", context_length=context_length, **options),
            env=env,
            main_summarizer=main_summarizer,
        )
        kernels.append(kernel)
        return kernel

    try:
        yield make
    finally:
        for kernel in kernels:
            kernel.close()
        unregister_engine("lcm")
