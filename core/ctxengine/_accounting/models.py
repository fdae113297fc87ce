"""Model metadata: context window, output limit, minimum cacheable prefix and prices.

:func:`lookup_model` resolves whatever name a caller configured ("anthropic/claude-sonnet-4.5",
"claude-sonnet-4-5-20250929", "meta-llama/Llama-3.3-70B-Instruct") to one row of a built-in table,
then applies ``models.<name>`` overrides from the config. Unknown names never raise: they get
conservative defaults (128,000-token window, 4,096 output tokens) and ``known=False``.

Table facts are *reference* values from the providers' public documentation. Open models are
served by many hosts with different limits and prices; their rows hold common values and are
meant to be overridden in config when a host differs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    from ctxengine._config.core import Config, ModelOverride

Family = Literal["claude", "gpt", "gemini", "open", "unknown"]

UNKNOWN_CONTEXT_LENGTH = 128_000
"""Window assumed for a model the table does not know: small enough to be safe almost anywhere."""
UNKNOWN_MAX_OUTPUT_TOKENS = 4_096
UNKNOWN_MIN_CACHEABLE_TOKENS = 1_024
"""Anthropic's documented floor for most models and OpenAI's automatic-caching minimum."""


@attrs.frozen
class ModelInfo:
    """What ctxengine needs to know about one model.

    :ivar name: the canonical table name (or the caller's name, lower-cased, when unknown).
    :ivar context_length: input + output window in tokens.
    :ivar max_output_tokens: the most tokens one response may contain.
    :ivar min_cacheable_tokens: shortest prefix the provider caches; 0 when it has no prompt
        caching. Below it the API caches nothing and says nothing.
    :ivar input_price: USD per million uncached input tokens (0.0 when unknown).
    :ivar output_price: USD per million output tokens (0.0 when unknown).
    :ivar known: False when the name matched no table row and no config override.
    """

    name: str
    family: Family
    context_length: int
    max_output_tokens: int
    min_cacheable_tokens: int
    input_price: float
    output_price: float
    known: bool


# Anthropic: minimum cacheable prefix per the prompt-caching docs (4,096 for Opus 4.5/4.6 and
# Haiku 4.5, 2,048 for the Haiku 3.x line, 1,024 otherwise). Sonnet 4.6 is documented at 1,024
# but caches only from ~2,048 in practice (reported on the API and on Bedrock), so we use 2,048:
# a too-high floor only costs a spurious "cannot cache" notice, a too-low one hides a miss.
# OpenAI caches automatically from 1,024 tokens. Gemini's implicit caching floors come from
# Google's caching docs. DeepSeek caches on disk in 64-token units; other open models: none.
_Row = tuple[str, Family, int, int, int, float, float]

_ROWS: tuple[_Row, ...] = (
    # Claude
    ("claude-opus-4-6", "claude", 200_000, 128_000, 4_096, 5.0, 25.0),
    ("claude-opus-4-5", "claude", 200_000, 64_000, 4_096, 5.0, 25.0),
    ("claude-opus-4-1", "claude", 200_000, 32_000, 1_024, 15.0, 75.0),
    ("claude-opus-4", "claude", 200_000, 32_000, 1_024, 15.0, 75.0),
    ("claude-sonnet-4-6", "claude", 200_000, 64_000, 2_048, 3.0, 15.0),
    ("claude-sonnet-4-5", "claude", 200_000, 64_000, 1_024, 3.0, 15.0),
    ("claude-sonnet-4", "claude", 200_000, 64_000, 1_024, 3.0, 15.0),
    ("claude-haiku-4-5", "claude", 200_000, 64_000, 4_096, 1.0, 5.0),
    ("claude-3-7-sonnet", "claude", 200_000, 64_000, 1_024, 3.0, 15.0),
    ("claude-3-5-sonnet", "claude", 200_000, 8_192, 1_024, 3.0, 15.0),
    ("claude-3-5-haiku", "claude", 200_000, 8_192, 2_048, 0.80, 4.0),
    ("claude-3-opus", "claude", 200_000, 4_096, 1_024, 15.0, 75.0),
    ("claude-3-haiku", "claude", 200_000, 4_096, 2_048, 0.25, 1.25),
    # OpenAI
    ("gpt-5.1", "gpt", 400_000, 128_000, 1_024, 1.25, 10.0),
    ("gpt-5", "gpt", 400_000, 128_000, 1_024, 1.25, 10.0),
    ("gpt-5-mini", "gpt", 400_000, 128_000, 1_024, 0.25, 2.0),
    ("gpt-5-nano", "gpt", 400_000, 128_000, 1_024, 0.05, 0.40),
    ("gpt-4.1", "gpt", 1_047_576, 32_768, 1_024, 2.0, 8.0),
    ("gpt-4.1-mini", "gpt", 1_047_576, 32_768, 1_024, 0.40, 1.60),
    ("gpt-4.1-nano", "gpt", 1_047_576, 32_768, 1_024, 0.10, 0.40),
    ("gpt-4o", "gpt", 128_000, 16_384, 1_024, 2.50, 10.0),
    ("gpt-4o-mini", "gpt", 128_000, 16_384, 1_024, 0.15, 0.60),
    ("gpt-4-turbo", "gpt", 128_000, 4_096, 0, 10.0, 30.0),
    ("gpt-4", "gpt", 8_192, 8_192, 0, 30.0, 60.0),
    ("o1", "gpt", 200_000, 100_000, 1_024, 15.0, 60.0),
    ("o3", "gpt", 200_000, 100_000, 1_024, 2.0, 8.0),
    ("o3-pro", "gpt", 200_000, 100_000, 0, 20.0, 80.0),
    ("o3-mini", "gpt", 200_000, 100_000, 1_024, 1.10, 4.40),
    ("o4-mini", "gpt", 200_000, 100_000, 1_024, 1.10, 4.40),
    # Google (prices for prompts up to 200K tokens)
    ("gemini-3-pro", "gemini", 1_048_576, 65_536, 4_096, 2.0, 12.0),
    ("gemini-2.5-pro", "gemini", 1_048_576, 65_536, 2_048, 1.25, 10.0),
    ("gemini-2.5-flash", "gemini", 1_048_576, 65_536, 1_024, 0.30, 2.50),
    ("gemini-2.5-flash-lite", "gemini", 1_048_576, 65_536, 2_048, 0.10, 0.40),
    ("gemini-2.0-flash", "gemini", 1_048_576, 8_192, 0, 0.10, 0.40),
    # Open-weight models (common hosted limits and prices; hosts differ)
    ("llama-4-maverick", "open", 1_048_576, 16_384, 0, 0.15, 0.60),
    ("llama-4-scout", "open", 327_680, 16_384, 0, 0.08, 0.30),
    ("llama-3.3-70b", "open", 131_072, 8_192, 0, 0.60, 0.60),
    ("llama-3.1-405b", "open", 131_072, 8_192, 0, 3.0, 3.0),
    ("llama-3.1-70b", "open", 131_072, 8_192, 0, 0.60, 0.60),
    ("llama-3.1-8b", "open", 131_072, 8_192, 0, 0.05, 0.08),
    ("qwen3-coder", "open", 262_144, 65_536, 0, 0.40, 1.60),
    ("qwen3-235b-a22b", "open", 131_072, 16_384, 0, 0.20, 0.60),
    ("qwen3", "open", 131_072, 16_384, 0, 0.10, 0.30),
    ("deepseek-v3", "open", 131_072, 8_192, 64, 0.28, 1.10),
    ("deepseek-r1", "open", 131_072, 32_768, 64, 0.55, 2.19),
    ("mistral-large", "open", 131_072, 8_192, 0, 2.0, 6.0),
    ("mistral-medium", "open", 131_072, 8_192, 0, 0.40, 2.0),
    ("mistral-small", "open", 131_072, 8_192, 0, 0.10, 0.30),
    ("codestral", "open", 262_144, 8_192, 0, 0.30, 0.90),
    ("gpt-oss-120b", "open", 131_072, 32_768, 0, 0.15, 0.60),
    ("gpt-oss-20b", "open", 131_072, 32_768, 0, 0.05, 0.20),
)

_TABLE: tuple[ModelInfo, ...] = tuple(ModelInfo(*row, known=True) for row in _ROWS)

# Other spellings providers use for a table row (keys are already in matching form).
_ALIASES: dict[str, str] = {
    "deepseek-chat": "deepseek-v3",
    "deepseek-reasoner": "deepseek-r1",
    "claude-3-7-sonnet-latest": "claude-3-7-sonnet",
    "claude-sonnet-3-7": "claude-3-7-sonnet",
    "claude-sonnet-3-5": "claude-3-5-sonnet",
    "claude-haiku-3-5": "claude-3-5-haiku",
}


def _match_key(name: str) -> str:
    """The form names are compared in: lower case, no provider path, dots as dashes.

    "openrouter/anthropic/Claude-Sonnet-4.5:thinking" -> "claude-sonnet-4-5";
    Bedrock ("us.anthropic.claude-...-v1:0") and Vertex ("claude-...@20250514") ids work too.
    """
    key = name.strip().lower()
    key = key.rsplit("/", 1)[-1]  # provider prefixes: "anthropic/", "meta-llama/", ...
    key = key.split(":", 1)[0]  # OpenRouter variants (":thinking", ":free"), Bedrock ":0"
    key = key.split("@", 1)[0]  # Vertex version pins
    if "anthropic." in key:  # Bedrock ids, optionally with a region prefix
        key = key.split("anthropic.", 1)[1]
    return key.replace(".", "-").replace("_", "-")


_BY_KEY: dict[str, ModelInfo] = {_match_key(row.name): row for row in _TABLE}
# Longest first, so "gpt-4o-mini-2024-07-18" finds gpt-4o-mini before gpt-4o.
_PREFIXES: tuple[str, ...] = tuple(sorted(_BY_KEY, key=len, reverse=True))
# After a matched prefix, a short number means another version of the model ("claude-opus-4-7"
# is not claude-opus-4), whereas dates ("-20250514", "-2025-04-14", "-0324") and words
# ("-latest", "-instruct", "-preview") are the same model.
_OTHER_VERSION = re.compile(r"-\d{1,2}(?:-|$)")


def _table_row(key: str) -> ModelInfo | None:
    row = _BY_KEY.get(key)
    if row is not None:
        return row
    alias = _ALIASES.get(key)
    if alias is not None:
        return _BY_KEY[alias]
    for prefix in _PREFIXES:
        if key.startswith(prefix) and key[len(prefix) : len(prefix) + 1] == "-":
            if _OTHER_VERSION.match(key, len(prefix)):
                continue
            return _BY_KEY[prefix]
    return None


def _guess_family(key: str) -> Family:
    if "claude" in key:
        return "claude"
    if key.startswith(("gpt-oss",)):
        return "open"
    if key.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "gpt"
    if key.startswith("gemini"):
        return "gemini"
    return "unknown"


def is_claude(name: str) -> bool:
    """True when ``name`` denotes an Anthropic Claude model, whatever prefix or spelling it uses."""
    return "claude" in _match_key(name)


def _find_override(
    overrides: Mapping[str, ModelOverride], name: str, key: str, canonical: str | None
) -> ModelOverride | None:
    """The override for ``name``: one spelled exactly like it (ignoring case) wins; otherwise one
    whose key matches it or the matched table name after normalisation."""
    spelled = name.strip().lower()
    wanted = {key} if canonical is None else {key, _match_key(canonical)}
    found: ModelOverride | None = None
    for override_name, override in overrides.items():
        if override_name.strip().lower() == spelled:
            return override
        if found is None and _match_key(override_name) in wanted:
            found = override
    return found


def _apply_override(info: ModelInfo, override: ModelOverride) -> ModelInfo:
    """``info`` with every field ``override`` sets (its fields are named like ``info``'s; ``None``
    keeps the table's value)."""
    changes = attrs.asdict(override, filter=lambda _, value: value is not None)
    return attrs.evolve(info, **changes, known=True)


def lookup_model(name: str, overrides: Mapping[str, ModelOverride] | None = None) -> ModelInfo:
    """Metadata for ``name``, with config ``overrides`` applied.

    Matching, first hit wins: the exact table name; a known alias; the longest table name that
    prefixes the caller's name at a ``-`` boundary (date and variant suffixes), unless what follows
    is a short version number. Before matching, case, provider paths ("anthropic/",
    "openrouter/anthropic/", "meta-llama/"), ":variant" and "@version" suffixes are dropped and
    dots compare equal to dashes ("claude-sonnet-4.5" == "claude-sonnet-4-5").

    An override whose key matches the caller's name (or the matched table name) replaces the
    fields it sets; an override for a name the table lacks adds that model (``known=True``).
    Otherwise an unknown name gets :data:`UNKNOWN_CONTEXT_LENGTH`,
    :data:`UNKNOWN_MAX_OUTPUT_TOKENS`, prices 0.0 and ``known=False``.

    :raises ValueError: when ``name`` is not a non-empty string.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    key = _match_key(name)
    row = _table_row(key)
    info = row
    if info is None:
        info = ModelInfo(
            name=name.strip().lower(),
            family=_guess_family(key),
            context_length=UNKNOWN_CONTEXT_LENGTH,
            max_output_tokens=UNKNOWN_MAX_OUTPUT_TOKENS,
            min_cacheable_tokens=UNKNOWN_MIN_CACHEABLE_TOKENS,
            input_price=0.0,
            output_price=0.0,
            known=False,
        )
    if overrides:
        override = _find_override(overrides, name, key, None if row is None else row.name)
        if override is not None:
            info = _apply_override(info, override)
    return info


def model_for_settings(config: Config) -> ModelInfo:
    """The model named in ``config.model``, with ``config.models`` overrides applied and then
    ``model.context_length`` / ``model.max_tokens`` (the caller's own limits) on top."""
    settings = config.model
    info = lookup_model(settings.name, config.models)
    if settings.context_length is not None:
        info = attrs.evolve(info, context_length=settings.context_length)
    if settings.max_tokens is not None:
        info = attrs.evolve(info, max_output_tokens=settings.max_tokens)
    return info
