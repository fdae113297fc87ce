"""The summary providers: a kernel service every engine calls to write summaries.

Providers (``auxiliary.compression.provider``): ``anthropic`` (official SDK), ``openai`` (any
OpenAI-compatible endpoint; optional extra), ``main`` (the host's own model as a callable),
``extractive`` (no model: :func:`resolve_provider` returns ``None`` and the engine writes its local
digest) and ``auto`` (picks one from settings and environment, see :func:`.selection.choose`).

Every failure of a summary call is a :class:`SummaryError` whose ``aborts`` flag carries the
failure policy (``docs/summaries.md``), identically for every engine; :mod:`.policy` adds retries,
a circuit breaker and a fallback chain around the providers. Importing this package imports no
SDK.
"""

from __future__ import annotations

from ctxengine._summarize.errors import SummaryError, classify_error
from ctxengine._summarize.providers import SummaryProvider
from ctxengine._summarize.selection import describe_provider, resolve_provider

__all__ = [
    "SummaryError",
    "SummaryProvider",
    "classify_error",
    "describe_provider",
    "resolve_provider",
]
