"""The kernel: builds the plugin manager once and hands out one :class:`Session` per session id.

Typical agent loop::

    kernel = ctxengine.load()                 # reads config.yaml (or pass a Config / path)
    session = kernel.session("chat-42")
    if session.should_compress(messages, system):
        messages = session.compress(messages, system).messages
    request = session.prepare({"model": ..., "system": system, "messages": messages})
    response = client.messages.create(**request, max_tokens=1024)
    session.update_usage(response.usage)
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pluggy

from ctxengine import hookspecs
from ctxengine._accounting.models import ModelInfo, model_for_settings
from ctxengine._config.core import (
    Config,
    LoadedConfig,
    config_from_mapping,
    ctxengine_home,
    load_config,
)
from ctxengine._kernel.cache_settings import cache_settings_for, caching_status_line
from ctxengine._kernel.hooks import Hooks
from ctxengine._kernel.hygiene import HygieneReport, run_hygiene
from ctxengine._kernel.resolve import Catalog, PluginEntry, discover, install_hint
from ctxengine._kernel.session import Session
from ctxengine._messages.conversation import Message, SystemPrompt
from ctxengine._plugin.context import CacheSettings
from ctxengine._summarize import SummaryProvider, describe_provider, resolve_provider

log = logging.getLogger("ctxengine")

DEFAULT_ENGINE = "compressor"
MainSummarizer = Callable[[str, str, int], str]


class EngineNotFoundError(LookupError):
    """``context.engine`` names an engine that resolves nowhere (raised with ``strict: true``)."""


class EngineNotFoundWarning(UserWarning):
    """``context.engine`` names an engine that resolves nowhere; the built-in compressor is used."""


def _not_found_message(name: str, catalog: Catalog, entry: PluginEntry | None) -> str:
    if entry is not None and entry.error is not None:
        problem = (
            f"context engine {name!r} failed to load from {entry.source} {entry.location}: "
            f"{entry.error}"
        )
    elif entry is not None:
        problem = f"{name!r} is a plugin of kind {entry.kind!r}, not a context engine"
    else:
        problem = f"context engine {name!r} was not found"
    searched = "; ".join(catalog.searched)
    return f"{problem}. Searched: {searched}. To install it: {install_hint(name)}"


def build_plugin_manager(
    config: Config,
    catalog: Catalog,
    *,
    extra_plugins: Iterable[tuple[str, object]] = (),
    trace: bool = False,
) -> tuple[pluggy.PluginManager, PluginEntry, list[str]]:
    """Build the plugin manager: specs, the selected engine, cache strategy and extensions.

    Only the engine named by ``context.engine`` and the strategy named by
    ``prompt_caching.strategy`` are registered: installing a plugin never activates it.

    :returns: the manager, the engine entry actually used, and warnings for the user.
    :raises EngineNotFoundError: when the engine cannot be resolved and ``context.strict`` is set.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    notices: list[str] = []

    wanted = config.context.engine
    entry = catalog.winner(wanted)
    if entry is None or not entry.ok or entry.kind != "engine":
        message = _not_found_message(wanted, catalog, entry)
        if config.context.strict:
            raise EngineNotFoundError(message)
        fallback = catalog.winner(DEFAULT_ENGINE)
        if fallback is None or not fallback.ok or fallback.kind != "engine":
            raise EngineNotFoundError(
                f"{message}; the built-in {DEFAULT_ENGINE!r} engine is unavailable too"
                + (f" ({fallback.error})" if fallback is not None and fallback.error else "")
            )
        message += f". Using the built-in {DEFAULT_ENGINE!r} engine instead."
        warnings.warn(message, EngineNotFoundWarning, stacklevel=3)
        log.warning("%s", message)
        notices.append(message)
        entry = fallback
    pm.register(entry.plugin, name=entry.name)

    strategy = catalog.winner(config.prompt_caching.strategy)
    if config.prompt_caching.enabled is not False:
        if strategy is not None and strategy.ok and strategy.kind == "cache_strategy":
            pm.register(strategy.plugin, name=strategy.name)
        else:
            detail = strategy.error if strategy is not None and strategy.error else "not found"
            notices.append(
                f"cache strategy {config.prompt_caching.strategy!r} is unavailable ({detail}); "
                "requests are sent without cache markers"
            )

    for extension in catalog.active_of_kind("extension"):
        pm.register(extension.plugin, name=extension.name)
    for name, plugin in extra_plugins:
        pm.register(plugin, name=name)
    pm.check_pending()
    if trace:
        pm.trace.root.setwriter(lambda message: log.debug("hook: %s", message.rstrip()))
        pm.enable_tracing()
    return pm, entry, notices


class Kernel:
    """One loaded configuration with its plugins; hands out per-session :class:`Session` objects.

    Thread-safe: sessions are created once per id under a lock, and each session serialises its
    own calls. Build it with :func:`load`.
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        catalog: Catalog,
        *,
        main_summarizer: MainSummarizer | None = None,
        extra_plugins: Iterable[tuple[str, object]] = (),
        clock: Callable[[], float] = time.monotonic,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.catalog = catalog
        self.env: Mapping[str, str] = os.environ if env is None else env
        trace = self.env.get("CTXENGINE_TRACE", "") not in ("", "0")
        pm, engine_entry, notices = build_plugin_manager(
            self.config, catalog, extra_plugins=extra_plugins, trace=trace
        )
        self._pm = pm
        self.hooks = Hooks(pm)
        self.engine_entry = engine_entry
        self.notices = notices
        self.model: ModelInfo = model_for_settings(self.config)
        self.cache_settings: CacheSettings | None
        self.cache_settings, self.caching_reason = cache_settings_for(self.config, self.model)
        if not pm.has_plugin(self.config.prompt_caching.strategy):
            self.cache_settings = None
        self.main_summarizer = main_summarizer
        self.clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._provider: tuple[SummaryProvider | None] | None = None

    def use_summary_provider(self, provider: SummaryProvider | None) -> None:
        """Use ``provider`` for every summary instead of ``auxiliary.compression``.

        For hosts that bring their own client object and for tests with a scripted provider;
        ``None`` selects the ``extractive`` local digest.
        """
        with self._lock:
            self._provider = (provider,)

    def summary_provider(self) -> SummaryProvider | None:
        """The auxiliary summary provider, built on first use and shared by all sessions.

        ``None`` means the ``extractive`` provider (a local digest, no model call).
        """
        with self._lock:
            if self._provider is None:
                self._provider = (
                    resolve_provider(
                        self.config.auxiliary.compression,
                        main=self.main_summarizer,
                        env=self.env,
                        main_model=self.config.model.name,
                    ),
                )
            return self._provider[0]

    @property
    def engine(self) -> str:
        """The name of the engine in use (the built-in compressor after a fallback)."""
        return self.engine_entry.name

    def session(self, session_id: str) -> Session:
        """The session for ``session_id``, created (with fresh engine state) on first use."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                session = Session(self, session_id)
                self._sessions[session_id] = session
        return session

    def close_session(self, session_id: str) -> None:
        """End a session: plugins release its resources and its state is forgotten."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def close(self) -> None:
        """End every session."""
        with self._lock:
            ids = list(self._sessions)
        for session_id in ids:
            self.close_session(session_id)

    def hygiene(
        self,
        session_id: str,
        history: Sequence[Message],
        *,
        system: SystemPrompt | None = None,
        last_prompt_tokens: int | None = None,
    ) -> HygieneReport:
        """Gateway safety net: compact a stored session's history before the agent runs.

        Fires when the plugin deciding the ``"gateway"`` stage says so (built-in: 85 % of the
        window or the hard message limit, at least 4 messages, compression enabled), then
        compacts with the selected engine, forced past cooldowns. The history comes back
        unchanged unless the compaction really happened; if another worker is compacting the
        same session right now, this call returns the history unchanged and says so.

        :param last_prompt_tokens: the previous turn's real prompt tokens, when the gateway has
            them; otherwise the session's last usage, else a character-based estimate.
        """
        return run_hygiene(
            self.session(session_id),
            history,
            system=system,
            last_prompt_tokens=last_prompt_tokens,
        )

    async def ahygiene(
        self,
        session_id: str,
        history: Sequence[Message],
        *,
        system: SystemPrompt | None = None,
        last_prompt_tokens: int | None = None,
    ) -> HygieneReport:
        """:meth:`hygiene` in a worker thread, for async gateways."""
        return await asyncio.to_thread(
            self.hygiene,
            session_id,
            history,
            system=system,
            last_prompt_tokens=last_prompt_tokens,
        )

    def status_lines(self) -> list[str]:
        """Lines a host prints at start: engine, caching status, and any notices."""
        lines = [f"🧠 Context engine: {self.engine} ({self.engine_entry.source})"]
        lines.append(
            caching_status_line(self.config, self.model, self.cache_settings, self.caching_reason)
        )
        summaries = describe_provider(
            self.config.auxiliary.compression,
            self.env,
            main=self.main_summarizer,
            main_model=self.config.model.name,
        )
        lines.append(f"📝 Summaries: {summaries}")
        lines.extend(f"⚠️  {notice}" for notice in self.notices)
        return lines

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ConfigLike = Config | LoadedConfig | Mapping[str, Any] | str | os.PathLike[str] | None


def _as_loaded(config: ConfigLike, env: Mapping[str, str] | None) -> LoadedConfig:
    if isinstance(config, LoadedConfig):
        return config
    if isinstance(config, Config):
        return LoadedConfig(config=config, path=None, sources={})
    if isinstance(config, Mapping):
        return LoadedConfig(config=config_from_mapping(config), path=None, sources={})
    return load_config(config, env=env)


def load(
    config: ConfigLike = None,
    *,
    main_summarizer: MainSummarizer | None = None,
    plugins: Iterable[tuple[str, object]] = (),
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Kernel:
    """Load the configuration, discover plugins and build a :class:`Kernel`.

    :param config: a :class:`~ctxengine.config.Config`, a mapping shaped like ``config.yaml``, a
        path to a YAML file, or ``None`` to look it up (``$CTXENGINE_CONFIG``, then
        ``<home>/config.yaml``, else defaults).
    :param main_summarizer: the host's own model as a callable ``(system, prompt, max_tokens) ->
        text``, used by ``auxiliary.compression.provider: main``.
    :param plugins: extra ``(name, plugin)`` pairs registered as always-on extensions.
    :raises ctxengine.config.ConfigError: for an invalid configuration.
    :raises EngineNotFoundError: for an unknown engine with ``context.strict: true``.
    """
    loaded = _as_loaded(config, env)
    home: Path = ctxengine_home(env)
    catalog = discover(home, loaded.config.context.plugin_dirs)
    return Kernel(
        loaded,
        catalog,
        main_summarizer=main_summarizer,
        extra_plugins=plugins,
        clock=clock,
        env=env,
    )
