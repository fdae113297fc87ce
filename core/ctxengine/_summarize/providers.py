"""The summary providers: the Anthropic SDK, the OpenAI SDK (any compatible endpoint) and the
host's own model.

Each provider makes one call per summary, never retries (``max_retries=0``: the failure policy
decides what a failure means, see :mod:`ctxengine._summarize.errors`) and returns plain text that
is neither empty nor reasoning. SDKs are imported on first use, never at module import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from ctxengine._summarize.errors import SummaryError, classify_error
from ctxengine._summarize.reasoning import strip_reasoning

OPENAI_INSTALL_HINT = "pip install 'ctxengine[openai]'"
OPENAI_BASE_URL = "https://api.openai.com/v1"

MainCallable = Callable[[str, str, int], str]
"""The host's own model: ``(system, prompt, max_tokens) -> text``."""

MainRequestCallable = Callable[[dict[str, Any], int], str]
"""The host's own model sending a whole request of the agent's (its API arguments, cache markers
included) with a ``max_tokens`` limit: ``(request, max_tokens) -> text``. It makes provider
``main``'s summaries cache-aware (the compressor's cache-aware summary call)."""


@runtime_checkable
class SummaryProvider(Protocol):
    """What every engine calls to write a summary.

    ``complete`` returns non-empty text with reasoning removed, or raise
    :class:`~ctxengine.SummaryError`; nothing else escapes them.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def context_length(self) -> int: ...

    def complete(self, system: str, prompt: str, max_tokens: int) -> str: ...


_DROPPED_ARGUMENTS = ("stream", "stream_options", "max_tokens", "max_completion_tokens", "n")
"""Arguments of the agent's request a summary call must not inherit (it sets its own limit and
reads one whole reply); none of them is part of the cached prefix."""


def summary_arguments(request: Mapping[str, Any], max_tokens: int) -> dict[str, Any]:
    """``request`` without the arguments a one-shot summary call sets itself, and with room for
    ``max_tokens`` of answer on top of any extended-thinking budget (which must stay as it was:
    changing it would invalidate the cached messages)."""
    out = {k: v for k, v in request.items() if k not in _DROPPED_ARGUMENTS}
    thinking = request.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, Mapping) else None
    out["max_tokens"] = max_tokens + (budget if isinstance(budget, int) else 0)
    return out


def _check_max_tokens(max_tokens: int) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")


def _check_call(system: str, prompt: str, max_tokens: int) -> None:
    """Reject arguments no provider can send (a programming error, not a summary failure)."""
    if not isinstance(system, str) or not isinstance(prompt, str):
        raise TypeError("summary calls take system and prompt as str")
    if not prompt.strip():
        raise ValueError("summary prompt is empty: there is nothing to summarise")
    _check_max_tokens(max_tokens)


def is_official_openai(base_url: str | None) -> bool:
    """True for OpenAI's own API (no base URL, or one on ``api.openai.com``)."""
    return base_url is None or "api.openai.com" in base_url


def _final_text(text: str, provider: str) -> str:
    cleaned = strip_reasoning(text)
    if not cleaned:
        detail = "only reasoning" if text.strip() else "empty or whitespace text"
        raise SummaryError.of("empty", provider, detail)
    return cleaned


def anthropic_reply_text(reply: Any, provider: str = "anthropic") -> str:
    """The text of a Messages API reply: text blocks joined, thinking and tool blocks ignored.

    :raises SummaryError: ``unparsable`` when the reply is not a message or has content but no
        text block; ``empty`` when it has no content or only blank text / reasoning.
    """
    content = getattr(reply, "content", None)
    if not isinstance(content, list):
        raise SummaryError.of(
            "unparsable", provider, f"expected a message with content, got {type(reply).__name__}"
        )
    if not content:
        raise SummaryError.of("empty", provider, "the reply has no content blocks")
    texts = [str(block.text) for block in content if getattr(block, "type", None) == "text"]
    if not texts:
        kinds = ", ".join(sorted({str(getattr(b, "type", "?")) for b in content}))
        raise SummaryError.of("unparsable", provider, f"no text block, only: {kinds}")
    return _final_text("".join(texts), provider)


def openai_reply_text(reply: Any, provider: str = "openai") -> str:
    """The text of a chat completion: ``choices[0].message.content`` (``reasoning_content`` and
    ``reasoning`` are ignored).

    :raises SummaryError: ``unparsable`` when there is no choice or the message holds only tool
        calls; ``empty`` when the content is missing, blank or only reasoning.
    """
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise SummaryError.of(
            "unparsable", provider, f"expected a chat completion with choices, got {reply!r:.200}"
        )
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if isinstance(content, list):  # some servers return content parts
        content = "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(getattr(part, "text", ""))
            for part in content
        )
    if content is None or not isinstance(content, str):
        if getattr(message, "tool_calls", None) or getattr(message, "function_call", None):
            raise SummaryError.of("unparsable", provider, "the reply holds only tool calls")
        raise SummaryError.of("empty", provider, "the reply has no content")
    return _final_text(content, provider)


@attrs.define(eq=False)
class _SdkProvider:
    """What the two SDK-backed providers share: one pooled client, error classification, reply
    parsing and usage capture. Subclasses say how to build the client, call the API and read the
    reply."""

    model: str
    api_key: str = attrs.field(repr=False)
    base_url: str | None
    timeout: float
    context_length: int
    name: str
    serves_main: bool = attrs.field(default=False, kw_only=True)
    """The provider talks to the main model on the main route, so it may resend the agent's
    cached requests (:meth:`complete_request`)."""
    last_usage: Any = attrs.field(default=None, init=False)
    """The SDK usage object of the last successful call (for cost accounting)."""
    _client: Any = attrs.field(default=None, init=False, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def _client_kwargs(self) -> dict[str, Any]:
        return {
            "api_key": self.api_key,
            "base_url": self.base_url,
            "timeout": self.timeout,
            "max_retries": 0,  # we classify failures and decide ourselves
        }

    def _request(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        """The API arguments of a one-shot summary (a blank ``system`` is left out)."""
        raise NotImplementedError

    def _new_client(self) -> Any:
        """A new SDK client (imports the SDK) with :meth:`_client_kwargs`."""
        raise NotImplementedError

    def _create(self, client: Any, request: dict[str, Any]) -> Any:
        """Make the API call and return its reply."""
        raise NotImplementedError

    def _reply_text(self, reply: Any) -> str:
        """The reply's text, or raises :class:`SummaryError` (``empty`` / ``unparsable``)."""
        raise NotImplementedError

    def _limit(self, request: dict[str, Any], max_tokens: int) -> dict[str, Any]:
        """``request`` with this API's output limit argument (Anthropic: ``max_tokens``)."""
        return request

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """One API call; see :class:`SummaryProvider`."""
        _check_call(system, prompt, max_tokens)
        return self._send(self._request(system, prompt, max_tokens))

    def complete_request(self, request: Mapping[str, Any], max_tokens: int) -> str:
        """Send a whole request of the agent's (markers included) with ``max_tokens`` of answer;
        the reply is read like :meth:`complete`'s. Streaming and output-limit arguments of the
        request are replaced; everything else is sent as it is."""
        _check_max_tokens(max_tokens)
        arguments = summary_arguments(request, max_tokens)
        return self._send(self._limit(arguments, arguments["max_tokens"]))

    def _send(self, request: dict[str, Any]) -> str:
        """One call with the pooled client (made on first use), classified and read."""
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            client = self._client
        try:
            reply = self._create(client, request)
        except Exception as exc:
            raise classify_error(exc, self.name, timeout=self.timeout) from exc
        text = self._reply_text(reply)
        self.last_usage = getattr(reply, "usage", None)  # only once the text is usable
        return text


@attrs.define(eq=False)
class AnthropicProvider(_SdkProvider):
    """Summaries through the official ``anthropic`` SDK (Messages API)."""

    name: str = "anthropic"

    def _request(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        if system.strip():
            request["system"] = system
        return request

    def _new_client(self) -> Any:
        import anthropic

        return anthropic.Anthropic(**self._client_kwargs())

    def _create(self, client: Any, request: dict[str, Any]) -> Any:
        return client.messages.create(**request)

    def _reply_text(self, reply: Any) -> str:
        return anthropic_reply_text(reply, self.name)


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            "the 'openai' summary provider needs the openai package; install it with: "
            f"{OPENAI_INSTALL_HINT}"
        ) from exc
    return openai


@attrs.define(eq=False)
class OpenAIProvider(_SdkProvider):
    """Summaries through the ``openai`` SDK against OpenAI or any compatible endpoint."""

    name: str = "openai"

    @property
    def official(self) -> bool:
        """True for OpenAI's own API (which wants ``max_completion_tokens``)."""
        return is_official_openai(self.base_url)

    def _client_kwargs(self) -> dict[str, Any]:
        # Always explicit: left out, the SDK would read $OPENAI_BASE_URL from os.environ even
        # when selection was made from another environment mapping.
        return {**super()._client_kwargs(), "base_url": self.base_url or OPENAI_BASE_URL}

    def _request(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        messages = [{"role": "user", "content": prompt}]
        if system.strip():
            messages.insert(0, {"role": "system", "content": system})
        return self._limit({"model": self.model, "messages": messages}, max_tokens)

    def _limit(self, request: dict[str, Any], max_tokens: int) -> dict[str, Any]:
        # OpenAI's newer models reject `max_tokens`; local servers (llama.cpp, older vLLM and
        # Ollama) only know `max_tokens`.
        out = {k: v for k, v in request.items() if k != "max_tokens"}
        out["max_completion_tokens" if self.official else "max_tokens"] = max_tokens
        return out

    def _new_client(self) -> Any:
        return _import_openai().OpenAI(**self._client_kwargs())

    def _create(self, client: Any, request: dict[str, Any]) -> Any:
        return client.chat.completions.create(**request)

    def _reply_text(self, reply: Any) -> str:
        return openai_reply_text(reply, self.name)


@attrs.define(eq=False)
class MainProvider:
    """Summaries written by the host's own model through a callable it hands to the kernel.

    Exceptions from the callable are classified like SDK errors: ``TimeoutError`` and
    ``ConnectionError`` (and SDK timeouts / connection / auth / rate-limit errors) abort, the rest
    fall back; a :class:`SummaryError` it raises passes through.
    """

    call: MainCallable = attrs.field(repr=False)
    model: str = "main"
    context_length: int = 128_000
    name: str = "main"
    send: MainRequestCallable | None = attrs.field(default=None, repr=False, kw_only=True)
    """The host's request sender, when it gave one: summaries then resend the agent's cached
    request (:meth:`complete_request`)."""

    @property
    def serves_main(self) -> bool:
        """True when the host gave a request sender (provider ``main`` is the main model)."""
        return self.send is not None

    def complete_request(self, request: Mapping[str, Any], max_tokens: int) -> str:
        """Hand a whole request of the agent's to the host's sender; classified like
        :meth:`complete`.

        :raises SummaryError: ``unparsable`` when no sender was given (check
            :attr:`serves_main`), and for every failure of the sender.
        """
        send = self.send
        if send is None:
            raise SummaryError.of("unparsable", self.name, "the host gave no request sender")
        arguments = summary_arguments(request, max_tokens)
        return self._host_text("sender", lambda: send(arguments, arguments["max_tokens"]))

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """Call the host's model; see :class:`SummaryProvider`."""
        _check_call(system, prompt, max_tokens)
        return self._host_text("callable", lambda: self.call(system, prompt, max_tokens))

    def _host_text(self, what: str, call: Callable[[], object]) -> str:
        """The text of one call into the host (its ``what``), every failure classified."""
        try:
            reply = call()
        except Exception as exc:
            raise classify_error(exc, self.name) from exc
        if not isinstance(reply, str):
            raise SummaryError.of(
                "unparsable", self.name, f"the host {what} returned {type(reply).__name__}, not str"
            )
        return _final_text(reply, self.name)
