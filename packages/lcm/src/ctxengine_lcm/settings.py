"""The ``engines.lcm`` section of ``config.yaml``, validated with the kernel's field rules.

Every key, its default and its range are listed in :data:`FIELDS`; the README's table mirrors it.
The compaction threshold is the engine's own (``engines.lcm.threshold``, default 0.75 of the
window), not ``compression.threshold`` (0.50): compaction here loses nothing, so it can wait
longer and compact less often, which keeps the prompt cache warm for longer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from ctxengine import Config, Field

SECTION = "engines.lcm"
ENGINE_NAME = "lcm"


@attrs.frozen
class LcmSettings:
    """Validated engine options (see :data:`FIELDS` for meanings and ranges)."""

    db_path: Path
    threshold: float = 0.75
    target_fill: float = 0.6
    fresh_tail_count: int = 32
    fresh_tail_max_tokens: int = 40_000
    leaf_chunk_tokens: int = 20_000
    leaf_min_messages: int = 8
    condense_fanout: int = 4
    leaf_summary_tokens: int = 1_200
    condensed_summary_tokens: int = 2_000
    large_output_tokens: int = 25_000
    regex_timeout_s: float = 2.0


def fields() -> list[Field]:
    """The section's keys, types, defaults and ranges."""
    from ctxengine import Field

    return [
        Field(
            "db_path",
            "str",
            None,
            nullable=True,
            doc="SQLite file; null = <CTXENGINE_HOME>/lcm/lcm.db",
        ),
        Field(
            "threshold",
            "number",
            0.75,
            gt=0.0,
            le=1.0,
            doc="compact when prompt tokens >= threshold x window",
        ),
        Field(
            "target_fill",
            "number",
            0.6,
            gt=0.0,
            le=1.0,
            doc="condense summaries until the context is <= target_fill x threshold tokens",
        ),
        Field("fresh_tail_count", "int", 32, ge=1, doc="most recent messages never compacted"),
        Field(
            "fresh_tail_max_tokens",
            "int",
            40_000,
            ge=1,
            doc="token cap on the fresh tail (wins over the count)",
        ),
        Field(
            "leaf_chunk_tokens",
            "int",
            20_000,
            ge=100,
            doc="tokens of raw messages per leaf summary",
        ),
        Field(
            "leaf_min_messages",
            "int",
            8,
            ge=1,
            doc="smallest chunk of raw messages worth a leaf summary",
        ),
        Field(
            "condense_fanout",
            "int",
            4,
            ge=2,
            doc="same-depth summaries condensed into one deeper summary",
        ),
        Field("leaf_summary_tokens", "int", 1_200, ge=50, doc="target size of a leaf summary"),
        Field(
            "condensed_summary_tokens",
            "int",
            2_000,
            ge=50,
            doc="target size of a condensed summary",
        ),
        Field(
            "large_output_tokens",
            "int",
            25_000,
            ge=100,
            doc="tool outputs above this are stored aside and described in context",
        ),
        Field(
            "regex_timeout_s",
            "number",
            2.0,
            gt=0.0,
            le=60.0,
            doc="run-time cap of one lcm_grep regex search",
        ),
    ]


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """``<CTXENGINE_HOME>/lcm/lcm.db``."""
    from ctxengine import ctxengine_home

    return ctxengine_home(env) / "lcm" / "lcm.db"


def parse_settings(
    options: Mapping[str, Any] | None,
    *,
    source: str = "config",
    env: Mapping[str, str] | None = None,
) -> LcmSettings:
    """Validate the raw ``engines.lcm`` mapping.

    :raises ctxengine.config.ConfigError: naming every unknown key and invalid value.
    """
    from ctxengine import parse_section

    values = parse_section(options or {}, SECTION, fields(), source=source)
    raw_path = values.pop("db_path")
    db_path = Path(raw_path).expanduser() if raw_path else default_db_path(env)
    return LcmSettings(db_path=db_path, **values)


def settings_for(config: Config, env: Mapping[str, str] | None = None) -> LcmSettings:
    """The engine's settings from a loaded :class:`~ctxengine.config.Config`."""
    return parse_settings(config.engines.get(ENGINE_NAME), env=env)
