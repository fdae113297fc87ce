"""What the native engine's tests share: the configuration pointing at the fake API, and the
requests the fake received, sorted by what they were for."""

from __future__ import annotations

from typing import Any

from ctxengine_fakeapi import FakeAPI, RecordedRequest

MODEL = "claude-sonnet-4-6"
RESPONSES_MODEL = "gpt-5"
WINDOW = 16_000


def native_config(api: FakeAPI, *, responses: bool = False, **native: Any) -> dict[str, Any]:
    """The native engine with the fake as its server, a small window and the local digest."""
    options: dict[str, Any] = {
        "api": "openai-responses" if responses else "anthropic",
        "base_url": api.openai_base_url if responses else api.base_url,
        "api_key": "test-key",
        **native,
    }
    return {
        "context": {"engine": "native", "strict": True},
        "model": {"name": RESPONSES_MODEL if responses else MODEL, "context_length": WINDOW},
        "auxiliary": {"compression": {"provider": "extractive"}},
        "engines": {"native": options},
    }


def is_compaction_request(request: RecordedRequest) -> bool:
    """A request the engine sent to compact (Anthropic: paused after compaction)."""
    if request.path.endswith("/responses/compact"):
        return True
    body = request.body if isinstance(request.body, dict) else {}
    edits = (body.get("context_management") or {}).get("edits") or []
    return any(e.get("pause_after_compaction") for e in edits if isinstance(e, dict))


def agent_requests(api: FakeAPI) -> list[RecordedRequest]:
    """The requests the agent itself sent (not the engine's compaction, counting or model
    look-ups)."""
    return [
        r
        for r in api.requests
        if r.method == "POST"
        and r.path in ("/v1/messages", "/v1/responses")
        and not is_compaction_request(r)
    ]
