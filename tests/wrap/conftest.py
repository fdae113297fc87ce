"""Fixtures for the SDK wrapper tests: a fake API and kernels on the lcm engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from ctxengine import Kernel
from ctxengine_fakeapi import FakeAPI
from ctxengine_lcm.testing import lcm_kernel as lcm_kernel_on


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


@pytest.fixture
def lcm_kernel(tmp_path: Path) -> Iterator[Callable[..., Kernel]]:
    """Makes kernels on the lcm engine with a small window, so a few turns reach the threshold."""
    with ExitStack() as stack:
        count = 0

        def make(**options: Any) -> Kernel:
            nonlocal count
            count += 1
            return stack.enter_context(lcm_kernel_on(tmp_path / f"lcm{count}.db", **options))

        yield make
