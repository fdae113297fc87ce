"""The cache-aware summary call: the agent's last request, read from the prompt cache, plus the
instruction.

Used by :func:`ctxengine_compressor.summary.summarize` when the kernel says the session's last
prepared request can be reused (:func:`ctxengine.reusable_request`: the summary provider serves
the main model on the main route, ``auxiliary.compression.cache_aware`` is on, the request is a
prefix of the conversation and fits the summary model's window). The model then reads the whole
conversation as the agent sent it, every byte up to its breakpoints from the cache, and the
instruction (template, previous summary to update, focus, budget, where the kept tail begins) at
the end. The call goes through the SDK's failure policy (:func:`ctxengine.call_summary_request`:
the first provider's retries and breaker) and its reply through the one summary check. When the
request cannot be reused, or the call fails without aborting, the caller uses the bounded input
instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ctxengine import SummaryError, call_summary_request, reusable_request, with_instruction

if TYPE_CHECKING:
    from ctxengine import EngineContext, Format, Message, SummaryProvider, SummaryReply

__all__ = ["build_instruction", "cache_aware_reply"]

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
        aborts when ``error.aborts``, else uses the bounded summariser input; ``error.attempts``
        lists the requests); ``(None, None)`` when the request cannot be reused.
    """
    from ctxengine_compressor.summary import render_message

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
