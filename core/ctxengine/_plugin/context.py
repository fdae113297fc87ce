"""What a plugin gets to work with for one session: :class:`EngineContext`."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from ctxengine._plugin.state import SessionState, Undecoded

if TYPE_CHECKING:
    from ctxengine._accounting.models import ModelInfo
    from ctxengine._accounting.tokens import TokenCounter
    from ctxengine._accounting.usage import Usage
    from ctxengine._config.core import Config
    from ctxengine._messages.conversation import Conversation, Format, Stage
    from ctxengine._messages.memo import MessageMemo
    from ctxengine._plugin.results import CompressResult
    from ctxengine._summarize import SummaryProvider

FallbackCompress = Callable[
    ["Conversation", "Stage", bool, "str | None", "int | None"], "CompressResult | None"
]
"""The kernel's service behind :meth:`EngineContext.fallback_compress`."""

T = TypeVar("T")

Route = Literal["anthropic", "openrouter", "anthropic-compatible", "openai-compatible"]
"""Where requests go: the native Anthropic API, OpenRouter (OpenAI envelope), an
Anthropic-compatible gateway, or some other OpenAI-compatible endpoint."""


TTLPolicy = Literal["5m", "1h", "auto"]
"""``prompt_caching.cache_ttl``: one TTL for every breakpoint, or chosen per request."""


def _default_stable_ttl(settings: CacheSettings) -> Literal["5m", "1h"]:
    return settings.ttl


def _check_ttl_order(settings: CacheSettings, attribute: object, value: str) -> None:
    if settings.ttl == "1h" and value == "5m":
        raise ValueError(
            "stable_ttl must not be shorter than ttl: stable breakpoints come first, and a 1h "
            "breakpoint must never follow a 5m one"
        )


@attrs.frozen
class CacheSettings:
    """How the selected cache strategy should mark one request of this session.

    The kernel hands the strategy a fresh value per request: with ``prompt_caching.cache_ttl:
    auto`` the TTLs change from request to request (see ``docs/builtins/caching.md``).

    :ivar ttl: ``"5m"`` or ``"1h"``: the TTL of breakpoints that move with the conversation
        (messages, a top-level automatic marker).
    :ivar route: where requests go; decides where markers are allowed.
    :ivar native: true on routes that accept ``cache_control`` on tool messages (native
        Anthropic API and Anthropic-compatible gateways), false on OpenAI-envelope routes.
    :ivar min_cacheable_tokens: the model's minimum cacheable prefix.
    :ivar stable_ttl: the TTL of breakpoints closing the stable prefix (tools, system prompt);
        never shorter than ``ttl``, so marking the stable prefix first keeps the API's
        "longer TTLs first" rule. Defaults to ``ttl``.
    :ivar policy: the configured ``cache_ttl`` (``"auto"`` when the kernel chose the TTLs).
    :ivar automatic: the route accepts Anthropic's top-level automatic ``cache_control`` (the
        native Anthropic API), which marks the last cacheable block by itself and counts towards
        the four breakpoints.
    """

    ttl: Literal["5m", "1h"]
    route: Route
    native: bool
    min_cacheable_tokens: int
    stable_ttl: Literal["5m", "1h"] = attrs.field(
        default=attrs.Factory(_default_stable_ttl, takes_self=True), validator=_check_ttl_order
    )
    policy: TTLPolicy = attrs.field(default=attrs.Factory(lambda self: self.ttl, takes_self=True))
    automatic: bool = False


@attrs.frozen
class MarkedRequest:
    """What a cache strategy may answer instead of the bare marked request: the request and how
    many ``cache_control`` markers it carries on ``tools``, ``system`` and ``messages`` (those
    the strategy placed or kept; a top-level automatic marker is not counted), as the strategy
    knows from placing them. The kernel reports that count (``RoundRecord.breakpoints``,
    :attr:`PreparedRequest.breakpoints`); for a strategy that answers with the bare request it
    counts the markers of that request itself.

    :ivar request: the marked request (a new dict; see the ``cache_strategy`` hookspec).
    :ivar breakpoints: the markers it carries, as above.
    """

    request: dict[str, Any]
    breakpoints: int


@attrs.frozen
class PreparedRequest:
    """The last request a session prepared, as the kernel keeps it for engines
    (``ctx.last_request``).

    An engine that makes a model call of its own on the main model and route (a summary, for
    instance) can send ``request`` again with something appended at the end: everything up to
    its breakpoints is then read from the provider's prompt cache instead of being paid in full.

    :ivar request: the request as it was sent: markers, ``system``, ``tools`` and every other
        argument included. Treat it as read-only; its ``messages`` list is a snapshot.
    :ivar messages: the caller's own message objects of that request, before marking (a
        snapshot of the list), to check that a conversation still starts with them.
    :ivar format: the request's wire format.
    :ivar tokens: the local token count of the request.
    :ivar sent_at: ``ctx.clock()`` when it was prepared.
    :ivar breakpoints: the ``cache_control`` markers the cache strategy reported the request
        carries (see :class:`MarkedRequest`; 0 when no strategy marked it).
    """

    request: Mapping[str, Any]
    messages: tuple[Any, ...]
    format: Format
    tokens: int
    sent_at: float
    breakpoints: int = 0


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
    :ivar route: where the main model's requests go (``model.base_url`` read as in
        :class:`CacheSettings`), ``None`` when the kernel did not say (a hand-built context).
    :ivar fallback_engine: the engine the kernel loaded as this engine's fallback (the engine's
        ``CTXENGINE_FALLBACK``), ``None`` when there is none; see :meth:`fallback_compress`.
    """

    session_id: str
    engine: str
    config: Config
    model: ModelInfo
    tokens: TokenCounter
    summarizer: Callable[[], SummaryProvider | None]
    state: dict[str, Any] = attrs.field(factory=dict)
    last_usage: Usage | None = None
    last_request: PreparedRequest | None = None
    """The session's last prepared request (``None`` before the first); see
    :class:`PreparedRequest`."""
    clock: Callable[[], float] = time.monotonic
    log: logging.Logger = attrs.field(factory=lambda: logging.getLogger("ctxengine"))
    env: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)
    data_dir: Path = attrs.field(
        default=attrs.Factory(lambda self: _home(self.env), takes_self=True), repr=False
    )
    route: Route | None = None
    fallback_engine: str | None = None
    _fallback: FallbackCompress | None = attrs.field(default=None, alias="fallback", repr=False)
    state_specs: dict[str, SessionState[Any]] = attrs.field(factory=dict, init=False, repr=False)
    """The :class:`SessionState` behind each decoded ``ctx.state`` entry (the kernel saves
    those); filled by :meth:`session_state`."""

    def fallback_compress(
        self,
        conversation: Conversation,
        *,
        stage: Stage = "agent",
        force: bool = False,
        focus: str | None = None,
        message_budget: int | None = None,
    ) -> CompressResult | None:
        """Compact ``conversation`` with the fallback engine, exactly as its own ``compress`` hook
        would (its settings, its state in this session, its guards), and return its result;
        ``None`` when no fallback engine is loaded. The fallback's failures come back as an
        ``aborted`` result, never as an exception. ``message_budget`` is the one the engine was
        given (the gateway's hard limit), passed on.

        For an engine that cannot always compact its own way (the native engine, when the server
        refuses) and must not lose the turn: plugins never import each other, the kernel runs the
        other engine for it.
        """
        if self._fallback is None:
            return None
        return self._fallback(conversation, stage, force, focus, message_budget)

    @property
    def memo(self) -> MessageMemo:
        """This session's message memo: the one :attr:`tokens` keeps its counts in, and where a
        cache strategy learns which messages carry markers (one memo per session)."""
        return self.tokens.memo

    def plugin_state(self, key: str, factory: Callable[[], T]) -> T:
        """This session's state object of one plugin, ``ctx.state[key]``, created with
        ``factory()`` on first use (or when something else was stored under ``key``).

        Kept in this process only; state that must survive a worker switch is declared with
        :meth:`session_state`.
        """
        state = self.state.get(key)
        if state is None or (isinstance(factory, type) and not isinstance(state, factory)):
            state = self.state[key] = factory()
        return state

    def session_state(self, spec: SessionState[T]) -> T:
        """This session's state declared by ``spec``, ``ctx.state[spec.key]``: the object
        already there, else the state another worker saved (decoded with ``spec.load``), else
        ``spec.factory()``. The kernel saves it when the session call ends (on a shared
        coordination backend; see :class:`~ctxengine.SessionState`). Mutate it in place or
        store a new object under ``spec.key``; pop the key to forget it.
        """
        state = self.state.get(spec.key)
        if state is not None and self.state_specs.get(spec.key) is spec:
            return state  # type: ignore[no-any-return]
        value: T | None = None
        if isinstance(state, Undecoded):
            value = self._decode(spec, state)
        if value is None:
            value = spec.factory()
        self.state[spec.key] = value
        self.state_specs[spec.key] = spec
        return value

    def _decode(self, spec: SessionState[T], saved: Undecoded) -> T | None:
        """``saved`` decoded by ``spec``, or ``None`` (logged) when it cannot be."""
        version = saved.entry.get("v")
        if version != spec.version:
            self.log.info(
                "session %r: saved state %r has version %r, this plugin reads %r; starting it "
                "afresh",
                self.session_id,
                spec.key,
                version,
                spec.version,
            )
            return None
        try:
            return spec.load(saved.entry.get("data"), saved.saved_at)
        except Exception as exc:
            self.log.warning(
                "session %r: saved state %r could not be read (%s: %s); starting it afresh",
                self.session_id,
                spec.key,
                type(exc).__name__,
                exc,
            )
            return None

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
