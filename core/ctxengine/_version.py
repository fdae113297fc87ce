"""The version of the ctxengine distribution (kept apart so the kernel need not import the SDK
facade to read it)."""

__version__ = "0.1.0"
