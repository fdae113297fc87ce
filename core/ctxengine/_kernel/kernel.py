"""The kernel: builds the plugin manager once and hands out one :class:`Session` per session id.

Typical agent loop::

    kernel = ctxengine.load()                 # reads config.yaml (or pass a mapping / path)
    session = kernel.session("chat-42")
    if session.should_compress(messages, system):
        messages = session.compress(messages, system).messages
    request = session.prepare({"model": ..., "system": system, "messages": messages})
    response = client.messages.create(**request, max_tokens=1024)
    session.update_usage(response.usage)

:func:`load` reads the configuration, imports only the selected plugins (the engine named by
``context.engine``, the strategy named by ``prompt_caching.strategy``, the always-on extensions
and those ``context.extensions`` names), asks them to declare their settings and validates
everything at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pluggy

from ctxengine import hookspecs
from ctxengine._accounting.models import ModelInfo, model_for_settings
from ctxengine._config.core import (
    Config,
    LoadedConfig,
    config_from_mapping,
    ctxengine_home,
    load_config,
    resolve_loaded,
)
from ctxengine._config.fields import ConfigError, ConfigProblem
from ctxengine._config.resolve import RawConfig
from ctxengine._config.spec import SettingsRegistry
from ctxengine._kernel.cache_settings import (
    cache_settings_for,
    caching_status_line,
    detect_route,
    validation_profile,
)
from ctxengine._kernel.coordination import Coordinator, ProcessCoordinator
from ctxengine._kernel.coordination_setup import open_coordinator, select_provider
from ctxengine._kernel.hooks import Hooks, guarded
from ctxengine._kernel.hygiene import HygieneReport
from ctxengine._kernel.resolve import (
    DEFAULT_ENGINE,
    Catalog,
    Kind,
    PluginEntry,
    builtin_entry,
    discover,
    install_hint,
)
from ctxengine._kernel.session import Services, Session, in_thread
from ctxengine._kernel.trace import enable_tracing
from ctxengine._messages.conversation import Message, SystemPrompt
from ctxengine._messages.validate import Profile
from ctxengine._plugin.context import usable_window
from ctxengine._summarize import SummaryProvider, describe_provider
from ctxengine._summarize.policy import SummaryService
from ctxengine._summarize.selection import (
    CONFIGURED,
    HostModel,
    describe_failure_policy,
    resolve_service,
)

log = logging.getLogger("ctxengine")

MainSummarizer = Callable[[str, str, int], str]
MainRequest = Callable[[dict[str, Any], int], str]


class EngineNotFoundError(LookupError):
    """``context.engine`` names an engine that resolves nowhere (raised with ``strict: true``)."""


class EngineNotFoundWarning(UserWarning):
    """``context.engine`` names an engine that resolves nowhere; the built-in compressor is used."""


def not_found_message(name: str, kind: Kind, catalog: Catalog, tried: Sequence[PluginEntry]) -> str:
    """Why ``name`` did not resolve as a ``kind``: a load error, another kind, or nowhere."""
    what = {"engine": "context engine", "cache_strategy": "cache strategy"}.get(kind, kind)
    failed = next((e for e in tried if e.error is not None), None)
    other = next((c for c in catalog.named(name) if c.kind not in (None, kind)), None)
    if failed is not None:
        problem = (
            f"{what} {name!r} failed to load from {failed.source} {failed.location}: {failed.error}"
        )
    elif tried:
        problem = f"{name!r} is a plugin of kind {tried[0].kind!r}, not a {what}"
    elif other is not None:
        problem = f"{name!r} is a plugin of kind {other.kind!r}, not a {what}"
    else:
        problem = f"{what} {name!r} was not found"
    searched = "; ".join(catalog.searched)
    return f"{problem}. Searched: {searched}. To install it: {install_hint(name)}"


@attrs.frozen
class Selection:
    """The plugins one kernel registers, and what the user should hear about the choice.

    :ivar fallback: the engine the selected engine names as its fallback (``CTXENGINE_FALLBACK``),
        loaded beside it; ``None`` when it names none or the fallback cannot be loaded.
    """

    engine: PluginEntry
    strategy: PluginEntry | None
    extensions: tuple[PluginEntry, ...]
    notices: tuple[str, ...]
    fallback: PluginEntry | None = None


FALLBACK_ATTRIBUTE = "CTXENGINE_FALLBACK"
"""The module attribute by which an engine names the engine it falls back to."""


def select_fallback(engine: PluginEntry, catalog: Catalog) -> tuple[PluginEntry | None, str | None]:
    """The fallback engine ``engine`` names, imported, or ``None`` with a notice saying why."""
    wanted = getattr(engine.plugin, FALLBACK_ATTRIBUTE, None)
    if wanted is None or wanted == engine.name:
        return None, None
    if not isinstance(wanted, str):
        return None, (
            f"engine {engine.name!r} names {wanted!r} as {FALLBACK_ATTRIBUTE}, not an engine "
            "name; it runs without a fallback"
        )
    fallback, tried = catalog.resolve(wanted, "engine")
    if fallback is None:
        detail = not_found_message(wanted, "engine", catalog, tried)
        return None, f"the fallback of engine {engine.name!r}: {detail}; it runs without one"
    return fallback, None


def select_plugins(config: Config, catalog: Catalog) -> Selection:
    """Import the selected engine, cache strategy and extensions, and the plugin of a
    ``coordination.backend`` other than ``process`` (nothing else).

    :raises EngineNotFoundError: when the engine cannot be resolved and ``context.strict`` is set.
    :raises ConfigError: no plugin provides ``coordination.backend``.
    """
    notices: list[str] = []
    wanted = config.context.engine
    engine, tried = catalog.resolve(wanted, "engine")
    if engine is None:
        message = not_found_message(wanted, "engine", catalog, tried)
        if config.context.strict:
            raise EngineNotFoundError(
                f"{message} (context.strict is true, so there is no fallback to the built-in "
                f"{DEFAULT_ENGINE!r})"
            )
        fallback = builtin_entry(DEFAULT_ENGINE)
        if not fallback.ok:
            raise EngineNotFoundError(
                f"{message}; the built-in {DEFAULT_ENGINE!r} engine is unavailable too "
                f"({fallback.error})"
            )
        message += f". Using the built-in {DEFAULT_ENGINE!r} engine instead."
        warnings.warn(message, EngineNotFoundWarning, stacklevel=4)
        log.warning("%s", message)
        notices.append(message)
        engine = fallback
    backup, notice = select_fallback(engine, catalog)
    if notice is not None:
        notices.append(notice)

    strategy: PluginEntry | None = None
    if config.prompt_caching.enabled is not False:
        name = config.prompt_caching.strategy
        strategy, tried = catalog.resolve(name, "cache_strategy")
        if strategy is None:
            detail = not_found_message(name, "cache_strategy", catalog, tried)
            notices.append(f"{detail}; requests are sent without cache markers")

    extensions: list[PluginEntry] = []
    names = [c.name for c in catalog.always_on()]
    names += [n for n in config.context.extensions if n not in names]
    for name in names:
        extension, tried = catalog.resolve(name, "extension")
        if extension is None:
            notices.append(not_found_message(name, "extension", catalog, tried))
        elif extension.name not in {
            engine.name,
            strategy.name if strategy else None,
            backup.name if backup else None,
        }:
            extensions.append(extension)
    provider = select_provider(config.coordination.backend, catalog)
    if provider is not None and provider.name not in {e.name for e in extensions}:
        extensions.append(provider)
    return Selection(engine, strategy, tuple(extensions), tuple(notices), backup)


def build_plugin_manager(
    selection: Selection, *, extra_plugins: Iterable[tuple[str, object]] = (), trace: bool = False
) -> pluggy.PluginManager:
    """The plugin manager: the hookspecs, then the selected plugins, each registered guarded."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    chosen = [selection.engine, *([selection.fallback] if selection.fallback else [])]
    chosen += [selection.strategy] if selection.strategy else []
    for entry in [*chosen, *selection.extensions]:
        pm.register(guarded(pm, entry.plugin, entry.name), name=entry.name)
    for name, plugin in extra_plugins:
        pm.register(guarded(pm, plugin, name), name=name)
    pm.check_pending()
    if trace:
        enable_tracing(pm, logging.getLogger("ctxengine.trace"))
    return pm


def _engine_trigger(registry: SettingsRegistry, engine: str) -> str | None:
    for owned in registry.specs:
        if owned.owner == engine and owned.spec.trigger is not None:
            return owned.spec.key(owned.spec.trigger)
    return None


def _with_kernel_overrides(
    loaded: LoadedConfig,
    registry: SettingsRegistry,
    engine: str,
    trigger_key: str | None,
    trigger: float | None,
    sandbox: object | None,
) -> RawConfig:
    """The raw configuration with what ``load(trigger=..., sandbox=...)`` asks for on top."""
    raw = loaded.config.raw
    overrides = dict(raw.overrides)
    if sandbox is not None:
        # Every declared storage location goes back to its default, which is under data_dir.
        overrides.update(
            {key: None for owned in registry.specs for key in owned.spec.storage_keys()}
        )
    if trigger is not None:
        if trigger_key is None:
            rule = (
                f"cannot be applied: engine {engine!r} declares no trigger setting "
                "(SettingsSpec.trigger); set one of its own keys instead"
            )
            raise ConfigError([ConfigProblem("trigger", trigger, rule, "override")])
        overrides[trigger_key] = trigger
    return attrs.evolve(raw, overrides=overrides) if overrides != dict(raw.overrides) else raw


class Kernel:
    """One loaded configuration with its plugins; hands out per-session :class:`Session` objects.

    Thread-safe: sessions are created once per id under a lock, and each session serialises its
    own calls. Build it with :func:`load`.

    :ivar trigger_key: the key path of the selected engine's compaction trigger
        (``engines.compressor.threshold`` for the compressor, ``engines.lcm.threshold`` for lcm), or
        ``None`` when the engine declares none.
    :ivar data_dir: where plugins keep persistent data (``ctx.data_dir``).
    :raises ConfigError: when a selected plugin's settings are invalid.
    :raises EngineNotFoundError: for an unknown engine with ``context.strict: true``.
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        catalog: Catalog,
        *,
        main_summarizer: MainSummarizer | None = None,
        extra_plugins: Iterable[tuple[str, object]] = (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        env: Mapping[str, str] | None = None,
        trigger: float | None = None,
        sandbox: str | os.PathLike[str] | None = None,
        main_request: MainRequest | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self.catalog = catalog
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.data_dir = Path(sandbox) if sandbox is not None else ctxengine_home(self.env)
        trace = self.env.get("CTXENGINE_TRACE", "") not in ("", "0")
        self.selection = select_plugins(loaded.config, catalog)
        pm = build_plugin_manager(self.selection, extra_plugins=extra_plugins, trace=trace)
        fallback = self.selection.fallback
        self.hooks = Hooks(
            pm,
            engine=self.selection.engine.name,
            fallback=fallback.name if fallback else None,
        )
        self.engine_entry = self.selection.engine
        self.notices = list(self.selection.notices)
        self._resolve_config(loaded, trigger, sandbox)
        self.model: ModelInfo = self._model()
        cache_settings, self.caching_reason = cache_settings_for(self.config, self.model)
        self.cache_settings = cache_settings if self.selection.strategy is not None else None
        route = detect_route(self.config.model.name, self.config.model.base_url)
        self.validation_profile: Profile = validation_profile(route, self.config.model.base_url)
        """The :func:`ctxengine.messages.validate` profile of the configured route."""
        self.main_summarizer = main_summarizer
        self.main_request = main_request
        self.clock = clock
        self.sleep = sleep
        # Deadlines saved by one worker are read by another: with the default monotonic clock
        # the elapsed time between them is measured on the wall clock; a clock given by the
        # caller (a test's) is taken as shared by every worker unless a wall clock is given.
        if wall_clock is None:
            wall_clock = time.time if clock is time.monotonic else clock
        # A simulation is one process: it must neither take a fleet's locks nor write the
        # state of the fleet's sessions (as it writes none of the plugins' stores).
        self.coordinator: Coordinator = (
            ProcessCoordinator()
            if sandbox is not None
            else open_coordinator(self.hooks, self.config, self.data_dir)
        )
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._provider: tuple[SummaryProvider | None] | None = None
        self._services = Services(
            hooks=self.hooks,
            config=self.config,
            model=self.model,
            cache_settings=self.cache_settings,
            engine=self.engine,
            fallback_engine=self.hooks.fallback,
            route=route,
            summary_provider=self.summary_provider,
            clock=clock,
            env=self.env,
            data_dir=self.data_dir,
            coordinator=self.coordinator,
            wall_clock=wall_clock,
        )

    def _resolve_config(
        self, loaded: LoadedConfig, trigger: float | None, sandbox: object | None
    ) -> None:
        """Validate ``loaded`` with the settings the selected plugins declare, and with what
        ``trigger`` and ``sandbox`` ask for on top: sets ``trigger_key``, ``config`` and
        ``loaded``; a plugin that fails to declare its settings adds a notice."""
        registry = SettingsRegistry()
        for failure in self.hooks.declare_settings(registry):
            self.notices.append(
                f"plugin {failure.plugin!r} failed to declare its settings "
                f"({failure.describe()}); its keys are not validated"
            )
        order = {name: index for index, name in enumerate(self.hooks.plugin_names)}
        self.trigger_key = _engine_trigger(registry, self.engine)
        resolved = resolve_loaded(
            _with_kernel_overrides(
                loaded, registry, self.engine, self.trigger_key, trigger, sandbox
            ),
            loaded.path,
            sorted(registry.specs, key=lambda owned: order.get(owned.owner, len(order))),
            engine_trigger=self.trigger_key,
        )
        # The kernel's own values stay as given (a host or replay may pass a Config it evolved
        # in code); the plugins' values come from the layers they were declared for.
        self.config = attrs.evolve(loaded.config, validated=resolved.config.validated_values())
        self.loaded = attrs.evolve(resolved, config=self.config)
        for unused in self.loaded.unused:
            log.info("config: %s is not read by any selected plugin (%s)", unused.key, unused.note)

    def _model(self) -> ModelInfo:
        """The configured model.

        :raises ConfigError: when ``model.max_tokens`` leaves it no usable window.
        """
        model = model_for_settings(self.config)
        try:
            usable_window(model.context_length, self.config.model.max_tokens)
        except ValueError:
            raise ConfigError(
                [
                    ConfigProblem(
                        "model.max_tokens",
                        self.config.model.max_tokens,
                        f"must be less than the context length of {model.name} "
                        f"({model.context_length:,} tokens); lower it or set "
                        "model.context_length",
                        self.loaded.sources.get("model.max_tokens"),
                    )
                ]
            ) from None
        return model

    def use_summary_provider(self, provider: SummaryProvider | None) -> None:
        """Use ``provider`` for every summary instead of ``auxiliary.compression.provider``.

        For hosts that bring their own client object and for tests with a scripted provider.
        The failure policy applies to it as to a configured provider (retries, breaker, the
        configured fallbacks after it); ``None`` selects the ``extractive`` local digest.
        """
        with self._lock:
            if provider is None or isinstance(provider, SummaryService):
                self._provider = (provider,)
                return
            self._provider = (self._summary_service(provider),)

    def summary_provider(self) -> SummaryProvider | None:
        """The auxiliary summary providers behind the failure policy (a
        :class:`~ctxengine.SummaryService`), built on first use and shared by all sessions.

        ``None`` means the ``extractive`` provider (a local digest, no model call).
        """
        with self._lock:
            if self._provider is None:
                self._provider = (self._summary_service(),)
            return self._provider[0]

    def _summary_service(self, primary: object = CONFIGURED) -> SummaryProvider | None:
        """The ``auxiliary.compression`` chain for this kernel's host and main model, led by
        ``primary`` when a host handed one in (see :func:`resolve_service`)."""
        host = HostModel(
            call=self.main_summarizer,
            request=self.main_request,
            name=self.config.model.name,
            base_url=self.config.model.base_url,
            window=self.model.context_length,
            models=self.config.models,
        )
        return resolve_service(
            self.config.auxiliary.compression,
            env=self.env,
            host=host,
            primary=primary,
            clock=self.clock,
            sleep=self.sleep,
        )

    @property
    def engine(self) -> str:
        """The name of the engine in use (the built-in compressor after a fallback)."""
        return self.engine_entry.name

    @property
    def plugin_names(self) -> list[str]:
        """The registered plugins, in registration order."""
        return self.hooks.plugin_names

    def session(self, session_id: str) -> Session:
        """The session for ``session_id``, created (with fresh engine state) on first use."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                session = Session(self._services, session_id)
                self._sessions[session_id] = session
        return session

    def close_session(self, session_id: str) -> None:
        """End a session: plugins release its resources and its state is forgotten."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def close(self) -> None:
        """End every session and let go of the coordination backend's files and connections;
        the kernel is not used afterwards."""
        with self._lock:
            ids = list(self._sessions)
        for session_id in ids:
            self.close_session(session_id)
        self.coordinator.close()

    def hygiene(
        self,
        session_id: str,
        history: Sequence[Message],
        *,
        system: SystemPrompt | None = None,
        last_prompt_tokens: int | None = None,
    ) -> HygieneReport:
        """Gateway hygiene (the safety net) for ``session_id``; see :meth:`Session.hygiene`."""
        return self.session(session_id).hygiene(
            history, system=system, last_prompt_tokens=last_prompt_tokens
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
        return await in_thread(
            self.hygiene, session_id, history, system=system, last_prompt_tokens=last_prompt_tokens
        )

    def status_lines(self) -> list[str]:
        """Lines a host prints at start: engine, caching status, and any notices."""
        lines = [f"🧠 Context engine: {self.engine} ({self.engine_entry.source})"]
        if self.selection.fallback is not None:
            lines[0] += f", falling back to {self.selection.fallback.name}"
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
        policy = describe_failure_policy(
            self.config.auxiliary.compression,
            self.env,
            main_available=self.main_summarizer is not None,
        )
        if policy is not None:
            lines.append(f"📝 Summary failures: {policy}")
        with self._lock:
            built = self._provider[0] if self._provider is not None else None
        if isinstance(built, SummaryService):
            lines.extend(f"⚠️  summary provider {line}" for line in built.status())
        if self.coordinator.shared:
            lines.append(f"🔗 Coordination: {self.coordinator.describe()}")
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
        # Validated again (with the plugins' keys) by the Kernel; the raw layers are kept.
        checked = config_from_mapping(config)
        return LoadedConfig(config=checked, path=None, sources={})
    if config is not None and not isinstance(config, str | os.PathLike):
        raise ConfigError(
            [
                ConfigProblem(
                    "",
                    config,
                    "ctxengine.load() takes a config mapping, a path to a YAML file, a Config "
                    f"or None, not {type(config).__name__}",
                    None,
                )
            ]
        )
    return load_config(config, env=env)


def load(
    config: ConfigLike = None,
    *,
    main_summarizer: MainSummarizer | None = None,
    plugins: Iterable[tuple[str, object]] = (),
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    trigger: float | None = None,
    sandbox: str | os.PathLike[str] | None = None,
    main_request: MainRequest | None = None,
    sleep: Callable[[float], None] = time.sleep,
    wall_clock: Callable[[], float] | None = None,
) -> Kernel:
    """Load the configuration, import the selected plugins and build a :class:`Kernel`.

    :param config: a mapping shaped like ``config.yaml``, a path to a YAML file, a
        :class:`~ctxengine.Config` / :class:`~ctxengine.LoadedConfig`, or ``None`` to look it up
        (``$CTXENGINE_CONFIG``, then ``<home>/config.yaml``, else defaults).
    :param main_summarizer: the host's own model as a callable ``(system, prompt, max_tokens) ->
        text``, used by ``auxiliary.compression.provider: main``.
    :param main_request: the host's own model sending a whole request of the agent's:
        ``(request, max_tokens) -> text``. With it, provider ``main`` writes summaries by
        resending the agent's last request with the instruction appended, read from the prompt
        cache (``auxiliary.compression.cache_aware``).
    :param plugins: extra ``(name, plugin)`` pairs registered as always-on extensions.
    :param clock: monotonic seconds for cooldowns and circuit breakers (tests move it by hand).
    :param trigger: the selected engine's compaction trigger (a fraction of the window), set on
        whichever key that engine declares as its trigger (``engines.compressor.threshold`` for the
        compressor, ``engines.lcm.threshold`` for lcm); validated like that key, with source
        ``override``.
    :param sandbox: a folder for a simulation: ``ctx.data_dir`` points there and every setting
        a plugin marks as ``storage`` is reset to its default, so nothing is written to the
        user's own data (the configuration and directory plugins are still read from home), and
        the coordination backend is ``process`` whatever ``coordination.backend`` says (a
        simulation takes no lock of a fleet and writes no state of its sessions).
    :param wall_clock: seconds every worker process agrees on (hosts' clocks in sync), used on a
        shared coordination backend to carry deadlines from one worker to another; default
        :func:`time.time` with the default ``clock``, else ``clock`` itself.
    :param sleep: how the summary failure policy waits between retries (tests record instead).
    :raises ctxengine.ConfigError: for an invalid configuration, the selected plugins' keys
        included, or a ``trigger`` for an engine that declares none.
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
        sleep=sleep,
        env=env,
        trigger=trigger,
        sandbox=sandbox,
        main_request=main_request,
        wall_clock=wall_clock,
    )


__all__ = [
    "EngineNotFoundError",
    "EngineNotFoundWarning",
    "Kernel",
    "Selection",
    "build_plugin_manager",
    "load",
    "select_plugins",
]
