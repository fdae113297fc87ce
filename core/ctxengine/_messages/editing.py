"""Server-side context management in requests: compaction blocks and Anthropic's context edits.

The rules a request must keep when a provider shortens the conversation on its side, in one
place for the native engine, the kernel's request preparation, the validator and the replay.

**Compaction.** Anthropic's ``compact_20260112`` edit (beta ``compact-2026-01-12``) answers with
a ``compaction`` block (``content``: the summary, or ``null`` when compaction failed;
``encrypted_content``) that the client sends back verbatim as the first block of the first
message, in place of everything it summarises; the server reads a request from its last
compaction block on. OpenAI's Responses API returns an opaque ``compaction`` item, which the chat
form (:class:`ctxengine.messages.ItemsConverter`) keeps as the only part of an assistant message.
:func:`is_compaction_block` recognises both.

**Context edits.** ``clear_tool_uses_20250919`` and ``clear_thinking_20251015`` (beta
``context-management-2025-06-27``) clear older tool uses and thinking blocks. A breakpoint on a
block the server may clear caches a prefix no later request repeats, so
:func:`clearable_blocks` says which blocks may be cleared and :func:`markers_kept_off_cleared`
moves such breakpoints. :func:`with_edits` adds edits and betas to a request given as SDK call
arguments, :func:`request_edits` and :func:`request_betas` read them. Nothing here mutates its
input.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxengine._messages.conversation import Message
from ctxengine._messages.markers import can_carry_marker, unmarked

if TYPE_CHECKING:
    from ctxengine._messages.memo import MessageView

__all__ = [
    "CLEAR_THINKING_EDIT",
    "CLEAR_TOOL_USES_EDIT",
    "COMPACTION_BLOCK",
    "COMPACT_BETA",
    "COMPACT_EDIT",
    "CONTEXT_MANAGEMENT_BETA",
    "DEFAULT_KEEP_TOOL_USES",
    "EDIT_BETAS",
    "EditBlock",
    "clearable_blocks",
    "clearable_in",
    "edit_blocks",
    "edit_problems",
    "is_compaction_block",
    "markers_kept_off_cleared",
    "remembered_edit_blocks",
    "request_betas",
    "request_edits",
    "with_edits",
]

COMPACTION_BLOCK = "compaction"
"""The ``type`` of an Anthropic compaction block and of an OpenAI Responses compaction item."""

COMPACT_EDIT = "compact_20260112"
CLEAR_TOOL_USES_EDIT = "clear_tool_uses_20250919"
CLEAR_THINKING_EDIT = "clear_thinking_20251015"
COMPACT_BETA = "compact-2026-01-12"
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"

EDIT_BETAS: Mapping[str, str] = {
    COMPACT_EDIT: COMPACT_BETA,
    CLEAR_TOOL_USES_EDIT: CONTEXT_MANAGEMENT_BETA,
    CLEAR_THINKING_EDIT: CONTEXT_MANAGEMENT_BETA,
}
"""The beta each edit type needs in the ``anthropic-beta`` header."""

DEFAULT_KEEP_TOOL_USES = 3
"""How many recent tool uses ``clear_tool_uses_20250919`` keeps when ``keep`` is not given (the
API's default)."""

_BETA_HEADER = "anthropic-beta"
_COUNT_KEYS: Mapping[str, tuple[str, ...]] = {
    "trigger": ("input_tokens", "tool_uses"),
    "keep": ("tool_uses",),
    "clear_at_least": ("input_tokens",),
}


# --- compaction blocks --------------------------------------------------------------------------


def is_compaction_block(block: object) -> bool:
    """Whether ``block`` is a compaction block (Anthropic) or compaction item part (Responses)."""
    if isinstance(block, Mapping):
        return bool(block.get("type") == COMPACTION_BLOCK)
    return False


def opens_with_compaction(message: object) -> bool:
    """Whether the content of ``message`` opens with a compaction block: where an engine puts
    the one it got back, standing for every turn before it."""
    content = message.get("content") if isinstance(message, Mapping) else None
    return isinstance(content, list) and bool(content) and is_compaction_block(content[0])


# --- where a request keeps its edits and betas ---------------------------------------------------


def _context_management(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
    # None first: most requests have neither key, and the Mapping ABC's check runs in Python.
    value = request.get("context_management")
    if value is not None and isinstance(value, Mapping):
        return value
    extra = request.get("extra_body")
    if extra is None:
        return None
    if isinstance(extra, Mapping) and isinstance(extra.get("context_management"), Mapping):
        found: Mapping[str, Any] = extra["context_management"]
        return found
    return None


def request_edits(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``context_management.edits`` of a request (top level or ``extra_body``), in order."""
    management = _context_management(request)
    edits = management.get("edits") if management is not None else None
    if not isinstance(edits, list | tuple):
        return []
    return [edit for edit in edits if isinstance(edit, Mapping)]


def request_betas(request: Mapping[str, Any]) -> set[str]:
    """The betas a request asks for: its ``betas`` argument and the ``anthropic-beta`` header of
    ``extra_headers`` (comma-separated)."""
    found: set[str] = set()
    betas = request.get("betas")
    if isinstance(betas, list | tuple):
        found.update(str(b) for b in betas)
    headers = request.get("extra_headers")
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if str(name).lower() == _BETA_HEADER and isinstance(value, str):
                found.update(part.strip() for part in value.split(",") if part.strip())
    return found


def with_edits(
    request: Mapping[str, Any], edits: Iterable[Mapping[str, Any]], *, betas: Iterable[str] = ()
) -> dict[str, Any]:
    """``request`` with ``edits`` added to its ``context_management`` and ``betas`` requested.

    An edit whose ``type`` the request already has is not added (the host's own configuration
    wins). Edits go where the request already keeps them, else into ``extra_body``; betas into
    ``betas`` when the request has that argument, else into the ``anthropic-beta`` header of
    ``extra_headers`` (merged with what is there). Each beta an added edit needs
    (:data:`EDIT_BETAS`) is requested too. Copy-on-write: only the dicts on the way are new.
    """
    out = dict(request)
    present = {edit.get("type") for edit in request_edits(request)}
    added = [dict(edit) for edit in edits if edit.get("type") not in present]
    wanted = [*betas, *(EDIT_BETAS[e["type"]] for e in added if e.get("type") in EDIT_BETAS)]
    if added:
        if isinstance(request.get("context_management"), Mapping):
            management = dict(request["context_management"])
            management["edits"] = [*request_edits(request), *added]
            out["context_management"] = management
        else:
            extra = dict(request.get("extra_body") or {})
            management = dict(extra.get("context_management") or {})
            management["edits"] = [*request_edits(request), *added]
            extra["context_management"] = management
            out["extra_body"] = extra
    missing = [beta for beta in dict.fromkeys(wanted) if beta not in request_betas(request)]
    if missing:
        if isinstance(request.get("betas"), list | tuple):
            out["betas"] = [*request["betas"], *missing]
        else:
            headers = dict(request.get("extra_headers") or {})
            name = next((k for k in headers if str(k).lower() == _BETA_HEADER), _BETA_HEADER)
            current = headers.get(name)
            parts = [p.strip() for p in current.split(",")] if isinstance(current, str) else []
            headers[name] = ",".join([*(p for p in parts if p), *missing])
            out["extra_headers"] = headers
    return out


def edit_problems(edits: object) -> list[str]:
    """What is wrong with the shape of a ``context_management.edits`` value, one line each.

    Checks the types the SDK defines (``compact_20260112``, ``clear_tool_uses_20250919``,
    ``clear_thinking_20251015``), the ``{"type", "value"}`` counts of ``trigger``, ``keep`` and
    ``clear_at_least``, that no type appears twice, and that ``clear_thinking_20251015`` comes
    first (the API applies thinking clearing before the other edits).
    """
    if not isinstance(edits, list | tuple):
        return [f"context_management.edits must be a list, got {type(edits).__name__}"]
    problems: list[str] = []
    seen: list[str] = []
    for k, edit in enumerate(edits):
        where = f"context_management.edits[{k}]"
        if not isinstance(edit, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        kind = edit.get("type")
        if kind not in EDIT_BETAS:
            problems.append(f"{where}.type: unknown edit {kind!r}; known: {', '.join(EDIT_BETAS)}")
            continue
        if kind in seen:
            problems.append(f"{where}: a second {kind} edit; each type may appear once")
        if kind == CLEAR_THINKING_EDIT and seen:
            problems.append(f"{where}: {CLEAR_THINKING_EDIT} must be the first edit")
        seen.append(str(kind))
        for key, units in _COUNT_KEYS.items():
            value = edit.get(key)
            if value is None or (kind == CLEAR_THINKING_EDIT and key == "keep"):
                continue
            if kind == COMPACT_EDIT and key != "trigger":
                problems.append(f"{where}.{key}: {COMPACT_EDIT} takes no {key!r}")
                continue
            if not _is_count(value, units):
                allowed = " or ".join(repr(u) for u in units)
                problems.append(
                    f"{where}.{key}: must be {{'type': {allowed}, 'value': <int >= 0>}}, "
                    f"got {value!r}"
                )
        keep = edit.get("keep")
        if kind == CLEAR_THINKING_EDIT and not _thinking_keep(keep):
            problems.append(
                f"{where}.keep: must be 'all', {{'type': 'all'}} or "
                f"{{'type': 'thinking_turns', 'value': <int>}}, got {keep!r}"
            )
    return problems


def _thinking_keep(keep: object) -> bool:
    if keep is None or keep == "all" or _is_count(keep, ("thinking_turns",)):
        return True
    return isinstance(keep, Mapping) and keep.get("type") == "all"


def _is_count(value: object, units: tuple[str, ...]) -> bool:
    if not isinstance(value, Mapping) or value.get("type") not in units:
        return False
    number = value.get("value")
    return isinstance(number, int) and not isinstance(number, bool) and number >= 0


# --- which blocks the server may clear ------------------------------------------------------------


def _count_value(value: object, default: int) -> int:
    if isinstance(value, Mapping) and isinstance(value.get("value"), int):
        return int(value["value"])
    return default


EditBlock = tuple[int, str, str, str]
"""A block of one message that context edits look at: ``(block index, kind, id, tool name)``
with kind ``"tool_use"`` (an assistant's: its id and name), ``"tool_result"`` (id: its
``tool_use_id``; name ``""``) or ``"thinking"`` (an assistant's thinking or redacted thinking;
id and name ``""``)."""


def edit_blocks(message: object) -> tuple[EditBlock, ...]:
    """The blocks of ``message`` that :func:`clearable_blocks` reads, in order.

    What a message holds for the edits depends on its content only, so a caller that has seen
    the same content before (the session's message memo) may keep the answer and pass it back
    instead of walking the message again on every request."""
    if not isinstance(message, Mapping):
        return ()
    content = message.get("content")
    if not isinstance(content, list):
        return ()
    assistant = message.get("role") == "assistant"
    found = (_edit_block(j, block, assistant) for j, block in enumerate(content))
    return tuple(block for block in found if block is not None)


def _edit_block(j: int, block: object, assistant: bool) -> EditBlock | None:
    """Block ``j`` as :func:`edit_blocks` lists it, or None when the edits do not look at it
    (only tool results are read in messages other than the assistant's)."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "tool_result":
        return (j, "tool_result", str(block.get("tool_use_id")), "")
    if not assistant:
        return None
    if kind == "tool_use":
        return (j, "tool_use", str(block.get("id")), str(block.get("name")))
    if kind in ("thinking", "redacted_thinking"):
        return (j, "thinking", "", "")
    return None


def remembered_edit_blocks(
    view: MessageView, sent: Sequence[Any]
) -> tuple[list[tuple[EditBlock, ...]], list[int]]:
    """:func:`edit_blocks` of each message of ``sent``, kept in the memo entries of ``view``, and
    the indices of the messages of ``sent`` that may carry a ``cache_control`` marker.

    ``sent`` is the message list of a request prepared from the list ``view`` resolved: a message
    that is still the object the view resolved (everything the cache strategy did not mark)
    takes its entry's blocks, computed once per message content and session, and may carry a
    marker only if its entry says so; any other message is read, and may. So a request with
    context edits walks the blocks of its new and marked messages only, not of the whole
    conversation."""
    items, entries = view.items, view.entries
    known = min(len(entries), view.length)
    blocks: list[tuple[EditBlock, ...]] = []
    marked: list[int] = []
    for i, message in enumerate(sent):
        if i < known and message is items[i]:
            entry = entries[i]
            found = entry.edit_blocks
            if found is None:
                found = entry.edit_blocks = edit_blocks(entry.snapshot)
            blocks.append(found)
            if entry.marked:
                marked.append(i)
        else:
            blocks.append(edit_blocks(message))
            marked.append(i)
    return blocks, marked


def clearable_blocks(
    messages: Sequence[Message], edits: Iterable[Mapping[str, Any]]
) -> frozenset[tuple[int, int]]:
    """The ``(message index, block index)`` of every block ``edits`` may clear in ``messages``.

    For ``clear_tool_uses_20250919``: the ``tool_result`` blocks of every tool use older than the
    last ``keep`` tool uses (all tool uses counted, so the set covers whatever the server keeps),
    except tools named in ``exclude_tools``; with ``clear_tool_inputs`` (``true``, or a list naming
    the tool) their ``tool_use`` blocks too. For ``clear_thinking_20251015``: the thinking blocks of
    assistant turns older than the last ``keep`` thinking turns (none for ``"all"``). The server
    clears only once its trigger is reached; the set ignores the trigger, so a breakpoint kept off
    it is safe on every later request too.
    """
    return clearable_in([edit_blocks(message) for message in messages], edits)


def clearable_in(
    blocks: Sequence[tuple[EditBlock, ...]], edits: Iterable[Mapping[str, Any]]
) -> frozenset[tuple[int, int]]:
    """:func:`clearable_blocks` from each message's :func:`edit_blocks` (``blocks[i]`` for
    message ``i``)."""
    cleared: set[tuple[int, int]] = set()
    for edit in edits:
        kind = edit.get("type")
        if kind == CLEAR_TOOL_USES_EDIT:
            cleared |= _clearable_tool_uses(blocks, edit)
        elif kind == CLEAR_THINKING_EDIT:
            cleared |= _clearable_thinking(blocks, edit.get("keep"))
    return frozenset(cleared)


def _clearable_tool_uses(
    blocks: Sequence[tuple[EditBlock, ...]], edit: Mapping[str, Any]
) -> set[tuple[int, int]]:
    uses: list[tuple[int, int, str, str]] = []  # message, block, id, tool name
    results: dict[str, tuple[int, int]] = {}
    for i, found in enumerate(blocks):
        for j, kind, ident, name in found:
            if kind == "tool_use":
                uses.append((i, j, ident, name))
            elif kind == "tool_result":
                results.setdefault(ident, (i, j))
    keep = _count_value(edit.get("keep"), DEFAULT_KEEP_TOOL_USES)
    excluded = {str(name) for name in edit.get("exclude_tools") or ()}
    inputs = edit.get("clear_tool_inputs")
    cleared: set[tuple[int, int]] = set()
    for i, j, call_id, name in uses[: max(0, len(uses) - keep)]:
        if name in excluded:
            continue
        if call_id in results:
            cleared.add(results[call_id])
        if inputs is True or (isinstance(inputs, list | tuple) and name in inputs):
            cleared.add((i, j))
    return cleared


def _clearable_thinking(
    blocks: Sequence[tuple[EditBlock, ...]], keep: object
) -> set[tuple[int, int]]:
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return set()
    turns = [
        [(i, j) for j, kind, _, _ in found if kind == "thinking"] for i, found in enumerate(blocks)
    ]
    turns = [thinking for thinking in turns if thinking]
    cleared: set[tuple[int, int]] = set()
    for thinking in turns[: max(0, len(turns) - _count_value(keep, 1))]:
        cleared.update(thinking)
    return cleared


# --- keeping breakpoints off what the server clears ----------------------------------------------


def _marked(block: object) -> bool:
    if not isinstance(block, Mapping):
        return False
    if block.get("cache_control") is not None:
        return True
    inner = block.get("content")
    return isinstance(inner, list) and any(_marked(b) for b in inner)


def markers_kept_off_cleared(
    request: Mapping[str, Any],
    known: tuple[Sequence[tuple[EditBlock, ...]], Collection[int]] | None = None,
) -> dict[str, Any]:
    """``request`` with every ``cache_control`` breakpoint that sits on a block its edits may clear
    (:func:`clearable_blocks`, including markers inside a cleared ``tool_result``) moved to the
    nearest earlier message block that may carry one, is not clearable and is not marked already.

    The search stops at the first marked block on the way back (that prefix is cached already) or
    at the start of the messages; the breakpoint is then dropped, so the request never holds more
    breakpoints than before. A request without edits, or whose breakpoints are all safe, comes
    back as an equal dict sharing every message. Copy-on-write.

    :param known: what :func:`remembered_edit_blocks` knows of the request's messages (their
        blocks, and which of them may carry markers), when the caller has it; by default both
        are read from the messages.
    """
    out = dict(request)
    messages = request.get("messages")
    edits = request_edits(request)
    if not edits or not isinstance(messages, list):
        return out
    if known is None:
        blocks: Sequence[tuple[EditBlock, ...]] = [edit_blocks(message) for message in messages]
        may_be_marked: Collection[int] = range(len(messages))
    else:
        blocks, may_be_marked = known
    cleared = clearable_in(blocks, edits)
    if not cleared or not may_be_marked:
        return out
    if not isinstance(may_be_marked, range):
        may_be_marked = set(may_be_marked)
    conflicts = sorted(
        (i, j)
        for i, j in cleared
        # clearable positions are list blocks
        if i in may_be_marked and _marked(messages[i]["content"][j])
    )
    if not conflicts:
        return out
    contents: dict[int, list[Any]] = {}

    def content(i: int) -> list[Any]:
        if i not in contents:
            contents[i] = list(messages[i]["content"])
        return contents[i]

    for i, j in conflicts:
        block = content(i)[j]
        marker = _first_marker(block)
        content(i)[j] = unmarked(block)
        target = _earlier_slot(messages, contents, cleared, i, j)
        if target is not None and marker is not None:
            ti, tj = target
            content(ti)[tj] = {**content(ti)[tj], "cache_control": dict(marker)}
    new_messages = list(messages)
    for i, blocks in contents.items():
        new_messages[i] = {**messages[i], "content": blocks}
    out["messages"] = new_messages
    return out


def _first_marker(block: Mapping[str, Any]) -> Mapping[str, Any] | None:
    marker = block.get("cache_control")
    if isinstance(marker, Mapping):
        return marker
    for inner in block.get("content") or ():
        if isinstance(inner, Mapping):
            found = _first_marker(inner)
            if found is not None:
                return found
    return None


def _earlier_slot(
    messages: Sequence[Message],
    contents: Mapping[int, list[Any]],
    cleared: frozenset[tuple[int, int]],
    i: int,
    j: int,
) -> tuple[int, int] | None:
    """The nearest block before ``(i, j)`` that may take a marker (see
    :func:`markers_kept_off_cleared`)."""
    for mi in range(i, -1, -1):
        blocks = contents.get(mi)
        if blocks is None:
            content = messages[mi].get("content")
            blocks = content if isinstance(content, list) else []
        start = j - 1 if mi == i else len(blocks) - 1
        for bj in range(start, -1, -1):
            block = blocks[bj]
            if _marked(block):
                return None
            if (mi, bj) not in cleared and can_carry_marker(block):
                return mi, bj
    return None
