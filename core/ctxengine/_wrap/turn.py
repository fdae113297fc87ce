"""One wrapped call, whatever the API: compact when due, prepare, send, record, answer tools.

A :class:`Turn` holds the state of one call from the host's arguments to the value returned; the
drivers at the bottom (:func:`run`, :func:`arun`, :func:`stream_rounds`, :func:`astream_rounds`)
run its steps around the SDK calls, so synchronous, asynchronous and streaming calls share every
decision and differ only in how they wait:

1. the host's history is resolved against the conversation's :class:`HistoryView` (what was
   sent last time stands in for what it covered), and engine tool results a previous response
   handed back are supplied;
2. before each request, :meth:`Session.should_compress` and, when due, :meth:`Session.compress`;
3. the engine's tools are added to ``tools`` and the request is prepared (cache markers);
4. after each response, :meth:`Session.update_usage`; if the model called only engine tools,
   the wrapper runs them and asks again (at most ``max_tool_rounds`` requests per call);
5. at the end the view is updated and a :class:`CallRecord` is stored.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from ctxengine._kernel.session import Session
from ctxengine._messages.conversation import Message, SystemPrompt
from ctxengine._messages.memo import MessageView
from ctxengine._messages.sdk_objects import plain
from ctxengine._plugin.results import CompressResult
from ctxengine._wrap.dialects import (
    AnthropicDialect,
    Api,
    ChatDialect,
    Dialect,
    EngineCall,
    ResponsesDialect,
    given,
)
from ctxengine._wrap.history import HistoryView
from ctxengine._wrap.record import CallRecord, RoundRecord
from ctxengine._wrap.streams import AsyncHelperRound, AsyncRawRound, HelperRound, RawRound

ToolMode = Literal["answer", "return", "off"]
TOOL_MODES: tuple[ToolMode, ...] = ("answer", "return", "off")

_DIALECTS: Mapping[Api, Callable[[], Dialect]] = {
    "anthropic.messages": AnthropicDialect,
    "openai.chat": ChatDialect,
    "openai.responses": ResponsesDialect,
}


class WrappedConversation:
    """The state a wrapped client keeps for its session: views, records and options.

    :param tools: ``"answer"`` (run engine tools for the host), ``"return"`` (add them, hand
        every call back) or ``"off"`` (do not offer them).
    :param max_tool_rounds: requests one call may send while answering engine tools (>= 1).
    :param keep_records: how many :class:`CallRecord` objects :attr:`records` keeps.
    :param on_record: called with each call's record as it is made.
    """

    def __init__(
        self,
        session: Session,
        *,
        tools: ToolMode = "answer",
        max_tool_rounds: int = 8,
        keep_records: int = 1000,
        on_record: Callable[[CallRecord], None] | None = None,
    ) -> None:
        if tools not in TOOL_MODES:
            raise ValueError(f"tools must be one of {', '.join(TOOL_MODES)}; got {tools!r}")
        if isinstance(max_tool_rounds, bool) or not isinstance(max_tool_rounds, int):
            raise TypeError(f"max_tool_rounds must be an integer, got {max_tool_rounds!r}")
        if max_tool_rounds < 1:
            raise ValueError(f"max_tool_rounds must be at least 1, got {max_tool_rounds}")
        if keep_records < 1:
            raise ValueError(f"keep_records must be at least 1, got {keep_records}")
        self.session = session
        self.tools: ToolMode = tools
        self.max_tool_rounds = max_tool_rounds
        self.records: collections.deque[CallRecord] = collections.deque(maxlen=keep_records)
        self.on_record = on_record
        self.views = {api: HistoryView() for api in _DIALECTS}
        self.dialects = {api: make() for api, make in _DIALECTS.items()}
        self._schemas: dict[Api, tuple[list[dict[str, Any]], list[str]]] = {}
        self._names: frozenset[str] | None = None

    def engine_schemas(self, api: Api) -> tuple[list[dict[str, Any]], list[str]]:
        """The engine's tools as ``api`` declares them, and their names (empty with
        ``tools="off"``). Read once: the engine's tools are fixed for its session."""
        if self.tools == "off":
            return [], []
        if api not in self._schemas:
            dialect = self.dialects[api]
            schemas = dialect.engine_tools(self.session)
            self._schemas[api] = (schemas, dialect.tool_names(schemas))
        return self._schemas[api]

    def engine_tool_names(self) -> frozenset[str]:
        """Names of the tools the engine offers (whatever the mode)."""
        if self._names is None:
            self._names = frozenset(entry.tool.name for entry in self.session.tools())
        return self._names

    def reset(self) -> None:
        """Forget the compacted views: the next call sends the host's history as given."""
        for view in self.views.values():
            view.clear()

    def add_record(self, record: CallRecord) -> None:
        self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)


class Turn:
    """The steps of one call (see the module docstring)."""

    def __init__(
        self,
        conversation: WrappedConversation,
        api: Api,
        kwargs: Mapping[str, Any],
        *,
        stream: bool,
    ) -> None:
        self.conversation = conversation
        self.session = conversation.session
        self.api: Api = api
        self.stream = stream
        self.dialect = conversation.dialects[api]
        self.view = conversation.views[api]
        self.kwargs = kwargs  # never mutated: every request is built as a new dict
        self.host, self.host_system = self.dialect.split(self.kwargs)
        self.stateful = self.dialect.stateful(self.kwargs)
        self.compactions: list[CompressResult] = []
        self.rounds: list[RoundRecord] = []
        self.notes: list[str] = []
        self.handed_back: list[tuple[str, str]] = []
        self.tools_added: tuple[str, ...] = ()
        self.supplied = 0
        self.reset = False
        self._request: dict[str, Any] = {}
        self._breakpoints = 0
        self._items = 0
        # How many messages the last request carried: self.messages may be the host's own list,
        # which the host may append to while a round runs (a stream), so it is read up to this.
        self._count = 0
        self._deferred = False
        self._supplied_ids: tuple[str, ...] = ()
        # The messages are the host's own, one for one, with its system prompt (see HistoryView).
        self._as_given = False
        self._unconfirmed = False
        self._sent_view: MessageView | None = None
        self.messages: list[Message] = []
        self.system: SystemPrompt | None = None
        if self.stateful:
            self.notes.append(
                "the history is kept by the server (previous_response_id / conversation): "
                "sent as given, without compaction or engine tools"
            )
            return
        self.messages, self.system, reset, self._as_given, self._unconfirmed = self.view.resolve(
            self.host, self.host_system, self.dialect.to_engine
        )
        if reset:
            self._reset()
        if self.view.pending and self._unconfirmed:
            self._confirm()  # supplying changes the messages: the record says first if reset
        if self.view.pending:
            answers = {call_id: text for call_id, (_, text) in self.view.pending.items()}
            self.messages, self.supplied = self.dialect.supply(self.messages, answers)
            self._as_given = self._as_given and not self.supplied
            # Forgotten only when the call succeeds (finish): a failed call supplies them again.
            self._supplied_ids = tuple(answers)

    def _reset(self) -> None:
        self.reset = True
        self.notes.append(
            "the history does not continue the one sent last time; the compacted view was "
            "dropped and the history sent as given"
        )

    def _confirm(self) -> None:
        """Whether the host's messages continue what the view covered, read from the memo's
        resolution of them (made by should_compress, or here)."""
        self._unconfirmed = False
        # Kept for request(), which needs the same view when no compaction replaces the list.
        self._sent_view = self.session.ctx.memo.view_of(self.messages)
        if not self.view.confirm(self._sent_view):
            self._reset()

    # -- steps ------------------------------------------------------------------------------

    def compaction_due(self) -> bool:
        """Whether the engine wants to compact the history before the next request."""
        if self.stateful:
            return False
        due = self.session.should_compress(self.messages, self.system)
        if self._unconfirmed:
            # Before a compaction replaces them: the memo has just resolved these messages.
            self._confirm()
        return due

    def compact(self) -> CompressResult:
        """Compact now (blocking); :func:`arun` runs this in a worker thread."""
        result = self.session.compress(self.messages, self.system, format=self.dialect.format)
        self.compactions.append(result)
        if result.compacted:
            self.messages = list(result.messages)
            self.system = result.system
            self._as_given = False
        return result

    def request(self) -> dict[str, Any]:
        """The arguments for the next SDK call."""
        if self.stateful:
            self._request = dict(self.kwargs)
            return self._request
        request = self.dialect.join(self.kwargs, self.messages, self.system)
        request = self._with_tools(request)
        if "messages" in request:
            # finish() hands the view of the list sent to the history (should_compress has just
            # resolved this list in the memo, or this resolves it and prepare reuses it).
            view = self._sent_view
            if view is None or not view.describes(self.messages):
                self._sent_view = self.session.ctx.memo.view_of(self.messages)
        self._count = len(self.messages)
        prepared, self._breakpoints = self.dialect.prepare(self.session, request)
        self._request = prepared
        # Counted now: without a cache strategy the request holds the host's own list.
        self._items = self.dialect.count_items(prepared)
        return prepared

    def _with_tools(self, request: dict[str, Any]) -> dict[str, Any]:
        schemas, engine_names = self.conversation.engine_schemas(self.api)
        if not schemas:
            return request
        host_tools = list(request["tools"]) if given(request.get("tools")) else []
        host_names = dict(zip(self.dialect.tool_names(host_tools), host_tools, strict=True))
        added = []
        added_names = []
        for name, schema in zip(engine_names, schemas, strict=True):
            if name not in host_names:
                added.append(schema)
                added_names.append(name)
            elif plain(host_names[name]) != schema:
                raise ValueError(
                    f"the request's tools already hold a tool named {name!r}, which the "
                    f"{self.session.ctx.engine!r} engine offers; rename the host's tool or wrap "
                    "the client with tools='off'"
                )
        self.tools_added = tuple(added_names)
        if added:
            request["tools"] = [*host_tools, *added]
        return request

    def settle(self, response: Any) -> list[EngineCall]:
        """Record ``response``; the engine tool calls to run now (empty: the call is done)."""
        usage = self.session.update_usage(self.dialect.usage(response))
        self.rounds.append(RoundRecord(usage, self._breakpoints, self._items))
        if self.stateful or self.conversation.tools == "off":
            return []
        names = self.conversation.engine_tool_names()
        if not names:  # an engine without tools: nothing in the response can be ours
            return []
        calls = self.dialect.calls(response)
        engine = [call for call in calls if call.name in names]
        if not engine:
            return []
        if self.conversation.tools == "return":
            self.handed_back.extend((call.name, call.id) for call in engine)
            return []
        self._deferred = len(engine) < len(calls)
        if not self._deferred and len(self.rounds) >= self.conversation.max_tool_rounds:
            self._deferred = True
            self.notes.append(
                f"stopped after {len(self.rounds)} requests (max_tool_rounds); the engine's "
                "results go with the next call"
            )
        return engine

    def answered(self, response: Any, answers: Sequence[tuple[EngineCall, str]]) -> bool:
        """Take the engine tools' results; whether to send another request now."""
        tools_answered = tuple(call.name for call, _ in answers)
        self.rounds[-1] = attrs.evolve(self.rounds[-1], tools_answered=tools_answered)
        if self._deferred:
            # The response also asks for the host's own tools (or the round limit is reached):
            # it goes back to the host, and the engine's results join the next request.
            self.view.pending.update({call.id: (call.name, text) for call, text in answers})
            self.handed_back.extend((call.name, call.id) for call, _ in answers)
            return False
        self.messages = [
            *self._messages_sent(),
            *self.dialect.assistant(response),
            *self.dialect.results(answers),
        ]
        self._as_given = False
        return True

    def finish(self) -> CallRecord:
        """Remember what was sent and store the call's record."""
        if not self.stateful:
            sent = self._sent_view
            # As given, the memo's view is of the list sent (the host's own, which the host may
            # have grown since: the view's entries are what was sent); mapped, the messages are
            # the wrapper's own list, never the host's (see HistoryView).
            given = self._as_given and sent is not None and sent.items is self.messages
            self.view.commit(
                self.host_system, self._messages_sent(), self.system, given=sent if given else None
            )
            for call_id in self._supplied_ids:
                self.view.pending.pop(call_id, None)
            if isinstance(self.dialect, ResponsesDialect):
                self.dialect.items.retain(self.messages)
        record = CallRecord(
            api=self.api,
            stream=self.stream,
            compactions=tuple(self.compactions),
            rounds=tuple(self.rounds),
            tools_added=self.tools_added,
            handed_back=tuple(self.handed_back),
            results_supplied=self.supplied,
            history_reset=self.reset,
            notes=tuple(self.notes),
        )
        self.conversation.add_record(record)
        return record

    def _messages_sent(self) -> list[Message]:
        """The messages of the last request (see ``_count``)."""
        messages = self.messages
        return messages if len(messages) == self._count else messages[: self._count]

    def run_tools(self, calls: Sequence[EngineCall]) -> list[tuple[EngineCall, str]]:
        return [(call, self.session.call_tool(call.name, call.arguments)) for call in calls]


# -- drivers ---------------------------------------------------------------------------------


def run(turn: Turn, send: Callable[..., Any]) -> Any:
    """Run ``turn`` with the SDK method ``send``; returns the last response, as the SDK gave it."""
    while True:
        if turn.compaction_due():
            turn.compact()
        response = send(**turn.request())
        calls = turn.settle(response)
        if not calls or not turn.answered(response, turn.run_tools(calls)):
            turn.finish()
            return response


async def arun(turn: Turn, send: Callable[..., Awaitable[Any]]) -> Any:
    """:func:`run` for async clients (compaction and tools run in a worker thread)."""
    while True:
        if turn.compaction_due():
            await asyncio.to_thread(turn.compact)
        response = await send(**turn.request())
        calls = turn.settle(response)
        if not calls or not turn.answered(response, await asyncio.to_thread(turn.run_tools, calls)):
            turn.finish()
            return response


def stream_rounds(
    turn: Turn,
    open_round: Callable[[dict[str, Any]], RawRound | HelperRound],
    on_open: Callable[[Any], None],
) -> Iterator[Any]:
    """Every event of every round of a streamed call; ``on_open`` sees each round's stream
    (its ``events()``, then ``final()``, the whole response, and ``close()``)."""
    while True:
        if turn.compaction_due():
            turn.compact()
        source = open_round(turn.request())
        on_open(source)
        try:
            yield from source.events()
        finally:
            source.close()
        final = source.final()
        calls = turn.settle(final)
        if not calls or not turn.answered(final, turn.run_tools(calls)):
            turn.finish()
            return


async def astream_rounds(
    turn: Turn,
    open_round: Callable[[dict[str, Any]], Awaitable[AsyncRawRound | AsyncHelperRound]],
    on_open: Callable[[Any], None],
) -> AsyncIterator[Any]:
    """:func:`stream_rounds` for async clients."""
    while True:
        if turn.compaction_due():
            await asyncio.to_thread(turn.compact)
        source = await open_round(turn.request())
        on_open(source)
        try:
            async for event in source.events():
                yield event
        finally:
            await source.close()
        final = source.final()
        calls = turn.settle(final)
        if not calls or not turn.answered(final, await asyncio.to_thread(turn.run_tools, calls)):
            turn.finish()
            return
