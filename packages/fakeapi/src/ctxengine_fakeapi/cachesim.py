"""A simulation of Anthropic's prompt cache, for replaying sessions without an API.

The model of the provider (documented behaviour, simplified to message granularity):

- a request is a sequence of pieces in cache order: tools, the system prompt, then each message;
  a ``cache_control`` marker ends a *breakpoint* after the piece that carries it;
- at each breakpoint the prefix up to it is written to the cache (billed as a cache write at the
  breakpoint's TTL price) unless it is shorter than the model's minimum cacheable prefix, in
  which case nothing is cached and nothing is said;
- a later request reads the longest cached prefix that ends at most ``lookback`` pieces before
  one of its breakpoints (the API checks about 20 block boundaries back), if it has not expired;
  a read refreshes the entry's lifetime;
- markers do not change the prefix: a piece's identity is its content without ``cache_control``;
- a marker on a block that is not the last of its message (or of a list ``system``) ends a
  breakpoint inside it: the message is then several pieces, cut after each marked block, and the
  piece up to a cut has the identity of the message truncated there. So a request that appends
  blocks after a marked one (a cache-aware summary call's instruction) reads the prefix an
  earlier request cached up to that block, as the API does at block granularity;
- a top-level ``cache_control`` on the request (Anthropic's automatic caching) is a breakpoint on
  the last piece, with its TTL, and counts like any other;
- :meth:`PromptCacheSimulator.fingerprint` and :func:`miss_reason` say why a request could not
  reuse an earlier one's prefix, the way Anthropic's ``diagnostics.cache_miss_reason`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ctxengine import TTL_SECONDS, PrefixCounter, TokenCounter, Usage

DEFAULT_LOOKBACK = 20


def _strip_markers(obj: Any) -> Any:
    """``obj`` as the cache sees it: without markers, string contents as one text block.

    A strategy turns a marked string content into a one-block list; the provider treats both
    forms as the same prefix, so they must get the same key.
    """
    if isinstance(obj, dict):
        stripped = {k: _strip_markers(v) for k, v in obj.items() if k != "cache_control"}
        if isinstance(stripped.get("content"), str):
            stripped["content"] = [{"type": "text", "text": stripped["content"]}]
        return stripped
    if isinstance(obj, list):
        return [_strip_markers(v) for v in obj]
    return obj


def _marker_ttl(obj: Any) -> str | None:
    """The TTL of the last ``cache_control`` marker inside ``obj`` (``None`` if unmarked)."""
    found: str | None = None
    if isinstance(obj, dict):
        marker = obj.get("cache_control")
        if isinstance(marker, Mapping):
            found = str(marker.get("ttl", "5m"))
        for value in obj.values():
            if isinstance(value, dict | list):
                found = _marker_ttl(value) or found
    elif isinstance(obj, list):
        for value in obj:
            found = _marker_ttl(value) or found
    return found


def _inner_cuts(blocks: Sequence[Any]) -> list[int]:
    """Where ``blocks`` are cut into pieces: after each marked block but the last one."""
    return [
        index + 1
        for index, block in enumerate(blocks[:-1])
        if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping)
    ]


@attrs.frozen
class Piece:
    """One cacheable unit of a request: its marker-free identity, marker TTL and size."""

    key: str
    ttl: str | None
    tokens: int


@attrs.define
class _Entry:
    expires: float
    ttl: str


class PromptCacheSimulator:
    """The provider's prompt cache for one session; :meth:`send` returns the usage it would bill.

    Per-message work is cached by message identity, so a replay costs O(new messages) per turn.
    """

    def __init__(
        self,
        counter: PrefixCounter,
        *,
        min_cacheable_tokens: int,
        lookback: int = DEFAULT_LOOKBACK,
        memo_limit: int = 100_000,
    ) -> None:
        self._counter = counter
        self._min = min_cacheable_tokens
        self._lookback = lookback
        self._cache: dict[int, _Entry] = {}
        # id(piece) -> (piece kept alive so the id is not reused, marker-free key, marker TTL)
        self._keys: dict[int, tuple[object, str, str | None]] = {}
        # id(message) -> (message kept alive, its pieces)
        self._split: dict[int, tuple[object, tuple[Piece, ...]]] = {}
        self._memo_limit = memo_limit

    def _identity(self, obj: object) -> tuple[str, str | None]:
        known = self._keys.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1], known[2]
        key = self._key(obj)
        ttl = _marker_ttl(obj)
        if len(self._keys) >= self._memo_limit:  # requests parsed afresh never repeat objects
            self._keys.clear()
        self._keys[id(obj)] = (obj, key, ttl)
        return key, ttl

    @staticmethod
    def _key(obj: object) -> str:
        """The marker-free identity of ``obj`` (not memoised)."""
        plain = _strip_markers(obj)
        if isinstance(plain, str):  # a string system prompt is one text block too
            plain = [{"type": "text", "text": plain}]
        return json.dumps(plain, sort_keys=True, ensure_ascii=False)

    def pieces(self, request: Mapping[str, Any]) -> list[Piece]:
        """The request in cache order: tools, system, then messages (OpenAI system included);
        a message or list system prompt with a marker before its last block is cut after each
        marked block (see the module docstring)."""
        pieces: list[Piece] = []
        tools = request.get("tools")
        if tools:
            pieces.append(Piece(*self._identity(tools), tokens=self._counter.count_tools(tools)))
        system = request.get("system")
        if system:
            if isinstance(system, list) and _inner_cuts(system):
                pieces.extend(self._cut(system, system, self._counter.count_system))
            else:
                tokens = self._counter.count_system(system)
                pieces.append(Piece(*self._identity(system), tokens=tokens))
        for message in request.get("messages") or ():
            pieces.extend(self._message_pieces(message))
        return pieces

    def _message_pieces(self, message: Any) -> tuple[Piece, ...]:
        known = self._split.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and _inner_cuts(content):

            def count(blocks: list[Any]) -> int:
                return self._counter.count_message({**message, "content": blocks})

            out = tuple(self._cut(message, content, count))
        else:
            key, ttl = self._identity(message)
            out = (Piece(key, ttl, tokens=self._counter.count_message(message)),)
        if len(self._split) >= self._memo_limit:
            self._split.clear()
        self._split[id(message)] = (message, out)
        return out

    def _cut(self, whole: Any, blocks: list[Any], count: Callable[[list[Any]], int]) -> list[Piece]:
        """``whole`` (a message, or a list system prompt) whose ``blocks`` carry a marker before
        the last one, as one piece per marked block and one for the rest. Each piece's tokens
        are what its blocks add to the count of those before them (``count`` of a block list)."""
        out: list[Piece] = []
        before = 0
        cuts = _inner_cuts(blocks)
        for cut in cuts:
            part = blocks[:cut]
            upto = part if whole is blocks else {**whole, "content": part}
            tokens = count(part)
            key = self._key(upto)
            out.append(Piece(key, _marker_ttl(blocks[cut - 1]), tokens=max(0, tokens - before)))
            before = tokens
        key = self._identity(whole)[0]
        rest = blocks[cuts[-1] :]
        outside = {} if whole is blocks else {k: v for k, v in whole.items() if k != "content"}
        rest_ttl = _marker_ttl(rest) or _marker_ttl(outside)
        out.append(Piece(key, rest_ttl, tokens=max(0, count(blocks) - before)))
        return out

    def send(self, request: Mapping[str, Any], now: float) -> Usage:
        """Simulate sending ``request`` at time ``now`` (seconds); returns the prompt usage.

        ``output_tokens`` is left at 0 for the caller to fill in.
        """
        pieces = self.pieces(request)
        automatic = request.get("cache_control")
        if isinstance(automatic, Mapping) and pieces and pieces[-1].ttl is None:
            pieces[-1] = attrs.evolve(pieces[-1], ttl=str(automatic.get("ttl", "5m")))
        hashes: list[int] = []
        cumulative: list[int] = []
        running_hash, running_tokens = 0, 0
        for piece in pieces:
            running_hash = hash((running_hash, piece.key))
            running_tokens += piece.tokens
            hashes.append(running_hash)
            cumulative.append(running_tokens)
        total = running_tokens
        breakpoints = [i for i, piece in enumerate(pieces) if piece.ttl is not None]

        # Longest live cached prefix reachable from a breakpoint.
        read_end = -1
        for bp in breakpoints:
            for i in range(bp, max(-1, bp - self._lookback - 1), -1):
                if i <= read_end:
                    break
                entry = self._cache.get(hashes[i])
                if entry is not None and entry.expires >= now:
                    read_end = i
                    break
        read_tokens = cumulative[read_end] if read_end >= 0 else 0
        if read_end >= 0:
            entry = self._cache[hashes[read_end]]
            entry.expires = now + TTL_SECONDS[entry.ttl]

        # Write every breakpoint past the read point whose prefix is long enough to cache.
        written = {"5m": 0, "1h": 0}
        covered = read_tokens
        for bp in breakpoints:
            ttl = pieces[bp].ttl or "5m"
            ttl = ttl if ttl in TTL_SECONDS else "5m"
            if bp <= read_end or cumulative[bp] < self._min:
                continue
            written[ttl] += cumulative[bp] - covered
            covered = cumulative[bp]
            self._cache[hashes[bp]] = _Entry(expires=now + TTL_SECONDS[ttl], ttl=ttl)
        return Usage(
            input_tokens=total - covered,
            cache_read_tokens=read_tokens,
            cache_write_5m_tokens=written["5m"],
            cache_write_1h_tokens=written["1h"],
        )

    def clear(self) -> None:
        """Forget every cache entry (e.g. a new deployment)."""
        self._cache.clear()

    def fingerprint(self, request: Mapping[str, Any]) -> Fingerprint:
        """What a later request is compared with to explain a cache miss."""
        tools = request.get("tools")
        system = request.get("system")
        keys: list[str] = []
        cumulative: list[int] = []
        running = 0
        if tools:
            running += self._counter.count_tools(tools)
        if system:
            running += self._counter.count_system(system)
        for message in request.get("messages") or ():
            key, _ = self._identity(message)
            running += self._counter.count_message(message)
            keys.append(key)
            cumulative.append(running)
        return Fingerprint(
            model=str(request.get("model")),
            tools=self._identity(tools)[0] if tools else None,
            system=self._identity(system)[0] if system else None,
            messages=tuple(keys),
            tokens=running,
        )


@attrs.frozen
class Fingerprint:
    """A request as the cache sees it: model, tools, system and each message's identity."""

    model: str
    tools: str | None
    system: str | None
    messages: tuple[str, ...]
    tokens: int


def miss_reason(
    previous: Fingerprint | None, current: Fingerprint, read_tokens: int
) -> dict[str, Any] | None:
    """Anthropic's ``cache_miss_reason`` for ``current`` compared with ``previous``, or ``None``
    when the previous request is a prefix of this one (nothing diverged).

    ``cache_missed_input_tokens`` is the previous prompt minus what this request read.
    """
    if previous is None:
        return {"type": "previous_message_not_found"}
    missed = max(0, previous.tokens - read_tokens)
    for kind, changed in (
        ("model_changed", previous.model != current.model),
        ("tools_changed", previous.tools != current.tools),
        ("system_changed", previous.system != current.system),
        (
            "messages_changed",
            current.messages[: len(previous.messages)] != previous.messages,
        ),
    ):
        if changed:
            return {"type": kind, "cache_missed_input_tokens": missed}
    return None


def prompt_usage(counter: TokenCounter, request: Mapping[str, Any]) -> Usage:
    """The usage of ``request`` with no prompt cache at all: every token is plain input."""
    messages: Sequence[Any] = request.get("messages") or ()
    return Usage(
        input_tokens=counter.count(list(messages), request.get("system"), request.get("tools"))
    )
