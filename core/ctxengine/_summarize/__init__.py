"""The summariser providers: a kernel service every engine calls to write summaries.

Providers (``auxiliary.compression.provider``): ``anthropic`` (official SDK), ``openai`` (any
OpenAI-compatible endpoint; optional extra), ``main`` (the host's own model as a callable),
``extractive`` (no model: :func:`resolve_provider` returns ``None`` and the engine writes its local
digest) and ``auto`` (picks one from settings and environment, see :func:`choose`).

Every failure of a summary call is a :class:`SummaryError` whose ``aborts`` flag carries the
failure policy (``docs/summaries.md``), identically for every engine; :mod:`.policy` adds retries,
a circuit breaker and a fallback chain around the providers. Importing this package imports no
SDK.
"""

from __future__ import annotations

from ctxengine._summarize.errors import (
    ABORT_KINDS,
    FALLBACK_KINDS,
    ProviderConfigError,
    SummaryAttempt,
    SummaryError,
    classify_error,
    is_context_length_message,
    kind_for_status,
    retry_after_seconds,
)
from ctxengine._summarize.policy import (
    BREAKER_KINDS,
    RETRYABLE_KINDS,
    FailurePolicy,
    SummaryReply,
    SummaryService,
    call_summary,
    call_summary_request,
)
from ctxengine._summarize.providers import (
    OPENAI_INSTALL_HINT,
    SAFETY_MARGIN,
    AnthropicProvider,
    MainCallable,
    MainProvider,
    OpenAIProvider,
    SummaryProvider,
    anthropic_reply_text,
    fits,
    max_prompt_tokens,
    openai_reply_text,
)
from ctxengine._summarize.reasoning import strip_reasoning
from ctxengine._summarize.selection import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    FALLBACK_CONTEXT_LENGTH,
    PROVIDERS,
    Choice,
    HostModel,
    choose,
    describe_failure_policy,
    describe_provider,
    failure_policy,
    resolve_provider,
    resolve_service,
    summary_context_length,
)

__all__ = [
    "ABORT_KINDS",
    "BREAKER_KINDS",
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "FALLBACK_CONTEXT_LENGTH",
    "FALLBACK_KINDS",
    "OPENAI_INSTALL_HINT",
    "PROVIDERS",
    "RETRYABLE_KINDS",
    "SAFETY_MARGIN",
    "AnthropicProvider",
    "Choice",
    "FailurePolicy",
    "HostModel",
    "MainCallable",
    "MainProvider",
    "OpenAIProvider",
    "ProviderConfigError",
    "SummaryAttempt",
    "SummaryError",
    "SummaryProvider",
    "SummaryReply",
    "SummaryService",
    "anthropic_reply_text",
    "call_summary",
    "call_summary_request",
    "choose",
    "classify_error",
    "describe_failure_policy",
    "describe_provider",
    "failure_policy",
    "fits",
    "is_context_length_message",
    "kind_for_status",
    "max_prompt_tokens",
    "openai_reply_text",
    "resolve_provider",
    "resolve_service",
    "retry_after_seconds",
    "strip_reasoning",
    "summary_context_length",
]
