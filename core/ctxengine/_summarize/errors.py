"""Summary-call failures and their classification into the kinds the failure policy acts on.

The failure policy (``docs/summaries.md``): auth, network, timeout and rate-limit failures *abort*
a compaction (messages unchanged, cooldown); every other failure falls back to the local digest.
Every provider raises :class:`SummaryError` and nothing else from a summary call, so engines branch
on ``.aborts`` / ``.kind`` without knowing which SDK was involved. Exceptions of a host's own
client (``httpx``, ``requests``, anything with an HTTP status) are classified the same way, so a
host-supplied provider gets the same retries, pauses and breaker as the built-in ones.
"""

from __future__ import annotations

import email.utils
import json
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

import attrs

ABORT_KINDS = frozenset({"auth", "network", "timeout", "rate_limit"})
"""Kinds that abort the compaction and start a cooldown."""

FALLBACK_KINDS = frozenset(
    {"empty", "server", "unparsable", "context_length", "too_small", "other"}
)
"""Kinds after which the engine writes the deterministic local digest instead."""

_WHAT = {
    "auth": "authentication failed",
    "network": "could not reach the endpoint",
    "timeout": "timed out",
    "rate_limit": "rate limited or overloaded",
    "empty": "the reply held no text",
    "server": "server error",
    "unparsable": "the reply could not be used",
    "context_length": "the input does not fit the summary model's context window",
    "too_small": "the summary model's context window is too small",
    "other": "the request failed",
}

# How providers word "your prompt does not fit" in a 400 (Anthropic, OpenAI, vLLM, llama.cpp,
# Ollama, OpenRouter).
_CONTEXT_LENGTH = re.compile(
    r"prompt is too long|context[ _-]?length|maximum context|context window|context limit"
    r"|context size|too many tokens|exceeds? the (?:model.?s? )?(?:context|maximum)",
    re.IGNORECASE,
)


@attrs.frozen
class SummaryAttempt:
    """One request the failure policy made (or skipped) to one provider.

    :ivar outcome: ``"ok"``, a failure kind (``"rate_limit"``, ``"unparsable"``…), or
        ``"skipped"`` when the provider's circuit breaker was open and no request was sent.
    :ivar pause_s: seconds waited before this request (backoff or ``Retry-After``).
    :ivar detail: the failure's message (empty for ``"ok"``).
    """

    provider: str
    outcome: str
    status: int | None = None
    pause_s: float = 0.0
    detail: str = ""


DETAIL_CHARS = 300
"""An error's detail (an API message, an HTML error page) is cut to this many characters."""


class SummaryError(Exception):
    """A summary call failed; ``kind`` says how, ``aborts`` what the failure policy does.

    :ivar kind: one of :data:`ABORT_KINDS` or :data:`FALLBACK_KINDS`.
    :ivar provider: the provider name (``"anthropic"``, ``"openai"``, ``"main"``).
    :ivar status: the HTTP status when the endpoint answered with an error, else ``None``.
    :ivar retry_after: seconds the endpoint asked to wait (``Retry-After``), else ``None``.
    :ivar attempts: every request the failure policy made before giving up (empty for the error
        of a single request).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        provider: str,
        status: int | None = None,
        retry_after: float | None = None,
        aborts: bool | None = None,
    ) -> None:
        if kind not in ABORT_KINDS and kind not in FALLBACK_KINDS:
            allowed = ", ".join(sorted(ABORT_KINDS | FALLBACK_KINDS))
            raise ValueError(f"SummaryError kind {kind!r} is unknown; allowed: {allowed}")
        super().__init__(message)
        self.kind = kind
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        self.attempts: tuple[SummaryAttempt, ...] = ()
        self._aborts = aborts

    @property
    def aborts(self) -> bool:
        """True when the compaction must be aborted rather than fall back to a local digest:
        the kinds in :data:`ABORT_KINDS`, unless the failure policy decided otherwise (a
        fallback chain that ends with the local digest never aborts)."""
        return self._aborts if self._aborts is not None else self.kind in ABORT_KINDS

    @classmethod
    def of(
        cls,
        kind: str,
        provider: str,
        detail: str = "",
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> SummaryError:
        """An error whose message reads ``"<provider> summariser: <what went wrong>: <detail>"``
        (the detail cut to :data:`DETAIL_CHARS`)."""
        head = f"{provider} summariser: {_WHAT.get(kind, kind)}"
        if status is not None:
            head += f" (HTTP {status})"
        detail = _short(detail)
        return cls(
            f"{head}: {detail}" if detail else head,
            kind=kind,
            provider=provider,
            status=status,
            retry_after=retry_after,
        )


_TAG = re.compile(r"<[^>]{0,200}>")


def _short(detail: str) -> str:
    """One line of at most :data:`DETAIL_CHARS`; an HTML error page is reduced to its text."""
    if re.search(r"<(?:!doctype|html|body|head|title)\b", detail, re.I):
        detail = "HTML error page: " + _TAG.sub(" ", detail)
    detail = " ".join(detail.split())
    return detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 1] + "…"


def retry_after_seconds(headers: Mapping[str, str] | Any, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds or an HTTP date) or ``retry-after-ms``;
    ``None`` when there is none or it does not parse. Negative waits count as 0."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except (TypeError, ValueError):
            pass
    value = get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ProviderConfigError(ValueError):
    """The summary provider settings cannot work (missing key, missing model, unknown name)."""


def is_context_length_message(message: str) -> bool:
    """True when an error message says the prompt does not fit the model's context window."""
    return bool(_CONTEXT_LENGTH.search(message))


def kind_for_status(status: int, message: str = "", error_type: str | None = None) -> str:
    """The failure kind for an HTTP error ``status`` (with the API's message and error type)."""
    if status in (401, 403):
        return "auth"
    if status in (408, 504) or error_type == "timeout_error":
        return "timeout"  # the endpoint or a gateway in front of it gave up waiting
    if status in (429, 529) or error_type == "overloaded_error":
        return "rate_limit"
    if status == 413:
        return "context_length"
    if status in (400, 422) and is_context_length_message(message):
        return "context_length"
    if status >= 500:
        return "server"
    return "other"


def classify_error(
    exc: BaseException, provider: str, *, timeout: float | None = None
) -> SummaryError:
    """Turn any exception from a summary call into a :class:`SummaryError`.

    Exceptions of the ``anthropic`` and ``openai`` SDKs are mapped by class (both SDKs use the
    same names; a status error's kind also reads the API's error type); built-in
    ``TimeoutError`` / ``ConnectionError`` and their HTTP-client counterparts become ``timeout``
    / ``network``; an exception carrying an HTTP status is classified by
    :func:`kind_for_status`; a reply body that is not JSON becomes ``unparsable``; anything else
    is ``other``. A :class:`SummaryError` passes through unchanged.
    """
    if isinstance(exc, SummaryError):
        return exc
    sdk = _sdk_of(exc)
    if sdk is not None:
        if isinstance(exc, sdk.APITimeoutError):
            return SummaryError.of("timeout", provider, _after(timeout) or str(exc))
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f"{exc} ({type(cause).__name__}: {cause})" if cause is not None else str(exc)
            return SummaryError.of("network", provider, detail)
        if isinstance(exc, sdk.APIResponseValidationError):
            return SummaryError.of("unparsable", provider, str(exc))
    if isinstance(exc, _timeout_types()) or _named_like(exc, _TIMEOUT_NAMES):
        return SummaryError.of("timeout", provider, _after(timeout) or _described(exc))
    if isinstance(exc, ConnectionError) or _named_like(exc, _NETWORK_NAMES):
        return SummaryError.of("network", provider, _described(exc))
    status = _http_status(exc)
    if status is not None:
        if sdk is not None and isinstance(exc, sdk.APIStatusError):
            message, error_type = _api_message(exc)
            detail = f"{error_type}: {message}" if error_type else message
        else:
            message, error_type, detail = str(exc), None, _described(exc)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return SummaryError.of(
            kind_for_status(status, message, error_type),
            provider,
            detail,
            status=status,
            retry_after=retry_after_seconds(headers),
        )
    if isinstance(exc, json.JSONDecodeError):
        return SummaryError.of("unparsable", provider, f"the reply body is not valid JSON ({exc})")
    return SummaryError.of("other", provider, _described(exc))


# Exception classes of HTTP clients a host may call its model with (httpx, requests, urllib3,
# aiohttp), recognised by name so none of them is imported here.
_TIMEOUT_NAMES = frozenset(
    {"TimeoutException", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "Timeout"}
)
_NETWORK_NAMES = frozenset(
    {
        "ConnectError",
        "NetworkError",
        "RemoteProtocolError",
        "NewConnectionError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ServerDisconnectedError",
    }
)


def _named_like(exc: BaseException, names: frozenset[str]) -> bool:
    return any(cls.__name__ in names for cls in type(exc).__mro__)


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (``status_code``/``status`` on it or on its
    ``response``), as HTTP clients' status errors do."""
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def _described(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _sdk_of(exc: BaseException) -> Any:
    """The ``anthropic`` / ``openai`` module an exception comes from, if it is already imported."""
    root = type(exc).__module__.split(".", 1)[0]
    if root in ("anthropic", "openai"):
        return sys.modules.get(root)
    return None


def _timeout_types() -> tuple[type[BaseException], ...]:
    """Built-in timeouts; on Python 3.10 asyncio's is a separate class (no asyncio import here:
    if asyncio is not loaded, nothing raised its timeout)."""
    asyncio = sys.modules.get("asyncio")
    return (TimeoutError, asyncio.TimeoutError) if asyncio is not None else (TimeoutError,)


def _after(timeout: float | None) -> str:
    return f"no reply within {timeout:g} s" if timeout is not None else ""


def _api_message(exc: Any) -> tuple[str, str | None]:
    """``(message, error type)`` from an SDK status error's body, whichever envelope it used."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        error_type = error.get("type") or error.get("code")
        return (
            str(message) if message else str(exc),
            str(error_type) if error_type else None,
        )
    message = str(getattr(exc, "message", exc))
    # Not the API's envelope (a proxy's HTML page, plain text): what the endpoint sent says more,
    # on one line and bounded (a page can be long, and reasons end up in logs and status lines).
    raw = body if isinstance(body, str) else getattr(getattr(exc, "response", None), "text", None)
    text = " ".join(raw.split()) if isinstance(raw, str) else ""
    if text and text not in message:
        cut = "…" if len(text) > DETAIL_CHARS else ""
        message = f"{message}: {text[:DETAIL_CHARS]}{cut}"
    return message, None
