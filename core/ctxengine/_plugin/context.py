"""What a plugin gets to work with for one session: :class:`EngineContext`."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

if TYPE_CHECKING:
    from ctxengine._accounting.models import ModelInfo
    from ctxengine._accounting.tokens import TokenCounter
    from ctxengine._accounting.usage import Usage
    from ctxengine._config.core import Config
    from ctxengine._messages.memo import MessageMemo
    from ctxengine._summarize import SummaryProvider

T = TypeVar("T")

Route = Literal["anthropic", "openrouter", "anthropic-compatible", "openai-compatible"]
"""Where requests go: the native Anthropic API, OpenRouter (OpenAI envelope), an
Anthropic-compatible gateway, or some other OpenAI-compatible endpoint."""


@attrs.frozen
class CacheSettings:
    """How the selected cache strategy should mark requests for this session.

    :ivar ttl: ``"5m"`` or ``"1h"``.
    :ivar route: where requests go; decides where markers are allowed.
    :ivar native: true on routes that accept ``cache_control`` on tool messages (native
        Anthropic API and Anthropic-compatible gateways), false on OpenAI-envelope routes.
    :ivar min_cacheable_tokens: the model's minimum cacheable prefix.
    """

    ttl: Literal["5m", "1h"]
    route: Route
    native: bool
    min_cacheable_tokens: int


@attrs.define(eq=False)
class EngineContext:
    """Per-session context handed to every hook.

    Two sessions never share a context, so ``state`` is where a plugin keeps its per-session
    counters and summaries; each plugin keys its entry by its own name.

    :ivar clock: monotonic seconds; injected so tests can move time (cooldowns, cache TTLs).
    :ivar summarizer: returns the configured summary provider, built on first use; ``None``
        means the ``extractive`` provider (a deterministic local digest, no model call).
    :ivar env: the environment the kernel was loaded with; use it instead of ``os.environ``.
    :ivar data_dir: where plugins keep persistent data (a store, an index): ``$CTXENGINE_HOME``
        normally, a temporary folder when the kernel runs a simulation (``load(sandbox=...)``,
        ``ctxengine replay``). Default locations of stored data must be under it.
    :ivar config: the validated configuration; a plugin reads its own keys with
        ``ctx.config.settings(ITS_SPEC)``.
    """

    session_id: str
    engine: str
    config: Config
    model: ModelInfo
    tokens: TokenCounter
    summarizer: Callable[[], SummaryProvider | None]
    state: dict[str, Any] = attrs.field(factory=dict)
    last_usage: Usage | None = None
    clock: Callable[[], float] = time.monotonic
    log: logging.Logger = attrs.field(factory=lambda: logging.getLogger("ctxengine"))
    env: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)
    data_dir: Path = attrs.field(
        default=attrs.Factory(lambda self: _home(self.env), takes_self=True), repr=False
    )

    @property
    def memo(self) -> MessageMemo:
        """This session's message memo: the one :attr:`tokens` keeps its counts in, and where a
        cache strategy learns which messages carry markers (one memo per session)."""
        return self.tokens.memo

    def plugin_state(self, key: str, factory: Callable[[], T]) -> T:
        """This session's state object of one plugin, ``ctx.state[key]``, created with
        ``factory()`` on first use (or when something else was stored under ``key``)."""
        state = self.state.get(key)
        if state is None or (isinstance(factory, type) and not isinstance(state, factory)):
            state = self.state[key] = factory()
        return state

    @property
    def window(self) -> int:
        """The usable window: the model's context length minus the output reservation
        (``model.max_tokens``). Every engine's thresholds are fractions of it.

        :raises ValueError: when the reservation leaves no window (``ctxengine.load`` refuses
            such a configuration, so only hand-built contexts hit this).
        """
        return usable_window(self.model.context_length, self.config.model.max_tokens)

    def fraction_of_window(self, fraction: float) -> int:
        """``int(fraction × window)``: the token count a threshold setting stands for."""
        return int(fraction * self.window)


def _home(env: Mapping[str, str]) -> Path:
    from ctxengine._config.files import ctxengine_home

    return ctxengine_home(env)


def usable_window(context_length: int, max_tokens: int | None) -> int:
    """``context_length - max_tokens`` (the one window computation every engine uses).

    :raises ValueError: when the reservation leaves no window.
    """
    window = context_length - (max_tokens or 0)
    if window <= 0:
        raise ValueError(
            f"model.max_tokens ({max_tokens}) must be less than the model's context length "
            f"({context_length})"
        )
    return window
