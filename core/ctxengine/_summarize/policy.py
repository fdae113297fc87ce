"""The failure policy around summary providers: retries, a circuit breaker, a fallback chain.

One place for every engine: the kernel wraps the configured providers in a
:class:`SummaryService`, so ``ctx.summarizer()`` hands each engine the same policy. The rules
(which failures are retried and how long to wait, when a provider's breaker opens and for how
long, when the chain moves on and when its final failure does not abort) are stated once, in
``docs/summaries.md`` ("The failure policy"); :data:`RETRYABLE_KINDS`, :data:`BREAKER_KINDS`,
:class:`FailurePolicy` and :class:`Breaker` hold them. A whole request (a cache-aware summary,
:func:`call_summary_request`) goes to the first provider alone: no other provider can read its
prompt cache.

Time comes from injected ``clock`` and ``sleep`` callables, so tests never really wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Literal

import attrs

from ctxengine._summarize.errors import SummaryAttempt, SummaryError, classify_error
from ctxengine._summarize.providers import SummaryProvider

RETRYABLE_KINDS = frozenset({"rate_limit", "server", "timeout", "network"})
"""Failures a later request may not repeat: retried with backoff."""

BREAKER_KINDS = RETRYABLE_KINDS | {"auth"}
"""Failures that say the endpoint cannot serve anyone right now; they count towards the breaker."""

ReplyCheck = Callable[[str, str], str]
"""``check(reply, provider_name)``: the text to keep, or raises :class:`~ctxengine.SummaryError`
(usually :func:`~ctxengine.check_summary`)."""

BreakerState = Literal["closed", "open", "half-open"]


@attrs.frozen
class FailurePolicy:
    """The failure policy's settings (``auxiliary.compression.*``, see ``docs/summaries.md``).

    :ivar max_attempts: requests per provider and call, the first included (1 = no retry).
    :ivar retry_backoff: seconds before the first retry, doubled for each further one.
    :ivar retry_max_wait: the longest single pause; a longer ``Retry-After`` ends the retries.
    :ivar breaker_failures: consecutive failed requests that open a provider's breaker.
    :ivar breaker_cooldown: seconds an open breaker keeps every call away from its provider.
    """

    max_attempts: int = 3
    retry_backoff: float = 1.0
    retry_max_wait: float = 30.0
    breaker_failures: int = 3
    breaker_cooldown: float = 60.0

    def pause_before(self, retry: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number ``retry`` (1 for the second request), or ``None``
        when the provider asked for longer than :attr:`retry_max_wait`."""
        if retry_after is not None:
            return retry_after if retry_after <= self.retry_max_wait else None
        return float(min(self.retry_max_wait, self.retry_backoff * 2.0 ** (retry - 1)))

    def describe(self) -> str:
        """The policy in one phrase, for status lines."""
        if self.max_attempts > 1:
            retries = (
                f"{self.max_attempts} attempts (pauses from {self.retry_backoff:g} s doubling, "
                f"at most {self.retry_max_wait:g} s, Retry-After honoured)"
            )
        else:
            retries = "no retries"
        return (
            f"{retries}; breaker opens after {self.breaker_failures} failures in a row for "
            f"{self.breaker_cooldown:g} s"
        )


@attrs.define
class Breaker:
    """One provider's circuit breaker (the rules: ``docs/summaries.md``).

    :ivar failures: consecutive failed requests of the kinds in :data:`BREAKER_KINDS`.
    :ivar open_until: clock time before which no request is sent.
    :ivar tripped: the breaker opened and no request has succeeded since (half-open once
        ``open_until`` has passed).
    :ivar cause: the failure that opened it.
    """

    failures: int = 0
    open_until: float = float("-inf")
    tripped: bool = False
    cause: SummaryError | None = None

    def state(self, now: float) -> BreakerState:
        if not self.tripped:
            return "closed"
        return "open" if now < self.open_until else "half-open"

    def succeeded(self) -> None:
        self.failures = 0
        self.tripped = False
        self.cause = None
        self.open_until = float("-inf")

    def failed(self, error: SummaryError, now: float, policy: FailurePolicy) -> bool:
        """Count one failed request; ``True`` when the breaker is open after it."""
        if error.kind not in BREAKER_KINDS:
            return False
        self.failures += 1
        too_long = error.retry_after is not None and error.retry_after > policy.retry_max_wait
        if (
            self.failures >= policy.breaker_failures
            or error.kind == "auth"
            or too_long
            or self.tripped  # a failed trial request opens it again at once
        ):
            self.tripped = True
            self.cause = error
            self.open_until = now + max(policy.breaker_cooldown, error.retry_after or 0.0)
            return True
        return False

    def describe(self, name: str, now: float) -> str:
        state = self.state(now)
        if state == "closed":
            return f"{name}: closed ({self.failures} recent failure(s))"
        cause = f"{self.cause.kind}" if self.cause is not None else "failures"
        if state == "open":
            return (
                f"{name}: circuit OPEN after {self.failures} failure(s) in a row ({cause}); "
                f"no summary requests for {self.open_until - now:.0f} s"
            )
        return f"{name}: circuit half-open after {cause}; the next summary call is a trial"


@attrs.frozen
class SummaryReply:
    """A summary a provider wrote, who wrote it, and every request it took.

    :ivar text: the reply, as the ``check`` returned it (the raw text without a check).
    """

    text: str
    provider: str
    attempts: tuple[SummaryAttempt, ...]


class SummaryService:
    """Summary providers behind the failure policy; a :class:`SummaryProvider` itself.

    ``name``, ``model`` and ``context_length`` are the first provider's, except that the window
    is the smallest of the chain, so a prompt sized for it fits every provider. Thread-safe:
    breaker state is shared by every session of the kernel, pauses and requests happen outside
    the lock.

    :param providers: the chain, primary first (at least one).
    :param digest_fallback: the configured chain ends with ``extractive``: when every provider
        fails, the final error does not abort (the engine writes its local digest).
    """

    def __init__(
        self,
        providers: Sequence[SummaryProvider],
        policy: FailurePolicy | None = None,
        *,
        digest_fallback: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not providers:
            raise ValueError("SummaryService needs at least one provider")
        self.providers = tuple(providers)
        self.policy = policy or FailurePolicy()
        self.digest_fallback = digest_fallback
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._breakers = [Breaker() for _ in self.providers]
        self._answered: SummaryProvider | None = None

    # -- the SummaryProvider protocol ------------------------------------------------------

    @property
    def name(self) -> str:
        return self.providers[0].name

    @property
    def model(self) -> str:
        return self.providers[0].model

    @property
    def context_length(self) -> int:
        return min(p.context_length for p in self.providers)

    @property
    def serves_main(self) -> bool:
        """Whether the first provider serves the main model on the main route and can send a
        whole request (it has ``complete_request``): cache-aware summaries go to it."""
        primary = self.providers[0]
        return bool(getattr(primary, "serves_main", False)) and callable(
            getattr(primary, "complete_request", None)
        )

    def complete_request(self, request: Mapping[str, Any], max_tokens: int) -> str:
        """:meth:`call_request` without a check, returning the text."""
        return self.call_request(request, max_tokens).text

    @property
    def last_usage(self) -> Any:
        """The usage report of the last reply, as the provider that wrote it kept it (``None``
        before any reply, or when that provider keeps none)."""
        with self._lock:
            return getattr(self._answered, "last_usage", None)

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """:meth:`call` without a check, returning the text."""
        return self.call(system, prompt, max_tokens).text

    # -- the policy ------------------------------------------------------------------------

    def breaker_state(self, index: int = 0) -> BreakerState:
        """The state of the breaker of ``providers[index]`` now."""
        with self._lock:
            return self._breakers[index].state(self.clock())

    def status(self) -> list[str]:
        """One line per provider whose breaker is not closed (nothing when all is well)."""
        now = self.clock()
        with self._lock:
            return [
                breaker.describe(provider.name, now)
                for provider, breaker in zip(self.providers, self._breakers, strict=True)
                if breaker.tripped
            ]

    def call(
        self,
        system: str,
        prompt: str,
        max_tokens: int,
        *,
        check: ReplyCheck | None = None,
        force: bool = False,
    ) -> SummaryReply:
        """Ask the chain for a summary under the policy.

        :param check: validates a reply (raise :class:`SummaryError` to reject it).
        :param force: send requests even through an open breaker.
        :raises SummaryError: the last failure, with ``attempts`` listing every request; its
            ``aborts`` is false when the chain ends with the local digest.
        """
        sends = [partial(p.complete, system, prompt, max_tokens) for p in self.providers]
        return self._chain(sends, check, force, degrades=self.digest_fallback)

    def call_request(
        self,
        request: Mapping[str, Any],
        max_tokens: int,
        *,
        check: ReplyCheck | None = None,
        force: bool = False,
    ) -> SummaryReply:
        """Send a whole request (the agent's, with the summary instruction appended) to the first
        provider under the policy; see :func:`call_summary_request`.

        :raises SummaryError: the last failure, with ``attempts``; its ``aborts`` is false when
            the chain has other providers or ends with the local digest (the engine may still
            ask it with a bounded prompt). A :exc:`TypeError` when the first provider cannot
            send whole requests (check :attr:`serves_main` first).
        """
        send = _request_sender(self.providers[0], request, max_tokens)
        degrades = len(self.providers) > 1 or self.digest_fallback
        return self._chain([send], check, force, degrades=degrades)

    def _chain(
        self,
        sends: Sequence[Callable[[], str]],
        check: ReplyCheck | None,
        force: bool,
        *,
        degrades: bool,
    ) -> SummaryReply:
        """Ask ``providers[i]`` through ``sends[i]``, in order, until one answers.

        :param degrades: something is left when these providers all fail, so the final error
            does not abort (otherwise it aborts as its kind says).
        :raises SummaryError: the last failure, a copy carrying every attempt of the call.
        """
        attempts: list[SummaryAttempt] = []
        last: SummaryError | None = None
        for index, send in enumerate(sends):
            reply, error = self._ask(index, send, check, force, attempts)
            last = error or last
            if reply is not None:
                return SummaryReply(reply, self.providers[index].name, tuple(attempts))
        assert last is not None  # every provider either answered or left an error
        final = SummaryError(
            str(last),
            kind=last.kind,
            provider=last.provider,
            status=last.status,
            retry_after=last.retry_after,
            aborts=False if degrades else None,
        )
        final.attempts = tuple(attempts)
        raise final

    def _ask(
        self,
        index: int,
        send: Callable[[], str],
        check: ReplyCheck | None,
        force: bool,
        attempts: list[SummaryAttempt],
    ) -> tuple[str | None, SummaryError | None]:
        """Up to ``max_attempts`` requests to ``providers[index]`` (each one ``send()``), each
        recorded in ``attempts``: ``(reply, None)``, or ``(None, the error that made it give
        up)`` (``None`` when the policy allows no request at all)."""
        provider = self.providers[index]
        policy = self.policy
        breaker = self._breakers[index]
        with self._lock:
            state = breaker.state(self.clock())
            cause = breaker.cause
        if state == "open" and not force:
            assert cause is not None
            detail = (
                f"circuit open after {cause.kind} failures; {breaker.open_until - self.clock():.0f}"
                f" s until the next trial request (last error: {cause})"
            )
            attempts.append(SummaryAttempt(provider.name, "skipped", cause.status, 0.0, detail))
            return None, SummaryError.of(
                cause.kind,
                provider.name,
                detail,
                status=cause.status,
                retry_after=cause.retry_after,
            )
        allowed = 1 if state == "half-open" and not force else policy.max_attempts
        error: SummaryError | None = None
        for number in range(allowed):
            pause = 0.0
            if number:
                assert error is not None
                wait = policy.pause_before(number, error.retry_after)
                if wait is None:
                    break  # the provider asked for a longer wait than the policy allows
                pause = wait
                if pause > 0:
                    self.sleep(pause)
            try:
                text = _checked(send, check, provider.name)
            except SummaryError as exc:
                error = exc
            else:
                with self._lock:
                    breaker.succeeded()
                    self._answered = provider
                attempts.append(SummaryAttempt(provider.name, "ok", None, pause))
                return text, None
            attempts.append(
                SummaryAttempt(provider.name, error.kind, error.status, pause, str(error))
            )
            with self._lock:
                opened = breaker.failed(error, self.clock(), policy)
            if opened or error.kind not in RETRYABLE_KINDS:
                break
        return None, error


def _checked(send: Callable[[], str], check: ReplyCheck | None, name: str) -> str:
    """One request (``send()``) to provider ``name``, its reply passed through ``check``.

    :raises SummaryError: whatever the provider or the check raised, classified (a host's
        provider may raise anything) and chained to the original exception.
    """
    try:
        text = send()
        return text if check is None else check(text, name)
    except Exception as exc:
        error = classify_error(exc, name)
        if error is exc:
            raise
        raise error from exc


def _request_sender(
    provider: SummaryProvider, request: Mapping[str, Any], max_tokens: int
) -> Callable[[], str]:
    """``send()`` for a whole request through ``provider.complete_request``.

    :raises TypeError: ``provider`` cannot send whole requests.
    """
    complete_request = getattr(provider, "complete_request", None)
    if not callable(complete_request):
        raise TypeError(f"summary provider {provider.name!r} cannot send whole requests")
    return lambda: str(complete_request(request, max_tokens))


def _service(provider: SummaryProvider) -> SummaryService:
    """``provider`` when it is a :class:`SummaryService` (what ``ctx.summarizer()`` returns in a
    kernel); any other provider (a context built by hand) behind a policy of one request per
    call, classified and checked the same way."""
    if isinstance(provider, SummaryService):
        return provider
    return SummaryService([provider], FailurePolicy(max_attempts=1))


def call_summary(
    provider: SummaryProvider,
    system: str,
    prompt: str,
    max_tokens: int,
    *,
    check: ReplyCheck | None = None,
    force: bool = False,
) -> SummaryReply:
    """One summary through the failure policy (:meth:`SummaryService.call`): what every engine
    calls.

    :raises SummaryError: classified, with ``attempts``.
    """
    return _service(provider).call(system, prompt, max_tokens, check=check, force=force)


def call_summary_request(
    provider: SummaryProvider,
    request: Mapping[str, Any],
    max_tokens: int,
    *,
    check: ReplyCheck | None = None,
    force: bool = False,
) -> SummaryReply:
    """A cache-aware summary through the failure policy (:meth:`SummaryService.call_request`):
    ``request`` (the agent's own, with the instruction appended after its last breakpoint) sent
    whole by ``provider.complete_request``.

    :raises SummaryError: classified, with ``attempts``.
    :raises TypeError: ``provider`` cannot send whole requests.
    """
    return _service(provider).call_request(request, max_tokens, check=check, force=force)
