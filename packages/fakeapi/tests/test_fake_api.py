"""FakeAPI: the local Anthropic/OpenAI HTTP fake the provider and engine tests run against."""

from __future__ import annotations

import copy
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from ctxengine_fakeapi import FakeAPI, Step, check_anthropic_request

VERSION = {"anthropic-version": "2023-06-01"}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def post(
    api: FakeAPI, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """POST ``body`` (JSON, or raw bytes) and return ``(status, parsed JSON or raw text)``."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        api.base_url + path,
        data=data,
        method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with _OPENER.open(request, timeout=10) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


def message(api: FakeAPI, body: dict[str, Any], **headers: str) -> tuple[int, Any]:
    return post(api, "/v1/messages", body, {**VERSION, **headers})


def user(text: str = "hello") -> dict[str, Any]:
    return {"role": "user", "content": text}


def request(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-haiku-4-5", "max_tokens": 100, "messages": list(messages), **extra}


def use(tool_id: str = "toolu_1", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"cmd": "ls"}, **extra}


def result(tool_id: str = "toolu_1", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok", **extra}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}

VALID = request(
    {"role": "user", "content": [text("look at this"), {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should list files", "signature": "sig"},
        text("Listing."),
        use("toolu_1"),
        use("toolu_2"),
    ]},
    {"role": "user", "content": [
        result("toolu_1"),
        result("toolu_2", is_error=True, content=[text("exit 1")], cache_control=EPHEMERAL),
        text("go on"),
    ]},
    {"role": "assistant", "content": ""},
    system=[text("You are careful.", cache_control=HOUR)],
    tools=[{"name": "bash", "description": "run", "input_schema": {"type": "object"},
            "cache_control": HOUR}],
)  # fmt: skip


# -- lifecycle -------------------------------------------------------------------------------


def test_serves_on_loopback_and_leaves_no_threads_behind() -> None:
    before = set(threading.enumerate())
    fake = FakeAPI()
    with pytest.raises(RuntimeError, match="FakeAPI is not running: use it as a context manager"):
        _ = fake.base_url
    with fake:
        assert fake.start() is fake  # idempotent
        assert fake.base_url == f"http://127.0.0.1:{fake.port}"
        assert fake.openai_base_url == f"{fake.base_url}/v1"
        assert message(fake, request(user()))[0] == 200
    fake.close()  # idempotent
    assert set(threading.enumerate()) == before


def test_close_wakes_a_delayed_handler_whose_client_gave_up() -> None:
    import anthropic

    before = set(threading.enumerate())
    with FakeAPI() as fake:
        fake.delay(60)  # without the wake-up, closing would wait a minute for this handler
        client = anthropic.Anthropic(
            api_key="k", base_url=fake.base_url, max_retries=0, timeout=0.3
        )
        with pytest.raises(anthropic.APITimeoutError):
            client.messages.create(**request(user()))
        client.close()
    assert set(threading.enumerate()) == before


def test_records_requests_with_lowercase_headers(api: FakeAPI) -> None:
    body = request(user("first"))
    message(api, body, **{"X-Custom": "v"})
    (recorded,) = api.requests
    assert (recorded.method, recorded.path, recorded.api) == ("POST", "/v1/messages", "anthropic")
    assert recorded.headers["x-custom"] == "v"
    assert recorded.body == body
    api.requests.clear()  # a copy: the record survives
    assert len(api.requests) == 1


# -- scripted replies ------------------------------------------------------------------------


def test_default_reply_is_a_deterministic_echo_summary(api: FakeAPI) -> None:
    status, first = message(api, request(user("Please fix   the parser in src/p.py")))
    _, second = message(api, request(user("Please fix   the parser in src/p.py")))
    assert status == 200
    reply = first["content"][0]["text"]
    assert reply == second["content"][0]["text"]
    assert reply.startswith("## Goal\n")
    assert "### In Progress" in reply
    assert "Request ended: Please fix the parser in src/p.py" in reply
    assert first["id"] != second["id"]
    assert (first["type"], first["role"], first["stop_reason"]) == (
        "message",
        "assistant",
        "end_turn",
    )


def test_script_is_consumed_in_order(api: FakeAPI) -> None:
    api.reply_text("one").script(Step("text", text="two"), Step("empty"))
    assert api.pending == 3
    replies = [message(api, request(user()))[1]["content"] for _ in range(3)]
    assert replies == [[text("one")], [text("two")], []]
    assert api.pending == 0


def test_reply_blocks_sets_tool_use_stop_reason(api: FakeAPI) -> None:
    api.reply_blocks([use("toolu_9")])
    _, body = message(api, request(user()))
    assert body["content"] == [use("toolu_9")]
    assert body["stop_reason"] == "tool_use"


def test_anthropic_error_envelope(api: FakeAPI) -> None:
    api.fail(429, "slow down").fail(529, "Overloaded").fail(400, "gone", type="not_found_error")
    status, body = message(api, request(user()))
    assert status == 429
    assert body["type"] == "error"
    assert body["error"] == {"type": "rate_limit_error", "message": "slow down"}
    assert body["request_id"].startswith("req_fake_")
    status, body = message(api, request(user()))
    assert (status, body["error"]["type"]) == (529, "overloaded_error")
    assert message(api, request(user()))[1]["error"]["type"] == "not_found_error"


def test_context_length_errors_use_each_apis_wording(api: FakeAPI) -> None:
    api.context_length_error().context_length_error()
    status, body = message(api, request(user()))
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: ")
    status, body = post(api, "/v1/chat/completions", {"model": "m", "messages": [user()]})
    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 128000 tokens" in body["error"]["message"]


def test_garbage_reply_is_not_json(api: FakeAPI) -> None:
    api.reply_garbage("{broken")
    assert message(api, request(user())) == (200, "{broken")


# -- the OpenAI side -------------------------------------------------------------------------


def test_openai_completion_body_and_translation(api: FakeAPI) -> None:
    api.reply_blocks(
        [
            {"type": "thinking", "thinking": "hidden", "signature": "s"},
            text("visible"),
        ]
    )
    api.reply_blocks([use("call_1")])
    status, body = post(api, "/v1/chat/completions", {"model": "m", "messages": [user()]})
    assert status == 200
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["message"]["content"] == "visible"
    assert choice["message"]["reasoning_content"] == "hidden"
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # The path without /v1 is served too (base URLs that already end in /v1 differ by server).
    _, body = post(api, "/chat/completions", {"model": "m", "messages": [user()]})
    choice = body["choices"][0]
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {
        "name": "bash",
        "arguments": '{"cmd": "ls"}',
    }
    assert choice["finish_reason"] == "tool_calls"


def test_openai_error_envelope(api: FakeAPI) -> None:
    api.fail(429, "Rate limit reached")
    status, body = post(api, "/v1/chat/completions", {"model": "m", "messages": [user()]})
    assert status == 429
    assert body == {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def test_openai_rejects_tool_messages_without_a_call(api: FakeAPI) -> None:
    body = {
        "model": "m",
        "messages": [user(), {"role": "tool", "tool_call_id": "call_1", "content": "x"}],
    }
    status, reply = post(api, "/v1/chat/completions", body)
    assert status == 400
    assert (
        "must be a response to a preceding message with 'tool_calls'" in reply["error"]["message"]
    )


# -- auth ------------------------------------------------------------------------------------


def test_auth_token_is_required_when_set() -> None:
    with FakeAPI(auth_token="secret") as fake:
        status, body = message(fake, request(user()))
        assert status == 401
        assert body["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
        assert message(fake, request(user()), authorization="Bearer wrong")[0] == 401
        assert message(fake, request(user()), authorization="Bearer secret")[0] == 200
        assert message(fake, request(user()), **{"x-api-key": "secret"})[0] == 200
        status, body = post(fake, "/v1/chat/completions", {"model": "m", "messages": [user()]})
        assert (status, body["error"]["code"]) == (401, "invalid_api_key")
        ok = post(
            fake,
            "/v1/chat/completions",
            {"model": "m", "messages": [user()]},
            {"authorization": "Bearer secret"},
        )
        assert ok[0] == 200


def test_anthropic_sdk_sends_the_bearer_token() -> None:
    import anthropic

    with FakeAPI(auth_token="sk-ant") as fake:
        client = anthropic.Anthropic(api_key="sk-ant", base_url=fake.base_url, max_retries=0)
        reply = client.messages.create(**request(user()))
        client.close()
    assert reply.content[0].type == "text"
    assert reply.usage.input_tokens > 0


# -- request checks --------------------------------------------------------------------------


def test_a_rich_valid_request_is_accepted(api: FakeAPI) -> None:
    assert check_anthropic_request(VALID) == []
    status, body = message(api, VALID)
    assert status == 200, body


MALFORMED: list[tuple[str, dict[str, Any], str]] = [
    (
        "missing max_tokens",
        {"model": "m", "messages": [user()]},
        "max_tokens: Field required",
    ),
    ("missing model", {"max_tokens": 5, "messages": [user()]}, "model: Field required"),
    ("no messages", request(), "messages: at least one message is required"),
    (
        "starts with assistant",
        request({"role": "assistant", "content": "hi"}, user()),
        "messages.0.role: the first message must use the 'user' role",
    ),
    (
        "roles do not alternate",
        request(user("a"), user("b")),
        "messages.1.role: roles must alternate between 'user' and 'assistant'",
    ),
    (
        "system role in messages",
        request({"role": "system", "content": "be nice"}, user()),
        "use the top-level `system` parameter",
    ),
    (
        "empty text block",
        request({"role": "user", "content": [text("")]}),
        "messages.0.content.0.text: text content blocks must contain non-whitespace text",
    ),
    (
        "empty user content",
        request(user(""), {"role": "assistant", "content": "x"}),
        "messages.0.content: all messages must have non-empty content except for the optional "
        "final assistant message",
    ),
    (
        "unknown block type",
        request({"role": "user", "content": [{"type": "video", "url": "x"}]}),
        "messages.0.content.0.type: Input tag 'video' found using 'type' does not match",
    ),
    (
        "tool_use in a user message",
        request({"role": "user", "content": [use()]}),
        "messages.0.content.0: `tool_use` blocks are not allowed in `user` messages",
    ),
    (
        "tool_use input not an object",
        request(user(), {"role": "assistant", "content": [use(input="ls")]}),
        "messages.1.content.0.input: Input should be a valid dictionary",
    ),
    (
        "unanswered tool_use",
        request(user(), {"role": "assistant", "content": [use("toolu_1")]}, user("next")),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_1.",
    ),
    (
        "trailing pending tool_use",
        request(user(), {"role": "assistant", "content": [use("toolu_7")]}),
        "immediately after: toolu_7",
    ),
    (
        "orphan tool_result",
        request(
            user(),
            {"role": "assistant", "content": [use("toolu_1")]},
            {"role": "user", "content": [result("toolu_1"), result("toolu_9")]},
        ),
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9",
    ),
    (
        "tool_result after text",
        request(
            user(),
            {"role": "assistant", "content": [use("toolu_1")]},
            {"role": "user", "content": [text("first"), result("toolu_1")]},
        ),
        "messages.2.content.1: `tool_result` blocks must come first in the user message",
    ),
    (
        "duplicate tool_use ids",
        request(
            user(),
            {"role": "assistant", "content": [use("toolu_1")]},
            {"role": "user", "content": [result("toolu_1")]},
            {"role": "assistant", "content": [use("toolu_1")]},
            {"role": "user", "content": [result("toolu_1")]},
        ),
        "messages.3.content.0: `tool_use` ids must be unique: toolu_1",
    ),
    (
        "bad image media type",
        request(
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/bmp", "data": "x"},
                    }
                ],
            }
        ),
        "messages.0.content.0.source.media_type: Input should be",
    ),
    (
        "five breakpoints",
        request(
            {"role": "user", "content": [text(f"t{i}", cache_control=EPHEMERAL) for i in range(5)]}
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    (
        "cache_control on empty text",
        request({"role": "user", "content": [text("", cache_control=EPHEMERAL), text("x")]}),
        "messages.0.content.0: cache_control cannot be set for empty text blocks",
    ),
    (
        "cache_control on a thinking block",
        request(
            user(),
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s", "cache_control": HOUR},
                    text("x"),
                ],
            },
        ),
        "messages.1.content.0: cache_control cannot be set for thinking blocks",
    ),
    (
        "unknown ttl",
        request(
            {
                "role": "user",
                "content": [text("x", cache_control={"type": "ephemeral", "ttl": "10m"})],
            }
        ),
        "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h', got '10m'",
    ),
    (
        "1h after 5m",
        request(
            {"role": "user", "content": [text("x", cache_control=HOUR)]},
            system=[text("sys", cache_control=EPHEMERAL)],
        ),
        "messages.0.content.0.cache_control: a ttl='1h' cache_control block must not come after "
        "a ttl='5m' cache_control block",
    ),
    (
        "tool without input_schema",
        request(user(), tools=[{"name": "bash"}]),
        "tools.0.input_schema: Field required",
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"), [pytest.param(b, e, id=name) for name, b, e in MALFORMED]
)
def test_malformed_anthropic_requests_get_400(
    body: dict[str, Any], expected: str, api: FakeAPI
) -> None:
    status, reply = message(api, body)
    assert status == 400
    assert reply["error"]["type"] == "invalid_request_error"
    assert expected in reply["error"]["message"]
    assert api.pending == 0  # nothing scripted was consumed by a rejected request


def test_sdk_sees_the_400_as_bad_request(api: FakeAPI) -> None:
    import anthropic

    client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(**request(user("a"), user("b")))
    client.close()
    assert "roles must alternate" in str(info.value)


def test_other_request_errors(api: FakeAPI) -> None:
    status, body = post(api, "/v1/messages", request(user()))  # no anthropic-version header
    assert (status, body["error"]["message"]) == (400, "anthropic-version: header is required")
    status, body = post(api, "/v1/messages", b"{not json", VERSION)
    assert status == 400
    assert "not valid JSON" in body["error"]["message"]
    status, body = post(api, "/v1/complete", request(user()), VERSION)
    assert status == 404
    assert body["error"]["type"] == "not_found_error"


def test_check_does_not_mutate_its_input() -> None:
    body = copy.deepcopy(VALID)
    check_anthropic_request(body)
    assert body == VALID


# -- token counting and cache simulation -----------------------------------------------------


def test_count_tokens(api: FakeAPI) -> None:
    short = post(
        api, "/v1/messages/count_tokens", {"model": "m", "messages": [user("hi")]}, VERSION
    )
    long = post(
        api, "/v1/messages/count_tokens", {"model": "m", "messages": [user("hi " * 400)]}, VERSION
    )
    assert short[0] == long[0] == 200
    assert 0 < short[1]["input_tokens"] < long[1]["input_tokens"]
    bad = post(api, "/v1/messages/count_tokens", {"model": "m", "messages": []}, VERSION)
    assert bad[0] == 400


def cached_request(question: str, ttl: dict[str, str] = EPHEMERAL) -> dict[str, Any]:
    return request(
        user(question), system=[text("A long stable system prompt. " * 50, cache_control=ttl)]
    )


def test_cache_write_then_read(api: FakeAPI) -> None:
    first = message(api, cached_request("question one"))[1]["usage"]
    second = message(api, cached_request("question two"))[1]["usage"]
    assert first["cache_creation_input_tokens"] > 0
    assert first["cache_read_input_tokens"] == 0
    assert (
        first["cache_creation"]["ephemeral_5m_input_tokens"] == first["cache_creation_input_tokens"]
    )
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] == first["input_tokens"]  # only the uncached question


def test_cache_reads_the_longest_earlier_prefix_within_the_lookback(api: FakeAPI) -> None:
    turn = [user("q1"), {"role": "assistant", "content": "a1"}]
    marked_1 = {"role": "user", "content": [text("q1", cache_control=EPHEMERAL)]}
    first = message(api, request(marked_1))[1]["usage"]
    # Next turn: the breakpoint moved two messages on; the old prefix is found by look-back.
    second_body = request(*turn, {"role": "user", "content": [text("q2", cache_control=EPHEMERAL)]})
    second = message(api, second_body)[1]["usage"]
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] > 0


def test_one_hour_writes_and_minimum_cacheable_size() -> None:
    with FakeAPI() as fake:
        usage = message(fake, cached_request("q", HOUR))[1]["usage"]
        assert usage["cache_creation"]["ephemeral_1h_input_tokens"] > 0
        assert usage["cache_creation"]["ephemeral_5m_input_tokens"] == 0
    with FakeAPI(min_cacheable_tokens=100_000) as fake:
        for _ in range(2):
            usage = message(fake, cached_request("q"))[1]["usage"]
            assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
