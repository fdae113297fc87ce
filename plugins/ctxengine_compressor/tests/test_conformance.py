"""The kernel's engine conformance suite, run against the built-in compressor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxengine.testing.conformance import EngineConformance


class TestCompressorConformance(EngineConformance):
    engine = "compressor"

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        # A short protected tail, so the samples have a middle.
        return {"protect_last_n": 6}
