"""A host that asks for compaction inside its own requests: the server compacts while answering,
and the native engine drops what the block replaced before the next request."""

from __future__ import annotations

from typing import Any

import anthropic

import ctxengine
from ctxengine_fakeapi import FakeAPI

from .helpers import MODEL, native_config

FILLER = "a long tool log line " * 60


def test_a_compaction_inside_a_response_is_spliced_before_the_next_request() -> None:
    with FakeAPI() as api:
        config = native_config(api, threshold=0.8)
        kernel = ctxengine.load(config, env={})
        client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
        wrapped = ctxengine.wrap(client, kernel=kernel)
        edits = {
            "edits": [
                {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 2000}}
            ]
        }
        history: list[Any] = []
        for turn in range(8):
            history.append({"role": "user", "content": f"turn {turn} {FILLER}"})
            api.reply_text(f"reply {turn}")
            reply = wrapped.beta.messages.create(
                model=MODEL,
                max_tokens=256,
                messages=history,
                betas=["compact-2026-01-12"],
                context_management=edits,
            )
            history.append({"role": "assistant", "content": reply.content})
            if reply.content[0].type == "compaction":
                break
        else:
            raise AssertionError("the server never compacted")
        assert wrapped.session.ctx.last_usage is not None
        assert wrapped.session.ctx.last_usage.compacted
        block = reply.content[0].to_dict()
        history.append({"role": "user", "content": "and now?"})
        api.reply_text("onwards")
        wrapped.beta.messages.create(
            model=MODEL,
            max_tokens=256,
            messages=history,
            betas=["compact-2026-01-12"],
            context_management=edits,
        )
        record = wrapped.last_record
        assert record is not None
        (compaction,) = record.compactions
        assert compaction.compacted
        assert compaction.reason.startswith("the server compacted while answering")
        sent = api.requests[-1].body["messages"]
        assert sent[0]["content"][0] == block
        assert len(sent) == 2  # the compacted reply, then the new user message
        # The host's own edit is kept as it wrote it, not declared twice.
        assert api.requests[-1].body["context_management"] == edits
