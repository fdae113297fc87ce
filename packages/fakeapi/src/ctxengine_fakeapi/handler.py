"""The HTTP side of :class:`~ctxengine_fakeapi.FakeAPI`: one handler per request, which routes
the path to its API, checks the request (:mod:`ctxengine_fakeapi.checks`), takes the next scripted
step and sends the reply as JSON or server-sent events."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from ctxengine import estimate_tokens
from ctxengine_fakeapi.checks import check_anthropic_request, check_openai_request
from ctxengine_fakeapi.native import (
    Counter,
    apply_clearing,
    check_native,
    check_responses_native,
    compact,
    compaction_item,
    model_info,
    prompt_tokens,
    responses_compact_body,
    responses_threshold,
    responses_tokens,
    server_view,
    template_text,
)
from ctxengine_fakeapi.responses import check_responses_request, responses_body
from ctxengine_fakeapi.script import (
    ANTHROPIC_ERROR_TYPES,
    OPENAI_ERROR_TYPES,
    REASONS,
    Api,
    RecordedReply,
    RecordedRequest,
    Step,
)
from ctxengine_fakeapi.streams import (
    SSEvent,
    anthropic_events,
    chat_chunks,
    encode,
    responses_events,
)


class Fake(Protocol):
    """What a handler asks of the :class:`~ctxengine_fakeapi.FakeAPI` it serves (called from the
    handler threads; each method takes the fake's lock itself)."""

    counter: Counter
    validate: bool
    responder: Callable[[Mapping[str, Any]], str] | None

    def supports_native(self, model: str) -> bool: ...
    def _record(self, request: RecordedRequest) -> None: ...
    def _record_reply(self, reply: RecordedReply) -> None: ...
    def _next_step(self) -> Step: ...
    def _next_id(self) -> int: ...
    def _wait(self, seconds: float) -> bool: ...
    def _authorized(self, headers: Mapping[str, str], api: Api) -> bool: ...
    def _anthropic_usage(
        self, body: Mapping[str, Any], output_text: str, message_id: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]: ...
    def _openai_cached_tokens(self, body: Mapping[str, Any]) -> int: ...


class Server(ThreadingHTTPServer):
    """The fake's HTTP server; its handlers reach the fake through ``fake``."""

    daemon_threads = False  # joined by server_close(), so no handler thread outlives the fake
    block_on_close = True
    fake: Fake


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no idle keep-alive thread blocks shutdown.
    protocol_version = "HTTP/1.0"
    server: Server
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_POST(self) -> None:
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            # The client gave up (its own timeout); nothing left to answer.
            self.close_connection = True
        except Exception as exc:
            # A bug in the fake (or in a validator it consults) must reach the test as a
            # readable 500, not as a dropped connection that looks like a network error.
            self._send_error("anthropic", 500, f"FakeAPI internal error: {exc!r}")

    def do_GET(self) -> None:
        self.do_POST()

    def _handle(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        if path.startswith(GATEWAY_PREFIX + "/"):  # served the same as without the prefix
            path = path[len(GATEWAY_PREFIX) :]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        api = _api_for(path)
        fake._record(RecordedRequest(self.command, path, headers, body, api))

        models = path.startswith(_MODELS_PATH) and self.command == "GET"
        if api == "unknown" or (self.command != "POST" and not models):
            self._send_error(
                api if api != "unknown" else "anthropic",
                404,
                f"{self.command} {path} is not served by FakeAPI",
            )
            return
        if not fake._authorized(headers, api):
            message = (
                "invalid x-api-key"
                if api == "anthropic"
                else "Incorrect API key provided. You can find your API key in your dashboard."
            )
            self._send_error(api, 401, message)
            return
        if raw and body is None:
            self._send_error(api, 400, "There was an error parsing the body: not valid JSON")
            return

        if path.startswith(_MODELS_PATH):
            model = path[len(_MODELS_PATH) :]
            self._send_json(200, model_info(model, fake.supports_native(model)))
            return
        if path.endswith("/messages/count_tokens"):
            self._count_tokens(body)
            return
        if api == "anthropic" and fake.validate:
            if "anthropic-version" not in headers:
                self._send_error(api, 400, "anthropic-version: header is required")
                return
            problems = check_anthropic_request(body)
            problems = problems or check_native(body, headers, fake.supports_native)
            if problems:
                self._send_error(api, 400, "; ".join(problems[:5]))
                return
        if api == "openai":
            if _is_responses(path) or path.endswith(_COMPACT_PATH):
                problems = check_responses_request(body) or check_responses_native(body)
            else:
                problems = check_openai_request(body)
            if problems:
                self._send_error(api, 400, "; ".join(problems[:5]))
                return
            compacts = path.endswith(_COMPACT_PATH) or responses_threshold(body)
            model = str(body.get("model"))
            if compacts is not None and compacts is not False and not fake.supports_native(model):
                self._send_error(
                    api,
                    400,
                    f"The model '{model}' does not support compaction.",
                    "invalid_request_error",
                    param="model",
                )
                return

        step = fake._next_step()
        if not fake._wait(step.delay):
            self._send_error(api, 503, "FakeAPI is shutting down")
            return
        if path.endswith(_COMPACT_PATH):
            self._compact_responses(step, body)
            return
        self._respond(api, step, body, responses=_is_responses(path))

    def _count_tokens(self, body: Any) -> None:
        problems = check_anthropic_request(body, endpoint="count_tokens")
        if problems:
            self._send_error("anthropic", 400, "; ".join(problems[:5]))
            return
        # The count is of the conversation as the server reads it (context management ignored).
        view = {**body, "messages": server_view(body["messages"])}
        self._send_json(200, {"input_tokens": prompt_tokens(view, self.server.fake.counter)})

    def _compact_responses(self, step: Step, body: Mapping[str, Any]) -> None:
        if step.kind == "error":
            self._send_error(
                "openai",
                step.status,
                step.text,
                step.error_type,
                step.code,
                headers=dict(step.headers),
            )
            return
        if step.kind == "garbage":
            self._send_raw(200, step.raw.encode())
            return
        number = self.server.fake._next_id()
        failed = step.kind == "compaction_null"
        self._send_json(200, responses_compact_body(body, number, fail=failed))

    def _respond(
        self, api: Api, step: Step, body: Mapping[str, Any], *, responses: bool = False
    ) -> None:
        if step.kind == "error":
            self._send_error(
                api, step.status, step.text, step.error_type, step.code, headers=dict(step.headers)
            )
            return
        if step.kind == "raw":
            self._send_raw(step.status, step.raw.encode(), step.content_type)
            return
        if step.kind == "context_length":
            if api == "anthropic":
                message = "prompt is too long: 215337 tokens > 200000 maximum"
            else:
                message = (
                    "This model's maximum context length is 128000 tokens. However, your "
                    "messages resulted in 131072 tokens. Please reduce the length of the messages."
                )
            self._send_error(api, 400, message, code="context_length_exceeded")
            return
        if step.kind == "garbage":
            self._send_raw(200, step.raw.encode())
            return
        blocks: list[Mapping[str, Any]]
        if step.kind == "text":
            blocks = [{"type": "text", "text": step.text}]
        elif step.kind == "blocks":
            blocks = list(step.blocks)
        elif step.kind == "empty":
            blocks = []
        elif self.server.fake.responder is not None:
            blocks = [{"type": "text", "text": self.server.fake.responder(body)}]
        else:
            blocks = [{"type": "text", "text": _echo_summary(body, api)}]
        stream = body.get("stream") is True
        if api == "anthropic":
            reply = self._anthropic_message(body, blocks, fail=step.kind == "compaction_null")
            if stream:
                self._send_events(anthropic_events(reply))
            else:
                self._send_json(200, reply)
        elif responses:
            response = responses_body(body, blocks, self.server.fake._next_id())
            threshold = responses_threshold(body)
            tokens = responses_tokens(body)
            if threshold is not None and tokens >= threshold and step.kind != "compaction_null":
                raw = body.get("input")
                items: list[Any] = raw if isinstance(raw, list) else []
                item = compaction_item(items, self.server.fake._next_id(), tokens)
                response["output"] = [item, *response["output"]]
            if stream:
                self._send_events(responses_events(response))
            else:
                self._send_json(200, response)
        else:
            completion = self._openai_completion(body, blocks)
            if stream:
                options = body.get("stream_options")
                include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
                self._send_events(chat_chunks(completion, include_usage=include_usage))
            else:
                self._send_json(200, completion)

    def _anthropic_message(
        self, body: Mapping[str, Any], blocks: list[Mapping[str, Any]], *, fail: bool = False
    ) -> dict[str, Any]:
        """The reply as the server makes it: read from the last compaction block on, after the
        request's context edits and any compaction it asks for (:mod:`.native`)."""
        fake = self.server.fake
        view: dict[str, Any] = {**body, "messages": server_view(body["messages"])}
        clearing = apply_clearing(view, fake.counter)
        compaction = compact(clearing.body, fake.counter, fail=fail)
        message: dict[str, Any] = {
            "id": f"msg_fake_{fake._next_id():04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "stop_sequence": None,
        }
        if clearing.applied:
            message["context_management"] = {"applied_edits": clearing.applied}
        if compaction is not None and compaction.pause:
            zero = {"input_tokens": 0, "output_tokens": 0}
            message.update(
                content=[compaction.block],
                stop_reason="compaction",
                usage={
                    **zero,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                    "iterations": [compaction.usage],
                },
            )
            return message
        read = compaction.body if compaction is not None else clearing.body
        output = "".join(
            str(b.get("text") or b.get("thinking") or json.dumps(b.get("input", "")))
            for b in blocks
        )
        has_tool = any(b.get("type") == "tool_use" for b in blocks)
        usage, diagnostics = fake._anthropic_usage(read, output, str(message["id"]))
        content = list(blocks)
        if compaction is not None:
            content = [compaction.block, *content]
            iteration = {
                "type": "message",
                **{k: usage[k] for k in _ITERATION_KEYS},
            }
            usage["iterations"] = [compaction.usage, iteration]
        message.update(
            content=content, stop_reason="tool_use" if has_tool else "end_turn", usage=usage
        )
        if "diagnostics" in body:
            message["diagnostics"] = diagnostics
        return message

    def _openai_completion(
        self, body: Mapping[str, Any], blocks: list[Mapping[str, Any]]
    ) -> dict[str, Any]:
        fake = self.server.fake
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        reasoning = "".join(
            str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking"
        )
        calls = [
            {
                "id": str(b.get("id")),
                "type": "function",
                "function": {"name": str(b.get("name")), "arguments": json.dumps(b.get("input"))},
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if calls and not text else text,
            "refusal": None,
        }
        if calls:
            message["tool_calls"] = calls
        if reasoning:
            message["reasoning_content"] = reasoning
        prompt = estimate_tokens(json.dumps(body.get("messages"), ensure_ascii=False))
        cached = min(prompt, fake._openai_cached_tokens(body))
        completion = estimate_tokens(text + reasoning)
        return {
            "id": f"chatcmpl-fake{fake._next_id():04d}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": estimate_tokens(reasoning)},
            },
        }

    def _send_error(
        self,
        api: Api,
        status: int,
        message: str,
        error_type: str | None = None,
        code: str | None = None,
        *,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        payload: dict[str, Any]
        if api == "openai":
            default_type, default_code = OPENAI_ERROR_TYPES.get(
                status, ("server_error" if status >= 500 else "invalid_request_error", None)
            )
            payload = {
                "error": {
                    "message": message,
                    "type": error_type or default_type,
                    "param": param,
                    "code": code or default_code,
                }
            }
        else:
            fallback = "api_error" if status >= 500 else "invalid_request_error"
            payload = {
                "type": "error",
                "error": {
                    "type": error_type or ANTHROPIC_ERROR_TYPES.get(status, fallback),
                    "message": message,
                },
                "request_id": f"req_fake_{self.server.fake._next_id():04d}",
            }
        self._send_json(status, payload, headers)

    def _send_json(
        self, status: int, payload: object, headers: Mapping[str, str] | None = None
    ) -> None:
        fake = self.server.fake
        fake._record_reply(RecordedReply(self.path.split("?", 1)[0], status, payload))
        self._send_raw(status, json.dumps(payload).encode(), headers=headers)

    def _send_events(self, events: list[SSEvent]) -> None:
        """Send a ``text/event-stream`` body; the closed connection ends it (HTTP/1.0)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.wfile.write(encode(events))

    def _send_raw(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status, REASONS.get(status))
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.send_header("request-id", "req_fake")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


_MODELS_PATH = "/v1/models/"
GATEWAY_PREFIX = "/anthropic"
"""The path prefix of the fake's ``anthropic-compatible`` route (:attr:`FakeAPI.gateway_url`)."""
_COMPACT_PATH = "/responses/compact"
_ITERATION_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _api_for(path: str) -> Api:
    if path in ("/v1/messages", "/v1/messages/count_tokens") or path.startswith(_MODELS_PATH):
        return "anthropic"
    if path in ("/v1/chat/completions", "/chat/completions") or _is_responses(path):
        return "openai"
    if path in ("/v1/responses/compact", "/responses/compact"):
        return "openai"
    return "unknown"


def _is_responses(path: str) -> bool:
    return path in ("/v1/responses", "/responses")


def _last_user_text(body: Mapping[str, Any]) -> str:
    if isinstance(body.get("input"), str):  # a Responses request with a plain-text input
        return str(body["input"])
    for message in reversed(body.get("messages") or body.get("input") or []):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(
                str(b.get("text", "")) for b in content if isinstance(b, Mapping)
            ).strip()
    return ""


def _echo_summary(body: Mapping[str, Any], api: Api) -> str:
    """The default reply: the summary template with a deterministic echo of the request's end
    (its start is a summariser's instructions, which a summary must not repeat)."""
    prompt = " ".join(_last_user_text(body).split())
    return template_text(
        f"- Echo summary from FakeAPI ({api}) of a {len(prompt)}-character request.",
        [f"- Request ended: {prompt[-160:]}"],
    )
