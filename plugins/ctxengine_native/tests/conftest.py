"""Every test gets its own CTXENGINE_HOME (the kernel suite's fixture)."""

from tests.conftest import isolated_home

__all__ = ["isolated_home"]
