"""The kernel's side of prompt caching: route detection, cache settings, the status line.

The marking itself is a plugin's job (the ``cache_strategy`` hook; the built-in is
``system_and_3``), and the rules of a valid marker are the SDK's (:mod:`ctxengine.messages`).
The kernel decides *whether* requests are marked and *how* (TTL, whether tool messages may carry
markers, the model's minimum cacheable prefix) and hands that to the strategy as
:class:`~ctxengine.CacheSettings`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal
from urllib.parse import SplitResult, urlsplit

import attrs

from ctxengine._messages.validate import Profile
from ctxengine._plugin.context import CacheSettings, Route

if TYPE_CHECKING:
    from ctxengine._accounting.models import ModelInfo
    from ctxengine._config.core import Config

ApiKind = Literal["anthropic", "openai"]

ROUTE_LABELS: Mapping[Route, str] = {
    "anthropic": "Anthropic API",
    "openrouter": "OpenRouter",
    "anthropic-compatible": "Anthropic-compatible gateway",
    "openai-compatible": "OpenAI-compatible endpoint",
}
"""How status lines name each route."""

NATIVE_ROUTES: frozenset[Route] = frozenset({"anthropic", "anthropic-compatible"})
"""Routes that take the Anthropic Messages API as is: markers on tool results, betas and
context edits included."""

MARKER_ROUTES: frozenset[Route] = frozenset({"anthropic", "anthropic-compatible", "openrouter"})
"""Routes known to accept ``cache_control`` (automatic caching turns on only there)."""

DEFAULT_STRATEGY = "system_and_3"

AUTOMATIC_MARKER_ROUTES: frozenset[Route] = frozenset({"anthropic"})
"""Routes known to accept Anthropic's top-level automatic ``cache_control``."""

_ANTHROPIC_HOST = "api.anthropic.com"
_OPENROUTER_HOST = "openrouter.ai"
_OPENAI_HOST = "api.openai.com"


def _split(url: str) -> SplitResult:
    """``url`` split; ``urlsplit`` only finds the host after ``//``, and
    ``openrouter.ai/api/v1`` has no scheme."""
    return urlsplit(url if "://" in url else "//" + url)


def _host(url: str) -> str:
    """The lower-cased host of ``url``."""
    return (_split(url).hostname or "").lower()


def detect_route(model_name: str, base_url: str | None, *, api: ApiKind | None = None) -> Route:
    """Where requests for ``model_name`` sent to ``base_url`` go.

    - no ``base_url``: the model's own API -- ``"anthropic"`` for a Claude model (or when
      ``api="anthropic"``), ``"openai-compatible"`` otherwise (or when ``api="openai"``);
    - host ``api.anthropic.com``: ``"anthropic"``; host ``openrouter.ai``: ``"openrouter"``;
    - ``"anthropic"`` in the host or path (e.g. ``https://gw.example/anthropic/v1``), or any URL
      used with the Anthropic SDK (``api="anthropic"``): ``"anthropic-compatible"``;
    - anything else: ``"openai-compatible"``.

    :param api: which SDK / wire format the host uses for this URL, when it knows.
    :raises TypeError: when ``model_name`` is not a string or ``base_url`` is neither a string
        nor None.
    :raises ValueError: for an ``api`` other than "anthropic", "openai" or None.
    """
    if not isinstance(model_name, str):
        raise TypeError(f"model_name must be a string, got {type(model_name).__name__}")
    if base_url is not None and not isinstance(base_url, str):
        raise TypeError(f"base_url must be a string or None, got {type(base_url).__name__}")
    if api not in (None, "anthropic", "openai"):
        raise ValueError(f"api must be 'anthropic', 'openai' or None; got {api!r}")
    if base_url is None or not base_url.strip():
        if api == "anthropic":
            return "anthropic"
        if api == "openai":
            return "openai-compatible"
        from ctxengine._accounting.models import is_claude

        return "anthropic" if is_claude(model_name) else "openai-compatible"
    url = base_url.strip()
    host = _host(url)
    if host == _ANTHROPIC_HOST:
        return "anthropic"
    if host == _OPENROUTER_HOST or host.endswith("." + _OPENROUTER_HOST):
        return "openrouter"
    if api == "anthropic" or "anthropic" in host or "anthropic" in _split(url).path.lower():
        return "anthropic-compatible"
    return "openai-compatible"


def validation_profile(route: Route, base_url: str | None) -> Profile:
    """The :func:`ctxengine.messages.validate` profile for requests sent over ``route``.

    ``"provider"`` for the native Anthropic API and for OpenAI's own API (no ``base_url``, or
    ``api.openai.com``): each takes what its format allows. ``"strict"`` everywhere else:
    OpenRouter, Anthropic-compatible gateways and OpenAI-compatible endpoints may forward to
    Claude on Amazon Bedrock or to models whose chat templates insist on a user turn first and
    alternating roles, and answer 400 otherwise.
    """
    return "provider" if route == "anthropic" or is_openai_api(base_url, route) else "strict"


def cache_settings_for(
    config: Config, model: ModelInfo, *, api: ApiKind | None = None
) -> tuple[CacheSettings | None, str]:
    """The cache settings for a session, or None when caching is off, plus the reason.

    ``prompt_caching.enabled: auto`` turns caching on for Claude models on routes that accept
    ``cache_control`` (native Anthropic API, OpenRouter, Anthropic-compatible gateways); ``true``
    forces it on anywhere and ``false`` off. The reason is a short phrase for the status line:
    "Claude via OpenRouter" when on, what stopped it when off.

    :raises ValueError: for a ``cache_ttl`` other than "5m"/"1h" (config loading rejects those
        first; this guards hand-built configs).
    """
    caching = config.prompt_caching
    policy = caching.cache_ttl
    if policy not in ("5m", "1h", "auto"):
        raise ValueError(
            f"prompt_caching.cache_ttl must be one of '5m', '1h', 'auto'; got {policy!r}"
        )
    # With auto the kernel sets the TTLs of every request; until gaps are measured, 5m.
    ttl: Literal["5m", "1h"] = "1h" if policy == "1h" else "5m"
    base_url = config.model.base_url
    route = detect_route(config.model.name, base_url, api=api)
    where = ROUTE_LABELS[route]
    claude = model.family == "claude"
    if caching.enabled is False:
        return None, "prompt_caching.enabled is false"
    settings = CacheSettings(
        ttl=ttl,
        route=route,
        native=route in NATIVE_ROUTES,
        min_cacheable_tokens=model.min_cacheable_tokens,
        policy=policy,
        automatic=route in AUTOMATIC_MARKER_ROUTES,
    )
    if caching.enabled is True:
        subject = "Claude" if claude else model.name
        return settings, f"forced by prompt_caching.enabled, {subject} via {where}"
    if not claude:
        return None, (
            f"{model.name} is not a Claude model; set prompt_caching.enabled: true to force it"
        )
    if route not in MARKER_ROUTES:
        return None, (
            f"{base_url} is an {where} that may not accept cache_control; "
            "set prompt_caching.enabled: true to force it"
        )
    return settings, f"Claude via {where}"


def caching_status_line(
    config: Config, model: ModelInfo, settings: CacheSettings | None, reason: str
) -> str:
    """The start-up line, e.g. ``💾 Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)``.

    ``settings``/``reason`` are what :func:`cache_settings_for` returned, possibly overridden by
    the kernel: settings of None where caching would have been on means the strategy named by
    ``prompt_caching.strategy`` is not loaded, and the line says so.
    """
    if settings is not None:
        ttl = "adaptive TTL" if settings.policy == "auto" else f"{settings.ttl} TTL"
        strategy = config.prompt_caching.strategy
        named = "" if strategy == DEFAULT_STRATEGY else f", strategy {strategy}"
        return f"💾 Prompt caching: ENABLED ({reason}, {ttl}{named})"
    expected, _ = cache_settings_for(config, model)
    if expected is not None:
        strategy = config.prompt_caching.strategy
        reason = f"cache strategy {strategy!r} is not loaded"
    return f"💾 Prompt caching: DISABLED ({reason})"


@attrs.frozen
class RequestOptions:
    """What the kernel adds to each request of one session, besides the strategy's markers.

    Values the host already put in a request are never overwritten.

    :ivar cache_key: OpenAI's ``prompt_cache_key`` for OpenAI-format requests: one stable value
        per session, so the provider routes the session's requests to the machine that holds its
        cached prefix. ``None`` sends none.
    :ivar retention: OpenAI's ``prompt_cache_retention`` (``"in_memory"`` or ``"24h"``), sent with
        the key; ``None`` leaves the provider's default.
    :ivar diagnostics: ask Anthropic why a prompt missed the cache (``diagnostics`` with the
        previous response's id) on Anthropic-format requests.
    """

    cache_key: str | None = None
    retention: str | None = None
    diagnostics: bool = False


def session_cache_key(session_id: str) -> str:
    """The ``prompt_cache_key`` of a session: stable, at most 64 characters, and not the session
    id itself (which may hold a user name)."""
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
    return f"ctxengine-{digest[:40]}"


def is_openai_api(base_url: str | None, route: Route) -> bool:
    """Whether requests go to OpenAI's own API (no base URL for a non-Claude model, or host
    ``api.openai.com``)."""
    if route != "openai-compatible":
        return False
    if base_url is None or not base_url.strip():
        return True
    return _host(base_url.strip()) == _OPENAI_HOST


def request_options(
    config: Config, session_id: str, *, api: ApiKind | None = None
) -> RequestOptions:
    """The :class:`RequestOptions` of session ``session_id``.

    ``prompt_caching.cache_key``: ``auto`` sends a key on OpenAI's own API only (other
    OpenAI-compatible servers may reject unknown arguments), ``true`` on every OpenAI-format
    request, ``false`` never; ``cache_retention`` is sent with the key. ``diagnostics: true`` asks
    on every marked Anthropic-format request. Nothing is added when ``prompt_caching.enabled`` is
    ``false``.
    """
    caching = config.prompt_caching
    if caching.enabled is False:
        return RequestOptions()
    route = detect_route(config.model.name, config.model.base_url, api=api)
    wants_key = caching.cache_key is True or (
        caching.cache_key == "auto" and is_openai_api(config.model.base_url, route)
    )
    key = session_cache_key(session_id) if wants_key else None
    return RequestOptions(
        cache_key=key,
        retention=caching.cache_retention if key is not None else None,
        diagnostics=caching.diagnostics,
    )
