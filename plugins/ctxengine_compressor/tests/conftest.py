"""Every test gets its own CTXENGINE_HOME (the kernel suite's fixture); the property suite's
counts are printed after the run."""

from __future__ import annotations

from typing import Any

from tests.conftest import isolated_home

__all__ = ["isolated_home", "pytest_terminal_summary"]

COUNTS = "route properties"
"""The junit property the property suite (``test_route_properties.py``) records its counts in."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A "route properties" section with the counts each property run recorded, so that every
    test run states them (``-q`` included)."""
    lines = [
        str(value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == COUNTS
    ]
    if lines:
        terminalreporter.section(COUNTS)
        for line in lines:
            terminalreporter.write_line(line)
