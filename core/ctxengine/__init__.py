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
    from ctxengine._accounting.cache_stats import CacheCost, SessionCacheStats, cache_line, cost_of
    from ctxengine._accounting.estimate import (
        RoughCounter,
        TextSize,
        TokenEstimate,
        estimate_tokens,
        rough_conversation_tokens,
        rough_message_tokens,
    )
    from ctxengine._accounting.models import ModelInfo, lookup_model
    from ctxengine._accounting.tokens import MessageSizes, PrefixCounter, TokenCounter
    from ctxengine._accounting.ttl import TTL_SECONDS
    from ctxengine._accounting.usage import Usage, normalize_usage
    from ctxengine._cli.errors import CommandError, UsageError
    from ctxengine._cli.files import ConversationFileError, ConversationRecord, read_conversations
    from ctxengine._config.core import (
        CacheTTL,
        Config,
        ConfigRow,
        LoadedConfig,
        config_from_mapping,
        ctxengine_home,
        load_config,
    )
    from ctxengine._config.fields import (
        ConfigError,
        ConfigProblem,
        Field,
        FieldKind,
        RawSection,
        parse_section,
        setting,
    )
    from ctxengine._config.spec import (
        PluginSettings,
        SettingsDeclarationError,
        SettingsSpec,
        SettingsView,
    )
    from ctxengine._kernel.coordination import CoordinationError, SessionBusyError
    from ctxengine._kernel.hygiene import HygieneReport
    from ctxengine._kernel.kernel import EngineNotFoundError, EngineNotFoundWarning, Kernel, load
    from ctxengine._kernel.resolve import register_engine, unregister_engine
    from ctxengine._kernel.session import Session
    from ctxengine._messages.conversation import Conversation, Format, Message, Stage, SystemPrompt
    from ctxengine._plugin.commands import (
        Command,
        CommandRegistry,
        DuplicateCommandError,
        PluginCommands,
    )
    from ctxengine._plugin.context import (
        CacheSettings,
        EngineContext,
        MarkedRequest,
        PreparedRequest,
        Route,
        usable_window,
    )
    from ctxengine._plugin.guards import (
        COOLDOWN_SECONDS,
        THRASH_RUN,
        THRASH_SAVING,
        CompactionGuard,
    )
    from ctxengine._plugin.results import CompressResult, GatewayVerdict, SummaryCall
    from ctxengine._plugin.state import SessionState
    from ctxengine._plugin.tools import (
        DuplicateToolError,
        RegisteredTool,
        Tool,
        ToolError,
        bounded_repr,
    )
    from ctxengine._summarize import SummaryError, SummaryProvider, classify_error, strip_reasoning
    from ctxengine._summarize.errors import SummaryAttempt
    from ctxengine._summarize.policy import (
        FailurePolicy,
        SummaryReply,
        SummaryService,
        call_summary,
        call_summary_request,
    )
    from ctxengine._summarize.providers import fits
    from ctxengine._summarize.template import (
        DIGEST_LABEL_PREFIX,
        EMPTY_SECTION,
        MIN_SUMMARY_WORDS,
        MIN_TEMPLATE_HEADINGS,
        SUMMARY_HEADINGS,
        check_summary,
        is_placeholder,
    )
    from ctxengine._wrap import CallRecord, RoundRecord, WrappedClient, wrap

# Public name -> defining private module, imported on first attribute access.
_LAZY = {
    "CacheCost": "ctxengine._accounting.cache_stats",
    "cost_of": "ctxengine._accounting.cache_stats",
    "RoughCounter": "ctxengine._accounting.estimate",
    "TTL_SECONDS": "ctxengine._accounting.ttl",
    "CommandError": "ctxengine._cli.errors",
    "UsageError": "ctxengine._cli.errors",
    "ConversationFileError": "ctxengine._cli.files",
    "ConversationRecord": "ctxengine._cli.files",
    "read_conversations": "ctxengine._cli.files",
    "CacheTTL": "ctxengine._config.core",
    "bounded_repr": "ctxengine._plugin.tools",
    "GatewayVerdict": "ctxengine._plugin.results",
    "FailurePolicy": "ctxengine._summarize.policy",
    "MIN_SUMMARY_WORDS": "ctxengine._summarize.template",
    "SummaryAttempt": "ctxengine._summarize.errors",
    "SummaryCall": "ctxengine._plugin.results",
    "SummaryReply": "ctxengine._summarize.policy",
    "SummaryService": "ctxengine._summarize.policy",
    "call_summary": "ctxengine._summarize.policy",
    "call_summary_request": "ctxengine._summarize.policy",
    "check_summary": "ctxengine._summarize.template",
    "COOLDOWN_SECONDS": "ctxengine._plugin.guards",
    "CacheSettings": "ctxengine._plugin.context",
    "CallRecord": "ctxengine._wrap",
    "Command": "ctxengine._plugin.commands",
    "CommandRegistry": "ctxengine._plugin.commands",
    "CompactionGuard": "ctxengine._plugin.guards",
    "CompressResult": "ctxengine._plugin.results",
    "Config": "ctxengine._config.core",
    "ConfigError": "ctxengine._config.fields",
    "ConfigProblem": "ctxengine._config.fields",
    "ConfigRow": "ctxengine._config.core",
    "CoordinationError": "ctxengine._kernel.coordination",
    "Conversation": "ctxengine._messages.conversation",
    "DIGEST_LABEL_PREFIX": "ctxengine._summarize.template",
    "DuplicateCommandError": "ctxengine._plugin.commands",
    "DuplicateToolError": "ctxengine._plugin.tools",
    "EngineContext": "ctxengine._plugin.context",
    "EngineNotFoundError": "ctxengine._kernel.kernel",
    "EngineNotFoundWarning": "ctxengine._kernel.kernel",
    "Field": "ctxengine._config.fields",
    "FieldKind": "ctxengine._config.fields",
    "Format": "ctxengine._messages.conversation",
    "HygieneReport": "ctxengine._kernel.hygiene",
    "Kernel": "ctxengine._kernel.kernel",
    "LoadedConfig": "ctxengine._config.core",
    "MIN_TEMPLATE_HEADINGS": "ctxengine._summarize.template",
    "Message": "ctxengine._messages.conversation",
    "MessageSizes": "ctxengine._accounting.tokens",
    "ModelInfo": "ctxengine._accounting.models",
    "PluginCommands": "ctxengine._plugin.commands",
    "PluginSettings": "ctxengine._config.spec",
    "PrefixCounter": "ctxengine._accounting.tokens",
    "RawSection": "ctxengine._config.fields",
    "RegisteredTool": "ctxengine._plugin.tools",
    "RoundRecord": "ctxengine._wrap",
    "Route": "ctxengine._plugin.context",
    "SUMMARY_HEADINGS": "ctxengine._summarize.template",
    "EMPTY_SECTION": "ctxengine._summarize.template",
    "is_placeholder": "ctxengine._summarize.template",
    "Session": "ctxengine._kernel.session",
    "SessionBusyError": "ctxengine._kernel.coordination",
    "SessionCacheStats": "ctxengine._accounting.cache_stats",
    "SessionState": "ctxengine._plugin.state",
    "SettingsDeclarationError": "ctxengine._config.spec",
    "SettingsSpec": "ctxengine._config.spec",
    "SettingsView": "ctxengine._config.spec",
    "Stage": "ctxengine._messages.conversation",
    "SummaryError": "ctxengine._summarize",
    "PreparedRequest": "ctxengine._plugin.context",
    "MarkedRequest": "ctxengine._plugin.context",
    "SummaryProvider": "ctxengine._summarize",
    "SystemPrompt": "ctxengine._messages.conversation",
    "THRASH_RUN": "ctxengine._plugin.guards",
    "THRASH_SAVING": "ctxengine._plugin.guards",
    "TextSize": "ctxengine._accounting.estimate",
    "TokenCounter": "ctxengine._accounting.tokens",
    "TokenEstimate": "ctxengine._accounting.estimate",
    "Tool": "ctxengine._plugin.tools",
    "ToolError": "ctxengine._plugin.tools",
    "Usage": "ctxengine._accounting.usage",
    "fits": "ctxengine._summarize.providers",
    "WrappedClient": "ctxengine._wrap",
    "cache_line": "ctxengine._accounting.cache_stats",
    "classify_error": "ctxengine._summarize",
    "config_from_mapping": "ctxengine._config.core",
    "ctxengine_home": "ctxengine._config.core",
    "estimate_tokens": "ctxengine._accounting.estimate",
    "load": "ctxengine._kernel.kernel",
    "load_config": "ctxengine._config.core",
    "lookup_model": "ctxengine._accounting.models",
    "normalize_usage": "ctxengine._accounting.usage",
    "parse_section": "ctxengine._config.fields",
    "setting": "ctxengine._config.fields",
    "register_engine": "ctxengine._kernel.resolve",
    "rough_conversation_tokens": "ctxengine._accounting.estimate",
    "rough_message_tokens": "ctxengine._accounting.estimate",
    "strip_reasoning": "ctxengine._summarize",
    "unregister_engine": "ctxengine._kernel.resolve",
    "usable_window": "ctxengine._plugin.context",
    "wrap": "ctxengine._wrap",
}

__all__ = [
    "COOLDOWN_SECONDS",
    "DIGEST_LABEL_PREFIX",
    "EMPTY_SECTION",
    "MIN_SUMMARY_WORDS",
    "MIN_TEMPLATE_HEADINGS",
    "SUMMARY_HEADINGS",
    "THRASH_RUN",
    "THRASH_SAVING",
    "TTL_SECONDS",
    "CacheCost",
    "CacheSettings",
    "CacheTTL",
    "CallRecord",
    "Command",
    "CommandError",
    "CommandRegistry",
    "CompactionGuard",
    "CompressResult",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "ConfigRow",
    "Conversation",
    "ConversationFileError",
    "ConversationRecord",
    "CoordinationError",
    "DuplicateCommandError",
    "DuplicateToolError",
    "EngineContext",
    "EngineNotFoundError",
    "EngineNotFoundWarning",
    "FailurePolicy",
    "Field",
    "FieldKind",
    "Format",
    "GatewayVerdict",
    "HygieneReport",
    "Kernel",
    "LoadedConfig",
    "MarkedRequest",
    "Message",
    "MessageSizes",
    "ModelInfo",
    "PluginCommands",
    "PluginSettings",
    "PrefixCounter",
    "PreparedRequest",
    "RawSection",
    "RegisteredTool",
    "RoughCounter",
    "RoundRecord",
    "Route",
    "Session",
    "SessionBusyError",
    "SessionCacheStats",
    "SessionState",
    "SettingsDeclarationError",
    "SettingsSpec",
    "SettingsView",
    "Stage",
    "SummaryAttempt",
    "SummaryCall",
    "SummaryError",
    "SummaryProvider",
    "SummaryReply",
    "SummaryService",
    "SystemPrompt",
    "TextSize",
    "TokenCounter",
    "TokenEstimate",
    "Tool",
    "ToolError",
    "Usage",
    "UsageError",
    "WrappedClient",
    "__version__",
    "bounded_repr",
    "cache_line",
    "call_summary",
    "call_summary_request",
    "check_summary",
    "classify_error",
    "config_from_mapping",
    "cost_of",
    "ctxengine_home",
    "estimate_tokens",
    "fits",
    "hookimpl",
    "is_placeholder",
    "load",
    "load_config",
    "lookup_model",
    "normalize_usage",
    "parse_section",
    "read_conversations",
    "register_engine",
    "rough_conversation_tokens",
    "rough_message_tokens",
    "setting",
    "strip_reasoning",
    "unregister_engine",
    "usable_window",
    "wrap",
]


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
