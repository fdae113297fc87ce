"""One usage record for every provider: :class:`Usage` and :func:`normalize_usage`.

Providers count the same things differently:

- Anthropic Messages: ``input_tokens`` *excludes* cache reads and writes;
  ``cache_read_input_tokens``; ``cache_creation_input_tokens`` with an optional
  ``cache_creation.{ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}`` split;
  ``output_tokens_details.thinking_tokens``.
- OpenAI chat completions: ``prompt_tokens`` *includes* ``prompt_tokens_details.cached_tokens``
  (and ``cache_write_tokens`` where a router such as OpenRouter reports it);
  ``completion_tokens_details.reasoning_tokens``.
- OpenAI Responses: ``input_tokens`` *includes* ``input_tokens_details.cached_tokens`` (and
  ``cache_write_tokens``); ``output_tokens_details.reasoning_tokens``.
- OpenRouter: the chat shape, with ``prompt_tokens_details.cache_write_tokens`` for the providers
  it routes to that bill writes (Anthropic through OpenRouter).
- Gemini's OpenAI-compatible endpoint: the chat shape, ``prompt_tokens_details`` may be ``null``
  (nothing cached), and ``completion_tokens`` may leave out the thinking tokens it reports in
  ``completion_tokens_details.reasoning_tokens``; ``total_tokens`` then includes them, which is
  how that case is recognised.
- Anthropic responses with ``diagnostics.cache_miss_reason`` (requested with ``diagnostics``)
  say why the prompt missed the cache; pass the whole response to keep the reason.

:class:`Usage` always holds uncached input separately, so ``prompt_tokens`` means the same thing
whatever the provider.

Server-side context management shows in two places of an Anthropic response. ``usage.iterations``
lists each sampling iteration; an entry of type ``compaction`` is what a server-side compaction
cost, and its tokens are *not* in the top-level fields, which describe the context the model then
read. :attr:`Usage.compaction` keeps them apart, so the prompt size stays the real context and the
cost (:func:`~ctxengine.cost_of`) still counts them. ``context_management.applied_edits`` of the
response (given a whole response) says what context editing cleared:
:attr:`Usage.cleared_input_tokens` and the counts beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ctxengine._messages.sdk_objects import field

# Price multipliers of the input price (Anthropic's published rule).
CACHE_READ_MULTIPLIER = 0.1
CACHE_WRITE_5M_MULTIPLIER = 1.25
CACHE_WRITE_1H_MULTIPLIER = 2.0


@attrs.frozen
class Usage:
    """Token usage of one response (or a sum of several).

    :ivar input_tokens: uncached input tokens; EXCLUDES cache reads and writes.
    :ivar output_tokens: output tokens, reasoning included.
    :ivar cache_read_tokens: input tokens served from the cache.
    :ivar cache_write_5m_tokens: input tokens written with the short TTL (Anthropic 5 minutes;
        OpenAI's default retention).
    :ivar cache_write_1h_tokens: input tokens written with the long TTL (Anthropic 1 hour;
        OpenAI's extended retention).
    :ivar reasoning_tokens: the part of ``output_tokens`` spent on reasoning / thinking.
    :ivar cache_miss_reason: why the provider could not reuse the previous request's cached
        prefix (Anthropic's ``diagnostics.cache_miss_reason.type``: ``messages_changed``,
        ``system_changed``, ``tools_changed``, ``model_changed``, ``previous_message_not_found``,
        ``unavailable``); ``None`` when nothing was missed or nothing was said. A sum keeps the
        latest reason.
    :ivar cache_missed_tokens: tokens the provider says it would have read had the prefix
        matched.
    :ivar compaction: what server-side compaction iterations cost (Anthropic ``usage.iterations``
        entries of type ``compaction``), ``None`` when there were none; not part of the fields
        above, which describe the context the model read.
    :ivar cleared_input_tokens: input tokens the server's context editing removed from this
        request before the model read it (``context_management.applied_edits``).
    :ivar cleared_tool_uses: tool uses ``clear_tool_uses_20250919`` cleared.
    :ivar cleared_thinking_turns: thinking turns ``clear_thinking_20251015`` cleared.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    cache_miss_reason: str | None = None
    cache_missed_tokens: int = 0
    compaction: Usage | None = None
    cleared_input_tokens: int = 0
    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0

    @property
    def cache_write_tokens(self) -> int:
        """Tokens written to the cache, both TTLs."""
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def prompt_tokens(self) -> int:
        """Everything the request sent: uncached input + cache reads + cache writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def cache_hit_ratio(self) -> float:
        """Share of the prompt read from the cache (0.0 for an empty prompt)."""
        prompt = self.prompt_tokens
        return self.cache_read_tokens / prompt if prompt else 0.0

    @property
    def compacted(self) -> bool:
        """Whether the server compacted the context while answering (a compaction iteration)."""
        return self.compaction is not None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.compaction is None or other.compaction is None:
            compaction = self.compaction or other.compaction
        else:
            compaction = self.compaction + other.compaction
        return Usage(
            **{name: getattr(self, name) + getattr(other, name) for name in COUNTS},
            cache_miss_reason=other.cache_miss_reason or self.cache_miss_reason,
            compaction=compaction,
        )


COUNTS = tuple(
    f.name for f in attrs.fields(Usage) if f.name not in ("cache_miss_reason", "compaction")
)
"""The token counts of a :class:`Usage`, in declaration order: what a sum adds up."""


_CHAT_KEYS = frozenset({"prompt_tokens", "completion_tokens"})
_ANTHROPIC_ONLY_KEYS = frozenset(
    {"cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation", "iterations"}
)
_RESPONSES_KEYS = frozenset({"input_tokens_details", "total_tokens"})
_TOKEN_KEYS = frozenset({"input_tokens", "output_tokens", *_CHAT_KEYS})


def _as_mapping(obj: object) -> dict[str, Any] | None:
    """A dict view of a usage dict or SDK object (pydantic models, plain attribute objects);
    keys whose value is None are dropped, so absent and null fields look the same."""
    if isinstance(obj, Mapping):
        items = dict(obj)
    else:
        dump = getattr(obj, "model_dump", None)  # every SDK usage object: a pydantic model
        if callable(dump):
            dumped = dump()
            if not isinstance(dumped, Mapping):
                return None
            items = dict(dumped)
        elif hasattr(obj, "__dict__"):
            items = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
        else:
            return None
    return {str(k): v for k, v in items.items() if v is not None}


def _count(data: Mapping[str, Any], key: str, where: str = "") -> int:
    value = data.get(key)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"usage field '{where}{key}' must be a non-negative integer, got {value!r}"
        )
    return value


def _details(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    nested = data.get(key)
    if nested is None:
        return {}
    mapping = _as_mapping(nested)
    if mapping is None:
        raise ValueError(f"usage field {key!r} must be an object, got {nested!r}")
    return mapping


def _from_anthropic(data: Mapping[str, Any], where: str = "") -> Usage:
    written_total = _count(data, "cache_creation_input_tokens", where)
    split = _details(data, "cache_creation")
    write_1h = _count(split, "ephemeral_1h_input_tokens", where + "cache_creation.")
    write_5m = _count(split, "ephemeral_5m_input_tokens", where + "cache_creation.")
    # Without a split the total is 5-minute writes (the default TTL); any part of the total the
    # split does not explain is counted as 5m too, so no written token goes missing.
    write_5m += max(0, written_total - write_5m - write_1h)
    output_details = _details(data, "output_tokens_details")
    return Usage(
        input_tokens=_count(data, "input_tokens", where),
        output_tokens=_count(data, "output_tokens", where),
        cache_read_tokens=_count(data, "cache_read_input_tokens", where),
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
        reasoning_tokens=_count(
            output_details, "thinking_tokens", where + "output_tokens_details."
        ),
        compaction=_compaction_iterations(data.get("iterations")),
    )


def _compaction_iterations(entries: object) -> Usage | None:
    """The summed usage of the ``compaction`` entries of Anthropic's ``usage.iterations`` (their
    tokens are not in the top-level fields), or ``None`` when there is none."""
    if entries is None:
        return None
    if not isinstance(entries, list | tuple):
        raise ValueError(f"usage field 'iterations' must be a list, got {entries!r}")
    total: Usage | None = None
    for k, entry in enumerate(entries):
        data = _as_mapping(entry)
        if data is None:
            raise ValueError(f"usage field 'iterations[{k}]' must be an object, got {entry!r}")
        if data.get("type") != "compaction":
            continue
        part = _from_anthropic(data, f"iterations[{k}].")
        total = part if total is None else total + part
    return total


def _applied_edits(response: object) -> dict[str, int]:
    """What ``context_management.applied_edits`` of a whole response cleared, summed."""
    management = field(response, "context_management")
    edits = field(management, "applied_edits") if management is not None else None
    if not isinstance(edits, list | tuple):
        return {}
    totals = {"cleared_input_tokens": 0, "cleared_tool_uses": 0, "cleared_thinking_turns": 0}
    for k, edit in enumerate(edits):
        data = _as_mapping(edit)
        if data is None:
            raise ValueError(f"applied_edits[{k}] must be an object, got {edit!r}")
        for key in totals:
            totals[key] += _count(data, key, f"applied_edits[{k}].")
    return totals


def _openai_writes(details: Mapping[str, Any], where: str) -> tuple[int, int]:
    """(short, long) TTL cache writes from an OpenAI-style ``*_tokens_details`` object."""
    total = _count(details, "cache_write_tokens", where)
    ttl = _details(details, "cache_write_tokens_details")
    long_ttl = _count(ttl, "ttl_12h_tokens", where + "cache_write_tokens_details.")
    return max(0, total - long_ttl), long_ttl


def _from_openai(data: Mapping[str, Any], prompt_key: str, output_key: str) -> Usage:
    """Chat completions (``prompt``/``completion``) or Responses (``input``/``output``): the
    ``<prompt_key>_tokens`` include the cached and written tokens; keep only the uncached rest."""
    where = f"{prompt_key}_tokens_details."
    prompt_details = _details(data, f"{prompt_key}_tokens_details")
    cached = _count(prompt_details, "cached_tokens", where)
    write_short, write_long = _openai_writes(prompt_details, where)
    output_details = _details(data, f"{output_key}_tokens_details")
    prompt = _count(data, f"{prompt_key}_tokens")
    output = _count(data, f"{output_key}_tokens")
    reasoning = _count(output_details, "reasoning_tokens", f"{output_key}_tokens_details.")
    total = _count(data, "total_tokens") if prompt_key == "prompt" else None
    if reasoning and total == prompt + output + reasoning:
        # Gemini's OpenAI-compatible endpoint counts thinking outside completion_tokens; the
        # total says so. Output always includes reasoning here.
        output += reasoning
    return Usage(
        input_tokens=max(0, prompt - cached - write_short - write_long),
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_5m_tokens=write_short,
        cache_write_1h_tokens=write_long,
        reasoning_tokens=reasoning,
    )


def _miss_reason(response: Mapping[str, Any]) -> tuple[str | None, int]:
    """``(type, cache_missed_input_tokens)`` of a response's ``diagnostics.cache_miss_reason``."""
    diagnostics = _details(response, "diagnostics")
    reason = _details(diagnostics, "cache_miss_reason")
    kind = reason.get("type")
    if kind is None:
        return None, 0
    if not isinstance(kind, str) or not kind:
        raise ValueError(
            f"response field 'diagnostics.cache_miss_reason.type' must be a string, got {kind!r}"
        )
    return kind, _count(reason, "cache_missed_input_tokens", "diagnostics.cache_miss_reason.")


def message_id(response: object) -> str | None:
    """The ``id`` of an Anthropic Messages response (``msg_...``), or ``None`` for anything else
    (a bare usage object, an OpenAI response)."""
    data = response if isinstance(response, Mapping) else None
    value = data.get("id") if data is not None else getattr(response, "id", None)
    if isinstance(value, str) and value.startswith("msg_"):
        return value
    return None


def _whole_response(usage: Usage, response: object) -> Usage:
    """``usage`` of a whole response with what the response says beside it: the counts its
    ``context_management.applied_edits`` cleared and its ``diagnostics.cache_miss_reason``."""
    cleared = _applied_edits(response)
    if cleared:
        usage = attrs.evolve(
            usage,
            cleared_input_tokens=cleared["cleared_input_tokens"],
            cleared_tool_uses=cleared["cleared_tool_uses"],
            cleared_thinking_turns=cleared["cleared_thinking_turns"],
        )
    reason, missed = _miss_reason({"diagnostics": field(response, "diagnostics")})
    if reason is None:
        return usage
    return attrs.evolve(usage, cache_miss_reason=reason, cache_missed_tokens=missed)


def usage_from_data(data: Any) -> Usage:
    """The :class:`Usage` whose ``attrs.asdict`` is ``data`` (the nested compaction usage
    included): how a usage saved as JSON data comes back in another process.

    :raises ValueError: ``data`` is not such a mapping.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"not a usage record: {data!r}")
    compaction = data.get("compaction")
    try:
        return Usage(
            **{**data, "compaction": None if compaction is None else usage_from_data(compaction)}
        )
    except TypeError as exc:
        raise ValueError(f"not a usage record ({exc})") from exc


def normalize_usage(raw: object) -> Usage:
    """Turn a provider's usage report into a :class:`Usage`.

    ``raw`` may be a :class:`Usage` (returned as is), a dict, or an SDK object (``anthropic``
    ``Usage``, ``openai`` ``CompletionUsage`` or ``ResponseUsage``, or anything with the same
    attributes); a whole response carrying a ``usage`` field is accepted too, and then its
    ``context_management.applied_edits`` fill the ``cleared_*`` counts. The shape is recognised by
    its keys: ``prompt_tokens``/``completion_tokens`` -> OpenAI chat (OpenRouter and Gemini's
    OpenAI-compatible endpoint included); Anthropic's
    ``cache_*_input_tokens``/``cache_creation``/``iterations`` -> Anthropic;
    ``input_tokens_details`` or ``total_tokens`` -> OpenAI Responses; bare
    ``input_tokens``/``output_tokens`` -> Anthropic.

    :raises ValueError: when no shape matches (the message lists the keys seen) or a count is
        not a non-negative integer (the message names the field).
    """
    if isinstance(raw, Usage):
        return raw
    if field(raw, "usage") is not None and all(
        field(raw, key) is None for key in (*_TOKEN_KEYS, *_ANTHROPIC_ONLY_KEYS)
    ):
        # A whole response (a dict or the SDK's object): its usage, edits and diagnostics are
        # read, the rest of its content is not.
        return _whole_response(normalize_usage(field(raw, "usage")), raw)
    data = _as_mapping(raw)
    if data is None:
        raise ValueError(
            f"cannot read a usage report from {type(raw).__name__}: expected a dict or an SDK "
            "usage object"
        )
    keys = data.keys()
    if not keys.isdisjoint(_CHAT_KEYS):
        return _from_openai(data, "prompt", "completion")
    if not keys.isdisjoint(_ANTHROPIC_ONLY_KEYS):
        return _from_anthropic(data)
    if not keys.isdisjoint(_RESPONSES_KEYS):
        return _from_openai(data, "input", "output")
    if "input_tokens" in data or "output_tokens" in data:
        return _from_anthropic(data)
    raise ValueError(
        f"unrecognised usage shape: keys seen {sorted(data)}; expected Anthropic "
        "(input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens), "
        "OpenAI chat (prompt_tokens, completion_tokens) or OpenAI Responses "
        "(input_tokens, output_tokens, input_tokens_details)"
    )
