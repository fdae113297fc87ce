"""The kernel's engine conformance suite, run against the built-in compressor."""

from __future__ import annotations

from ctxengine.testing.conformance import EngineConformance


class TestCompressorConformance(EngineConformance):
    engine = "compressor"
