"""ctxengine: keeps long LLM-agent conversations inside the context window and cheap to send.

This package is the declared SDK: every name in ``__all__`` is public and documented in
``docs/sdk.md``; hosts and engine authors (the built-in plugins and ``ctxengine-lcm`` included)
import only from here, :mod:`ctxengine.messages`, :mod:`ctxengine.hookspecs` and
:mod:`ctxengine.testing`. Modules and packages whose names start with an underscore are private
and may change in any release.

``import ctxengine`` stays cheap: the names below are imported on first access, nothing here
imports a plugin, ``anthropic`` or ``tiktoken``, and no plugin discovery happens until
:func:`load` builds a kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxengine._version import __version__
from ctxengine.hookspecs import hookimpl

if TYPE_CHECKING:
    from ctxengine._accounting.cache_stats import (
        CacheCost as CacheCost,
    )
    from ctxengine._accounting.cache_stats import (
        SessionCacheStats as SessionCacheStats,
    )
    from ctxengine._accounting.cache_stats import (
        cache_line as cache_line,
    )
    from ctxengine._accounting.cache_stats import (
        cost_of as cost_of,
    )
    from ctxengine._accounting.estimate import (
        TextSize as TextSize,
    )
    from ctxengine._accounting.estimate import (
        TokenEstimate as TokenEstimate,
    )
    from ctxengine._accounting.estimate import (
        estimate_tokens as estimate_tokens,
    )
    from ctxengine._accounting.estimate import (
        rough_conversation_tokens as rough_conversation_tokens,
    )
    from ctxengine._accounting.models import ModelInfo as ModelInfo
    from ctxengine._accounting.models import lookup_model as lookup_model
    from ctxengine._accounting.tokens import (
        MessageSizes as MessageSizes,
    )
    from ctxengine._accounting.tokens import (
        PrefixCounter as PrefixCounter,
    )
    from ctxengine._accounting.tokens import (
        TokenCounter as TokenCounter,
    )
    from ctxengine._accounting.ttl import TTL_SECONDS as TTL_SECONDS
    from ctxengine._accounting.usage import Usage as Usage
    from ctxengine._accounting.usage import normalize_usage as normalize_usage
    from ctxengine._config.core import (
        CacheTTL as CacheTTL,
    )
    from ctxengine._config.core import (
        Config as Config,
    )
    from ctxengine._config.core import (
        LoadedConfig as LoadedConfig,
    )
    from ctxengine._config.core import (
        config_from_mapping as config_from_mapping,
    )
    from ctxengine._config.core import (
        ctxengine_home as ctxengine_home,
    )
    from ctxengine._config.core import (
        load_config as load_config,
    )
    from ctxengine._config.fields import (
        ConfigError as ConfigError,
    )
    from ctxengine._config.fields import (
        Field as Field,
    )
    from ctxengine._config.fields import (
        setting as setting,
    )
    from ctxengine._config.spec import (
        PluginSettings as PluginSettings,
    )
    from ctxengine._config.spec import (
        SettingsSpec as SettingsSpec,
    )
    from ctxengine._config.spec import (
        SettingsView as SettingsView,
    )
    from ctxengine._kernel.coordination import (
        CoordinationError as CoordinationError,
    )
    from ctxengine._kernel.coordination import (
        SessionBusyError as SessionBusyError,
    )
    from ctxengine._kernel.hygiene import HygieneReport as HygieneReport
    from ctxengine._kernel.kernel import (
        EngineNotFoundError as EngineNotFoundError,
    )
    from ctxengine._kernel.kernel import (
        Kernel as Kernel,
    )
    from ctxengine._kernel.kernel import (
        load as load,
    )
    from ctxengine._kernel.resolve import (
        register_engine as register_engine,
    )
    from ctxengine._kernel.session import Session as Session
    from ctxengine._messages.conversation import (
        Conversation as Conversation,
    )
    from ctxengine._messages.conversation import (
        Format as Format,
    )
    from ctxengine._messages.conversation import (
        Message as Message,
    )
    from ctxengine._messages.conversation import (
        Stage as Stage,
    )
    from ctxengine._messages.conversation import (
        SystemPrompt as SystemPrompt,
    )
    from ctxengine._messages.errors import (
        MessageFormatError as MessageFormatError,
    )
    from ctxengine._messages.files import (
        ConversationFileError as ConversationFileError,
    )
    from ctxengine._messages.files import (
        ConversationRecord as ConversationRecord,
    )
    from ctxengine._messages.files import (
        read_conversations as read_conversations,
    )
    from ctxengine._plugin.command_errors import (
        CommandError as CommandError,
    )
    from ctxengine._plugin.command_errors import (
        UsageError as UsageError,
    )
    from ctxengine._plugin.commands import (
        CommandRegistry as CommandRegistry,
    )
    from ctxengine._plugin.commands import (
        PluginCommands as PluginCommands,
    )
    from ctxengine._plugin.commands import (
        engine_options as engine_options,
    )
    from ctxengine._plugin.commands import (
        engine_overrides as engine_overrides,
    )
    from ctxengine._plugin.context import (
        CacheSettings as CacheSettings,
    )
    from ctxengine._plugin.context import (
        EngineContext as EngineContext,
    )
    from ctxengine._plugin.context import (
        MarkedRequest as MarkedRequest,
    )
    from ctxengine._plugin.context import (
        PreparedRequest as PreparedRequest,
    )
    from ctxengine._plugin.guards import (
        CompactionGuard as CompactionGuard,
    )
    from ctxengine._plugin.results import (
        CompressResult as CompressResult,
    )
    from ctxengine._plugin.results import (
        GatewayVerdict as GatewayVerdict,
    )
    from ctxengine._plugin.results import (
        SummaryCall as SummaryCall,
    )
    from ctxengine._plugin.state import SessionState as SessionState
    from ctxengine._plugin.tools import (
        Tool as Tool,
    )
    from ctxengine._plugin.tools import (
        ToolError as ToolError,
    )
    from ctxengine._plugin.tools import (
        bounded_repr as bounded_repr,
    )
    from ctxengine._summarize import (
        SummaryError as SummaryError,
    )
    from ctxengine._summarize import (
        SummaryProvider as SummaryProvider,
    )
    from ctxengine._summarize import (
        classify_error as classify_error,
    )
    from ctxengine._summarize.policy import (
        SummaryReply as SummaryReply,
    )
    from ctxengine._summarize.policy import (
        SummaryService as SummaryService,
    )
    from ctxengine._summarize.policy import (
        call_summary as call_summary,
    )
    from ctxengine._summarize.policy import (
        call_summary_request as call_summary_request,
    )
    from ctxengine._summarize.template import (
        DIGEST_LABEL_PREFIX as DIGEST_LABEL_PREFIX,
    )
    from ctxengine._summarize.template import (
        EMPTY_SECTION as EMPTY_SECTION,
    )
    from ctxengine._summarize.template import (
        MIN_TEMPLATE_HEADINGS as MIN_TEMPLATE_HEADINGS,
    )
    from ctxengine._summarize.template import (
        SUMMARY_HEADINGS as SUMMARY_HEADINGS,
    )
    from ctxengine._summarize.template import (
        check_summary as check_summary,
    )
    from ctxengine._summarize.template import (
        is_placeholder as is_placeholder,
    )
    from ctxengine._wrap import wrap as wrap

# The SDK: each private module and the public names it defines. `__all__` and the lazy import
# below come from this table; the block above says the same to type checkers (a test checks
# that the two agree).
_SDK: dict[str, tuple[str, ...]] = {
    "ctxengine._accounting.cache_stats": (
        "CacheCost",
        "SessionCacheStats",
        "cache_line",
        "cost_of",
    ),
    "ctxengine._accounting.estimate": (
        "TextSize",
        "TokenEstimate",
        "estimate_tokens",
        "rough_conversation_tokens",
    ),
    "ctxengine._accounting.models": ("ModelInfo", "lookup_model"),
    "ctxengine._accounting.tokens": ("MessageSizes", "PrefixCounter", "TokenCounter"),
    "ctxengine._accounting.ttl": ("TTL_SECONDS",),
    "ctxengine._accounting.usage": ("Usage", "normalize_usage"),
    "ctxengine._config.core": (
        "CacheTTL",
        "Config",
        "LoadedConfig",
        "config_from_mapping",
        "ctxengine_home",
        "load_config",
    ),
    "ctxengine._config.fields": ("ConfigError", "Field", "setting"),
    "ctxengine._config.spec": ("PluginSettings", "SettingsSpec", "SettingsView"),
    "ctxengine._kernel.coordination": ("CoordinationError", "SessionBusyError"),
    "ctxengine._kernel.hygiene": ("HygieneReport",),
    "ctxengine._kernel.kernel": ("EngineNotFoundError", "Kernel", "load"),
    "ctxengine._kernel.resolve": ("register_engine",),
    "ctxengine._kernel.session": ("Session",),
    "ctxengine._messages.conversation": (
        "Conversation",
        "Format",
        "Message",
        "Stage",
        "SystemPrompt",
    ),
    "ctxengine._messages.errors": ("MessageFormatError",),
    "ctxengine._messages.files": (
        "ConversationFileError",
        "ConversationRecord",
        "read_conversations",
    ),
    "ctxengine._plugin.command_errors": ("CommandError", "UsageError"),
    "ctxengine._plugin.commands": (
        "CommandRegistry",
        "PluginCommands",
        "engine_options",
        "engine_overrides",
    ),
    "ctxengine._plugin.context": (
        "CacheSettings",
        "EngineContext",
        "MarkedRequest",
        "PreparedRequest",
    ),
    "ctxengine._plugin.guards": ("CompactionGuard",),
    "ctxengine._plugin.results": ("CompressResult", "GatewayVerdict", "SummaryCall"),
    "ctxengine._plugin.state": ("SessionState",),
    "ctxengine._plugin.tools": ("Tool", "ToolError", "bounded_repr"),
    "ctxengine._summarize": ("SummaryError", "SummaryProvider", "classify_error"),
    "ctxengine._summarize.policy": (
        "SummaryReply",
        "SummaryService",
        "call_summary",
        "call_summary_request",
    ),
    "ctxengine._summarize.template": (
        "DIGEST_LABEL_PREFIX",
        "EMPTY_SECTION",
        "MIN_TEMPLATE_HEADINGS",
        "SUMMARY_HEADINGS",
        "check_summary",
        "is_placeholder",
    ),
    "ctxengine._wrap": ("wrap",),
}
_LAZY = {name: module for module, names in _SDK.items() for name in names}

__all__ = ["__version__", "hookimpl", *_LAZY]  # noqa: PLE0604 (derived from the table)


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'ctxengine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
