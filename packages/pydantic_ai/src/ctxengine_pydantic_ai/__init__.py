"""ctxengine for pydantic-ai agents: ``Agent(..., capabilities=[Ctxengine(kernel)])``."""

from __future__ import annotations

from ctxengine_pydantic_ai.capability import Ctxengine, usage_from_pydantic_ai
from ctxengine_pydantic_ai.convert import Converter

__all__ = ["Converter", "Ctxengine", "usage_from_pydantic_ai"]
__version__ = "0.1.0"
