"""The per-session facade an agent loop talks to.

A :class:`Session` owns one :class:`~ctxengine.EngineContext` (so two sessions never share
counters or summaries) and serialises calls on it with a lock, so a host may call it from several
threads. On a shared coordination backend that lock is also the session's cross-process lock,
and the session's state is loaded and saved around each call
(:mod:`ctxengine._kernel.session_state`), so several processes may serve one session. Async
variants run the same code in a worker thread, since engines may block on I/O (summariser calls,
SQLite).

What a request costs: :meth:`Session.should_compress` checks the history against the session's
message memo once (one list comparison when the history is the one seen before, however it was
handed over) and sizes the prompt as the provider's last measured prompt tokens plus an estimate
of what was added since, or as a calibrated estimate; exact counts are made only when the estimate
lies within its error of a threshold an engine compares it with (:class:`~ctxengine.TokenEstimate`).
:meth:`Session.prepare` reuses that check for the same list (an edit made between the two calls is
not seen) and records the request for calibration without counting it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ctxengine._accounting.cache_stats import SessionCacheStats
from ctxengine._accounting.estimate import TextSize, TokenEstimate
from ctxengine._accounting.models import ModelInfo
from ctxengine._accounting.tokens import TokenCounter
from ctxengine._accounting.ttl import TTLPlanner
from ctxengine._accounting.usage import Usage, message_id, normalize_usage, usage_from_data
from ctxengine._config.core import Config
from ctxengine._kernel.cache_settings import RequestOptions, request_options
from ctxengine._kernel.coordination import Coordinator, NamedLock
from ctxengine._kernel.editing import wanted_edits
from ctxengine._kernel.hooks import Hooks
from ctxengine._kernel.hygiene import HygieneReport, run_hygiene
from ctxengine._kernel.session_state import KernelState, SharedSessionLock, local_time
from ctxengine._messages.conversation import Conversation, Format, Message, Stage, SystemPrompt
from ctxengine._messages.editing import (
    markers_kept_off_cleared,
    remembered_edit_blocks,
    request_edits,
    with_edits,
)
from ctxengine._messages.markers import detect_request_format, marker_positions
from ctxengine._messages.memo import MemoEntry, MessageView
from ctxengine._messages.read import detect_format
from ctxengine._messages.validate import ensure_well_formed
from ctxengine._plugin.context import CacheSettings, EngineContext, PreparedRequest, Route
from ctxengine._plugin.results import CompressResult, GatewayVerdict
from ctxengine._plugin.tools import RegisteredTool, ToolError, bounded_repr
from ctxengine._summarize import SummaryProvider

_T = TypeVar("_T")

TOOL_ERROR_CHARS = 2_000
"""An ``Error: ...`` answer of a tool is cut to this many characters."""


def _tool_error(text: str) -> str:
    """``Error: text``, bounded: a tool that quotes its whole argument back in an error must not
    put it into the agent's context."""
    if len(text) > TOOL_ERROR_CHARS:
        text = f"{text[: TOOL_ERROR_CHARS - 40]}… ({len(text):,} characters, cut)"
    return f"Error: {text}"


async def in_thread(function: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """``function(*args, **kwargs)`` in a worker thread: the async variants run the same code as
    the sync ones, since engines may block on I/O."""
    import asyncio  # only async hosts pay for it

    return await asyncio.to_thread(function, *args, **kwargs)


@attrs.frozen
class Services:
    """What a :class:`Session` uses from its kernel (and nothing else of it).

    :ivar cache_settings: how to mark requests, or ``None`` when caching is off.
    :ivar summary_provider: returns the shared summary provider, built on first use.
    :ivar coordinator: the coordination backend (``coordination.backend``).
    :ivar wall_clock: a clock every process agrees on, to carry saved deadlines between them.
    :ivar fallback_engine: the engine's fallback loaded beside it, if any.
    :ivar route: where the main model's requests go.
    """

    hooks: Hooks
    config: Config
    model: ModelInfo
    cache_settings: CacheSettings | None
    engine: str
    summary_provider: Callable[[], SummaryProvider | None]
    clock: Callable[[], float]
    env: Mapping[str, str]
    data_dir: Path
    coordinator: Coordinator
    wall_clock: Callable[[], float]
    fallback_engine: str | None = None
    route: Route | None = None


@attrs.frozen
class _Request:
    """A request the session prepared: its message contents, their rough size (so the next
    request that extends it is sized from the new messages only) and its local token count (an
    estimate, exact on demand) to calibrate against the provider's count."""

    entries: list[MemoEntry]
    size: TextSize
    local: TokenEstimate


def _digest(entries: Sequence[MemoEntry]) -> str:
    """A digest of message contents, the same in every process for equal JSON data."""
    text = json.dumps(
        [entry.snapshot for entry in entries],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=repr,
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Session:
    """One conversation's view of the kernel. Create it with :meth:`Kernel.session`."""

    def __init__(self, services: Services, session_id: str) -> None:
        self.id = session_id
        self._services = services
        self._hooks = services.hooks
        coordinator = services.coordinator
        self.gateway_lock: NamedLock = coordinator.lock(f"gateway:{session_id}")
        """Held while the gateway safety net works on this session (see :meth:`hygiene`), in
        every process that shares the coordination backend."""
        self.ctx = EngineContext(
            session_id=session_id,
            engine=services.engine,
            config=services.config,
            model=services.model,
            tokens=TokenCounter(),
            summarizer=services.summary_provider,
            clock=services.clock,
            env=services.env,
            data_dir=services.data_dir,
            route=services.route,
            fallback_engine=services.fallback_engine,
            fallback=self._fallback_compress,
        )
        self.cache_stats = SessionCacheStats()
        # True from a compaction until the next provider usage: the last real prompt size then
        # describes a conversation that no longer exists, so estimates are used instead.
        self._usage_stale = True
        # The last prepared request (until its usage arrives) and the one the last usage measured.
        self._prepared: _Request | None = None
        self._measured: _Request | None = None
        # On a shared coordination backend: the request another worker's usage measured, as
        # (message count, digest), until a history here is found to extend it.
        self._foreign_measured: tuple[int, str] | None = None
        self._measured_digest: tuple[_Request, str] | None = None
        self._tools: dict[str, RegisteredTool] | None = None
        self._closed = False
        self._ttl = TTLPlanner()
        # When the planner last measured a request, on the wall clock (for another worker).
        self._ttl_wall: float | None = None
        self._options: RequestOptions = request_options(services.config, session_id)
        # The id of the last Anthropic response, for the diagnostics of the next request.
        self._last_message_id: str | None = None
        self._lock: threading.RLock | SharedSessionLock = threading.RLock()
        if coordinator.shared:
            self._lock = SharedSessionLock(
                self.ctx,
                coordinator,
                timeout=services.config.coordination.lock_timeout_s,
                export_kernel=self._export_state,
                import_kernel=self._import_state,
                wall_clock=services.wall_clock,
            )
        # Not under the lock: creating a session must not wait for another worker's call (a
        # state created here is replaced by a newer saved one at the first call).
        self._hooks.session_start(self.ctx)

    @property
    def call_lock(self) -> threading.RLock | SharedSessionLock:
        """The lock every call of this session takes (re-entrant); hold it to make several
        calls one (on a shared coordination backend: one cross-process lock and one load and
        save of the session's state)."""
        return self._lock

    def _export_state(self) -> KernelState:
        """The kernel's own session state, for the coordination backend (JSON data).

        The measured request travels as its message count and a digest of their contents (the
        worker that gets the next turn compares its history with it, see :meth:`prompt`). A
        prepared request whose usage has not arrived stays here: its usage is expected in this
        worker, in the same turn.
        """
        usage = self.ctx.last_usage
        ttl = attrs.asdict(self._ttl)
        ttl["last_time"] = self._ttl_wall if self._ttl.last_time is not None else None
        return {
            "calibration": self.ctx.tokens.calibration(),
            "last_usage": None if usage is None else attrs.asdict(usage),
            "usage_stale": self._usage_stale,
            "measured": self._measured_key(),
            "cache_stats": self.cache_stats.dump(),
            "ttl": ttl,
            "last_message_id": self._last_message_id,
        }

    def _import_state(self, state: KernelState) -> None:
        """Take over what :meth:`_export_state` gave in another process.

        :raises TypeError, ValueError, KeyError: ``state`` is not what it writes.
        """
        self.ctx.tokens.restore_calibration(state["calibration"])
        usage = state["last_usage"]
        self.ctx.last_usage = None if usage is None else usage_from_data(usage)
        self._usage_stale = bool(state["usage_stale"])
        measured = state["measured"]
        if measured != self._measured_key():
            foreign = None if measured is None else (int(measured[0]), str(measured[1]))
            self._measured, self._prepared, self._foreign_measured = None, None, foreign
        self.cache_stats = SessionCacheStats.restore(state["cache_stats"])
        ttl = dict(state["ttl"])
        wall = ttl["last_time"]  # the wall-clock time of the planner's last request
        if wall is not None:
            ttl["last_time"] = local_time(wall, self.ctx.clock(), self._services.wall_clock())
        self._ttl, self._ttl_wall = TTLPlanner(**ttl), wall
        last_id = state["last_message_id"]
        self._last_message_id = None if last_id is None else str(last_id)

    def _forget_requests(self) -> None:
        """Forget the prepared and the measured request: the conversation they describe no
        longer exists (a compaction, a reset), so prompt sizes are estimated until the next
        usage."""
        self._usage_stale = True
        self._measured = self._prepared = None
        self._foreign_measured = None

    def _measured_key(self) -> list[Any] | None:
        """``[message count, digest]`` of the request the last usage measured (``None``: none)."""
        if self._measured is None:
            return None if self._foreign_measured is None else [*self._foreign_measured]
        entries = self._measured.entries
        cached = self._measured_digest
        if cached is None or cached[0] is not self._measured:
            cached = self._measured_digest = (self._measured, _digest(entries))
        return [len(entries), cached[1]]

    def _adopt_measured(self, view: MessageView) -> _Request | None:
        """The measured request another worker saw, when ``view`` begins with its messages (it
        becomes this worker's own); ``None`` when it does not."""
        assert self._foreign_measured is not None
        count, digest = self._foreign_measured
        if len(view.entries) < count or _digest(view.entries[:count]) != digest:
            return None
        tokens = self.ctx.tokens
        entries = view.entries[:count]
        size = tokens.size_of(entries)
        self._measured = _Request(entries, size, tokens.tally(entries, size=size))
        self._foreign_measured = None
        return self._measured

    # -- token accounting -------------------------------------------------------------------

    def update_usage(self, usage: object) -> Usage:
        """Record the provider's usage for the last response (any supported shape).

        Remembers the provider's prompt tokens as the measured size of the request last
        prepared with :meth:`prepare`, calibrates local estimates against it (the local count of
        that request is made exact only if the exact ratio is ever needed), updates cache
        statistics and tells the plugins. Pass the whole response (not just its ``usage``) to
        keep Anthropic's cache-miss reason and to let the next request ask for it
        (``prompt_caching.diagnostics``). What the server's context editing cleared counts as
        sent (it was); a response whose server compacted the context is not used for calibration
        (the model read a different prompt).

        :raises ValueError: when ``usage`` has no recognisable shape.
        """
        normalized = normalize_usage(usage)
        with self._lock:
            self._last_message_id = message_id(usage) or self._last_message_id
            prepared = self._prepared
            sent = normalized.prompt_tokens + normalized.cleared_input_tokens
            if prepared is not None and sent > 0 and not normalized.compacted:
                self.ctx.tokens.observe_estimate(prepared.local, sent)
            self._measured, self._prepared = prepared, None
            self._foreign_measured = None
            self.ctx.tokens.memo.release()
            self.ctx.last_usage = normalized
            self._usage_stale = False
            self.cache_stats.add(normalized, self.ctx.model)
            self._hooks.update_usage(self.ctx, normalized)
        return normalized

    def prompt(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TokenEstimate:
        """The size of the prompt ``messages`` make, in the provider's tokens, as decisions use it.

        - Measured: when the provider reported usage after the last compaction, its prompt tokens,
          plus the calibrated local tokens of the messages added since, when ``messages`` extends
          the request that usage measured (compared by content; on a shared coordination
          backend also when another worker's usage measured it); the usage alone when no request
          was prepared in this session before it (a host that restores a session).
        - Otherwise the calibrated local count of ``messages``, ``system`` and ``tools``.

        Either is an estimate whose exact value is counted only where a comparison needs it
        (:meth:`~ctxengine.TokenEstimate.reaches`).

        :raises ValueError: a message is not a dict (the message names its index).
        """
        tokens = self.ctx.tokens
        with self._lock:
            usage = self.ctx.last_usage
            measured_tokens = usage.prompt_tokens if usage is not None else 0
            measured = self._measured
            fresh = measured_tokens > 0 and not self._usage_stale
            if fresh and measured is None and self._foreign_measured is None:
                return TokenEstimate.known(measured_tokens, measured=True)
            view = tokens.memo.resolve(messages)
            if fresh and measured is None:
                measured = self._adopt_measured(view)
            if fresh and measured is not None:
                known = len(measured.entries)
                if view.starts_with(measured.entries):
                    if len(view.entries) == known:
                        return TokenEstimate.known(measured_tokens, measured=True)
                    added = tokens.tally(view.entries[known:])
                    return tokens.scaled(added, plus=measured_tokens, measured=True)
            return tokens.scaled(tokens.tally(view.entries, system=system, tools=tools))

    def prompt_tokens(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[int, bool]:
        """The point estimate of :meth:`prompt` and whether it rests on the provider's count."""
        estimate = self.prompt(messages, system, tools)
        return estimate.value, estimate.measured

    def prompt_tokens_if_measured(self) -> tuple[int, bool]:
        """The provider's prompt tokens of the last response, if known and current."""
        with self._lock:
            usage = self.ctx.last_usage
            if usage is not None and not self._usage_stale and usage.prompt_tokens > 0:
                return usage.prompt_tokens, True
            return 0, False

    # -- compaction -------------------------------------------------------------------------

    def should_compress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        stage: Stage = "agent",
        force: bool = False,
        prompt_tokens: int | None = None,
        measured: bool = True,
        prompt: TokenEstimate | None = None,
    ) -> bool:
        """Ask the engine whether this conversation should be compacted now.

        The engine gets the prompt size of :meth:`prompt` as a :class:`~ctxengine.TokenEstimate`;
        an answer is the one exact counts would give.

        :param prompt_tokens: a prompt size the caller knows (e.g. a gateway's last turn).
        :param measured: whether ``prompt_tokens`` came from the provider (ignored without it).
        :param prompt: the prompt size as :meth:`prompt` returned it, when the caller has it.
        :raises ValueError: a message is not a dict (the message names its index).
        """
        if not self._services.config.context.compaction:
            return False
        with self._lock:
            if prompt_tokens is not None:
                prompt = TokenEstimate.known(prompt_tokens, measured=measured)
            elif prompt is None:
                prompt = self.prompt(messages, system)
            return self._hooks.should_compress(self.ctx, prompt, stage, force, len(messages))

    def gateway_verdict(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        prompt: TokenEstimate | None = None,
    ) -> GatewayVerdict:
        """The gateway stage's decision with its reason and message budget (``False`` while
        compression is disabled).

        :param prompt: the prompt size as :meth:`prompt` returned it (or a measured one), when
            the caller has it.
        """
        if not self._services.config.context.compaction:
            return GatewayVerdict(False, "compression is disabled (context.compaction: false)")
        with self._lock:
            if prompt is None:
                prompt = self.prompt(messages, system)
            return self._hooks.verdict(self.ctx, prompt, "gateway", True, len(messages))

    def compress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        force: bool = False,
        focus: str | None = None,
        stage: Stage = "agent",
        format: Format | None = None,
        message_budget: int | None = None,
    ) -> CompressResult:
        """Compact the conversation with the selected engine.

        The caller's list is never mutated. Whatever the engine does, the result holds a valid
        conversation: the compacted one, or the input unchanged with status ``noop``/``aborted``
        and a reason.

        :param force: ignore the engine's cooldowns and thresholds; at the agent stage also send
            summary requests through an open circuit breaker.
        :param message_budget: the most messages the result may hold (engines that support it
            compact further; see the ``compress`` hookspec).
        :raises ctxengine.MessageFormatError: for a malformed message list (wrong
            types, missing or unknown fields), naming each message index and field; order and
            tool pairing are the engine's to repair.
        """
        fmt = format or detect_format(messages, system)
        ensure_well_formed(messages, fmt, system=system)
        conversation = Conversation(messages=list(messages), format=fmt, system=system)
        with self._lock:
            result = self._hooks.compress(
                self.ctx,
                conversation,
                stage,
                force,
                focus,
                self._estimate(conversation),
                message_budget,
            )
            if result.compacted:
                self._forget_requests()
                # What the compaction replaced need not stay alive in the memo.
                self.ctx.tokens.retain(result.messages)
            return result

    def _estimate(self, conversation: Conversation) -> Callable[[], int]:
        """The estimated size of ``conversation``, made only when called (the record of an
        engine that failed needs it; call it with the session lock held)."""
        tokens = self.ctx.tokens

        def estimate() -> int:
            entries = tokens.memo.view_of(conversation.messages).entries
            return tokens.tally(entries, system=conversation.system).value

        return estimate

    def _fallback_compress(
        self,
        conversation: Conversation,
        stage: Stage,
        force: bool,
        focus: str | None,
        message_budget: int | None = None,
    ) -> CompressResult | None:
        """The kernel's side of :meth:`EngineContext.fallback_compress` (called from inside the
        engine's ``compress``, so the session lock is already held)."""
        return self._hooks.fallback_compress(
            self.ctx,
            conversation,
            stage,
            force,
            focus,
            self._estimate(conversation),
            message_budget,
        )

    def maybe_compress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        focus: str | None = None,
    ) -> CompressResult | None:
        """:meth:`compress` when :meth:`should_compress` says so, else ``None``."""
        with self._lock:
            if not self.should_compress(messages, system):
                return None
            return self.compress(messages, system, focus=focus)

    # -- requests ---------------------------------------------------------------------------

    def prepare(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The request to send, marked by the cache strategy when caching is on.

        ``request`` holds the API call's keyword arguments (``messages`` and, for Anthropic,
        ``system``/``tools``). It is not mutated; only the messages that get markers are copied.
        The request is remembered (its messages' contents, not their count) so that the
        provider's usage in :meth:`update_usage` measures it, and the prepared request is kept
        as ``ctx.last_request`` for engines (see :class:`~ctxengine.PreparedRequest`).

        With ``prompt_caching.cache_ttl: auto`` the strategy gets this request's TTLs, chosen from
        the session's measured gaps (``docs/builtins/caching.md``). OpenAI-format requests get the
        session's ``prompt_cache_key`` (and retention) and Anthropic-format ones the cache-miss
        ``diagnostics`` when the configuration asks for them; a value the host set is kept.
        Anthropic requests also get the server-side context edits the ``context_editing``
        settings ask for and the declaration of a compaction block they open with (see
        :mod:`ctxengine._kernel.editing`), and no breakpoint stays on a block those edits, or
        edits the host wrote itself, may clear (each message's clearable blocks are kept with
        its memo entry, so only new and marked messages are read).

        :raises ValueError: a message is not a dict (the message names its index).
        """
        prepared = dict(request)
        with self._lock:
            memo = self.ctx.tokens.memo
            messages = prepared.get("messages")
            tokens = 0
            view = None
            if isinstance(messages, list):
                view = memo.view_of(messages)
                self._prepared = self._request(view, prepared.get("system"), prepared.get("tools"))
                # An estimate is enough to price a TTL and to describe the request for engines.
                tokens = self._prepared.local.value
            now = self.ctx.clock()
            edits = wanted_edits(
                prepared,
                self._services.config.context_editing,
                route=self.ctx.route,
                window=self.ctx.window,
                context_length=self.ctx.model.context_length,
            )
            if edits:
                prepared = with_edits(prepared, edits)
            settings = self._services.cache_settings
            breakpoints = 0
            if settings is not None:
                if settings.policy == "auto":
                    choice = self._ttl.choose(now, tokens)
                    self._ttl_wall = self._services.wall_clock()
                    settings = attrs.evolve(settings, ttl=choice.ttl, stable_ttl=choice.stable_ttl)
                marked = self._hooks.cache_strategy(self.ctx, prepared, settings)
                prepared, breakpoints = marked.request, marked.breakpoints
            if edits or request_edits(prepared):  # the host's own edits clear blocks too
                sent = prepared.get("messages")
                prepared = markers_kept_off_cleared(
                    prepared,
                    remembered_edit_blocks(view, sent)
                    if view is not None and isinstance(sent, list)
                    else None,
                )
                if breakpoints and prepared.get("messages") is not sent:
                    # Markers moved off cleared blocks, one dropped where no earlier block could
                    # carry it: the strategy's count no longer describes the request.
                    breakpoints = len(marker_positions(prepared))
            if isinstance(messages, list):
                fmt = detect_request_format(prepared)
                self._add_options(prepared, fmt, marked=settings is not None)
                sent = prepared.get("messages")
                snapshot = list(sent) if isinstance(sent, list) else list(messages)
                self.ctx.last_request = PreparedRequest(
                    request={**prepared, "messages": snapshot},
                    messages=tuple(messages),
                    format=fmt,
                    tokens=tokens,
                    sent_at=now,
                    breakpoints=breakpoints,
                )
            memo.release()
        return prepared

    def _add_options(self, prepared: dict[str, Any], fmt: Format, *, marked: bool) -> None:
        options = self._options
        if fmt == "openai" and options.cache_key is not None:
            prepared.setdefault("prompt_cache_key", options.cache_key)
            if options.retention is not None:
                prepared.setdefault("prompt_cache_retention", options.retention)
        elif fmt == "anthropic" and options.diagnostics and marked:
            prepared.setdefault("diagnostics", {"previous_message_id": self._last_message_id})

    def _request(self, view: MessageView, system: Any, tools: Any) -> _Request:
        """The record of a prepared request, sized from what is new since the last one."""
        tokens = self.ctx.tokens
        entries = view.entries
        base = self._prepared or self._measured
        if base is not None and view.starts_with(base.entries):
            size = tokens.size_of(entries[len(base.entries) :], base.size)
        else:
            size = tokens.size_of(entries)
        system = system if isinstance(system, (str, list)) else None
        tools = tools if isinstance(tools, list) else None
        local = tokens.tally(entries, system=system, tools=tools, size=size)
        return _Request(entries, size, local)

    # -- tools ------------------------------------------------------------------------------

    def _registered_tools(self) -> dict[str, RegisteredTool]:
        if self._tools is None:
            registry = self._hooks.expose_tools(self.ctx)
            self._tools = {entry.tool.name: entry for entry in registry}
        return self._tools

    def tools(self) -> list[RegisteredTool]:
        """The tools the engine offers the agent, each with the plugin that provides it."""
        with self._lock:
            return list(self._registered_tools().values())

    def tool_schemas(self, format: Format = "anthropic") -> list[dict[str, Any]]:
        """The tools in the shape the provider's ``tools`` parameter takes."""
        return [
            entry.tool.anthropic_schema() if format == "anthropic" else entry.tool.openai_schema()
            for entry in self.tools()
        ]

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run an engine tool and return its result as text for a tool-result message.

        A tool's own refusal (:class:`~ctxengine.ToolError`) and bad arguments come back as
        an ``Error: ...`` text the agent can read (at most :data:`TOOL_ERROR_CHARS`); a crashing
        tool is reported the same way, so a broken plugin never takes the agent loop down.

        :raises KeyError: when no tool of that name is offered.
        """
        with self._lock:
            entry = self._registered_tools().get(name)
            if entry is None:
                offered = ", ".join(sorted(self._registered_tools())) or "none"
                raise KeyError(f"no tool named {bounded_repr(name)}; tools offered: {offered}")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except json.JSONDecodeError as exc:
                    return _tool_error(f"the arguments are not valid JSON ({exc})")
            if not isinstance(arguments, Mapping):
                return _tool_error("the arguments must be a JSON object")
            try:
                result = entry.tool.handler(arguments)
            except ToolError as exc:
                return _tool_error(str(exc))
            except Exception as exc:
                self.ctx.log.exception("tool %r from plugin %r crashed", name, entry.provider)
                return _tool_error(f"tool {name!r} failed: {type(exc).__name__}: {exc}")
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)

    # -- gateway ----------------------------------------------------------------------------

    def hygiene(
        self,
        history: Sequence[Message],
        *,
        system: SystemPrompt | None = None,
        last_prompt_tokens: int | None = None,
    ) -> HygieneReport:
        """Gateway safety net: compact a stored history before the agent runs.

        Fires when the plugin deciding the ``"gateway"`` stage says so (built-in: 85 % of the
        window or the hard message limit, at least 4 messages, compression enabled), then
        compacts with the selected engine, forced past cooldowns. The history comes back
        unchanged unless the compaction really happened; if another worker is compacting this
        session right now, the history comes back unchanged and the notice says so.

        :param last_prompt_tokens: the previous turn's real prompt tokens, when the gateway has
            them; otherwise the session's last usage, else a character-based estimate.
        """
        return run_hygiene(self, history, system=system, last_prompt_tokens=last_prompt_tokens)

    # -- lifecycle --------------------------------------------------------------------------

    def reset(self) -> None:
        """Start the conversation over: plugins drop their per-session state."""
        with self._lock:
            self._hooks.session_reset(self.ctx)
            self.ctx.state.clear()
            self.ctx.last_usage = None
            self.ctx.last_request = None
            self._ttl = TTLPlanner()
            self._ttl_wall = None
            self._last_message_id = None
            self._forget_requests()
            self._tools = None
            self.cache_stats = SessionCacheStats()

    def close(self) -> None:
        """End the session (idempotent); plugins release files and connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._hooks.session_end(self.ctx)

    # -- async variants ---------------------------------------------------------------------

    async def acompress(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        *,
        force: bool = False,
        focus: str | None = None,
        stage: Stage = "agent",
    ) -> CompressResult:
        """:meth:`compress` in a worker thread, for async hosts."""
        return await in_thread(
            self.compress, messages, system, force=force, focus=focus, stage=stage
        )

    async def amaybe_compress(
        self, messages: Sequence[Message], system: SystemPrompt | None = None
    ) -> CompressResult | None:
        """:meth:`maybe_compress` in a worker thread, for async hosts."""
        return await in_thread(self.maybe_compress, messages, system)

    async def acall_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """:meth:`call_tool` in a worker thread (tools may query a store or a model)."""
        return await in_thread(self.call_tool, name, arguments)
