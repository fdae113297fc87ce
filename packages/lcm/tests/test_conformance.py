"""The kernel's conformance suite, run against the lcm engine on each store backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

import ctxengine_lcm
from ctxengine.testing.conformance import EngineConformance


class TestLcmConformance(EngineConformance):
    engine = "lcm"
    plugin: ClassVar[object | None] = ctxengine_lcm

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        return {"db_path": str(tmp_path / "lcm.db")}


class TestLcmConformanceOnPostgres(EngineConformance):
    engine = "lcm"
    plugin: ClassVar[object | None] = ctxengine_lcm
    url: str

    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str) -> None:
        # Autouse fixtures run before the suite's kernel fixture reads engine_options.
        self.url = postgres_url

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        return {"database_url": self.url}
