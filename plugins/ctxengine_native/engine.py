"""The native engine's ``compress``: the server compacts, the block goes back verbatim, and any
refusal falls back to the local engine (``docs/builtins/native.md``).

In order:

1. **Splice.** When a response already carried a server compaction (a host that asks for it
   inside its own requests), everything before the last compaction block with a summary is what
   the server no longer reads: it is dropped and the block opens the conversation.
2. **Route.** Which server compacts this conversation (:func:`server_api`); a route without
   server-side compaction is a refusal.
3. **Cut.** A tail of at least ``keep_last`` messages stays verbatim; the rest is sent, unless
   (automatic compactions only) what the server would replace (:func:`replaceable`) is less than
   :data:`MIN_SHARE` of the prompt: the server would be paid, and the cached prefix rewritten,
   for a prompt still near the threshold.
4. **Compact.** Anthropic: a ``compact_20260112`` request paused after the compaction, whose
   ``compaction`` block becomes the first block of the tail's first (assistant) message, in place
   of everything it summarises. Responses: ``responses.compact``, whose output (the user messages,
   then one compaction item) replaces the sent part.
5. **Fall back.** Every refusal (:mod:`.server`) hands the conversation to the fallback engine
   through the kernel (:meth:`ctxengine.EngineContext.fallback_compress`); the result says
   ``fallback`` = why and its reason says both what failed and what the fallback did. Nothing is
   dropped on the way: a refusal never changes the conversation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ctxengine import CompressResult, Usage, normalize_usage
from ctxengine.messages import ItemsConverter, cut_points, is_compaction_block
from ctxengine_native.server import (
    AnthropicServer,
    Refused,
    ResponsesServer,
    endpoint,
)
from ctxengine_native.settings import NativeSettings, settings
from ctxengine_native.state import NativeState, get_state

if TYPE_CHECKING:
    from ctxengine import Conversation, EngineContext, Message, Stage

ENGINE = "native"

MIN_SHARE = 0.2
"""The least share of the prompt an automatic compaction sends to the server. Below it the tail
kept verbatim is most of the prompt (large tool results, say): compacting the rest saves little,
leaves the prompt near the threshold, and the next turn compacts again, each time paying for the
server's compaction and rewriting the cached prefix. A forced compaction is always sent."""
ServerApi = Literal["anthropic", "openai-responses"]
_SYSTEM_ROLES = ("system", "developer")


@attrs.frozen
class Compacted:
    """What a server compaction made of a conversation."""

    messages: list[Message]
    usage: Usage
    summarised: int
    """How many messages the server's summary stands for."""


def compress(
    ctx: EngineContext,
    conversation: Conversation,
    stage: Stage,
    force: bool,
    focus: str | None,
    message_budget: int | None = None,
) -> CompressResult:
    """Compact ``conversation`` on the server, or fall back (see the module docstring).

    ``message_budget`` (the gateway's hard limit) goes to the fallback engine; the server's
    compaction leaves its summary and the last ``keep_last`` messages, and the kernel reports a
    result still over the budget."""
    started = time.perf_counter()
    state = get_state(ctx)
    options = settings(ctx)
    messages = conversation.messages
    tokens_before = ctx.tokens.count(messages, conversation.system)

    def unchanged(reason: str, usage: Usage | None = None) -> CompressResult:
        result = CompressResult.unchanged(
            "noop",
            reason,
            conversation,
            engine=ENGINE,
            tokens=tokens_before,
            duration_s=time.perf_counter() - started,
        )
        return attrs.evolve(result, usage=usage)

    if not ctx.config.context.compaction and not force:
        return unchanged("compression is disabled (context.compaction: false)")
    if not messages:
        return unchanged("the conversation is empty")
    # Whatever the server did inside a response is handled now, by the splice below.
    state.inband = False
    if conversation.format == "anthropic":
        spliced = _splice(messages)
        if spliced is not None:
            return _result(ctx, conversation, spliced, tokens_before, started, inband=True)
    try:
        api = server_api(ctx, conversation, options)
        cut = find_cut(messages, conversation.format, options.keep_last)
        if cut is None:
            return unchanged(
                f"too short to compact on the server: {len(messages)} messages, and the last "
                f"{options.keep_last} stay verbatim (engines.native.keep_last)"
            )
        if not force:
            replaced = replaceable(messages[:cut], api)
            share = ctx.tokens.count(replaced, None)
            if share < MIN_SHARE * tokens_before:
                return unchanged(
                    f"compacting would not pay: the server would replace {len(replaced)} "
                    f"messages holding {share:,} of the prompt's {tokens_before:,} tokens (under "
                    f"{MIN_SHARE:.0%}); the rest stays verbatim (engines.native.keep_last "
                    f"{options.keep_last})"
                )
        if api == "anthropic":
            done = _compact_anthropic(ctx, options, state, conversation, cut, focus)
        else:
            done = _compact_responses(ctx, options, state, conversation, cut)
    except Refused as refused:
        return fall_back(
            ctx, state, conversation, refused, stage, force, focus, started, message_budget
        )
    if ctx.tokens.count(done.messages, conversation.system) >= tokens_before:
        return unchanged(
            f"the server's compaction of {done.summarised} messages is not smaller than they "
            "are; the conversation is kept as it was",
            done.usage,
        )
    return _result(ctx, conversation, done, tokens_before, started, inband=False)


def _result(
    ctx: EngineContext,
    conversation: Conversation,
    done: Compacted,
    tokens_before: int,
    started: float,
    *,
    inband: bool,
) -> CompressResult:
    state = get_state(ctx)
    tokens_after = ctx.tokens.count(done.messages, conversation.system)
    state.compactions += 1
    state.guard.record_saving(1.0 - tokens_after / tokens_before if tokens_before else 0.0)
    if inband:
        reason = (
            f"the server compacted while answering; the {done.summarised} messages before its "
            f"compaction block were dropped ({tokens_before:,} -> {tokens_after:,} tokens)"
        )
    else:
        reason = (
            f"the server compacted {done.summarised} messages into its compaction block, sent "
            f"back verbatim ({tokens_before:,} -> {tokens_after:,} tokens)"
        )
    return CompressResult(
        status="compacted",
        reason=reason,
        conversation=conversation.with_messages(done.messages, conversation.system),
        engine=ENGINE,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        messages_before=len(conversation.messages),
        messages_after=len(done.messages),
        provider="server",
        duration_s=time.perf_counter() - started,
        usage=None if inband else done.usage,
    )


def fall_back(
    ctx: EngineContext,
    state: NativeState,
    conversation: Conversation,
    refused: Refused,
    stage: Stage,
    force: bool,
    focus: str | None,
    started: float,
    message_budget: int | None = None,
) -> CompressResult:
    """The fallback engine's compaction of ``conversation``, saying why the server did not."""
    state.fallbacks += 1
    why = f"server compaction refused ({refused.why}: {refused.detail})"
    result = ctx.fallback_compress(
        conversation, stage=stage, force=force, focus=focus, message_budget=message_budget
    )
    if result is None:
        tokens = ctx.tokens.count(conversation.messages, conversation.system)
        reason = (
            f"{why}; no fallback engine is loaded, so the messages are unchanged; automatic "
            f"compaction paused for {state.guard.cooldown_s:g} s"
        )
        state.guard.start_cooldown(ctx.clock(), reason)
        result = CompressResult.unchanged(
            "aborted", reason, conversation, engine=ENGINE, tokens=tokens
        )
        return attrs.evolve(result, fallback=refused.why, duration_s=time.perf_counter() - started)
    if result.status == "aborted":
        state.guard.start_cooldown(ctx.clock(), f"{why}; the fallback aborted too")
    return attrs.evolve(
        result,
        engine=ENGINE,
        reason=f"{why}; fell back to the {ctx.fallback_engine} engine: {result.reason}",
        fallback=refused.why,
        duration_s=time.perf_counter() - started,
    )


# --- which server, where to cut -------------------------------------------------------------------


def server_api(
    ctx: EngineContext, conversation: Conversation, options: NativeSettings
) -> ServerApi:
    """Which server compacts ``conversation``.

    ``auto``: Anthropic's for an Anthropic-format conversation whose requests go to the native
    Anthropic API (or to ``engines.native.base_url`` when set); an OpenAI-format conversation has
    no server compaction unless ``api: openai-responses`` says the host calls the Responses API
    (chat completions has none).

    :raises Refused: ``unsupported-route`` when no server compacts this conversation.
    """
    fmt = conversation.format
    if options.api == "auto":
        if fmt == "openai":
            raise Refused(
                "unsupported-route",
                "an OpenAI-format conversation: OpenAI's chat completions API has no server-side "
                "compaction (set engines.native.api: openai-responses when the host calls "
                "client.responses)",
            )
        if options.base_url is None and ctx.route not in (None, "anthropic"):
            raise Refused(
                "unsupported-route",
                f"requests go to {ctx.config.model.base_url} (route {ctx.route}), which does not "
                "take Anthropic's server-side compaction (set engines.native.api: anthropic to "
                "send it there anyway)",
            )
        return "anthropic"
    wanted = "anthropic" if options.api == "anthropic" else "openai"
    if fmt != wanted:
        raise Refused(
            "unsupported-route",
            f"engines.native.api is {options.api!r} but the conversation is in {fmt} format",
        )
    return options.api


def find_cut(messages: Sequence[Message], fmt: str, keep_last: int) -> int | None:
    """Where the verbatim tail starts, or ``None`` when the conversation is too short.

    The tail holds at least ``keep_last`` messages and starts where no tool call is split from
    its results. Anthropic: at an assistant message (the compaction block is put in front of its
    content, the position the API requires), so the part sent ends with a user message.
    Responses: at a user or assistant message after the leading system messages.
    """
    cuts = cut_points(messages, "anthropic" if fmt == "anthropic" else "openai")
    first = 0
    if fmt != "anthropic":
        while first < len(messages) and messages[first].get("role") in _SYSTEM_ROLES:
            first += 1
    roles = ("assistant",) if fmt == "anthropic" else ("user", "assistant")
    for c in range(len(messages) - keep_last, first + 1, -1):
        if cuts[c] and messages[c].get("role") in roles:
            return c
    return None


def replaceable(prefix: Sequence[Message], api: ServerApi) -> list[Message]:
    """The messages of ``prefix`` (the part sent) the server's compaction stands in for: all of
    them on Anthropic's; on the Responses API's all but the system and user messages, which its
    compacted output repeats verbatim."""
    if api == "anthropic":
        return list(prefix)
    return [m for m in prefix if m.get("role") not in ("user", *_SYSTEM_ROLES)]


# --- the two servers ------------------------------------------------------------------------------


def _server(
    ctx: EngineContext,
    options: NativeSettings,
    state: NativeState,
    provider: Literal["anthropic", "openai"],
) -> Any:
    """This session's client for ``provider`` at the configured endpoint, made on first use.

    :raises Refused: ``no-credentials`` (see :func:`ctxengine_native.server.endpoint`).
    """
    where = endpoint(
        ctx,
        provider=provider,
        base_url=options.base_url,
        api_key=options.api_key,
        timeout=options.timeout,
    )
    key = (provider, where.base_url, where.api_key)
    if key not in state.servers:
        kind = AnthropicServer if provider == "anthropic" else ResponsesServer
        state.servers[key] = kind(where)
    return state.servers[key]


def _compact_anthropic(
    ctx: EngineContext,
    options: NativeSettings,
    state: NativeState,
    conversation: Conversation,
    cut: int,
    focus: str | None,
) -> Compacted:
    server: AnthropicServer = _server(ctx, options, state, "anthropic")
    where = server.where
    model = ctx.config.model.name
    if options.check_model and server.model_supports(model) is False:
        raise Refused(
            "unsupported-model",
            f"the Models API at {where.base_url} lists no compact_20260112 support for {model}",
        )
    messages = conversation.messages
    system = conversation.system
    tail = messages[cut:]
    prefix = sendable(messages[:cut])
    try:
        counted = server.count(model, system, prefix)
    except Refused:
        counted = ctx.tokens.estimate(prefix, system)  # a gateway without count_tokens
    trigger = min(ctx.fraction_of_window(options.threshold), counted)
    instructions = options.instructions
    if focus:
        instructions = f"{instructions or ''} Keep the most detail about: {focus}".strip()
    block, usage = server.compact(model, system, prefix, trigger=trigger, instructions=instructions)
    return Compacted(
        messages=[_opened_with(tail[0], block), *tail[1:]],
        usage=normalize_usage(usage),
        summarised=len(prefix),
    )


PLACEHOLDER = "(no text)"
"""Stands in, in the copy sent for compaction, for a text that is only whitespace."""


def sendable(messages: Sequence[Message]) -> list[Message]:
    """``messages`` as the Messages API takes them for a compaction: text blocks holding only
    whitespace (which the API refuses, and recorded sessions hold) are left out, or read
    :data:`PLACEHOLDER` when nothing else is in the message. Only the copy sent changes; the
    messages kept verbatim are never touched."""
    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        sent = message
        if isinstance(content, str):
            if not content.strip():
                sent = {**message, "content": PLACEHOLDER}
        elif isinstance(content, list):
            kept = [b for b in content if not _blank_text(b)]
            if len(kept) != len(content):
                sent = {**message, "content": kept or [{"type": "text", "text": PLACEHOLDER}]}
        out.append(sent)
    return out


def _blank_text(block: object) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and not block["text"].strip()
    )


def _opened_with(message: Message, block: dict[str, Any]) -> Message:
    """``message`` (an assistant message) with ``block`` as its first content block."""
    content = message.get("content")
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}] if content.strip() else []
    else:
        blocks = list(content or [])
    return {**message, "content": [block, *blocks]}


def _compact_responses(
    ctx: EngineContext,
    options: NativeSettings,
    state: NativeState,
    conversation: Conversation,
    cut: int,
) -> Compacted:
    server: ResponsesServer = _server(ctx, options, state, "openai")
    messages = conversation.messages
    lead = 0
    while messages[lead].get("role") in _SYSTEM_ROLES:
        lead += 1
    prefix, tail = messages[:cut], messages[cut:]
    output, usage = server.compact(ctx.config.model.name, ItemsConverter().to_items(prefix))
    # The system messages stay as the host wrote them; the output repeats only user messages.
    kept = [item for item in output if item.get("role") not in _SYSTEM_ROLES]
    compacted = ItemsConverter().to_chat(kept)
    return Compacted(
        messages=[*messages[:lead], *compacted, *tail],
        usage=normalize_usage(usage),
        summarised=len(prefix) - lead,
    )


def _splice(messages: Sequence[Message]) -> Compacted | None:
    """The conversation from its last compaction block with a summary on, when that block is not
    already where it opens the conversation; else ``None``."""
    found = _latest_compaction(messages)
    if found is None or found == (0, 0):
        return None
    i, j = found
    first = {**messages[i], "content": list(messages[i]["content"][j:])}
    # Nothing to pay for this one: the server reported the cost with the response.
    return Compacted(messages=[first, *messages[i + 1 :]], usage=Usage(), summarised=i)


def _latest_compaction(messages: Sequence[Message]) -> tuple[int, int] | None:
    """``(message index, block index)`` of the last compaction block that holds a summary (the
    one the server reads the request from), or ``None``. Anthropic blocks whose ``content`` is
    ``null`` are failed compactions, no-ops to the server, and are skipped; a Responses item (no
    ``content`` key) always counts."""
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content")
        if not isinstance(content, list):
            continue
        for j in range(len(content) - 1, -1, -1):
            block = content[j]
            if is_compaction_block(block) and block.get("content", True) is not None:
                return i, j
    return None
