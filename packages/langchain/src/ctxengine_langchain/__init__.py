"""ctxengine for LangChain v1 agents: ``create_agent(..., middleware=[CtxengineMiddleware()])``."""

from __future__ import annotations

from ctxengine_langchain.convert import Converter
from ctxengine_langchain.middleware import CtxengineMiddleware, usage_from_metadata

__all__ = ["Converter", "CtxengineMiddleware", "usage_from_metadata"]
__version__ = "0.1.0"
