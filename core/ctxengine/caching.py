"""The kernel's side of prompt caching: route detection, settings, breakpoint reports, status.

The marking itself is a plugin's job (the ``cache_strategy`` hook; the built-in is
``system_and_3``). The kernel decides *whether* requests are marked and *how* (TTL, whether tool
messages may carry markers, the model's minimum cacheable prefix) and can tell, for any marked
request, which breakpoints cover a prefix long enough to be cached at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit

import attrs

from ctxengine.context import CacheSettings, Route

if TYPE_CHECKING:
    from ctxengine.config import Config
    from ctxengine.models import ModelInfo

ApiKind = Literal["anthropic", "openai"]

ROUTE_LABELS: Mapping[Route, str] = {
    "anthropic": "Anthropic API",
    "openrouter": "OpenRouter",
    "anthropic-compatible": "Anthropic-compatible gateway",
    "openai-compatible": "OpenAI-compatible endpoint",
}
"""How status lines name each route."""

NATIVE_ROUTES: frozenset[Route] = frozenset({"anthropic", "anthropic-compatible"})
"""Routes that take the Anthropic Messages API as is, markers on tool results included."""

MARKER_ROUTES: frozenset[Route] = frozenset({"anthropic", "anthropic-compatible", "openrouter"})
"""Routes known to accept ``cache_control`` (automatic caching turns on only there)."""

_ANTHROPIC_HOST = "api.anthropic.com"
_OPENROUTER_HOST = "openrouter.ai"


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
        from ctxengine.models import is_claude

        return "anthropic" if is_claude(model_name) else "openai-compatible"
    url = base_url.strip()
    # urlsplit only finds the host after "//"; "openrouter.ai/api/v1" has no scheme.
    parts = urlsplit(url if "://" in url else "//" + url)
    host = (parts.hostname or "").lower()
    if host == _ANTHROPIC_HOST:
        return "anthropic"
    if host == _OPENROUTER_HOST or host.endswith("." + _OPENROUTER_HOST):
        return "openrouter"
    if api == "anthropic" or "anthropic" in host or "anthropic" in parts.path.lower():
        return "anthropic-compatible"
    return "openai-compatible"


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
    ttl = caching.cache_ttl
    if ttl not in ("5m", "1h"):
        raise ValueError(f"prompt_caching.cache_ttl must be one of '5m', '1h'; got {ttl!r}")
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
        return f"💾 Prompt caching: ENABLED ({reason}, {settings.ttl} TTL)"
    expected, _ = cache_settings_for(config, model)
    if expected is not None:
        strategy = config.prompt_caching.strategy
        reason = f"cache strategy {strategy!r} is not loaded"
    return f"💾 Prompt caching: DISABLED ({reason})"


# --- breakpoint reports --------------------------------------------------------------------


class PrefixCounter(Protocol):
    """What :func:`breakpoint_report` needs from a token counter (``TokenCounter`` has it)."""

    def count_message(self, msg: dict[str, Any]) -> int: ...

    def count_system(self, system: str | list[dict[str, Any]] | None) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int: ...


@attrs.frozen
class Breakpoint:
    """One ``cache_control`` marker of a request and whether it can cache anything.

    :ivar position: where the marker sits: ``"tools[2]"``, ``"system[0]"``,
        ``"messages[7]"`` (on the message itself) or ``"messages[7].content[1]"``.
    :ivar prefix_tokens: tokens from the start of the prompt (tools, system, messages) up to
        and including the marked message or block (counted per message for messages).
    :ivar cacheable: ``prefix_tokens`` reaches the model's minimum cacheable prefix; when false
        the API caches nothing there and reports nothing.
    """

    position: str
    prefix_tokens: int
    cacheable: bool


def marker_positions(request: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Every ``cache_control`` marker in ``request``, in prompt order (tools, system, messages),
    as ``(position, marker)`` pairs; positions as in :attr:`Breakpoint.position`. Markers in a
    ``tool_result``'s own content list are listed as ``messages[i].content[j].content[k]``."""
    return [(position, item["cache_control"]) for position, item in _marked_items(request)]


def _marked_items(request: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The dicts of ``request`` that carry a ``cache_control`` mapping, in prompt order."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for key in ("tools", "system", "messages"):
        items = request.get(key)
        if isinstance(items, list):
            for index, item in enumerate(items):
                _collect(item, f"{key}[{index}]", found)
    return found


def _collect(item: object, where: str, found: list[tuple[str, Mapping[str, Any]]]) -> None:
    if not isinstance(item, dict):
        return
    if isinstance(item.get("cache_control"), Mapping):
        found.append((where, item))
    content = item.get("content")
    if isinstance(content, list):
        for index, block in enumerate(content):
            _collect(block, f"{where}.content[{index}]", found)


def marker_problems(request: Mapping[str, Any]) -> list[str]:
    """What Anthropic would reject about the markers of ``request`` (empty when nothing).

    Checks: at most 4 markers; marker type "ephemeral" and TTL "5m"/"1h"; longer TTLs before
    shorter ones in prompt order; no marker on a thinking block or an empty text block.
    """
    problems: list[str] = []
    items = _marked_items(request)
    if len(items) > 4:
        where = ", ".join(position for position, _ in items)
        problems.append(f"{len(items)} cache_control breakpoints (at most 4 allowed): {where}")
    previous_ttl: object = None
    previous_at = ""
    for position, item in items:
        marker = item["cache_control"]
        ttl = marker.get("ttl", "5m")
        if marker.get("type") != "ephemeral":
            problems.append(f"{position}: cache_control type must be 'ephemeral', got {marker!r}")
        if ttl not in ("5m", "1h"):
            problems.append(f"{position}: cache_control ttl must be '5m' or '1h', got {ttl!r}")
        elif previous_ttl == "5m" and ttl == "1h":
            problems.append(
                f"{position}: a 1h breakpoint after the 5m breakpoint at {previous_at} "
                "(longer TTLs must come first)"
            )
        previous_ttl, previous_at = ttl, position
        kind = item.get("type")
        if kind in ("thinking", "redacted_thinking"):
            problems.append(f"{position}: cache_control on a {kind} block")
        elif kind == "text" and not str(item.get("text") or "").strip():
            problems.append(f"{position}: cache_control on an empty text block")
    return problems


def breakpoint_report(
    request: Mapping[str, Any],
    counter: PrefixCounter,
    min_cacheable_tokens: int,
    *,
    unmarked: Mapping[str, Any] | None = None,
) -> list[Breakpoint]:
    """Each marker of ``request`` with the size of the prefix it closes and whether that reaches
    ``min_cacheable_tokens``.

    Messages are counted whole with ``counter.count_message`` (a marker sits on a message's last
    block in practice, so this is the prefix up to the marker). Pass the caller's ``unmarked``
    request (same messages, before marking) so counts come from the caller's long-lived message
    objects, which a counter caches, instead of the fresh marked copies.
    """
    markers = marker_positions(request)
    if not markers:
        return []
    source = request if unmarked is None else unmarked
    tools = source.get("tools")
    tool_list: list[Any] = tools if isinstance(tools, list) else []
    tools_total = counter.count_tools(tool_list)
    system = source.get("system")
    system_tokens = counter.count_system(system if isinstance(system, (str, list)) else None)
    messages = source.get("messages")
    message_list: list[Any] = messages if isinstance(messages, list) else []
    last_message = max(_message_index(position) for position, _ in markers)
    cumulative: list[int] = []
    running = tools_total + system_tokens
    for msg in message_list[: last_message + 1]:
        running += counter.count_message(msg) if isinstance(msg, dict) else 0
        cumulative.append(running)

    report: list[Breakpoint] = []
    for position, _ in markers:
        if position.startswith("tools["):
            index = int(position[6:].split("]", 1)[0])
            prefix = counter.count_tools(tool_list[: index + 1])
        elif position.startswith("system"):
            prefix = tools_total + system_tokens
        else:
            index = _message_index(position)
            prefix = cumulative[index] if index < len(cumulative) else running
        report.append(Breakpoint(position, prefix, prefix >= min_cacheable_tokens))
    return report


def _message_index(position: str) -> int:
    if not position.startswith("messages["):
        return -1
    return int(position[9:].split("]", 1)[0])
