"""ctxengine: keeps long LLM-agent conversations inside the context window and cheap to send.

``import ctxengine`` stays cheap: nothing here imports a plugin, ``anthropic`` or ``tiktoken``,
and no plugin discovery happens until :func:`load` builds a kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxengine.hookspecs import hookimpl

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ctxengine.config import Config, ConfigError, load_config
    from ctxengine.context import CacheSettings, EngineContext
    from ctxengine.conversation import Conversation, Message
    from ctxengine.kernel import Kernel, load
    from ctxengine.resolve import register_engine
    from ctxengine.results import CompressResult
    from ctxengine.session import Session
    from ctxengine.tools import Tool, ToolError
    from ctxengine.usage import Usage, normalize_usage

# Public name -> defining module, imported on first attribute access.
_LAZY = {
    "CacheSettings": "ctxengine.context",
    "CompressResult": "ctxengine.results",
    "Config": "ctxengine.config",
    "ConfigError": "ctxengine.config",
    "Conversation": "ctxengine.conversation",
    "EngineContext": "ctxengine.context",
    "Kernel": "ctxengine.kernel",
    "Message": "ctxengine.conversation",
    "Session": "ctxengine.session",
    "Tool": "ctxengine.tools",
    "ToolError": "ctxengine.tools",
    "Usage": "ctxengine.usage",
    "load": "ctxengine.kernel",
    "load_config": "ctxengine.config",
    "normalize_usage": "ctxengine.usage",
    "register_engine": "ctxengine.resolve",
}

__all__ = [
    "CacheSettings",
    "CompressResult",
    "Config",
    "ConfigError",
    "Conversation",
    "EngineContext",
    "Kernel",
    "Message",
    "Session",
    "Tool",
    "ToolError",
    "Usage",
    "__version__",
    "hookimpl",
    "load",
    "load_config",
    "normalize_usage",
    "register_engine",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'ctxengine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
