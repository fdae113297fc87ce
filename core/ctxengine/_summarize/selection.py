"""Which summary provider the settings and the environment select, and why.

One pure function, :func:`choose`, decides; :func:`resolve_provider` builds the provider it picked
and :func:`describe_provider` reports the same decision for status lines, so the two never
disagree.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

import attrs

from ctxengine._accounting.models import is_claude, lookup_model
from ctxengine._summarize.errors import ProviderConfigError
from ctxengine._summarize.policy import FailurePolicy, SummaryService
from ctxengine._summarize.providers import (
    OPENAI_BASE_URL,
    OPENAI_INSTALL_HINT,
    AnthropicProvider,
    MainCallable,
    MainProvider,
    MainRequestCallable,
    OpenAIProvider,
    SummaryProvider,
    is_official_openai,
)

if TYPE_CHECKING:
    from ctxengine._config.core import ModelOverride, SummaryProviderSettings

ProviderName = Literal["anthropic", "openai", "main", "extractive"]

PROVIDERS = ("auto", "anthropic", "openai", "main", "extractive")
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
FALLBACK_CONTEXT_LENGTH = 128_000
"""The summary model's window when neither the settings nor the model table know it."""

# Sent to keyless local endpoints (llama.cpp, vLLM, Ollama): the SDKs insist on some key.
NO_KEY = "not-needed"

_KEY = "auxiliary.compression"
_log = logging.getLogger("ctxengine")


@attrs.frozen
class Choice:
    """The outcome of provider selection.

    :ivar provider: what will write summaries; ``extractive`` means the local digest.
    :ivar reason: why ``auto`` picked it (empty for an explicit provider).
    :ivar problem: why the explicitly requested provider cannot work (``None`` when it can).
    """

    requested: str
    provider: ProviderName
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    reason: str = ""
    problem: str | None = None


def _get(mapping: Mapping[str, str], name: str) -> str | None:
    value = mapping.get(name)
    return value if value else None  # an empty variable counts as unset


def _anthropic_key(env: Mapping[str, str]) -> tuple[str | None, str]:
    """The Anthropic key the environment holds and the variable it came from (``$NAME``)."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        key = _get(env, var)
        if key:
            return key, f"${var}"
    return None, ""


def _anthropic(settings: SummaryProviderSettings, env: Mapping[str, str], reason: str) -> Choice:
    key = settings.api_key or _anthropic_key(env)[0]
    base_url = settings.base_url or _get(env, "ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
    model = settings.model or DEFAULT_ANTHROPIC_MODEL
    problem = None
    if key is None:
        if base_url.rstrip("/") == ANTHROPIC_BASE_URL:
            problem = (
                f"no API key for the anthropic summariser: set {_KEY}.api_key or "
                "$ANTHROPIC_API_KEY (or choose provider 'openai', 'main' or 'extractive')"
            )
        else:
            key = NO_KEY
    return Choice(
        requested=settings.provider,
        provider="anthropic",
        model=model,
        base_url=base_url,
        api_key=key,
        reason=reason,
        problem=problem,
    )


def _openai(settings: SummaryProviderSettings, env: Mapping[str, str], reason: str) -> Choice:
    base_url = settings.base_url or _get(env, "OPENAI_BASE_URL")
    official = is_official_openai(base_url)
    key = settings.api_key or _get(env, "OPENAI_API_KEY") or (None if official else NO_KEY)
    model = settings.model or (DEFAULT_OPENAI_MODEL if official else None)
    problem = None
    if importlib.util.find_spec("openai") is None:
        problem = f"the openai package is not installed; install it with: {OPENAI_INSTALL_HINT}"
    elif model is None:
        problem = (
            f"{_KEY}.model is required for the OpenAI-compatible endpoint {base_url}: "
            "name the model that endpoint serves (for example 'qwen2.5:7b' on Ollama)"
        )
    elif key is None:
        problem = (
            f"no API key for the openai summariser: set {_KEY}.api_key or $OPENAI_API_KEY, "
            f"or point {_KEY}.base_url at a local endpoint"
        )
    return Choice(
        requested=settings.provider,
        provider="openai",
        model=model,
        base_url=base_url,
        api_key=key,
        reason=reason,
        problem=problem,
    )


def _extractive(requested: str, reason: str = "") -> Choice:
    return Choice(requested=requested, provider="extractive", reason=reason)


def _auto(settings: SummaryProviderSettings, env: Mapping[str, str]) -> Choice:
    # Explicit settings beat ambient environment variables.
    anthropic_var = _anthropic_key(env)[1]
    if settings.api_key and not settings.base_url:
        candidate = _anthropic(settings, env, f"{_KEY}.api_key is set")
    elif settings.base_url:
        candidate = _openai(settings, env, f"{_KEY}.base_url is set")
    elif anthropic_var:
        candidate = _anthropic(settings, env, f"{anthropic_var} is set")
    elif _get(env, "OPENAI_API_KEY") or _get(env, "OPENAI_BASE_URL"):
        var = "$OPENAI_API_KEY" if _get(env, "OPENAI_API_KEY") else "$OPENAI_BASE_URL"
        candidate = _openai(settings, env, f"{var} is set")
    else:
        return _extractive(
            "auto",
            "no summary model configured (set $ANTHROPIC_API_KEY or $OPENAI_API_KEY, "
            f"or {_KEY}.base_url)",
        )
    if candidate.problem is not None:
        # auto never fails a session: it degrades to the local digest and says why.
        return _extractive("auto", f"{candidate.provider} unusable: {candidate.problem}")
    return candidate


def choose(
    settings: SummaryProviderSettings,
    env: Mapping[str, str] | None = None,
    *,
    main_available: bool = False,
) -> Choice:
    """Decide the provider from ``settings`` and ``env`` (default: ``os.environ``).

    ``auto`` picks, in order: Anthropic when ``api_key`` is set without ``base_url``; the
    OpenAI-compatible endpoint when ``base_url`` is set; Anthropic when ``$ANTHROPIC_API_KEY`` (or
    ``$ANTHROPIC_AUTH_TOKEN``) is set; OpenAI when ``$OPENAI_API_KEY`` or ``$OPENAI_BASE_URL`` is
    set; otherwise the extractive digest. When the candidate cannot work (missing model, missing
    extra) ``auto`` degrades to extractive with the problem as its reason; an explicit provider
    reports the problem in :attr:`Choice.problem` instead.

    :raises ProviderConfigError: for a provider name outside :data:`PROVIDERS` or a bad timeout.
    """
    env = os.environ if env is None else env
    requested = settings.provider
    if requested not in PROVIDERS:
        raise ProviderConfigError(
            f"{_KEY}.provider: {requested!r} is not a summary provider; "
            f"allowed: {', '.join(PROVIDERS)}"
        )
    timeout = settings.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ProviderConfigError(f"{_KEY}.timeout: {timeout!r} is not allowed; use seconds > 0")
    if requested == "anthropic":
        return _anthropic(settings, env, "")
    if requested == "openai":
        return _openai(settings, env, "")
    if requested == "main":
        problem = (
            None
            if main_available
            else "provider 'main' needs the host's model callable, and none was given "
            "(pass main_summarizer= when loading the kernel, or choose another provider)"
        )
        return Choice(requested="main", provider="main", model=settings.model, problem=problem)
    if requested == "extractive":
        return _extractive("extractive")
    return _auto(settings, env)


def summary_context_length(
    settings: SummaryProviderSettings,
    model: str | None,
    *,
    models: Mapping[str, ModelOverride] | None = None,
    main_window: int | None = None,
) -> int:
    """The summary model's window: ``settings.context_length``, else ``main_window`` (provider
    ``main``: the host model's window as the kernel sees it, ``model.context_length`` and
    ``models.<name>`` applied), else the model table's value with the ``models.<name>``
    overrides, else :data:`FALLBACK_CONTEXT_LENGTH`."""
    if settings.context_length:
        return int(settings.context_length)
    if main_window:
        return int(main_window)
    if model:
        return int(lookup_model(model, models).context_length)
    return FALLBACK_CONTEXT_LENGTH


def serves_main_route(
    provider: ProviderName,
    model: str | None,
    base_url: str | None,
    *,
    main_model: str | None,
    main_base_url: str | None,
) -> bool:
    """Whether a provider of this kind, model and endpoint talks to the main model on the main
    route: same model name, and the same endpoint (no base URL means each SDK's own API:
    Anthropic's for the anthropic provider, OpenAI's for the openai one)."""
    if model is None or main_model is None or model != main_model:
        return False
    default = ANTHROPIC_BASE_URL if provider == "anthropic" else OPENAI_BASE_URL
    main_default = ANTHROPIC_BASE_URL if is_claude(main_model) else OPENAI_BASE_URL

    def endpoint(url: str | None, fallback: str) -> str:
        return (url or fallback).strip().rstrip("/").removesuffix("/v1").lower()

    return endpoint(base_url, default) == endpoint(main_base_url, main_default)


@attrs.frozen
class HostModel:
    """What the summary providers need to know of the host and its main model.

    :ivar call: the host's own model as ``(system, prompt, max_tokens) -> text`` (provider
        ``main``).
    :ivar request: the host's request sender (provider ``main``'s cache-aware summaries).
    :ivar name: the main model's name, for the ``main`` provider and to tell whether an SDK
        provider serves the main model.
    :ivar base_url: where the main model is served (``model.base_url``).
    :ivar window: the main model's window as the kernel sees it (provider ``main``'s window).
    :ivar models: the ``models.<name>`` overrides (an SDK summary model's window).
    """

    call: MainCallable | None = None
    request: MainRequestCallable | None = None
    name: str | None = None
    base_url: str | None = None
    window: int | None = None
    models: Mapping[str, ModelOverride] | None = None


NO_HOST = HostModel()
"""A host that gave nothing: no ``main`` provider, windows from the model table."""


def resolve_provider(
    settings: SummaryProviderSettings,
    *,
    env: Mapping[str, str] | None = None,
    host: HostModel = NO_HOST,
) -> SummaryProvider | None:
    """Build the configured summary provider; ``None`` means the extractive local digest.

    No SDK is imported and no network is touched here; clients are made on the first call.

    :param host: the host's model callable, request sender and main model.
    :raises ProviderConfigError: when an explicitly chosen provider cannot work (missing key,
        missing model for a compatible endpoint, no ``main`` callable), naming what to set.
    :raises ImportError: for provider ``openai`` without the openai package; the message holds
        the ``pip install`` line.
    """
    choice = choose(settings, env, main_available=host.call is not None)
    if choice.problem is not None:
        if choice.provider == "openai" and "not installed" in choice.problem:
            raise ImportError(choice.problem)
        raise ProviderConfigError(f"{_KEY}.provider {choice.requested!r}: {choice.problem}")
    if choice.reason:
        _log.info("summary provider: %s", _describe(choice))
    if choice.provider == "extractive":
        return None
    if choice.provider == "main":
        assert host.call is not None  # choose() reports a problem otherwise
        name = host.name or settings.model
        return MainProvider(
            call=host.call,
            model=name or "main",
            context_length=summary_context_length(
                settings, name, models=host.models, main_window=host.window
            ),
            send=host.request,
        )
    assert choice.model is not None and choice.api_key is not None
    window = summary_context_length(settings, choice.model, models=host.models)
    serves_main = serves_main_route(
        choice.provider,
        choice.model,
        choice.base_url,
        main_model=host.name,
        main_base_url=host.base_url,
    )
    sdk = AnthropicProvider if choice.provider == "anthropic" else OpenAIProvider
    return sdk(
        model=choice.model,
        api_key=choice.api_key,
        base_url=choice.base_url,
        timeout=float(settings.timeout),
        context_length=window,
        serves_main=serves_main,
    )


def _describe(choice: Choice) -> str:
    if choice.provider == "extractive":
        picked = "extractive (local digest, no model call)"
    elif choice.provider == "main":
        picked = f"main ({choice.model or 'the host model'})"
    else:
        where = ""
        if choice.base_url and choice.base_url.rstrip("/") != ANTHROPIC_BASE_URL:
            where = f" at {choice.base_url}"
        picked = f"{choice.provider} ({choice.model or 'no model'}{where})"
    text = f"auto -> {picked}" if choice.requested == "auto" else picked
    if choice.reason:
        text += f": {choice.reason}"
    if choice.problem:
        text += f": not usable: {choice.problem}"
    return text


def describe_provider(
    settings: SummaryProviderSettings,
    env: Mapping[str, str] | None = None,
    *,
    main: MainCallable | None = None,
    main_model: str | None = None,
) -> str:
    """One status line saying which provider summaries use and why, e.g.
    ``"auto -> anthropic (claude-haiku-4-5): $ANTHROPIC_API_KEY is set"``.

    Never raises for an unusable explicit provider: the line says ``not usable`` and why. Never
    shows an API key.
    """
    try:
        choice = choose(settings, env, main_available=main is not None)
    except ProviderConfigError as exc:
        return f"{settings.provider}: not usable: {exc}"
    if choice.provider == "main" and main_model:
        choice = attrs.evolve(choice, model=main_model)
    return _describe(choice)


def failure_policy(settings: SummaryProviderSettings) -> FailurePolicy:
    """The failure policy the ``auxiliary.compression`` settings describe."""
    return FailurePolicy(
        max_attempts=settings.max_attempts,
        retry_backoff=settings.retry_backoff,
        retry_max_wait=settings.retry_max_wait,
        breaker_failures=settings.breaker_failures,
        breaker_cooldown=settings.breaker_cooldown,
    )


CONFIGURED: object = object()
"""``resolve_service(primary=CONFIGURED)``, the default: the configured provider leads the chain."""


def resolve_service(
    settings: SummaryProviderSettings,
    *,
    env: Mapping[str, str] | None = None,
    host: HostModel = NO_HOST,
    primary: SummaryProvider | object | None = CONFIGURED,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SummaryProvider | None:
    """The configured providers behind the failure policy, or ``None`` for the local digest.

    The chain is the provider (``primary`` when a host handed one in, else the one
    :func:`resolve_provider` builds), then each of ``settings.fallback`` built with its own
    defaults and environment variables (``model``, ``base_url`` and ``api_key`` are the primary
    provider's; ``host`` is everyone's). A primary
    that resolves to ``extractive`` (``auto`` found no model) leaves the fallbacks to write
    summaries; ``None`` only when no model is left at all.

    :raises ProviderConfigError: when a provider of the chain cannot work (see
        :func:`resolve_provider`).
    :raises ImportError: for an ``openai`` provider without the openai package.
    """

    first = resolve_provider(settings, env=env, host=host) if primary is CONFIGURED else primary
    chain: list[SummaryProvider] = []
    if first is not None:
        chain.append(first)  # type: ignore[arg-type]  # a provider, or None (handled here)
    for name in itertools.takewhile(lambda name: name != "extractive", settings.fallback):
        fallback = attrs.evolve(
            settings,
            provider=name,  # type: ignore[arg-type]  # checked at load: a provider name
            model=None,
            base_url=None,
            api_key=None,
            fallback=(),
        )
        built = resolve_provider(fallback, env=env, host=host)
        if built is not None:
            chain.append(built)
    if not chain:
        return None
    return SummaryService(
        chain,
        failure_policy(settings),
        digest_fallback="extractive" in settings.fallback,
        clock=clock,
        sleep=sleep,
    )


def describe_failure_policy(
    settings: SummaryProviderSettings,
    env: Mapping[str, str] | None = None,
    *,
    main_available: bool = False,
) -> str | None:
    """The failure policy and fallback chain in one phrase, for the status line; ``None`` when
    no model writes summaries (nothing can fail)."""
    try:
        primary = choose(settings, env, main_available=main_available).provider
    except ProviderConfigError:
        primary = settings.provider  # type: ignore[assignment]  # the status line says why
    models = [n for n in settings.fallback if n != "extractive"]
    if primary == "extractive" and not models:
        return None
    chain = [n if n != "extractive" else "the local digest" for n in settings.fallback]
    then = f"; then {', then '.join(chain)}" if chain else ""
    return f"{failure_policy(settings).describe()}{then}"
