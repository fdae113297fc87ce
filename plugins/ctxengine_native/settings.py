"""The native engine's keys (``engines.native``).

``threshold`` is the engine's trigger, a fraction of the usable window like every ctxengine
threshold: the engine asks the server to compact once the prompt reaches it, and sends it to the
server as the ``compact_20260112`` edit's ``input_tokens`` trigger (lowered to the server's own
count of what is sent when that is smaller, so the server compacts what ctxengine decided to).
"""

from __future__ import annotations

from typing import Literal

import attrs

from ctxengine import EngineContext, SettingsSpec, setting

Api = Literal["auto", "anthropic", "openai-responses"]


@attrs.frozen
class NativeSettings:
    """The native engine's validated keys."""

    threshold: float = setting(
        "number",
        0.50,
        ge=0.05,
        le=0.95,
        env="CTXENGINE_NATIVE_THRESHOLD",
        doc="ask the server to compact when prompt tokens >= threshold x window",
    )
    api: Api = setting(
        "choice",
        "auto",
        choices=("auto", "anthropic", "openai-responses"),
        env="CTXENGINE_NATIVE_API",
        doc="whose server compacts (auto: Anthropic's for Anthropic conversations on its own API)",
    )
    base_url: str | None = setting(
        "url",
        nullable=True,
        env="CTXENGINE_NATIVE_BASE_URL",
        doc="where compaction requests go (null = model.base_url, else the provider's API)",
    )
    api_key: str | None = setting(
        "str",
        nullable=True,
        secret=True,
        doc="null = $ANTHROPIC_API_KEY (or $ANTHROPIC_AUTH_TOKEN) / $OPENAI_API_KEY",
    )
    timeout: float = setting("number", 120.0, gt=0, doc="seconds per compaction request")
    keep_last: int = setting(
        "int", 4, ge=2, doc="fewest recent messages kept verbatim after the compaction block"
    )
    instructions: str | None = setting(
        "str",
        nullable=True,
        doc="extra summarisation instructions sent with the compaction (Anthropic)",
    )
    check_model: bool = setting(
        "bool",
        True,
        doc="ask the Models API whether the model supports compaction before sending",
    )


SETTINGS: SettingsSpec[NativeSettings] = SettingsSpec.of(
    "engines.native",
    NativeSettings,
    trigger="threshold",
    doc="the native engine: the provider's server-side compaction",
)


def settings(ctx: EngineContext) -> NativeSettings:
    """This session's validated native settings."""
    return ctx.config.settings(SETTINGS)
