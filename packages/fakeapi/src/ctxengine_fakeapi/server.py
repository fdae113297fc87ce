"""A local stand-in for the Anthropic Messages API and the OpenAI chat completions and Responses
APIs.

:class:`FakeAPI` is a threaded HTTP server on ``127.0.0.1`` (a free port) that the real
``anthropic`` and ``openai`` SDKs can talk to. Tests queue scripted responses (text, content
blocks, HTTP errors with the right error envelope, delays, unparsable bodies) and read back every
request it received. When the queue is empty it answers with its ``responder``'s text, or else a
deterministic summary-shaped text. A request with ``"stream": true`` gets the same reply as
server-sent events (:mod:`ctxengine_fakeapi.streams`); ``/v1/responses`` is served by
:mod:`ctxengine_fakeapi.responses`. Server-side context management -- Anthropic's
compaction and context editing, the Models API's capabilities, OpenAI's Responses compaction --
is simulated by :mod:`ctxengine_fakeapi.native`.

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
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ctxengine import estimate_tokens
from ctxengine_fakeapi.cachesim import Fingerprint, PromptCacheSimulator, miss_reason
from ctxengine_fakeapi.handler import GATEWAY_PREFIX, Handler, Server
from ctxengine_fakeapi.native import Counter, RoughCounter
from ctxengine_fakeapi.script import Api, RecordedReply, RecordedRequest, Step


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
        counter: Counter | None = None,
    ) -> None:
        self.auth_token = auth_token
        self.native_models = None if native_models is None else frozenset(native_models)
        self.counter: Counter = counter if counter is not None else RoughCounter()
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
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeAPI:
        """Bind a free port and serve in a background thread; idempotent."""
        if self._server is not None:
            return self
        server = Server(("127.0.0.1", 0), Handler)
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
        return f"{self.base_url}{GATEWAY_PREFIX}"

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

    def _record_reply(self, reply: RecordedReply) -> None:
        with self._lock:
            self._replies.append(reply)

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
