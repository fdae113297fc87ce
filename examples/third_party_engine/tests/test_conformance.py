"""Run with ``pytest`` after ``pip install -e .``: the kernel's conformance suite against trim."""

from __future__ import annotations

from ctxengine.testing.conformance import EngineConformance


class TestTrimConformance(EngineConformance):
    engine = "trim"
