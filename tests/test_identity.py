"""Identity memos: work per message done once while a list only grows by appending."""

from __future__ import annotations

from typing import Any

from ctxengine._accounting.tokens import TokenCounter
from ctxengine._messages.memo import ListProgress, fingerprint
from ctxengine_caching.strategy import apply_system_and_3


def messages(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i}"}
        for i in range(n)
    ]


def test_fingerprint_changes_with_usual_in_place_edits() -> None:
    msg: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "a"}]}
    before = fingerprint(msg)
    msg["content"].append({"type": "text", "text": "b"})
    assert fingerprint(msg) != before
    grown = fingerprint(msg)
    msg["content"] = "replaced"
    assert fingerprint(msg) != grown


def test_list_progress_resumes_only_for_the_same_growing_list() -> None:
    progress = ListProgress()
    items = messages(4)
    assert progress.resume(items) == 0
    progress.record(items, 4, "value")
    items.append({"role": "user", "content": "new"})
    assert progress.resume(items) == 4
    assert progress.value == "value"
    assert progress.resume(list(items)) == 0  # another list object
    items[3] = {"role": "assistant", "content": "replaced tail"}
    assert progress.resume(items) == 0  # the element at the resume point changed
    progress.record(items, 5)
    del items[2:]
    assert progress.resume(items) == 0  # shrunk below the resume point
    progress.reset()
    assert progress.resume(items) == 0


def test_counting_an_appended_list_equals_a_full_recount() -> None:
    counter = TokenCounter()
    items = messages(10)
    counter.count(items)
    items.append({"role": "user", "content": "one more message with several words"})
    incremental = counter.count(items)
    assert incremental == TokenCounter().count(list(items))


def test_counting_after_an_in_place_replacement_needs_invalidate() -> None:
    counter = TokenCounter()
    items = messages(5)
    counter.count(items)
    items[1] = {"role": "assistant", "content": "a much longer replacement text " * 10}
    counter.invalidate()
    assert counter.count(items) == TokenCounter().count(list(items))


def test_strategy_progress_still_strips_markers_of_new_messages() -> None:
    progress = ListProgress()
    items = messages(6)
    request = {"model": "claude-sonnet-4-6", "messages": items}
    first = apply_system_and_3(request, ttl="5m", native=True, clean=progress)
    assert progress.resume(items) == 6
    # The caller appends a message that still carries a marker from somewhere else.
    items.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
        }
    )
    second = apply_system_and_3(request, ttl="1h", native=True, clean=progress)
    markers = [
        block["cache_control"]
        for msg in second["messages"]
        if isinstance(msg["content"], list)
        for block in msg["content"]
        if "cache_control" in block
    ]
    assert markers == [{"type": "ephemeral", "ttl": "1h"}] * 3
    assert first != second
    assert second == apply_system_and_3(request, ttl="1h", native=True)
