"""The ``engines.lcm`` section of ``config.yaml``, validated with the kernel's field rules.

Every key, its default and its range are declared once, on :class:`LcmSettings`; the README's
table mirrors it.
The compaction threshold is the engine's own (``engines.lcm.threshold``, default 0.75 of the
window), not ``engines.compressor.threshold`` (0.50): compaction here loses nothing, so it can wait
longer and compact less often, which keeps the prompt cache warm for longer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ctxengine import (
    Config,
    SettingsSpec,
    SettingsView,
    config_from_mapping,
    ctxengine_home,
    setting,
)
from ctxengine_lcm.urls import POSTGRES_SCHEMES

SECTION = "engines.lcm"
ENGINE_NAME = "lcm"


@attrs.frozen
class LcmSettings:
    """Validated engine options, each declared once here (default, range, environment variable,
    meaning)."""

    db_path: Path | None = setting(
        "str",
        nullable=True,
        storage=True,  # a replay redirects it to a temporary store
        doc="SQLite file; null = <CTXENGINE_HOME>/lcm/lcm.db (unused with database_url; a "
        "replay uses a temporary one)",
    )
    """The SQLite file; ``None`` until :func:`settings_for` fills in the default location."""
    database_url: str | None = setting(
        "str",
        nullable=True,
        env="CTXENGINE_LCM_DATABASE_URL",
        storage=True,  # a replay never writes to the real database either
        doc="postgresql://user@host:port/dbname: keep the store in PostgreSQL instead of "
        "the SQLite file (many processes and hosts); null = SQLite",
    )
    """The PostgreSQL database that holds the store instead (``None``: the SQLite file)."""
    database_pool_size: int = setting(
        "int",
        8,
        ge=1,
        le=1_000,
        doc="most PostgreSQL connections one process opens to database_url",
    )
    threshold: float = setting(
        "number",
        0.75,
        gt=0.0,
        le=1.0,
        doc="compact when prompt tokens >= threshold x window",
    )
    target_fill: float = setting(
        "number",
        0.6,
        gt=0.0,
        le=1.0,
        doc="condense summaries until the context is <= target_fill x threshold tokens",
    )
    fresh_tail_count: int = setting("int", 32, ge=1, doc="most recent messages never compacted")
    fresh_tail_max_tokens: int = setting(
        "int", 40_000, ge=1, doc="token cap on the fresh tail (wins over the count)"
    )
    leaf_chunk_tokens: int = setting(
        "int", 20_000, ge=100, doc="tokens of raw messages per leaf summary"
    )
    leaf_min_messages: int = setting(
        "int", 8, ge=1, doc="smallest chunk of raw messages worth a leaf summary"
    )
    condense_fanout: int = setting(
        "int", 4, ge=2, doc="same-depth summaries condensed into one deeper summary"
    )
    leaf_summary_tokens: int = setting("int", 1_200, ge=50, doc="target size of a leaf summary")
    condensed_summary_tokens: int = setting(
        "int", 2_000, ge=50, doc="target size of a condensed summary"
    )
    large_output_tokens: int = setting(
        "int",
        25_000,
        ge=100,
        doc="tool outputs above this are stored aside and described in context",
    )
    regex_timeout_s: float = setting(
        "number",
        2.0,
        gt=0.0,
        le=60.0,
        doc="run-time cap of one lcm_grep regex search",
    )

    @property
    def path(self) -> Path:
        """The SQLite file (:func:`settings_for` and :func:`parse_settings` always fill it)."""
        if self.db_path is None:
            raise RuntimeError("engines.lcm.db_path was not resolved; use settings_for()")
        return self.db_path


def _build(db_path: str | None, **values: Any) -> LcmSettings:
    # The default path depends on the data folder, which only the session's context knows;
    # settings_for fills it in.
    return LcmSettings(db_path=Path(db_path).expanduser() if db_path else None, **values)


def _one_store(view: SettingsView) -> None:
    """``database_url`` is a PostgreSQL URL, and ``db_path`` is not set beside it."""
    url, path = f"{SECTION}.database_url", f"{SECTION}.db_path"
    if url not in view or view.has_problem(url) or view.value(url) is None:
        return
    if not str(view.value(url)).startswith(POSTGRES_SCHEMES):
        view.problem(
            url,
            "must be a postgresql:// (or postgres://) URL, e.g. "
            "postgresql://lcm@db.example.internal:5432/lcm; leave it null for SQLite",
        )
    elif path in view and not view.has_problem(path) and view.value(path) is not None:
        view.problem(
            path,
            f"must be null when {view.describe(url, seen_from=view.source(path))} is set (the "
            "store is either the SQLite file or the PostgreSQL database, not both)",
        )


SETTINGS: SettingsSpec[LcmSettings] = SettingsSpec.of(
    SECTION,
    LcmSettings,
    build=_build,
    checks=(_one_store,),
    trigger="threshold",
    doc="the lossless engine",
)
"""The ``engines.lcm`` keys, declared to the kernel in the ``declare_settings`` hook."""


def default_db_path(data_dir: Path) -> Path:
    """``<data_dir>/lcm/lcm.db`` (``data_dir`` is ``ctx.data_dir``: ``$CTXENGINE_HOME``, or a
    replay's temporary folder)."""
    return data_dir / "lcm" / "lcm.db"


def parse_settings(
    options: Mapping[str, Any] | None,
    *,
    source: str = "config",
    data_dir: Path | None = None,
) -> LcmSettings:
    """Validate a raw ``engines.lcm`` mapping on its own (tools and tests).

    :param data_dir: where the default store goes (default ``$CTXENGINE_HOME``).
    :raises ctxengine.ConfigError: naming every unknown key and invalid value.
    """
    settings = config_from_mapping(
        {"engines": {ENGINE_NAME: dict(options or {})}}, source=source, specs=[SETTINGS]
    ).settings(SETTINGS)
    return _with_path(settings, ctxengine_home() if data_dir is None else data_dir)


def settings_for(config: Config, data_dir: Path) -> LcmSettings:
    """The engine's validated settings from a loaded :class:`~ctxengine.Config`, the default
    store placed under ``data_dir`` (``ctx.data_dir``)."""
    return _with_path(config.settings(SETTINGS), data_dir)


def _with_path(settings: LcmSettings, data_dir: Path) -> LcmSettings:
    if settings.db_path is not None:
        return settings
    return attrs.evolve(settings, db_path=default_db_path(data_dir))
