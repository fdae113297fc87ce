"""The kernel's conformance suite, run against the lcm engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import ctxengine_lcm
from ctxengine.testing.conformance import EngineConformance


class TestLcmConformance(EngineConformance):
    engine = "lcm"
    plugin: ClassVar[object | None] = ctxengine_lcm

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        return {"db_path": str(tmp_path / "lcm.db")}
