"""Talking to the servers that compact: Anthropic's Messages API and OpenAI's Responses API.

Every request goes through the official SDK with ``max_retries=0`` (a failure falls back at once
instead of being retried behind the agent's back). Responses are read as the JSON the server
sent (``with_raw_response``), so the compaction block or item handed back to the conversation is
byte for byte what came over the wire, ``encrypted_content`` and ``signature`` included.

Every way the server can refuse becomes a :class:`Refused` with a stable id (the
``CompressResult.fallback`` of the local fallback that follows):

============================ ===========================================================
``unsupported-route``        the conversation's requests go somewhere without this API
``no-credentials``           no API key for the provider's own endpoint
``unsupported-model``        the Models API says the model has no ``compact_20260112``, or
                             the server refused the model (OpenAI: a 400 on ``model``)
``client-error``             any other 4xx
``server-error``             a 5xx (overloaded, internal error...)
``unreachable``              connection failed or timed out
``not-compacted``            the server answered without a compaction
``null-content``             the compaction block came back with ``content: null``
============================ ===========================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ctxengine import EngineContext, Message, SystemPrompt
from ctxengine.messages import COMPACT_BETA, COMPACT_EDIT, is_compaction_block

FallbackId = Literal[
    "unsupported-route",
    "no-credentials",
    "unsupported-model",
    "client-error",
    "server-error",
    "unreachable",
    "not-compacted",
    "null-content",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
OPENAI_BASE_URL = "https://api.openai.com/v1"
NO_KEY = "not-needed"
"""Sent to endpoints other than the provider's own when no key is configured (the SDKs insist
on one)."""

COMPACTION_MAX_TOKENS = 4096
"""``max_tokens`` of a compaction request. The response pauses right after the compaction, so
this only bounds a reply the server writes when it does not compact."""


class Refused(Exception):
    """The server did not compact; ``why`` is one of :data:`FallbackId`."""

    def __init__(self, why: FallbackId, detail: str) -> None:
        super().__init__(f"{why}: {detail}")
        self.why: FallbackId = why
        self.detail = detail


@attrs.frozen
class Endpoint:
    """Where compaction requests go and with which key."""

    base_url: str
    api_key: str = attrs.field(repr=False)
    timeout: float


def endpoint(
    ctx: EngineContext,
    *,
    provider: Literal["anthropic", "openai"],
    base_url: str | None,
    api_key: str | None,
    timeout: float,
) -> Endpoint:
    """The endpoint for ``provider``: the setting, else ``model.base_url``, else the provider's
    environment variable, else its own API; the key from the setting or the environment.

    :raises Refused: ``no-credentials`` for the provider's own API without a key.
    """
    env = ctx.env
    key_vars: tuple[str, ...]
    if provider == "anthropic":
        official, url_var = ANTHROPIC_BASE_URL, "ANTHROPIC_BASE_URL"
        key_vars = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    else:
        official, url_var = OPENAI_BASE_URL, "OPENAI_BASE_URL"
        key_vars = ("OPENAI_API_KEY",)
    url = base_url or ctx.config.model.base_url or env.get(url_var) or official
    key = api_key or next((env[v] for v in key_vars if env.get(v)), None)
    if key is None:
        if url.rstrip("/") == official.rstrip("/"):
            raise Refused(
                "no-credentials",
                f"no API key for {url}: set engines.native.api_key or ${key_vars[0]}",
            )
        key = NO_KEY
    return Endpoint(url, key, timeout)


def refusal(exc: Exception, where: str) -> Refused:
    """The :class:`Refused` for an exception an SDK raised while talking to ``where``."""
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message = _error_message(exc, body)
    if isinstance(status, int):
        detail = f"{where} answered HTTP {status}: {message}"
        if status >= 500:
            return Refused("server-error", detail)
        error = body.get("error", body) if isinstance(body, Mapping) else None
        if isinstance(error, Mapping) and error.get("param") == "model":
            return Refused("unsupported-model", detail)
        return Refused("client-error", detail)
    return Refused("unreachable", f"{where} could not be reached: {type(exc).__name__}: {exc}")


def _error_message(exc: Exception, body: object) -> str:
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            kind = error.get("type")
            return f"{kind}: {error['message']}" if isinstance(kind, str) else error["message"]
    return str(exc)


# --- Anthropic ------------------------------------------------------------------------------------


class AnthropicServer:
    """Compaction through ``client.beta.messages`` (``compact_20260112``, paused after it)."""

    def __init__(self, where: Endpoint) -> None:
        import anthropic  # a core dependency, imported when a compaction first needs it

        self.where = where
        self.client = anthropic.Anthropic(
            api_key=where.api_key, base_url=where.base_url, timeout=where.timeout, max_retries=0
        )
        self._supported: dict[str, bool | None] = {}

    def close(self) -> None:
        self.client.close()

    def model_supports(self, model: str) -> bool | None:
        """What the Models API says about ``compact_20260112`` for ``model`` (asked once per
        model); ``None`` when it cannot tell (no such endpoint, no capabilities)."""
        if model not in self._supported:
            self._supported[model] = self._ask_models_api(model)
        return self._supported[model]

    def _ask_models_api(self, model: str) -> bool | None:
        try:
            info = self.client.beta.models.with_raw_response.retrieve(model).http_response.json()
        except Exception:
            return None  # a gateway without the Models API: the compaction request will tell
        capabilities = info.get("capabilities") if isinstance(info, Mapping) else None
        management = (
            capabilities.get("context_management") if isinstance(capabilities, Mapping) else None
        )
        support = management.get(COMPACT_EDIT) if isinstance(management, Mapping) else None
        if isinstance(support, Mapping) and isinstance(support.get("supported"), bool):
            return bool(support["supported"])
        if isinstance(management, Mapping) and isinstance(management.get("supported"), bool):
            return bool(management["supported"])
        return None

    def count(self, model: str, system: SystemPrompt | None, messages: Sequence[Message]) -> int:
        """The server's count of a request's input tokens.

        :raises Refused: when the count fails.
        """
        request: dict[str, Any] = {"model": model, "messages": list(messages)}
        if system is not None:
            request["system"] = system
        if messages and is_compaction_block((messages[0].get("content") or [None])[0]):
            request["betas"] = [COMPACT_BETA]
        try:
            raw = self.client.beta.messages.with_raw_response.count_tokens(**request)
        except Exception as exc:
            raise refusal(exc, self.where.base_url) from exc
        return int(raw.http_response.json().get("input_tokens", 0))

    def compact(
        self,
        model: str,
        system: SystemPrompt | None,
        messages: Sequence[Message],
        *,
        trigger: int,
        instructions: str | None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Ask the server to compact ``messages``; returns the compaction block as sent and the
        response's usage (both JSON).

        :raises Refused: for every way the server did not compact.
        """
        edit: dict[str, Any] = {
            "type": COMPACT_EDIT,
            "trigger": {"type": "input_tokens", "value": max(1, trigger)},
            "pause_after_compaction": True,
        }
        if instructions:
            edit["instructions"] = instructions
        request: dict[str, Any] = {
            "model": model,
            "max_tokens": COMPACTION_MAX_TOKENS,
            "messages": list(messages),
            "betas": [COMPACT_BETA],
            "context_management": {"edits": [edit]},
        }
        if system is not None:
            request["system"] = system
        try:
            raw = self.client.beta.messages.with_raw_response.create(**request)
            reply = raw.http_response.json()
        except Exception as exc:
            raise refusal(exc, self.where.base_url) from exc
        content = reply.get("content") if isinstance(reply, Mapping) else None
        block = next((b for b in content or [] if is_compaction_block(b)), None)
        usage = reply.get("usage") if isinstance(reply, Mapping) else None
        if block is None:
            raise Refused(
                "not-compacted",
                f"the server answered without compacting (stop_reason "
                f"{reply.get('stop_reason')!r}): its count of the prompt stayed below the "
                f"trigger of {trigger:,} tokens",
            )
        if block.get("content") is None:
            raise Refused(
                "null-content",
                "the server's compaction failed (its block came back with content: null)",
            )
        return dict(block), dict(usage) if isinstance(usage, Mapping) else {}


# --- OpenAI Responses -----------------------------------------------------------------------------


class ResponsesServer:
    """Compaction through ``client.responses.compact``."""

    def __init__(self, where: Endpoint) -> None:
        try:
            import openai
        except ImportError as exc:  # the extra is optional
            raise Refused(
                "unsupported-route",
                "the openai package is not installed (pip install 'ctxengine[openai]')",
            ) from exc
        self.where = where
        self.client = openai.OpenAI(
            api_key=where.api_key, base_url=where.base_url, timeout=where.timeout, max_retries=0
        )

    def close(self) -> None:
        self.client.close()

    def compact(
        self, model: str, items: Sequence[Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The compacted output items (the user messages, then one compaction item) and the
        usage, as sent.

        :raises Refused: for every way the server did not compact.
        """
        request: dict[str, Any] = {"model": model, "input": list(items)}
        try:
            raw = self.client.responses.with_raw_response.compact(**request)
            reply = raw.http_response.json()
        except Exception as exc:
            raise refusal(exc, self.where.base_url) from exc
        output = reply.get("output") if isinstance(reply, Mapping) else None
        items_out = [dict(i) for i in output or [] if isinstance(i, Mapping)]
        if not any(is_compaction_block(i) for i in items_out):
            raise Refused("not-compacted", "the server's compacted output holds no compaction item")
        usage = reply.get("usage")
        return items_out, dict(usage) if isinstance(usage, Mapping) else {}
