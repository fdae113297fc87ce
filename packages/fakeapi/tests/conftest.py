"""Every test runs with its own CTXENGINE_HOME and no stray CTXENGINE_* variables."""

from ctxengine.testing.isolation import isolated_home

__all__ = ["isolated_home"]
