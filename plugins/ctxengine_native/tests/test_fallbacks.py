"""Every way the server can refuse falls back to the local compressor, with its own ``fallback``
id and a reason naming both what failed and what the compressor did; no message is lost (the
result is exactly the compressor's, whose own suite checks it loses nothing)."""

from __future__ import annotations

import copy
import socket
from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine
from ctxengine import CompressResult, Format
from ctxengine.messages import validate
from ctxengine.testing import samples
from ctxengine_fakeapi import FakeAPI

from .helpers import MODEL, RESPONSES_MODEL, is_compaction_request, native_config


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def _compressor_alone(config: dict[str, Any], fmt: Format) -> CompressResult:
    """What the compressor by itself makes of the sample conversation."""
    local = {k: v for k, v in config.items() if k != "engines"}
    local["context"] = {"engine": "compressor"}
    system, messages = samples.conversation(fmt)
    with ctxengine.load(local, env={}) as kernel:
        return kernel.session("local").compress(messages, system, force=True)


def _compress(
    config: dict[str, Any], fmt: Format, env: dict[str, str] | None = None
) -> CompressResult:
    system, messages = samples.conversation(fmt)
    before = copy.deepcopy(messages)
    with ctxengine.load(config, env=env or {}) as kernel:
        result = kernel.session("s").compress(messages, system, force=True)
    assert messages == before  # the caller's list is never touched
    return result


def _assert_fell_back(
    result: CompressResult, why: str, config: dict[str, Any], fmt: Format
) -> None:
    assert result.fallback == why, result.reason
    assert result.engine == "native"
    assert result.status == "compacted", result.reason
    assert result.reason.startswith(f"server compaction refused ({why}: ")
    assert "; fell back to the compressor engine: compacted " in result.reason
    local = _compressor_alone(config, fmt)
    # Exactly the compressor's compaction: the same messages, nothing dropped on the way.
    assert result.messages == local.messages
    assert result.system == local.system
    assert validate(result.messages, fmt, system=result.system) == []


def test_null_content_falls_back(api: FakeAPI) -> None:
    config = native_config(api)
    api.fail_compaction()
    result = _compress(config, "anthropic")
    _assert_fell_back(result, "null-content", config, "anthropic")
    assert "content: null" in result.reason
    assert [r for r in api.requests if is_compaction_request(r)]


@pytest.mark.parametrize(
    ("status", "kind", "why"),
    [
        (400, "invalid_request_error", "client-error"),
        (429, "rate_limit_error", "client-error"),
        (500, "api_error", "server-error"),
        (529, "overloaded_error", "server-error"),
    ],
)
def test_http_errors_fall_back(api: FakeAPI, status: int, kind: str, why: str) -> None:
    config = native_config(api)
    api.fail(status, "the compaction went wrong")
    result = _compress(config, "anthropic")
    _assert_fell_back(result, why, config, "anthropic")
    assert f"answered HTTP {status}: {kind}: the compaction went wrong" in result.reason


def test_unsupported_model_is_known_before_sending() -> None:
    with FakeAPI(native_models={"claude-opus-4-7"}) as api:
        config = native_config(api)
        result = _compress(config, "anthropic")
        _assert_fell_back(result, "unsupported-model", config, "anthropic")
        assert f"lists no compact_20260112 support for {MODEL}" in result.reason
        assert not [r for r in api.requests if is_compaction_request(r)]


def test_unsupported_model_refused_by_the_server_without_the_models_check() -> None:
    with FakeAPI(native_models={"claude-opus-4-7"}) as api:
        config = native_config(api, check_model=False)
        result = _compress(config, "anthropic")
        _assert_fell_back(result, "client-error", config, "anthropic")
        assert "does not support context management strategy compact_20260112" in result.reason


def test_responses_unsupported_model_falls_back() -> None:
    with FakeAPI(native_models={"gpt-6"}) as api:
        config = native_config(api, responses=True)
        result = _compress(config, "openai")
        _assert_fell_back(result, "unsupported-model", config, "openai")
        assert f"The model '{RESPONSES_MODEL}' does not support compaction." in result.reason


@pytest.mark.parametrize(("status", "why"), [(400, "client-error"), (503, "server-error")])
def test_responses_http_errors_fall_back(api: FakeAPI, status: int, why: str) -> None:
    config = native_config(api, responses=True)
    api.fail(status, "no compaction today")
    result = _compress(config, "openai")
    _assert_fell_back(result, why, config, "openai")


def test_route_without_support_falls_back_without_a_request(api: FakeAPI) -> None:
    config = native_config(api)
    del config["engines"]["native"]["api"], config["engines"]["native"]["base_url"]
    config["model"]["base_url"] = "https://openrouter.ai/api/v1"
    result = _compress(config, "anthropic")
    _assert_fell_back(result, "unsupported-route", config, "anthropic")
    assert "route openrouter" in result.reason
    assert api.requests == []


def test_openai_chat_conversation_has_no_server_compaction(api: FakeAPI) -> None:
    config = native_config(api)
    del config["engines"]["native"]["api"]
    result = _compress(config, "openai")
    _assert_fell_back(result, "unsupported-route", config, "openai")
    assert "chat completions API has no server-side compaction" in result.reason
    assert api.requests == []


def test_unreachable_server_falls_back(api: FakeAPI) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = native_config(api, base_url=f"http://127.0.0.1:{port}", timeout=5)
    result = _compress(config, "anthropic")
    _assert_fell_back(result, "unreachable", config, "anthropic")


def test_missing_credentials_fall_back(api: FakeAPI) -> None:
    config = native_config(api)
    del config["engines"]["native"]["base_url"], config["engines"]["native"]["api_key"]
    result = _compress(config, "anthropic", env={})
    _assert_fell_back(result, "no-credentials", config, "anthropic")
    assert "set engines.native.api_key or $ANTHROPIC_API_KEY" in result.reason
    assert api.requests == []


def test_the_gateways_message_budget_reaches_the_fallback(api: FakeAPI) -> None:
    # Past the hard message limit the gateway passes a message budget; when the server refuses,
    # the compressor it falls back to gets that budget too, and the history ends up under it.
    config = native_config(api)
    del config["engines"]["native"]["base_url"], config["engines"]["native"]["api_key"]
    config["model"]["context_length"] = 1_000_000
    messages: list[Any] = []
    for k in range(6_000):
        role = "user" if k % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"{role} line {k} about order #{k % 97}."})
    with ctxengine.load(config, env={}) as kernel:
        report = kernel.hygiene("big", messages)
    assert report.fired and report.compacted, report.notice
    assert report.error is None
    assert report.result is not None and report.result.fallback is not None  # the server refused
    assert report.result.engine == "native"
    assert report.message_budget is not None
    assert len(report.messages) <= report.message_budget
    assert validate(report.messages, "openai", profile="strict") == []
