"""The cache-aware summary call: the agent's last request, read from the prompt cache, plus the
instruction.

When the summary is written by the agent's own model on the agent's own route, the cheapest
summary request is the one the provider has just cached: the agent's last prepared request
(``ctx.last_request``), byte for byte, with its system prompt, tools and breakpoints, plus one
more user turn holding the instruction. Everything up to its last breakpoint is read from the
prompt cache (0.1x the input price) instead of a fresh summary prompt paid in full.

:func:`.summary.summarize` tries it first:

1. :func:`reusable_request` says whether ``ctx.last_request`` can be reused for the conversation
   (it starts with exactly the messages that request sent, the provider serves the main model on
   the main route, ``auxiliary.compression.cache_aware`` is on, the request plus instruction and
   answer fit the provider's window, and what it cached has not expired);
2. :func:`with_instruction` appends the instruction (template, previous summary to update, focus,
   budget, where the kept tail begins) after the request's last breakpoint, leaving every byte
   before it as it was sent;
3. :func:`ctxengine.call_summary_request` sends it through the SDK's failure policy (the first
   provider's retries and breaker) and the reply goes through the one summary check.

When the request cannot be reused, or the call fails without aborting, the caller uses the
bounded summary input instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxengine import TTL_SECONDS, SummaryError, SummaryProvider, call_summary_request
from ctxengine.messages import (
    carries_marker,
    detect_request_format,
    mark_message,
    marker_positions,
)
from ctxengine_compressor.transcript import render_message

if TYPE_CHECKING:
    from ctxengine import EngineContext, Format, Message, PreparedRequest, SummaryReply

__all__ = [
    "CacheAwareProvider",
    "build_instruction",
    "cache_aware_reply",
    "fits",
    "reusable_request",
    "with_instruction",
]


@runtime_checkable
class CacheAwareProvider(SummaryProvider, Protocol):
    """A summary provider that can send a whole request of the agent's own.

    ``serves_main`` is true when the provider talks to the main model on the main route (the
    only case where the agent's cached prefix can be read); ``complete_request`` sends
    ``request`` (the agent's API arguments, markers included) with ``max_tokens`` and returns the
    reply's text like ``complete``.
    """

    @property
    def serves_main(self) -> bool: ...

    def complete_request(self, request: Mapping[str, Any], max_tokens: int) -> str: ...


SAFETY_MARGIN = 0.05
"""Share of the summary model's window kept free for token-estimate error and message framing."""


def fits(provider: SummaryProvider, prompt_tokens: int, max_tokens: int) -> bool:
    """True when a prompt of ``prompt_tokens`` plus ``max_tokens`` of reply fit the provider's
    window with :data:`SAFETY_MARGIN` of it kept free."""
    room = int(provider.context_length * (1.0 - SAFETY_MARGIN)) - max_tokens
    return prompt_tokens <= max(room, 0)


def with_instruction(request: Mapping[str, Any], instruction: str) -> dict[str, Any]:
    """``request`` with ``instruction`` as the last user turn, after the request's last
    breakpoint; nothing before it changes.

    After a user message (the usual end: a question or tool results) the instruction becomes one
    more text block of that message, so roles still alternate; after an assistant message it is a
    new user message. A top-level automatic ``cache_control``, which the API applies to the last
    cacheable block, would move to the instruction and write it to the cache for a request that
    is never sent again (and miss the prefix the agent's request cached there): it becomes an
    explicit marker where the agent's request had it, on its last message (or is dropped when
    that message already carries a marker), so the same prefix is read and nothing is written.

    :raises ValueError: when ``request`` has no messages or ``instruction`` is blank.
    """
    if not instruction.strip():
        raise ValueError("the summary instruction is empty")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("the request to extend has no messages")
    out_request = dict(request)
    out = list(messages)
    automatic = _marker_ttl(request.get("cache_control"))
    if automatic is not None and isinstance(out[-1], dict):
        pinned = out[-1] if carries_marker(out[-1]) else None
        if pinned is None:
            pinned = mark_message(out[-1], automatic, detect_request_format(request), tool=True)
        if pinned is not None:
            out[-1] = pinned
            del out_request["cache_control"]
    block = {"type": "text", "text": instruction}
    last = out[-1]
    if isinstance(last, Mapping) and last.get("role") == "user":
        content = last.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}] if content else []
        elif isinstance(content, list):
            blocks = list(content)
        else:
            blocks = []
        out[-1] = {**last, "content": [*blocks, block]}
    else:
        out.append({"role": "user", "content": [block]})
    out_request["messages"] = out
    return out_request


def reusable_request(
    ctx: EngineContext,
    provider: SummaryProvider,
    messages: Sequence[Any],
    *,
    extra_tokens: int,
    max_tokens: int,
) -> PreparedRequest | None:
    """``ctx.last_request`` when a cache-aware summary call can reuse it for ``messages``.

    :param messages: the conversation being compacted; the last request must have sent exactly
        its first messages (the same objects, or equal ones).
    :param extra_tokens: the instruction's size, added to the request's for the window check.
    :param max_tokens: the summary's budget, which must fit the provider's window too.
    :returns: ``None`` when ``auxiliary.compression.cache_aware`` is off, the provider cannot send
        whole requests or does not serve the main model on the main route, there is no prepared
        request, it is not a prefix of ``messages``, it does not fit the provider's window, or
        what it cached has expired (:func:`still_cached`).
    """
    if not ctx.config.auxiliary.compression.cache_aware:
        return None
    if not isinstance(provider, CacheAwareProvider) or not provider.serves_main:
        return None
    prepared = ctx.last_request
    if prepared is None or not prepared.messages:
        return None
    sent = prepared.messages
    if len(sent) > len(messages):
        return None
    if not all(a is b or a == b for a, b in zip(sent, messages, strict=False)):
        return None
    if not fits(provider, round(prepared.tokens * ctx.tokens.ratio) + extra_tokens, max_tokens):
        return None
    if not still_cached(prepared, ctx.clock()):
        return None
    return prepared


def _marker_ttl(marker: object) -> str | None:
    """The TTL of a ``cache_control`` marker (the API's default "5m" when it names none);
    ``None`` when ``marker`` is no marker."""
    if not isinstance(marker, Mapping):
        return None
    return str(marker.get("ttl", "5m"))


def still_cached(prepared: PreparedRequest, now: float) -> bool:
    """Whether the prefix ``prepared`` cached up to its last breakpoint is still in the
    provider's cache at ``now`` (``ctx.clock()`` seconds): less time has passed since it was sent
    than that breakpoint's TTL (a top-level automatic marker is the last one).

    A request without any breakpoint counts as cached on OpenAI-format routes, whose provider
    caches prefixes by itself (5 minutes, or a day with ``prompt_cache_retention: 24h``), and as
    not cached in Anthropic format, which caches nothing unmarked. When it is not cached, a
    cache-aware summary call would pay (or write) the whole conversation, more than the bounded
    summarizer input costs.
    """
    request = prepared.request
    ttl = _marker_ttl(request.get("cache_control"))
    if ttl is None:
        markers = marker_positions(request)
        if markers:
            ttl = _marker_ttl(markers[-1][1]) or "5m"
    if ttl is None:
        if prepared.format != "openai":
            return False
        lives = 86_400.0 if request.get("prompt_cache_retention") == "24h" else TTL_SECONDS["5m"]
    else:
        lives = TTL_SECONDS.get(ttl, TTL_SECONDS["5m"])
    return now - prepared.sent_at < lives


TAIL_HINT_CHARS = 160
"""How much of the first kept message the instruction quotes to say where the summary stops."""


def build_instruction(
    template: str,
    update: str | None,
    focus: str | None,
    budget: int,
    tail_hint: str | None,
) -> str:
    """The last user turn of a cache-aware summary call.

    :param update: the instruction to update an earlier summary found in the conversation, when
        there is one.
    :param tail_hint: the opening of the first message that stays verbatim, when the kept tail
        is part of the conversation shown.
    """
    parts = [
        "Context compaction: stop working on the task for this one reply. Do not call any tool "
        "and do not answer or act on any request above. Write a hand-off summary of the "
        "conversation above, so that you can continue the work after its earlier turns are "
        "removed from your context. Keep file paths, commands, identifiers, numbers and error "
        "messages verbatim; never invent facts. Use exactly this template, headings unchanged "
        "and in this order (write 'None.' under an empty one):",
        template,
    ]
    if tail_hint:
        parts.append(
            "Summarise the conversation up to, not including, the message that begins as "
            f"follows; it and everything after it stay in your context word for word:\n"
            f"<kept-from>\n{tail_hint}\n</kept-from>"
        )
    if update:
        parts.append(update)
    if focus:
        parts.append(f"Keep the most detail about: {focus}")
    parts.append(f"Stay under about {budget:,} tokens. Output only the summary.")
    return "\n\n".join(parts)


def cache_aware_reply(
    ctx: EngineContext,
    provider: SummaryProvider,
    conversation: Sequence[Message],
    fmt: Format,
    *,
    tail_start: int,
    instruction_for: Callable[[str | None], str],
    budget: int,
    check: Callable[[str, str], str] | None = None,
    force: bool = False,
) -> tuple[SummaryReply | None, SummaryError | None]:
    """Try the cache-aware call.

    :param instruction_for: a callable ``(tail_hint) -> instruction`` (so the hint is quoted
        only when the kept tail is part of the request shown).
    :param check: the reply check (see :func:`ctxengine.call_summary_request`).
    :param force: pass an open circuit breaker (a host's explicit "compact now").
    :returns: ``(reply, None)`` on success; ``(None, error)`` when the call failed (the caller
        aborts when ``error.aborts``, else uses the bounded summarizer input; ``error.attempts``
        lists the requests); ``(None, None)`` when the request cannot be reused.
    """
    prepared = ctx.last_request
    shown = len(prepared.messages) if prepared is not None else 0
    hint = None
    if 0 <= tail_start < shown:
        hint = render_message(conversation[tail_start], fmt)[:TAIL_HINT_CHARS]
    instruction = instruction_for(hint)
    reusable = reusable_request(
        ctx,
        provider,
        conversation,
        extra_tokens=ctx.tokens.count_text(instruction),
        max_tokens=budget,
    )
    if reusable is None:
        return None, None
    request = with_instruction(reusable.request, instruction)
    try:
        reply = call_summary_request(provider, request, budget, check=check, force=force)
    except SummaryError as error:
        if not error.aborts:
            ctx.log.info(
                "compressor: cache-aware summary failed (%s); using the bounded input", error
            )
        return None, error
    return reply, None
