"""Fault injection on the summariser, through the real ``anthropic`` and ``openai`` SDKs against
the local fake API and a real kernel: for each failure, the right status, the number of requests,
the pause before each one (recorded by an injected ``sleep``: nothing really waits) and no
message lost. Then the circuit breaker: who may call a provider that just failed."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

import ctxengine
from ctxengine import CompressResult, Format, Kernel
from ctxengine.messages import validate
from ctxengine.testing import samples
from ctxengine_fakeapi import FakeAPI

from .helpers import GOOD_SUMMARY
from .test_fake_api import assert_nothing_lost

APIS = ("anthropic", "openai")
HTML_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
    "Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


class Clock:
    """Monotonic time the test moves; ``sleep`` records each pause and moves the clock."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _kernel(which: str, base_url: str, clock: Clock, timeout: float = 5.0, **aux: Any) -> Kernel:
    return ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 16_000},
            "auxiliary": {
                "compression": {
                    "provider": which,
                    "model": "claude-haiku-4-5" if which == "anthropic" else "gpt-4o-mini",
                    "base_url": base_url,
                    "api_key": "test-key",
                    "timeout": timeout,
                    **aux,
                }
            },
        },
        env={},
        clock=clock,
        sleep=clock.sleep,
    )


def _base(api: FakeAPI, which: str) -> str:
    return api.base_url if which == "anthropic" else api.openai_base_url


def _compact(kernel: Kernel, which: str, session: str = "s", force: bool = False) -> Any:
    fmt: Format = "anthropic" if which == "anthropic" else "openai"
    system, messages = samples.conversation(fmt)
    result = kernel.session(session).compress(messages, system, force=force)
    return messages, result


def _outcomes(result: CompressResult) -> list[str]:
    return [a.outcome for call in result.calls for a in call.attempts]


def _pauses(result: CompressResult) -> list[float]:
    return [a.pause_s for call in result.calls for a in call.attempts]


Script = Callable[[FakeAPI], object]

# name: (script, status, outcomes of the requests, pauses before each, reason contains)
CASES: dict[str, tuple[Script, str, list[str], list[float], str]] = {
    "401": (
        lambda api: api.fail(401, "invalid x-api-key"),
        "aborted",
        ["auth"],
        [0.0],
        "summary failed (auth)",
    ),
    "403": (
        lambda api: api.fail(403, "your key may not use this model"),
        "aborted",
        ["auth"],
        [0.0],
        "summary failed (auth)",
    ),
    "404": (
        lambda api: api.fail(404, "model: claude-haiku-9 not found"),
        "compacted",
        ["other"],
        [0.0],
        "local digest after summary failed (other)",
    ),
    "429 with Retry-After": (
        lambda api: api.fail(429, "slow down", headers={"retry-after": "7"}),
        "compacted",
        ["rate_limit", "ok"],
        [0.0, 7.0],
        "summary by",
    ),
    "429 with a Retry-After beyond the longest wait": (
        lambda api: api.fail(429, "slow down", headers={"retry-after": "120"}),
        "aborted",
        ["rate_limit"],
        [0.0],
        "summary failed (rate_limit)",
    ),
    "500 three times": (
        lambda api: [api.fail(500, "internal error") for _ in range(3)],
        "compacted",
        ["server", "server", "server"],
        [0.0, 1.0, 2.0],
        "local digest after summary failed (server)",
    ),
    "500 once": (
        lambda api: api.fail(500, "internal error"),
        "compacted",
        ["server", "ok"],
        [0.0, 1.0],
        "summary by",
    ),
    "502 with an HTML body": (
        lambda api: [api.fail_raw(502, HTML_502) for _ in range(3)],
        "compacted",
        ["server", "server", "server"],
        [0.0, 1.0, 2.0],
        "502 Bad Gateway",
    ),
    "529 overloaded": (
        lambda api: [api.fail(529, "Overloaded") for _ in range(3)],
        "aborted",
        ["rate_limit", "rate_limit", "rate_limit"],
        [0.0, 1.0, 2.0],
        "summary failed (rate_limit)",
    ),
    "timeout": (
        lambda api: [api.delay(3.0) for _ in range(3)],
        "aborted",
        ["timeout", "timeout", "timeout"],
        [0.0, 1.0, 2.0],
        "summary failed (timeout)",
    ),
    "empty reply": (
        lambda api: api.reply_empty(),
        "compacted",
        ["empty"],
        [0.0],
        "local digest after summary failed (empty)",
    ),
    "off-template reply": (
        lambda api: api.reply_text("Sure! The user fixed some tests and it went fine."),
        "compacted",
        ["unparsable"],
        [0.0],
        "does not follow the summary template",
    ),
    "context-length error": (
        lambda api: api.context_length_error(),
        "compacted",
        ["context_length"],
        [0.0],
        "local digest after summary failed (context_length)",
    ),
    "non-text reply": (
        lambda api: api.reply_blocks(
            [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]
        ),
        "compacted",
        ["unparsable"],
        [0.0],
        "local digest after summary failed (unparsable)",
    ),
}


@pytest.mark.parametrize("which", APIS)
@pytest.mark.parametrize("case", list(CASES))
def test_each_failure_gets_its_status_attempts_and_pauses(
    api: FakeAPI, which: str, case: str
) -> None:
    script, status, outcomes, pauses, reason = CASES[case]
    script(api)
    api.reply_text(GOOD_SUMMARY)  # what a request after the failures gets
    clock = Clock()
    timeout = 0.2 if case == "timeout" else 5.0
    kernel = _kernel(which, _base(api, which), clock, timeout=timeout)
    messages, result = _compact(kernel, which)
    assert result.status == status, result.reason
    assert reason in result.reason
    assert _outcomes(result) == outcomes
    assert _pauses(result) == pauses
    assert clock.pauses == [p for p in pauses if p]  # the only waiting there was
    assert len([r for r in api.requests if r.method == "POST"]) == len(outcomes)
    assert_nothing_lost(messages, result)
    if result.compacted:
        assert validate(result.messages, result.conversation.format, system=result.system) == []
    kernel.close()


@pytest.mark.parametrize("which", APIS)
def test_connection_refused_is_retried_then_aborts(which: str) -> None:
    clock = Clock()
    base = f"http://127.0.0.1:{_closed_port()}" + ("" if which == "anthropic" else "/v1")
    kernel = _kernel(which, base, clock)
    messages, result = _compact(kernel, which)
    assert result.status == "aborted", result.reason
    assert "summary failed (network)" in result.reason
    assert _outcomes(result) == ["network", "network", "network"]
    assert clock.pauses == [1.0, 2.0]
    assert_nothing_lost(messages, result)


@pytest.mark.parametrize("which", APIS)
def test_an_open_breaker_keeps_every_caller_away_unless_forced(api: FakeAPI, which: str) -> None:
    for _ in range(3):
        api.fail(529, "Overloaded")
    clock = Clock()
    kernel = _kernel(which, _base(api, which), clock)
    _, first = _compact(kernel, which, "a")
    assert first.status == "aborted"
    sent = len(api.requests)
    assert sent == 3
    provider = kernel.summary_provider()
    assert isinstance(provider, ctxengine.SummaryService)
    assert provider.breaker_state() == "open"
    assert any("circuit OPEN" in line for line in kernel.status_lines())
    # An explicit compress of another session and the gateway send nothing while it is open.
    _, explicit = _compact(kernel, which, "b")
    assert explicit.status == "aborted"
    assert _outcomes(explicit) == ["skipped"]
    fmt: Format = "anthropic" if which == "anthropic" else "openai"
    system, messages = samples.conversation(fmt)
    report = kernel.hygiene("c", messages, system=system, last_prompt_tokens=15_000)
    assert report.fired and not report.compacted
    assert report.result is not None and _outcomes(report.result) == ["skipped"]
    assert len(api.requests) == sent
    # A forced compress (the host's "compact now") sends a request through it.
    api.reply_text(GOOD_SUMMARY)
    _, forced = _compact(kernel, which, "d", force=True)
    assert forced.status == "compacted", forced.reason
    assert len(api.requests) == sent + 1
    assert provider.breaker_state() == "closed"


@pytest.mark.parametrize("which", APIS)
def test_after_the_cooldown_one_trial_request_closes_or_reopens_the_breaker(
    api: FakeAPI, which: str
) -> None:
    api.fail(401, "invalid x-api-key")
    clock = Clock()
    kernel = _kernel(which, _base(api, which), clock)
    _compact(kernel, which, "a")
    provider = kernel.summary_provider()
    assert isinstance(provider, ctxengine.SummaryService)
    assert provider.breaker_state() == "open"  # an auth failure opens it at once
    clock.now += 60.0
    assert provider.breaker_state() == "half-open"
    api.fail(500, "still broken")
    _, trial = _compact(kernel, which, "b")
    assert _outcomes(trial) == ["server"]  # one trial request, no retries
    assert provider.breaker_state() == "open"
    clock.now += 60.0
    api.reply_text(GOOD_SUMMARY)
    _, healed = _compact(kernel, which, "c")
    assert healed.status == "compacted" and _outcomes(healed) == ["ok"]
    assert provider.breaker_state() == "closed"


@pytest.mark.parametrize("which", APIS)
def test_a_fallback_chain_ends_with_the_local_digest_instead_of_an_abort(
    api: FakeAPI, which: str
) -> None:
    api.fail(401, "invalid x-api-key")
    calls: list[str] = []

    def host_model(system: str, prompt: str, max_tokens: int) -> str:
        calls.append(prompt)
        raise TimeoutError("the host's own model timed out")

    clock = Clock()
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6", "context_length": 16_000},
            "auxiliary": {
                "compression": {
                    "provider": which,
                    "model": "claude-haiku-4-5" if which == "anthropic" else "gpt-4o-mini",
                    "base_url": _base(api, which),
                    "api_key": "test-key",
                    "fallback": ["main", "extractive"],
                }
            },
        },
        env={},
        clock=clock,
        sleep=clock.sleep,
        main_summarizer=host_model,
    )
    messages, result = _compact(kernel, which)
    # auth on the primary, then the host model's raw TimeoutError is retried like an SDK's.
    assert _outcomes(result) == ["auth", "timeout", "timeout", "timeout"]
    assert [a.provider for a in result.calls[0].attempts] == [which, "main", "main", "main"]
    assert clock.pauses == [1.0, 2.0]
    assert len(calls) == 3
    assert result.status == "compacted" and result.fallback_used
    assert_nothing_lost(messages, result)
    lines = kernel.status_lines()
    assert any("then main, then the local digest" in line for line in lines)


def test_the_failure_policy_is_configurable(api: FakeAPI) -> None:
    for _ in range(5):
        api.fail(500, "internal error")
    clock = Clock()
    kernel = _kernel(
        "anthropic",
        api.base_url,
        clock,
        max_attempts=5,
        retry_backoff=0.5,
        retry_max_wait=1.5,
        breaker_failures=10,
    )
    _, result = _compact(kernel, "anthropic")
    assert _outcomes(result) == ["server"] * 5
    assert clock.pauses == [0.5, 1.0, 1.5, 1.5]
    provider = kernel.summary_provider()
    assert isinstance(provider, ctxengine.SummaryService)
    assert provider.breaker_state() == "closed"  # 5 < breaker_failures
    assert attrs.evolve(provider.policy, max_attempts=1).describe().startswith("no retries")
