"""Regression tests for defects found in review of the lossless engine."""

from __future__ import annotations

import json
from typing import Any

from ctxengine_lcm.engine import get_state


def _lcm(session: Any) -> Any:
    lcm = get_state(session.ctx).session
    assert lcm is not None
    return lcm


def test_lone_surrogate_is_stored_exactly_and_later_ingests_still_work(
    make_kernel: Any,
) -> None:
    session = make_kernel(fresh_tail_count=2, leaf_min_messages=1).session("surrogate")
    cut = json.loads('"emoji cut \\ud83d here"')
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": cut},
        {"role": "assistant", "content": "ok"},
    ]
    session.compress(messages, force=True)
    lcm = _lcm(session)
    assert lcm.store.message_count(lcm.conversation_id) == 4
    stored = lcm.store.messages(lcm.conversation_id)
    assert json.loads(stored[2].content) == messages[2]  # the exact text, surrogate and all
    assert "\ufffd" in stored[2].text  # the searchable column holds a safe stand-in
    session.compress([*messages, {"role": "user", "content": "more"}], force=True)
    assert lcm.store.message_count(lcm.conversation_id) == 5
