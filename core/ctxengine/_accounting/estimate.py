"""Token counts without a tokenizer: the rough estimate, its proven error bound, and
:class:`TokenEstimate`, a count known within bounds that is made exact only when asked.

The rough estimate of a text is its length / :data:`CHARS_PER_TOKEN`, rounded up. A message costs
the rough estimate of its token-bearing text (:func:`ctxengine.messages.text_size`, the length of
``message_text``), plus :data:`IMAGE_TOKENS` per image and :data:`MESSAGE_OVERHEAD_TOKENS`, the
same fixed costs the exact counter adds. It needs no tokenizer and one walk over the message's
structure that reads string lengths, so it costs a small fraction of a deep copy.

How far the exact (tiktoken ``o200k_base``) count of the text can be from the rough one is
bounded, for any run of consecutive messages of a conversation (a whole request, its tail, its
middle), by

    LOW_RATIO x rough - LOW_SLACK  <=  exact  <=  min(HIGH_RATIO x rough + HIGH_SLACK, 4 x chars)

(fixed costs are exact on both sides). The last term is a proof: a token is at least one UTF-8
byte and a character at most four. The others are measured: over all 636,049 runs of the bundled
transcripts (``tests/data/transcripts``: 83 sessions, 5,453 messages of Claude Code, OpenHands
and tau-bench agents; ``tests/test_estimate.py`` checks them on each run of the suite) the worst
runs need 1.35 x rough + 3,703 and 0.70 x rough - 5; the slacks leave headroom beyond both.

Decisions use the bound, not the estimate: :meth:`TokenEstimate.reaches` answers "is the exact
count at least this threshold?" from the bounds when the threshold lies outside them, and counts
exactly only when it lies inside. The answer is therefore the one exact counts give whenever the
bound holds. Should a conversation be stranger than anything bundled (say, nothing but minified
code), an estimate can fall on the wrong side of a threshold that lies within the error: the
decision then comes one turn late, when the provider's measured prompt size takes over. The
thresholds it concerns (compaction at 50-75 % of the window, the gateway at 85 %) leave the rest of
the window for exactly such errors; tiktoken itself is ~20 % off Claude's tokenizer before
calibration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ctxengine._messages.memo import NotAMessageError
from ctxengine._messages.read import text_size

if TYPE_CHECKING:
    from ctxengine._messages.conversation import Message, SystemPrompt

MESSAGE_OVERHEAD_TOKENS = 4
"""Per message: the role and the start/end markers the chat templates wrap around it (OpenAI's
published accounting is 3-4 tokens per message)."""

IMAGE_TOKENS = 1_600
"""Flat cost of one image. Anthropic bills about width*height/750 tokens, which is ~1,600 for an
image at its default maximum size (~1.15 megapixels); OpenAI's high-detail tiles land in the same
range. Real images are often cheaper, so this errs on the side of compacting early."""

CHARS_PER_TOKEN = 4
"""The rough estimator's ratio: English prose and code average about four characters a token."""

HIGH_RATIO = 1.35
HIGH_SLACK = 4_096
"""Exact text tokens of a run of messages are at most ``HIGH_RATIO x rough + HIGH_SLACK``."""

LOW_RATIO = 0.70
LOW_SLACK = 64
"""Exact text tokens of a run of messages are at least ``LOW_RATIO x rough - LOW_SLACK``."""

MAX_TOKENS_PER_CHAR = 4
"""Proven: a token is at least one UTF-8 byte, a character at most four bytes."""


# ---------------------------------------------------------------------------------------------
# Rough counts


def rough_tokens(chars: int) -> int:
    """Rough token count of ``chars`` characters of text: / :data:`CHARS_PER_TOKEN`, rounded
    up."""
    return -(-chars // CHARS_PER_TOKEN)


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` (:func:`rough_tokens` of its length)."""
    return rough_tokens(len(text))


def fixed_tokens(images: int) -> int:
    """The exact, text-independent cost of one message: :data:`MESSAGE_OVERHEAD_TOKENS` plus
    :data:`IMAGE_TOKENS` per image (the same for the rough and the exact count)."""
    return IMAGE_TOKENS * images + MESSAGE_OVERHEAD_TOKENS


def rough_system_tokens(system: SystemPrompt) -> int:
    """Rough cost of a system prompt: its text plus :data:`MESSAGE_OVERHEAD_TOKENS`."""
    return estimate_tokens(system_text(system)) + MESSAGE_OVERHEAD_TOKENS


def system_text(system: SystemPrompt | None) -> str:
    """Text of an Anthropic ``system`` value: a string or a list of text blocks.

    :raises ValueError: for anything else.
    """
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


def tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """Tool definitions as the JSON text they are counted as.

    :raises ValueError: when they are not JSON-serialisable.
    """
    try:
        return json.dumps(list(tools), ensure_ascii=False, default=str)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tools must be JSON-serialisable tool definitions: {exc}") from exc


def _require_message(msg: object, index: int | None = None) -> Message:
    if not isinstance(msg, dict):
        where = "message" if index is None else f"messages[{index}]"
        raise NotAMessageError(f"{where}: expected a dict, got {type(msg).__name__}")
    return msg


def rough_message_tokens(msg: Message) -> int:
    """Rough cost of one message: its token-bearing text / :data:`CHARS_PER_TOKEN` (rounded
    up), plus :data:`IMAGE_TOKENS` per image and :data:`MESSAGE_OVERHEAD_TOKENS`."""
    chars, images = text_size(_require_message(msg))
    return rough_tokens(chars) + fixed_tokens(images)


def rough_conversation_tokens(
    messages: Sequence[Message], system: SystemPrompt | None = None
) -> int:
    """Rough cost of a whole request: every message plus the (Anthropic) system prompt."""
    total = sum(rough_message_tokens(_require_message(m, i)) for i, m in enumerate(messages))
    if system is not None:
        total += rough_system_tokens(system)
    return total


# ---------------------------------------------------------------------------------------------
# Bounds


class TextSize:
    """What the bound needs to know about some text: its rough tokens, its characters, and the
    exact fixed costs (overheads, images) that come with it. Add them up run by run."""

    __slots__ = ("chars", "fixed", "rough")

    CHARS_PER_TOKEN: ClassVar[int] = CHARS_PER_TOKEN
    """The rough estimate's characters per token, for an engine that plans text by size."""

    def __init__(self, rough: int = 0, chars: int = 0, fixed: int = 0) -> None:
        self.rough = rough
        self.chars = chars
        self.fixed = fixed

    def add(self, chars: int, fixed: int) -> None:
        """Count one more piece: ``chars`` characters of text and ``fixed`` exact tokens."""
        self.rough += rough_tokens(chars)
        self.chars += chars
        self.fixed += fixed

    @property
    def value(self) -> int:
        """The rough estimate: rough text tokens plus the fixed costs."""
        return self.rough + self.fixed

    @property
    def low(self) -> int:
        """The least the exact count can be (see the module docstring)."""
        return self.fixed + max(0, math.floor(LOW_RATIO * self.rough) - LOW_SLACK)

    @property
    def high(self) -> int:
        """The most the exact count can be (see the module docstring)."""
        measured = math.ceil(HIGH_RATIO * self.rough) + HIGH_SLACK
        return self.fixed + min(measured, MAX_TOKENS_PER_CHAR * self.chars)


Refine = Callable[[], "TokenEstimate"]


class TokenEstimate:
    """A token count that lies in ``[low, high]``, with a point estimate, made exact on demand.

    Compare it with a threshold through :meth:`reaches`: that gives the answer the exact count
    would, and counts exactly only when the threshold lies within the bounds. :meth:`exact`
    always counts (as far as it is not known yet).

    :ivar value: the point estimate. It is computed from the content and the provider's usage
        only, never from what happened to be counted before, so it is the same however the
        history was handed over; it need not lie within bounds that were tightened later.
    :ivar low: the exact count is at least this.
    :ivar high: the exact count is at most this.
    :ivar measured: the count rests on the provider's measured prompt size (see
        :meth:`ctxengine.Session.prompt`).
    """

    __slots__ = ("_next", "_refine", "high", "low", "measured", "value")

    def __init__(
        self,
        value: int,
        low: int,
        high: int,
        *,
        measured: bool = False,
        refine: Refine | None = None,
    ) -> None:
        """:param refine: returns a tighter estimate (eventually one with ``low == high``);
            ``None`` when ``low == high`` is the exact count.
        :raises ValueError: when ``low > high``, or bounds differ without a way to refine.
        """
        if low > high:
            raise ValueError(f"low ({low}) must not exceed high ({high})")
        if refine is None and low != high:
            raise ValueError("an estimate whose bounds differ needs a way to refine it")
        self.value = value
        self.low = low
        self.high = high
        self.measured = measured
        self._refine = refine
        self._next: TokenEstimate | None = None

    @classmethod
    def known(cls, tokens: int, *, measured: bool = False) -> TokenEstimate:
        """An exact count."""
        return cls(tokens, tokens, tokens, measured=measured)

    @property
    def is_exact(self) -> bool:
        """Whether the bounds have met (``low == high`` is the exact count)."""
        return self._refine is None

    def refined(self) -> TokenEstimate:
        """The next, tighter estimate (computed once), or this one when it is exact."""
        if self._refine is None:
            return self
        if self._next is None:
            self._next = self._refine()
        return self._next

    def exact(self) -> int:
        """The exact count (counting whatever is not known yet)."""
        estimate = self
        while not estimate.is_exact:
            estimate = estimate.refined()
        return estimate.low

    def reaches(self, threshold: int | TokenEstimate) -> bool:
        """``exact() >= threshold``, computed exactly only when the bounds cannot tell.

        ``threshold`` may itself be an estimate (compare two runs of messages); both are then
        refined until their bounds separate.
        """
        mine: TokenEstimate = self
        other = (
            threshold if isinstance(threshold, TokenEstimate) else TokenEstimate.known(threshold)
        )
        while True:
            if mine.low >= other.high:
                return True
            if mine.high < other.low:
                return False
            if mine.is_exact and other.is_exact:
                return mine.low >= other.low
            mine, other = mine.refined(), other.refined()

    def __add__(self, other: TokenEstimate) -> TokenEstimate:
        """The estimate of the sum (exact when both are)."""
        if not isinstance(other, TokenEstimate):
            return NotImplemented
        both_exact = self.is_exact and other.is_exact
        return TokenEstimate(
            self.value + other.value,
            self.low + other.low,
            self.high + other.high,
            measured=self.measured and other.measured,
            refine=None if both_exact else lambda: self.refined() + other.refined(),
        )

    def __repr__(self) -> str:
        kind = "exact" if self.is_exact else f"{self.low}..{self.high}"
        return f"TokenEstimate({self.value}, {kind}{', measured' if self.measured else ''})"


def estimate_of(
    size: TextSize, count: Callable[[], int], *, exact: int | None = None
) -> TokenEstimate:
    """The estimate of text of ``size`` whose exact count ``count()`` returns.

    :param exact: the exact count when it is already known (the bounds are then that count).
    """
    if exact is not None:
        return TokenEstimate(size.value, exact, exact)
    low, high = size.low, size.high
    if low == high:
        return TokenEstimate(size.value, low, high)
    return TokenEstimate(size.value, low, high, refine=lambda: TokenEstimate.known(count()))
