"""A local stand-in for the Anthropic Messages API and the OpenAI chat completions and Responses
APIs.

:class:`FakeAPI` is a threaded HTTP server on ``127.0.0.1`` (a free port) that the real
``anthropic`` and ``openai`` SDKs can talk to. Tests queue scripted responses (text, content
blocks, HTTP errors with the right error envelope, delays, unparsable bodies) and read back every
request it received. When the queue is empty it answers with its ``responder``'s text, or else a
deterministic summary-shaped text. A request with ``"stream": true`` gets the same reply as
server-sent events (:mod:`ctxengine.testing.fake_streams`); ``/v1/responses`` is served by
:mod:`ctxengine.testing.fake_responses`. Server-side context management -- Anthropic's
compaction and context editing, the Models API's capabilities, OpenAI's Responses compaction --
is simulated by :mod:`ctxengine.testing.fake_native`.

Anthropic ``/v1/messages`` requests are checked the way the real API checks them (required fields,
alternating roles, block shapes, tool_use/tool_result pairing, cache_control breakpoints) and get a
``400 invalid_request_error`` naming the first problems when they are wrong, so a test that passes
against the fake sends requests the real API accepts. The checks are written here, independently of
:mod:`ctxengine.messages`, on purpose: the fake is the oracle those helpers are tested against.

Usage reported by ``/v1/messages`` simulates prompt caching: a prefix ending at a
``cache_control`` breakpoint (or at the last block, for a top-level automatic ``cache_control``)
is written to an in-memory cache and read back by later requests that repeat it (with the API's
20-block look-back), so caching strategies can be tested end to end. A request carrying
``diagnostics: {"previous_message_id": ...}`` gets ``diagnostics.cache_miss_reason`` back when its
prompt did not extend that earlier request's (``null`` when it did). Chat completions that carry a
``prompt_cache_key`` are routed to a warm cache for that key (OpenAI caches whole prompts by
itself) and report ``prompt_tokens_details.cached_tokens``; without a key nothing is cached.
Token counts are rough (characters / 4 of the JSON of each piece).

Typical use::

    with FakeAPI() as api:
        api.reply_text("## Goal\\nShip it")
        client = anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0)
        ...
        assert api.requests[0].body["model"] == "claude-haiku-4-5"
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import attrs

from ctxengine._accounting.cachesim import Fingerprint, PromptCacheSimulator, miss_reason
from ctxengine._accounting.estimate import RoughCounter, estimate_tokens
from ctxengine.testing import fake_native, fake_streams
from ctxengine.testing.fake_responses import check_responses_request, responses_body

Api = Literal["anthropic", "openai", "unknown"]
StepKind = Literal[
    "text",
    "blocks",
    "empty",
    "error",
    "garbage",
    "context_length",
    "raw",
    "default",
    "compaction_null",
]


# Default error `type` per HTTP status, as each API names them.
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}
_REASONS = {529: "Overloaded"}


@attrs.frozen
class RecordedRequest:
    """One request the fake received.

    :ivar headers: header names lower-cased.
    :ivar body: the parsed JSON body, or ``None`` when the body was empty or not JSON.
    :ivar api: which API the path belongs to.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    api: Api


@attrs.frozen
class RecordedReply:
    """One JSON reply the fake sent (streams are not recorded): the request's path, the HTTP
    status and the body as sent."""

    path: str
    status: int
    body: Any


@attrs.frozen
class Step:
    """One scripted response; build them with the :class:`FakeAPI` helpers.

    ``kind`` decides the body: ``text`` (one text block / message content), ``blocks`` (the given
    Anthropic content blocks; translated for OpenAI), ``empty`` (no content), ``error``
    (``status`` with the API's error envelope), ``garbage`` (``raw`` sent as an
    ``application/json`` body that does not parse), ``context_length`` (the API's own
    context-window error), ``raw`` (``raw`` sent as it is with ``status`` and ``content_type``,
    e.g. a proxy's HTML error page), ``default`` (the responder's reply, else the deterministic
    echo summary) and ``compaction_null`` (the default reply, but a server-side compaction the
    request asks for fails: its block's ``content`` is ``null``). ``delay`` seconds pass before
    anything is sent; ``headers`` are added to the response (``Retry-After``).
    """

    kind: StepKind
    text: str = ""
    blocks: tuple[Mapping[str, Any], ...] = ()
    status: int = 200
    error_type: str | None = None
    code: str | None = None
    raw: str = ""
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(), so no handler thread outlives the fake
    block_on_close = True
    fake: FakeAPI


class FakeAPI:
    """A scripted Anthropic + OpenAI HTTP API on ``127.0.0.1``; use as a context manager.

    :param auth_token: when set, every request must carry ``Authorization: Bearer <token>``
        (Anthropic paths also accept ``x-api-key: <token>``); others get a 401 in the API's
        error envelope.
    :param min_cacheable_tokens: prefixes shorter than this are never cached (the real minimum
        depends on the model; 0 caches everything so small test prompts show cache hits).
    :param validate: check Anthropic requests and answer 400 when they are malformed.
    :param responder: answers every request that finds the script empty: called with the
        parsed request body, returns the reply text (a scripted model that reads its prompt).
        Without it the fake answers with a deterministic echo summary.
    :param native_models: the models that support server-side compaction and context editing;
        ``None`` (the default) means every model does.
    :param counter: what prompts are counted with (cache simulation, compaction triggers, usage);
        the default is the rough characters / 4 estimate, so the fake never loads a tokenizer.
    """

    def __init__(
        self,
        *,
        auth_token: str | None = None,
        min_cacheable_tokens: int = 0,
        validate: bool = True,
        responder: Callable[[Mapping[str, Any]], str] | None = None,
        native_models: Collection[str] | None = None,
        counter: fake_native.Counter | None = None,
    ) -> None:
        self.auth_token = auth_token
        self.native_models = None if native_models is None else frozenset(native_models)
        self.counter: fake_native.Counter = counter if counter is not None else RoughCounter()
        self.min_cacheable_tokens = min_cacheable_tokens
        self.validate = validate
        self.responder = responder
        self._lock = threading.Lock()
        self._steps: collections.deque[Step] = collections.deque()
        self._requests: list[RecordedRequest] = []
        self._replies: list[RecordedReply] = []
        self._caches: dict[str, PromptCacheSimulator] = {}
        # msg id -> what that request's prompt was, for the diagnostics of later requests.
        self._fingerprints: dict[str, Fingerprint] = {}
        self._counter = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeAPI:
        """Bind a free port and serve in a background thread; idempotent."""
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._stopping.clear()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="FakeAPI"
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake any delayed handler and join every thread; idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()  # joins the handler threads (block_on_close)
        if thread is not None:
            thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound port; the server must be started."""
        if self._server is None:
            raise RuntimeError(
                "FakeAPI is not running: use it as a context manager or call start()"
            )
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the Anthropic SDK's ``base_url``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the OpenAI SDK's ``base_url`` (it appends no ``/v1``)."""
        return f"{self.base_url}/v1"

    @property
    def gateway_url(self) -> str:
        """``http://127.0.0.1:PORT/anthropic``: the fake as an Anthropic-compatible gateway (the
        Anthropic SDK's ``base_url``). ctxengine takes such a URL for the
        ``anthropic-compatible`` route, where server-side context editing applies; a plain
        ``127.0.0.1`` URL is an OpenAI-compatible route to it."""
        return f"{self.base_url}{_GATEWAY_PREFIX}"

    # -- inspection ------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def replies(self) -> list[RecordedReply]:
        """Every JSON reply sent so far, oldest first (a copy): what a client got byte for
        byte, e.g. to check that a compaction block came back unchanged."""
        with self._lock:
            return list(self._replies)

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        with self._lock:
            return len(self._steps)

    # -- scripting -------------------------------------------------------------------------

    def script(self, *steps: Step) -> FakeAPI:
        """Queue responses; each request consumes one, whatever its endpoint."""
        with self._lock:
            self._steps.extend(steps)
        return self

    def reply_text(self, text: str, *, delay: float = 0.0) -> FakeAPI:
        """Answer the next request with ``text`` as the whole reply."""
        return self.script(Step("text", text=text, delay=delay))

    def reply_blocks(self, blocks: Sequence[Mapping[str, Any]], *, delay: float = 0.0) -> FakeAPI:
        """Answer with these Anthropic content blocks (``text``, ``tool_use``, ``thinking``...).

        OpenAI requests get the same reply translated: text blocks joined into ``content``,
        ``tool_use`` as ``tool_calls`` and ``thinking`` as ``reasoning_content``.
        """
        return self.script(Step("blocks", blocks=tuple(blocks), delay=delay))

    def reply_empty(self, *, delay: float = 0.0) -> FakeAPI:
        """Answer with no content at all (Anthropic ``content: []``, OpenAI ``content: ""``)."""
        return self.script(Step("empty", delay=delay))

    def fail(
        self,
        status: int,
        message: str,
        type: str | None = None,
        *,
        code: str | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> FakeAPI:
        """Answer with HTTP ``status`` and the API's error envelope holding ``message``.

        ``type`` defaults to the API's own name for the status (``rate_limit_error``,
        ``overloaded_error``...); ``headers`` are sent too (e.g. ``{"retry-after": "7"}``).
        """
        return self.script(
            Step(
                "error",
                text=message,
                status=status,
                error_type=type,
                code=code,
                delay=delay,
                headers=tuple((headers or {}).items()),
            )
        )

    def fail_raw(
        self, status: int, body: str, *, content_type: str = "text/html; charset=utf-8"
    ) -> FakeAPI:
        """Answer with HTTP ``status`` and ``body`` as it is, not in the API's envelope: what a
        proxy or load balancer in front of the API sends (an HTML 502 page)."""
        return self.script(Step("raw", status=status, raw=body, content_type=content_type))

    def context_length_error(self) -> FakeAPI:
        """Answer with the API's own "prompt is too long" / "maximum context length" 400."""
        return self.script(Step("context_length", status=400))

    def reply_garbage(self, raw: str = '{"id": "msg_01", "content": [{"type": "te') -> FakeAPI:
        """Answer 200 with a body labelled ``application/json`` that does not parse."""
        return self.script(Step("garbage", raw=raw))

    def fail_compaction(self) -> FakeAPI:
        """The next request's server-side compaction fails (Anthropic: a ``compaction`` block
        whose ``content`` is ``null``; Responses compact: no compaction item)."""
        return self.script(Step("compaction_null"))

    def supports_native(self, model: str) -> bool:
        """Whether ``model`` supports server-side compaction and context editing here."""
        return self.native_models is None or model in self.native_models

    def delay(self, seconds: float) -> FakeAPI:
        """Wait ``seconds`` before sending the default reply (for client timeouts).

        Closing the fake wakes a waiting handler at once, so long delays never slow teardown.
        """
        return self.script(Step("default", delay=seconds))

    # -- request handling (called from handler threads) ------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_step(self) -> Step:
        with self._lock:
            return self._steps.popleft() if self._steps else Step("default")

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; false when the fake is shutting down meanwhile."""
        return not self._stopping.wait(seconds) if seconds > 0 else True

    def _authorized(self, headers: Mapping[str, str], api: Api) -> bool:
        if self.auth_token is None:
            return True
        if headers.get("authorization") == f"Bearer {self.auth_token}":
            return True
        return api == "anthropic" and headers.get("x-api-key") == self.auth_token

    def _simulator(self, key: str) -> PromptCacheSimulator:
        """The simulated cache for ``key`` (call with the lock held), counting with the fake's
        counter (rough estimates unless one was given, so the fake loads no tokenizer)."""
        simulator = self._caches.get(key)
        if simulator is None:
            simulator = PromptCacheSimulator(
                self.counter, min_cacheable_tokens=self.min_cacheable_tokens
            )
            self._caches[key] = simulator
        return simulator

    def _anthropic_usage(
        self, body: Mapping[str, Any], output_text: str, message_id: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Usage with simulated prompt caching for one valid ``/v1/messages`` request (one cache
        per model), and the ``diagnostics`` to answer with when the request asked for them."""
        model = str(body.get("model"))
        asked = body.get("diagnostics")
        with self._lock:
            simulator = self._simulator(model)
            usage = simulator.send(body, now=time.monotonic())
            diagnostics: dict[str, Any] | None = None
            if isinstance(asked, Mapping):
                current = simulator.fingerprint(body)
                previous_id = asked.get("previous_message_id")
                if previous_id is not None:
                    previous = self._fingerprints.get(str(previous_id))
                    reason = miss_reason(previous, current, usage.cache_read_tokens)
                    diagnostics = {"cache_miss_reason": reason} if reason else None
                self._fingerprints[message_id] = current
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": estimate_tokens(output_text),
            "cache_read_input_tokens": usage.cache_read_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage.cache_write_5m_tokens,
                "ephemeral_1h_input_tokens": usage.cache_write_1h_tokens,
            },
            "service_tier": "standard",
        }, diagnostics

    def _openai_cached_tokens(self, body: Mapping[str, Any]) -> int:
        """Prompt tokens OpenAI would serve from its cache: only for a ``prompt_cache_key``
        (requests are routed by it), whose cache holds each whole prompt it saw."""
        key = body.get("prompt_cache_key")
        if not isinstance(key, str) or not key:
            return 0
        chat = {
            "messages": [{**m, "content": m.get("content") or ""} for m in body["messages"]],
            "cache_control": {"type": "ephemeral"},
        }
        with self._lock:
            usage = self._simulator(f"openai:{body.get('model')}:{key}").send(
                chat, now=time.monotonic()
            )
        return usage.cache_read_tokens


# -- HTTP handler ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no idle keep-alive thread blocks shutdown.
    protocol_version = "HTTP/1.0"
    server: _Server
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
        if path.startswith(_GATEWAY_PREFIX + "/"):  # served the same as without the prefix
            path = path[len(_GATEWAY_PREFIX) :]
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
            self._send_json(200, fake_native.model_info(model, fake.supports_native(model)))
            return
        if path.endswith("/messages/count_tokens"):
            self._count_tokens(body)
            return
        if api == "anthropic" and fake.validate:
            if "anthropic-version" not in headers:
                self._send_error(api, 400, "anthropic-version: header is required")
                return
            problems = check_anthropic_request(body)
            problems = problems or fake_native.check_native(body, headers, fake.supports_native)
            if problems:
                self._send_error(api, 400, "; ".join(problems[:5]))
                return
        if api == "openai":
            if _is_responses(path) or path.endswith(_COMPACT_PATH):
                problems = check_responses_request(body) or fake_native.check_responses_native(body)
            else:
                problems = check_openai_request(body)
            if problems:
                self._send_error(api, 400, "; ".join(problems[:5]))
                return
            native = path.endswith(_COMPACT_PATH) or fake_native.responses_threshold(body)
            model = str(body.get("model"))
            if native is not None and native is not False and not fake.supports_native(model):
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
        view = {**body, "messages": fake_native.server_view(body["messages"])}
        self._send_json(
            200, {"input_tokens": fake_native.prompt_tokens(view, self.server.fake.counter)}
        )

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
        self._send_json(200, fake_native.responses_compact_body(body, number, fail=failed))

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
                self._send_events(fake_streams.anthropic_events(reply))
            else:
                self._send_json(200, reply)
        elif responses:
            response = responses_body(body, blocks, self.server.fake._next_id())
            threshold = fake_native.responses_threshold(body)
            tokens = fake_native.responses_tokens(body)
            if threshold is not None and tokens >= threshold and step.kind != "compaction_null":
                raw = body.get("input")
                items: list[Any] = raw if isinstance(raw, list) else []
                item = fake_native.compaction_item(items, self.server.fake._next_id(), tokens)
                response["output"] = [item, *response["output"]]
            if stream:
                self._send_events(fake_streams.responses_events(response))
            else:
                self._send_json(200, response)
        else:
            completion = self._openai_completion(body, blocks)
            if stream:
                options = body.get("stream_options")
                include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
                self._send_events(fake_streams.chat_chunks(completion, include_usage=include_usage))
            else:
                self._send_json(200, completion)

    def _anthropic_message(
        self, body: Mapping[str, Any], blocks: list[Mapping[str, Any]], *, fail: bool = False
    ) -> dict[str, Any]:
        """The reply as the server makes it: read from the last compaction block on, after the
        request's context edits and any compaction it asks for (:mod:`.fake_native`)."""
        fake = self.server.fake
        view: dict[str, Any] = {**body, "messages": fake_native.server_view(body["messages"])}
        clearing = fake_native.apply_clearing(view, fake.counter)
        compaction = fake_native.compact(clearing.body, fake.counter, fail=fail)
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
            default_type, default_code = _OPENAI_ERROR_TYPES.get(
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
                    "type": error_type or _ANTHROPIC_ERROR_TYPES.get(status, fallback),
                    "message": message,
                },
                "request_id": f"req_fake_{self.server.fake._next_id():04d}",
            }
        self._send_json(status, payload, headers)

    def _send_json(
        self, status: int, payload: object, headers: Mapping[str, str] | None = None
    ) -> None:
        fake = self.server.fake
        with fake._lock:
            fake._replies.append(RecordedReply(self.path.split("?", 1)[0], status, payload))
        self._send_raw(status, json.dumps(payload).encode(), headers=headers)

    def _send_events(self, events: list[fake_streams.SSEvent]) -> None:
        """Send a ``text/event-stream`` body; the closed connection ends it (HTTP/1.0)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.wfile.write(fake_streams.encode(events))

    def _send_raw(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status, _REASONS.get(status))
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.send_header("request-id", "req_fake")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


_MODELS_PATH = "/v1/models/"
_GATEWAY_PREFIX = "/anthropic"
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
    return fake_native.template_text(
        f"- Echo summary from FakeAPI ({api}) of a {len(prompt)}-character request.",
        [f"- Request ended: {prompt[-160:]}"],
    )


# -- request checks ----------------------------------------------------------------------------

_USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCKS = frozenset(
    {
        "text",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "thinking",
        "redacted_thinking",
        "compaction",
    }
)
_ALL_BLOCKS = sorted(_USER_BLOCKS | _ASSISTANT_BLOCKS)
_NO_CACHE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def check_anthropic_request(body: Any, *, endpoint: str = "messages") -> list[str]:
    """Every reason the Anthropic API would reject this request body, in the API's wording style.

    ``endpoint="count_tokens"`` skips ``max_tokens``. An empty list means the request is valid.
    """
    if not isinstance(body, Mapping):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    breakpoints: list[tuple[str, str]] = []
    model = body.get("model")
    if "model" not in body:
        problems.append("model: Field required")
    elif not isinstance(model, str) or not model:
        problems.append("model: Input should be a non-empty string")
    if endpoint == "messages":
        max_tokens = body.get("max_tokens")
        if "max_tokens" not in body:
            problems.append("max_tokens: Field required")
        elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            problems.append("max_tokens: Input should be an integer greater than or equal to 1")
    _check_tools(body.get("tools"), problems, breakpoints)
    _check_system(body.get("system"), problems, breakpoints)
    messages = body.get("messages")
    if "messages" not in body:
        problems.append("messages: Field required")
    elif not isinstance(messages, list):
        problems.append("messages: Input should be a valid list")
    elif not messages:
        problems.append("messages: at least one message is required")
    else:
        _check_messages(messages, problems, breakpoints)
    # Top-level automatic caching marks the last cacheable block: last in the TTL order.
    _check_cache_control(body, "request", problems, breakpoints)
    _check_diagnostics(body, problems)
    if len(breakpoints) > 4:
        problems.append(
            f"A maximum of 4 blocks with cache_control may be provided. Found {len(breakpoints)}."
        )
    seen_5m = False
    for where, ttl in breakpoints:
        if ttl == "5m":
            seen_5m = True
        elif seen_5m:
            problems.append(
                f"{where}.cache_control: a ttl='1h' cache_control block must not come after "
                "a ttl='5m' cache_control block (order: tools, system, messages)"
            )
    if not problems:
        problems.extend(_shared_validator_problems(body))
    return problems


def _check_diagnostics(body: Mapping[str, Any], problems: list[str]) -> None:
    if "diagnostics" not in body or body["diagnostics"] is None:
        return
    diagnostics = body["diagnostics"]
    if not isinstance(diagnostics, Mapping):
        problems.append("diagnostics: Input should be an object")
        return
    unknown = sorted(set(diagnostics) - {"previous_message_id"})
    if unknown:
        problems.append(f"diagnostics.{unknown[0]}: Extra inputs are not permitted")
    previous = diagnostics.get("previous_message_id")
    if previous is not None and not isinstance(previous, str):
        problems.append("diagnostics.previous_message_id: Input should be a valid string")


def _shared_validator_problems(body: Mapping[str, Any]) -> list[str]:
    """What :func:`ctxengine.messages.validate` finds in a request the checks above accept.

    The fake's own checks stay the oracle; the library validator is consulted as well, so a
    rule it enforces that the fake lacks cannot go unnoticed (the 400 names the rule id).
    """
    try:
        from ctxengine._messages.validate import validate
    except ImportError:  # the fake stays usable on its own
        return []
    tools = body.get("tools")
    found = validate(
        body["messages"],
        "anthropic",
        system=body.get("system"),
        tools=tools if isinstance(tools, list) else None,
        allow_pending_tool_call=False,
        cache_control=body.get("cache_control"),
        context_management=body.get("context_management"),
    )
    return [f"{p.message} [ctxengine.messages rule {p.rule}]" for p in found]


def _check_cache_control(
    obj: Mapping[str, Any],
    where: str,
    problems: list[str],
    breakpoints: list[tuple[str, str]],
    *,
    empty_text: bool = False,
) -> None:
    if "cache_control" not in obj or obj["cache_control"] is None:
        return
    marker = obj["cache_control"]
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        problems.append(f"{where}.cache_control.type: Input should be 'ephemeral'")
        return
    ttl = marker.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        problems.append(f"{where}.cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
        return
    if empty_text:
        problems.append(f"{where}: cache_control cannot be set for empty text blocks")
    breakpoints.append((where, str(ttl)))


def _check_tools(tools: Any, problems: list[str], breakpoints: list[tuple[str, str]]) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        problems.append("tools: Input should be a valid list")
        return
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, Mapping):
            problems.append(f"{where}: Input should be an object")
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if tool.get("type") in (None, "custom") and not isinstance(
            tool.get("input_schema"), Mapping
        ):
            problems.append(f"{where}.input_schema: Field required")
        _check_cache_control(tool, where, problems, breakpoints)


def _check_system(system: Any, problems: list[str], breakpoints: list[tuple[str, str]]) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        problems.append("system: Input should be a valid string or a list of text blocks")
        return
    for i, block in enumerate(system):
        where = f"system.{i}"
        if not isinstance(block, Mapping) or block.get("type") != "text":
            problems.append(f"{where}.type: Input should be 'text'")
            continue
        text = block.get("text")
        if not isinstance(text, str):
            problems.append(f"{where}.text: Input should be a valid string")
            continue
        empty = not text.strip()
        if empty:
            problems.append(f"{where}.text: system text blocks must contain non-whitespace text")
        _check_cache_control(block, where, problems, breakpoints, empty_text=empty)


def _check_messages(
    messages: list[Any], problems: list[str], breakpoints: list[tuple[str, str]]
) -> None:
    previous_role: object = None
    seen_tool_ids: set[str] = set()
    last = len(messages) - 1
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: Input should be an object")
            previous_role = None
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            hint = " (use the top-level `system` parameter)" if role == "system" else ""
            problems.append(f"{where}.role: Input should be 'user' or 'assistant'{hint}")
        elif i == 0 and role != "user" and not _opens_with_compaction(message):
            problems.append(f"{where}.role: the first message must use the 'user' role")
        elif role == previous_role:
            problems.append(
                f"{where}.role: roles must alternate between 'user' and 'assistant', "
                f"but messages.{i - 1} is also '{role}'"
            )
        previous_role = role
        content = message.get("content")
        final_assistant = i == last and role == "assistant"
        if isinstance(content, str):
            if not content.strip() and not final_assistant:
                problems.append(
                    f"{where}.content: all messages must have non-empty content except for the "
                    "optional final assistant message"
                )
            continue
        if not isinstance(content, list):
            problems.append(f"{where}.content: Input should be a string or a list of blocks")
            continue
        if not content and not final_assistant:
            problems.append(
                f"{where}.content: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        seen_other = False
        for j, block in enumerate(content):
            _check_block(block, f"{where}.content.{j}", str(role), problems, breakpoints)
            is_result = isinstance(block, Mapping) and block.get("type") == "tool_result"
            if is_result and seen_other:
                problems.append(
                    f"{where}.content.{j}: `tool_result` blocks must come first in the user "
                    "message, before any other content"
                )
            seen_other = seen_other or not is_result
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                tool_id = block.get("id")
                if isinstance(tool_id, str) and tool_id in seen_tool_ids:
                    problems.append(
                        f"{where}.content.{j}: `tool_use` ids must be unique: {tool_id}"
                    )
                if isinstance(tool_id, str):
                    seen_tool_ids.add(tool_id)
    _check_tool_pairing(messages, problems)


def _opens_with_compaction(message: Mapping[str, Any]) -> bool:
    """A compaction block opening the first message stands for the conversation before it."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, list)
        and bool(content)
        and isinstance(content[0], Mapping)
        and content[0].get("type") == "compaction"
    )


def _block_ids(message: Any, block_type: str, key: str) -> list[tuple[int, str]]:
    if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
        return []
    return [
        (j, str(block.get(key)))
        for j, block in enumerate(message["content"])
        if isinstance(block, Mapping) and block.get("type") == block_type
    ]


def _check_tool_pairing(messages: list[Any], problems: list[str]) -> None:
    for i, message in enumerate(messages):
        calls = _block_ids(message, "tool_use", "id")
        if calls:
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = {rid for _, rid in _block_ids(following, "tool_result", "tool_use_id")}
            missing = [cid for _, cid in calls if cid not in answered]
            if missing:
                problems.append(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        results = _block_ids(message, "tool_result", "tool_use_id")
        if results:
            previous = messages[i - 1] if i > 0 else None
            offered = {cid for _, cid in _block_ids(previous, "tool_use", "id")}
            seen: set[str] = set()
            for j, rid in results:
                if rid in seen:
                    problems.append(
                        f"messages.{i}.content.{j}: duplicate `tool_result` for `tool_use_id` "
                        f"{rid}; each `tool_use` block gets exactly one `tool_result` block."
                    )
                seen.add(rid)
                if rid not in offered:
                    problems.append(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {rid}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )


def _check_block(
    block: Any,
    where: str,
    role: str,
    problems: list[str],
    breakpoints: list[tuple[str, str]],
) -> None:
    if not isinstance(block, Mapping):
        problems.append(f"{where}: Input should be an object")
        return
    kind = block.get("type")
    if kind not in _USER_BLOCKS and kind not in _ASSISTANT_BLOCKS:
        allowed = ", ".join(f"'{t}'" for t in _ALL_BLOCKS)
        problems.append(
            f"{where}.type: Input tag {kind!r} found using 'type' does not match any of the "
            f"expected tags: {allowed}"
        )
        return
    allowed_here = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    if role in ("user", "assistant") and kind not in allowed_here:
        problems.append(f"{where}: `{kind}` blocks are not allowed in `{role}` messages")
    empty_text = False
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            problems.append(f"{where}.text: Input should be a valid string")
        elif not text.strip():
            empty_text = True
            problems.append(f"{where}.text: text content blocks must contain non-whitespace text")
    elif kind == "image":
        _check_image(block.get("source"), where, problems)
    elif kind == "document":
        if not isinstance(block.get("source"), Mapping):
            problems.append(f"{where}.source: Field required")
    elif kind in ("tool_use", "server_tool_use"):
        for key in ("id", "name"):
            value = block.get(key)
            if not isinstance(value, str) or not value:
                problems.append(f"{where}.{key}: Input should be a non-empty string")
        if not isinstance(block.get("input"), Mapping):
            problems.append(f"{where}.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        _check_tool_result(block, where, problems, breakpoints)
    elif kind == "thinking":
        for key in ("thinking", "signature"):
            if not isinstance(block.get(key), str):
                problems.append(f"{where}.{key}: Field required")
    elif kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        problems.append(f"{where}.data: Field required")
    elif kind == "compaction":
        content = block.get("content")
        if content is not None and (not isinstance(content, str) or not content):
            problems.append(f"{where}.content: Input should be a non-empty string or null")
        for key in ("encrypted_content", "signature"):
            if block.get(key) is not None and not isinstance(block.get(key), str):
                problems.append(f"{where}.{key}: Input should be a valid string")
    if kind in _NO_CACHE_BLOCKS:
        if block.get("cache_control") is not None:
            problems.append(f"{where}: cache_control cannot be set for {kind} blocks")
        return
    _check_cache_control(block, where, problems, breakpoints, empty_text=empty_text)


def _check_image(source: Any, where: str, problems: list[str]) -> None:
    if not isinstance(source, Mapping):
        problems.append(f"{where}.source: Field required")
        return
    kind = source.get("type")
    if kind == "base64":
        if source.get("media_type") not in _IMAGE_TYPES:
            allowed = ", ".join(f"'{t}'" for t in sorted(_IMAGE_TYPES))
            problems.append(f"{where}.source.media_type: Input should be {allowed}")
        if not isinstance(source.get("data"), str) or not source.get("data"):
            problems.append(f"{where}.source.data: Field required")
    elif kind == "url":
        if not isinstance(source.get("url"), str):
            problems.append(f"{where}.source.url: Field required")
    elif kind == "file":
        if not isinstance(source.get("file_id"), str):
            problems.append(f"{where}.source.file_id: Field required")
    else:
        problems.append(f"{where}.source.type: Input should be 'base64', 'url' or 'file'")


def _check_tool_result(
    block: Mapping[str, Any],
    where: str,
    problems: list[str],
    breakpoints: list[tuple[str, str]],
) -> None:
    if not isinstance(block.get("tool_use_id"), str) or not block.get("tool_use_id"):
        problems.append(f"{where}.tool_use_id: Field required")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        problems.append(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        problems.append(f"{where}.content: Input should be a string or a list of blocks")
        return
    for k, inner in enumerate(content):
        inner_where = f"{where}.content.{k}"
        if not isinstance(inner, Mapping) or inner.get("type") not in (
            "text",
            "image",
            "document",
            "search_result",
        ):
            problems.append(
                f"{inner_where}.type: tool_result content must be 'text', 'image', "
                "'document' or 'search_result' blocks"
            )
            continue
        _check_block(inner, inner_where, "user", problems, breakpoints)


def check_openai_request(body: Any) -> list[str]:
    """The main reasons an OpenAI-compatible server rejects a chat completions body."""
    if not isinstance(body, Mapping):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("'messages' must be a non-empty array")
        return problems
    open_calls: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            problems.append(f"messages[{i}]: must be an object")
            continue
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            problems.append(
                f"messages[{i}].role: Invalid value {role!r}; supported values are 'system', "
                "'developer', 'user', 'assistant', 'tool' and 'function'"
            )
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                problems.append(
                    f"messages[{i}].role: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            else:
                open_calls.remove(call_id)
            continue
        if open_calls:
            problems.append(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}"
            )
            open_calls = []
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    open_calls.append(str(call.get("id")))
    return problems
