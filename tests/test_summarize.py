"""The summariser providers, driven through the real anthropic/openai SDKs against FakeAPI."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ctxengine._accounting.models import UNKNOWN_CONTEXT_LENGTH, lookup_model
from ctxengine._config.core import SummaryProviderSettings
from ctxengine._summarize.errors import (
    ABORT_KINDS,
    FALLBACK_KINDS,
    ProviderConfigError,
    SummaryError,
    classify_error,
    is_context_length_message,
    kind_for_status,
)
from ctxengine._summarize.providers import (
    AnthropicProvider,
    MainProvider,
    OpenAIProvider,
    SummaryProvider,
)
from ctxengine._summarize.reasoning import strip_reasoning
from ctxengine._summarize.selection import HostModel, describe_provider, resolve_provider
from ctxengine_fakeapi import FakeAPI

KEY = "sk-test-0123456789"
SYSTEM = "You write structured summaries."
PROMPT = "Summarise: the user asked to fix tests/test_a.py; pytest -q exited 1."


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ambient keys must never decide a test (the SDKs read some variables themselves)."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI(auth_token=KEY) as fake:
        yield fake


def anthropic_for(base_url: str, **kw: Any) -> SummaryProvider:
    settings = SummaryProviderSettings(
        provider="anthropic", api_key=KEY, base_url=base_url, timeout=0.5, **kw
    )
    provider = resolve_provider(settings, env={})
    assert isinstance(provider, AnthropicProvider)
    return provider


def openai_for(base_url: str, **kw: Any) -> SummaryProvider:
    kw.setdefault("model", "qwen-test")
    settings = SummaryProviderSettings(
        provider="openai", api_key=KEY, base_url=base_url, timeout=0.5, **kw
    )
    provider = resolve_provider(settings, env={})
    assert isinstance(provider, OpenAIProvider)
    return provider


def provider_for(kind: str, api: FakeAPI) -> SummaryProvider:
    return anthropic_for(api.base_url) if kind == "anthropic" else openai_for(api.openai_base_url)


def failure(provider: SummaryProvider) -> SummaryError:
    with pytest.raises(SummaryError) as info:
        provider.complete(SYSTEM, PROMPT, 500)
    return info.value


# -- success paths ---------------------------------------------------------------------------


def test_anthropic_success_sends_model_max_tokens_system_and_prompt(api: FakeAPI) -> None:
    api.reply_text("## Goal\nFix the failing test")
    provider = anthropic_for(api.base_url)

    assert provider.complete(SYSTEM, PROMPT, 321) == "## Goal\nFix the failing test"

    (request,) = api.requests
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "claude-haiku-4-5"
    assert request.body["max_tokens"] == 321
    assert request.body["system"] == SYSTEM
    assert request.body["messages"] == [{"role": "user", "content": PROMPT}]
    assert provider.name == "anthropic"
    assert provider.model == "claude-haiku-4-5"
    assert isinstance(provider, AnthropicProvider)
    assert provider.last_usage.output_tokens > 0


def test_anthropic_omits_blank_system_and_uses_configured_model(api: FakeAPI) -> None:
    provider = anthropic_for(api.base_url, model="claude-sonnet-4-6")
    text = provider.complete("  ", PROMPT, 100)
    assert text.startswith("## Goal")  # FakeAPI's default echo summary
    body = api.requests[0].body
    assert "system" not in body
    assert body["model"] == "claude-sonnet-4-6"


def test_openai_success_sends_model_max_tokens_system_and_prompt(api: FakeAPI) -> None:
    api.reply_text("## Goal\nShip it")
    provider = openai_for(api.openai_base_url)

    assert provider.complete(SYSTEM, PROMPT, 222) == "## Goal\nShip it"

    (request,) = api.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "qwen-test"
    # A compatible endpoint gets the widely supported `max_tokens`.
    assert request.body["max_tokens"] == 222
    assert "max_completion_tokens" not in request.body
    assert request.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT},
    ]
    assert isinstance(provider, OpenAIProvider)
    assert provider.last_usage.completion_tokens > 0


def test_openai_official_endpoint_uses_max_completion_tokens() -> None:
    official = OpenAIProvider(
        model="gpt-4.1-mini", api_key=KEY, base_url=None, timeout=1.0, context_length=1000
    )
    local = OpenAIProvider(
        model="m", api_key=KEY, base_url="http://127.0.0.1:1/v1", timeout=1.0, context_length=1
    )
    assert official.official
    assert not local.official


# -- failure classification ------------------------------------------------------------------

FAILURES: list[tuple[str, Callable[[FakeAPI], object], str, str]] = [
    ("401", lambda a: a.fail(401, "invalid x-api-key"), "auth", "invalid x-api-key"),
    ("403", lambda a: a.fail(403, "no access to model"), "auth", "no access to model"),
    ("429", lambda a: a.fail(429, "slow down please"), "rate_limit", "slow down please"),
    ("529", lambda a: a.fail(529, "Overloaded"), "rate_limit", "Overloaded"),
    ("500", lambda a: a.fail(500, "Internal server error"), "server", "Internal server error"),
    ("503", lambda a: a.fail(503, "upstream unavailable"), "server", "upstream unavailable"),
    ("timeout", lambda a: a.delay(30), "timeout", "no reply within 0.5 s"),
    ("empty", lambda a: a.reply_empty(), "empty", ""),
    ("blank text", lambda a: a.reply_text("   \n"), "empty", "empty or whitespace text"),
    ("only reasoning", lambda a: a.reply_text("<think>hmm</think>"), "empty", "only reasoning"),
    (
        "non-text",
        lambda a: a.reply_blocks([{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]),
        "unparsable",
        "",
    ),
    ("garbage", lambda a: a.reply_garbage(), "unparsable", "not valid JSON"),
    ("context length", lambda a: a.context_length_error(), "context_length", ""),
    ("other 400", lambda a: a.fail(400, "temperature: out of range"), "other", "temperature"),
    ("404", lambda a: a.fail(404, "model not found"), "other", "model not found"),
]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
@pytest.mark.parametrize(
    ("script", "expected", "detail"),
    [pytest.param(s, e, d, id=name) for name, s, e, d in FAILURES],
)
def test_failures_map_to_summary_error_kinds(
    kind: str,
    script: Callable[[FakeAPI], object],
    expected: str,
    detail: str,
    api: FakeAPI,
) -> None:
    script(api)
    error = failure(provider_for(kind, api))
    assert error.kind == expected
    assert error.provider == kind
    assert error.aborts is (expected in ABORT_KINDS)
    assert str(error).startswith(f"{kind} summariser: ")
    assert detail in str(error)
    assert error.__cause__ is not None or expected in ("empty", "unparsable")


def test_non_text_reply_names_the_block_types(api: FakeAPI) -> None:
    api.reply_blocks(
        [
            {"type": "thinking", "thinking": "let me see", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}},
        ]
    )
    error = failure(anthropic_for(api.base_url))
    assert error.kind == "unparsable"
    assert "no text block, only: thinking, tool_use" in str(error)


def test_openai_tool_call_only_reply_is_unparsable(api: FakeAPI) -> None:
    api.reply_blocks([{"type": "tool_use", "id": "c1", "name": "bash", "input": {}}])
    error = failure(openai_for(api.openai_base_url))
    assert error.kind == "unparsable"
    assert "only tool calls" in str(error)


def test_http_status_is_recorded_on_the_error(api: FakeAPI) -> None:
    api.fail(529, "Overloaded")
    error = failure(anthropic_for(api.base_url))
    assert error.status == 529
    assert "(HTTP 529)" in str(error)
    assert "overloaded_error" in str(error)


def test_wrong_key_against_protected_endpoint_is_auth(api: FakeAPI) -> None:
    settings = SummaryProviderSettings(
        provider="anthropic", api_key="wrong", base_url=api.base_url, timeout=0.5
    )
    provider = resolve_provider(settings, env={})
    assert provider is not None
    error = failure(provider)
    assert (error.kind, error.status) == ("auth", 401)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_connection_refused_on_closed_port_is_network(kind: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    provider = anthropic_for(base) if kind == "anthropic" else openai_for(f"{base}/v1")
    error = failure(provider)
    assert (error.kind, error.aborts, error.status) == ("network", True, None)


# -- reasoning never becomes the summary -----------------------------------------------------


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_think_spans_are_stripped_from_replies(kind: str, api: FakeAPI) -> None:
    api.reply_text("<think>\nThe user wants...\n</think>\n\n## Goal\nFix it")
    assert provider_for(kind, api).complete(SYSTEM, PROMPT, 100) == "## Goal\nFix it"


def test_anthropic_thinking_blocks_are_ignored(api: FakeAPI) -> None:
    api.reply_blocks(
        [
            {"type": "thinking", "thinking": "secret plan", "signature": "sig"},
            {"type": "text", "text": "## Goal\n"},
            {"type": "text", "text": "Done"},
        ]
    )
    assert anthropic_for(api.base_url).complete(SYSTEM, PROMPT, 100) == "## Goal\nDone"


def test_openai_reasoning_content_is_ignored(api: FakeAPI) -> None:
    api.reply_blocks(
        [
            {"type": "thinking", "thinking": "secret plan", "signature": "s"},
            {"type": "text", "text": "## Goal\nDone"},
        ]
    )
    provider = openai_for(api.openai_base_url)
    assert provider.complete(SYSTEM, PROMPT, 100) == "## Goal\nDone"


def test_unclosed_leading_think_is_empty(api: FakeAPI) -> None:
    api.reply_text("<thinking>I ran out of tokens while thinking about the")
    error = failure(anthropic_for(api.base_url))
    assert error.kind == "empty"
    assert "only reasoning" in str(error)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain summary", "plain summary"),
        ("<think>a</think>kept", "kept"),
        ("<THINK>a</THINK> kept <thinking>b\nc</thinking> too", "kept  too"),
        ('<reasoning effort="high">x</reasoning>answer', "answer"),
        ("<think>never closed", ""),
        ("answer first\n<think>then reasoning that was cut", "answer first"),
        ("reasoning whose opener the server ate</think>\nanswer", "answer"),
        ("  \n", ""),
    ],
)
def test_strip_reasoning(raw: str, clean: str) -> None:
    assert strip_reasoning(raw) == clean


# -- the host's own model --------------------------------------------------------------------


def test_main_provider_calls_the_host_callable() -> None:
    calls: list[tuple[str, str, int]] = []

    def host(system: str, prompt: str, max_tokens: int) -> str:
        calls.append((system, prompt, max_tokens))
        return "<think>x</think>## Goal\nHost summary"

    settings = SummaryProviderSettings(provider="main")
    provider = resolve_provider(
        settings, env={}, host=HostModel(call=host, name="claude-sonnet-4-6")
    )
    assert isinstance(provider, MainProvider)
    assert provider.complete(SYSTEM, PROMPT, 77) == "## Goal\nHost summary"
    assert calls == [(SYSTEM, PROMPT, 77)]
    assert provider.model == "claude-sonnet-4-6"
    assert provider.context_length == lookup_model("claude-sonnet-4-6").context_length


def test_summary_windows_follow_the_models_overrides_and_the_main_models_limit() -> None:
    """The summary model's window is the one the rest of the configuration states: a
    ``models.<name>.context_length`` override for an SDK provider's model, and for provider
    ``main`` the host model's window with ``model.context_length`` applied, as the kernel's own
    thresholds use it."""
    import ctxengine

    def host(system: str, prompt: str, max_tokens: int) -> str:
        return "## Goal\nHost summary"

    sdk = ctxengine.load(
        {
            "auxiliary": {"compression": {"provider": "anthropic", "model": "house-summariser"}},
            "models": {"house-summariser": {"context_length": 24_000}},
        },
        env={"ANTHROPIC_API_KEY": KEY},
    ).summary_provider()
    assert sdk is not None and sdk.context_length == 24_000

    main = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 64_000},
            "auxiliary": {"compression": {"provider": "main"}},
        },
        main_summarizer=host,
        env={},
    ).summary_provider()
    assert main is not None and main.context_length == 64_000

    overridden = ctxengine.load(
        {
            "model": {"name": "house-model"},
            "models": {"house-model": {"context_length": 48_000}},
            "auxiliary": {"compression": {"provider": "main"}},
        },
        main_summarizer=host,
        env={},
    ).summary_provider()
    assert overridden is not None and overridden.context_length == 48_000

    # An explicit auxiliary.compression.context_length still wins over both.
    explicit = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 64_000},
            "auxiliary": {"compression": {"provider": "main", "context_length": 20_000}},
        },
        main_summarizer=host,
        env={},
    ).summary_provider()
    assert explicit is not None and explicit.context_length == 20_000


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (TimeoutError("host model timed out"), "timeout"),
        (ConnectionRefusedError("refused"), "network"),
        (ConnectionResetError("reset by peer"), "network"),
        (RuntimeError("model exploded"), "other"),
        (KeyError("choices"), "other"),
    ],
)
def test_main_provider_classifies_host_exceptions(raised: Exception, kind: str) -> None:
    def host(system: str, prompt: str, max_tokens: int) -> str:
        raise raised

    error = failure(MainProvider(call=host))
    assert error.kind == kind
    assert error.provider == "main"
    assert error.__cause__ is raised
    assert error.aborts is (kind in ABORT_KINDS)


def test_main_provider_passes_summary_errors_through_and_checks_replies() -> None:
    own = SummaryError("host says no", kind="rate_limit", provider="main")

    def raising(system: str, prompt: str, max_tokens: int) -> str:
        raise own

    with pytest.raises(SummaryError) as info:
        MainProvider(call=raising).complete(SYSTEM, PROMPT, 10)
    assert info.value is own

    assert failure(MainProvider(call=lambda s, p, m: "")).kind == "empty"
    not_text: Any = lambda s, p, m: {"text": "x"}  # noqa: E731 - a host that breaks the contract
    error = failure(MainProvider(call=not_text))
    assert error.kind == "unparsable"
    assert "returned dict, not str" in str(error)


def test_main_provider_classifies_sdk_errors_raised_by_the_host(api: FakeAPI) -> None:
    import anthropic

    client = anthropic.Anthropic(api_key="wrong", base_url=api.base_url, max_retries=0)

    def host(system: str, prompt: str, max_tokens: int) -> str:
        reply = client.messages.create(
            model="m", max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
        )
        return str(reply.content[0].text)  # type: ignore[union-attr]

    error = failure(MainProvider(call=host))
    assert (error.kind, error.status, error.provider) == ("auth", 401, "main")


def test_bad_call_arguments_are_caller_errors() -> None:
    provider = MainProvider(call=lambda s, p, m: "x")
    with pytest.raises(ValueError, match="summary prompt is empty"):
        provider.complete(SYSTEM, "  ", 10)
    with pytest.raises(ValueError, match="max_tokens must be a positive int, got 0"):
        provider.complete(SYSTEM, PROMPT, 0)


# -- selection -------------------------------------------------------------------------------


def test_extractive_resolves_to_none() -> None:
    settings = SummaryProviderSettings(provider="extractive")
    assert resolve_provider(settings, env={"ANTHROPIC_API_KEY": KEY}) is None
    assert describe_provider(settings, {}) == "extractive (local digest, no model call)"


def test_auto_prefers_anthropic_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    settings = SummaryProviderSettings()
    provider = resolve_provider(settings)
    assert isinstance(provider, AnthropicProvider)
    assert (provider.model, provider.api_key) == ("claude-haiku-4-5", KEY)
    assert provider.base_url == "https://api.anthropic.com"
    assert provider.context_length == lookup_model("claude-haiku-4-5").context_length
    assert describe_provider(settings) == (
        "auto -> anthropic (claude-haiku-4-5): $ANTHROPIC_API_KEY is set"
    )


def test_auto_uses_anthropic_base_url_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/gateway")
    settings = SummaryProviderSettings()
    provider = resolve_provider(settings)
    assert isinstance(provider, AnthropicProvider)
    assert provider.base_url == "http://127.0.0.1:9/gateway"
    assert describe_provider(settings) == (
        "auto -> anthropic (claude-haiku-4-5 at http://127.0.0.1:9/gateway): "
        "$ANTHROPIC_AUTH_TOKEN is set"
    )


def test_auto_falls_back_to_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    settings = SummaryProviderSettings()
    provider = resolve_provider(settings)
    assert isinstance(provider, OpenAIProvider)
    assert (provider.model, provider.base_url, provider.api_key) == (
        "gpt-4.1-mini",
        None,
        "sk-openai",
    )
    assert describe_provider(settings) == "auto -> openai (gpt-4.1-mini): $OPENAI_API_KEY is set"


def test_auto_with_settings_key_and_no_base_url_is_anthropic() -> None:
    settings = SummaryProviderSettings(api_key=KEY)
    provider = resolve_provider(settings, env={"OPENAI_API_KEY": "sk-openai"})
    assert isinstance(provider, AnthropicProvider)
    assert describe_provider(settings, {}) == (
        "auto -> anthropic (claude-haiku-4-5): auxiliary.compression.api_key is set"
    )


def test_auto_with_settings_base_url_beats_ambient_anthropic_key(api: FakeAPI) -> None:
    settings = SummaryProviderSettings(base_url=api.openai_base_url, model="llama3", api_key=KEY)
    env = {"ANTHROPIC_API_KEY": "sk-ant"}
    provider = resolve_provider(settings, env=env)
    assert isinstance(provider, OpenAIProvider)
    assert provider.complete(SYSTEM, PROMPT, 10).startswith("## Goal")
    assert api.requests[0].body["model"] == "llama3"
    assert describe_provider(settings, env) == (
        f"auto -> openai (llama3 at {api.openai_base_url}): auxiliary.compression.base_url is set"
    )


def test_local_openai_endpoint_needs_no_key(api: FakeAPI) -> None:
    with FakeAPI() as open_api:
        env = {"OPENAI_BASE_URL": open_api.openai_base_url}
        settings = SummaryProviderSettings(model="qwen2.5:7b")
        provider = resolve_provider(settings, env=env)
        assert isinstance(provider, OpenAIProvider)
        assert provider.api_key == "not-needed"
        provider.complete(SYSTEM, PROMPT, 10)
        assert open_api.requests[0].headers["authorization"] == "Bearer not-needed"
        assert provider.context_length == UNKNOWN_CONTEXT_LENGTH
        assert describe_provider(settings, env).endswith(": $OPENAI_BASE_URL is set")


def test_auto_without_anything_is_extractive_and_says_why() -> None:
    settings = SummaryProviderSettings()
    assert resolve_provider(settings, env={}) is None
    assert describe_provider(settings, {}) == (
        "auto -> extractive (local digest, no model call): no summary model configured "
        "(set $ANTHROPIC_API_KEY or $OPENAI_API_KEY, or auxiliary.compression.base_url)"
    )


def test_auto_degrades_to_extractive_when_compatible_endpoint_lacks_a_model() -> None:
    settings = SummaryProviderSettings(base_url="http://127.0.0.1:8080/v1")
    assert resolve_provider(settings, env={}) is None
    line = describe_provider(settings, {})
    assert line.startswith("auto -> extractive (local digest, no model call): openai unusable: ")
    assert "auxiliary.compression.model is required" in line


def test_describe_never_shows_the_key() -> None:
    secret = "sk-ant-api03-very-secret"
    for provider in ("auto", "anthropic"):  # both literals of the settings type
        settings = SummaryProviderSettings(provider=provider, api_key=secret)
        assert secret not in describe_provider(settings, {})
        assert secret not in repr(resolve_provider(settings, env={}))


# -- configuration errors --------------------------------------------------------------------


def test_explicit_anthropic_without_key_is_a_clear_error() -> None:
    settings = SummaryProviderSettings(provider="anthropic")
    with pytest.raises(ProviderConfigError) as info:
        resolve_provider(settings, env={})
    message = str(info.value)
    assert message.startswith("auxiliary.compression.provider 'anthropic': no API key")
    assert "auxiliary.compression.api_key" in message
    assert "$ANTHROPIC_API_KEY" in message
    assert describe_provider(settings, {}).startswith(
        "anthropic (claude-haiku-4-5): not usable: no API key"
    )


def test_explicit_openai_without_key_is_a_clear_error() -> None:
    with pytest.raises(ProviderConfigError, match=r"set auxiliary\.compression\.api_key or "):
        resolve_provider(SummaryProviderSettings(provider="openai"), env={})


def test_compatible_endpoint_without_model_is_a_clear_error() -> None:
    settings = SummaryProviderSettings(provider="openai", base_url="http://127.0.0.1:11434/v1")
    with pytest.raises(ProviderConfigError) as info:
        resolve_provider(settings, env={})
    assert "auxiliary.compression.model is required for the OpenAI-compatible endpoint " in str(
        info.value
    )
    assert "http://127.0.0.1:11434/v1" in str(info.value)


def test_main_without_callable_is_a_clear_error() -> None:
    with pytest.raises(ProviderConfigError, match="needs the host's model callable"):
        resolve_provider(SummaryProviderSettings(provider="main"), env={})


def test_unknown_provider_and_bad_timeout_are_rejected() -> None:
    bogus = SummaryProviderSettings(provider="gemini")  # type: ignore[arg-type]
    with pytest.raises(ProviderConfigError) as info:
        resolve_provider(bogus, env={})
    assert str(info.value) == (
        "auxiliary.compression.provider: 'gemini' is not a summary provider; "
        "allowed: auto, anthropic, openai, main, extractive"
    )
    assert describe_provider(bogus, {}).startswith("gemini: not usable: ")
    with pytest.raises(ProviderConfigError, match=r"timeout: 0 is not allowed; use seconds > 0"):
        resolve_provider(SummaryProviderSettings(timeout=0), env={})


def test_missing_openai_extra_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    settings = SummaryProviderSettings(provider="openai", api_key=KEY)
    with pytest.raises(ImportError, match=r"pip install 'ctxengine\[openai\]'"):
        resolve_provider(settings, env={})
    direct = OpenAIProvider(
        model="m", api_key=KEY, base_url="http://127.0.0.1:1/v1", timeout=1.0, context_length=10
    )
    with pytest.raises(ImportError, match=r"pip install 'ctxengine\[openai\]'"):
        direct.complete(SYSTEM, PROMPT, 10)
    # auto does not fail the session: it falls back to the digest and says why.
    auto = SummaryProviderSettings()
    assert resolve_provider(auto, env={"OPENAI_API_KEY": KEY}) is None
    assert "pip install 'ctxengine[openai]'" in describe_provider(auto, {"OPENAI_API_KEY": KEY})


# -- windows ---------------------------------------------------------------------------------


def test_context_length_from_settings_table_or_fallback(api: FakeAPI) -> None:
    assert anthropic_for(api.base_url, context_length=50_000).context_length == 50_000
    assert anthropic_for(api.base_url).context_length == 200_000
    assert openai_for(api.openai_base_url, model="no-such-model").context_length == 128_000


# -- error kinds -----------------------------------------------------------------------------


def test_summary_error_kinds() -> None:
    assert {"auth", "network", "timeout", "rate_limit"} == ABORT_KINDS
    assert "too_small" in FALLBACK_KINDS
    with pytest.raises(ValueError, match="SummaryError kind 'boom' is unknown; allowed: auth"):
        SummaryError("x", kind="boom", provider="anthropic")
    assert SummaryError("x", kind="too_small", provider="main").aborts is False


@pytest.mark.parametrize(
    ("status", "message", "error_type", "kind"),
    [
        (401, "", None, "auth"),
        (403, "", None, "auth"),
        (408, "", None, "timeout"),
        (429, "", None, "rate_limit"),
        (529, "", None, "rate_limit"),
        (500, "", "overloaded_error", "rate_limit"),
        (413, "request too large", None, "context_length"),
        (400, "prompt is too long: 215337 tokens > 200000 maximum", None, "context_length"),
        (400, "input length and `max_tokens` exceed context limit", None, "context_length"),
        (400, "This model's maximum context length is 4096 tokens", None, "context_length"),
        (400, "the request exceeds the available context size", None, "context_length"),
        (400, "temperature: must be <= 1", None, "other"),
        (404, "", None, "other"),
        (500, "", None, "server"),
        (502, "", None, "server"),
        (504, "", None, "timeout"),
        (500, "", "timeout_error", "timeout"),
    ],
)
def test_kind_for_status(status: int, message: str, error_type: str | None, kind: str) -> None:
    assert kind_for_status(status, message, error_type) == kind


def test_context_length_messages() -> None:
    assert is_context_length_message("Please reduce the length: context_length_exceeded")
    assert not is_context_length_message("max_tokens must be at least 1")


def test_classify_plain_exceptions() -> None:
    assert classify_error(TimeoutError(), "main", timeout=2).kind == "timeout"
    assert "no reply within 2 s" in str(classify_error(TimeoutError(), "main", timeout=2))
    assert classify_error(ValueError("bad"), "main").kind == "other"


def test_importing_the_providers_imports_no_sdk() -> None:
    code = (
        "import sys, ctxengine._summarize as s; "
        "print(sorted(m for m in ('anthropic', 'openai', 'asyncio') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_env_mapping_is_the_only_environment_consulted(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process environment points elsewhere; the mapping handed in must win, down to the SDK.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-process")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url}
    provider = resolve_provider(SummaryProviderSettings(timeout=0.5), env=env)
    assert provider is not None
    assert provider.complete(SYSTEM, PROMPT, 10).startswith("## Goal")
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"
