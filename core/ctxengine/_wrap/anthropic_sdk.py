"""The wrapped ``anthropic`` clients: ``messages.create`` (plain and ``stream=True``),
``messages.parse`` and ``messages.stream``, sync and async."""

from __future__ import annotations

from typing import Any

from ctxengine._wrap.base import Passthrough, WrappedClient, unsupported
from ctxengine._wrap.dialects import Api
from ctxengine._wrap.streams import (
    AnthropicCollector,
    AsyncChainedStream,
    AsyncHelperRound,
    AsyncMessageStreamChain,
    AsyncRawRound,
    AsyncStreamManager,
    ChainedStream,
    HelperRound,
    MessageStreamChain,
    RawRound,
    StreamManager,
)
from ctxengine._wrap.turn import Turn, WrappedConversation, arun, astream_rounds, run, stream_rounds

API: Api = "anthropic.messages"


class Messages(Passthrough):
    """``client.messages`` of a wrapped ``anthropic.Anthropic``."""

    def __init__(self, messages: Any, conversation: WrappedConversation) -> None:
        super().__init__(messages)
        self._conversation = conversation

    def create(self, **kwargs: Any) -> Any:
        """``messages.create`` with the ctxengine loop; the SDK's ``Message`` (or, with
        ``stream=True``, a stream of the SDK's events over every round)."""
        if kwargs.get("stream") is True:
            turn = Turn(self._conversation, API, kwargs, stream=True)

            def open_round(request: dict[str, Any]) -> RawRound:
                return RawRound(self._wrapped.create(**request), AnthropicCollector())

            return ChainedStream(lambda opened: stream_rounds(turn, open_round, opened))
        return run(Turn(self._conversation, API, kwargs, stream=False), self._wrapped.create)

    def parse(self, **kwargs: Any) -> Any:
        """``messages.parse`` (structured output) with the ctxengine loop."""
        return run(Turn(self._conversation, API, kwargs, stream=False), self._wrapped.parse)

    def stream(self, **kwargs: Any) -> StreamManager:
        """``messages.stream`` with the ctxengine loop: ``with ... as stream`` gives the SDK's
        stream interface over every round."""
        turn = Turn(self._conversation, API, kwargs, stream=True)

        def open_round(request: dict[str, Any]) -> HelperRound:
            return HelperRound(self._wrapped.stream(**request))

        return StreamManager(
            lambda: MessageStreamChain(lambda opened: stream_rounds(turn, open_round, opened))
        )


class AsyncMessages(Passthrough):
    """``client.messages`` of a wrapped ``anthropic.AsyncAnthropic``."""

    def __init__(self, messages: Any, conversation: WrappedConversation) -> None:
        super().__init__(messages)
        self._conversation = conversation

    async def create(self, **kwargs: Any) -> Any:
        """:meth:`Messages.create` for the async client."""
        if kwargs.get("stream") is True:
            turn = Turn(self._conversation, API, kwargs, stream=True)

            async def open_round(request: dict[str, Any]) -> AsyncRawRound:
                return AsyncRawRound(await self._wrapped.create(**request), AnthropicCollector())

            chain = AsyncChainedStream(lambda opened: astream_rounds(turn, open_round, opened))
            return await chain.start()
        return await arun(Turn(self._conversation, API, kwargs, stream=False), self._wrapped.create)

    async def parse(self, **kwargs: Any) -> Any:
        """:meth:`Messages.parse` for the async client."""
        return await arun(Turn(self._conversation, API, kwargs, stream=False), self._wrapped.parse)

    def stream(self, **kwargs: Any) -> AsyncStreamManager:
        """:meth:`Messages.stream` for the async client (``async with``)."""
        turn = Turn(self._conversation, API, kwargs, stream=True)

        async def open_round(request: dict[str, Any]) -> AsyncHelperRound:
            return await AsyncHelperRound(self._wrapped.stream(**request)).open()

        async def start() -> AsyncMessageStreamChain:
            chain = AsyncMessageStreamChain(lambda opened: astream_rounds(turn, open_round, opened))
            await chain.start()
            return chain

        return AsyncStreamManager(start)


class _NoToolRunner:
    def tool_runner(self, **kwargs: Any) -> Any:
        raise unsupported(
            "client.beta.messages.tool_runner (it keeps the history itself, in a message thread)",
            "loop over wrapped.messages.create, which answers the engine's tools for you",
        )


class _BetaMessages(_NoToolRunner, Messages):
    pass


class _AsyncBetaMessages(_NoToolRunner, AsyncMessages):
    pass


class Beta(Passthrough):
    """``client.beta``: ``beta.messages`` runs the same loop as ``messages``; the rest of the
    beta surface is the SDK's own."""

    def __init__(self, beta: Any, messages: Passthrough) -> None:
        super().__init__(beta)
        self.messages = messages


class WrappedAnthropic(WrappedClient):
    """A wrapped ``anthropic.Anthropic`` (or a platform client with the same ``messages``)."""

    _messages: type[Messages | AsyncMessages] = Messages
    _beta_messages: type[Messages | AsyncMessages] = _BetaMessages

    def __init__(self, client: Any, conversation: WrappedConversation) -> None:
        super().__init__(client, conversation)
        self.messages = self._messages(client.messages, conversation)
        if hasattr(client, "beta"):
            self.beta = Beta(client.beta, self._beta_messages(client.beta.messages, conversation))


class WrappedAsyncAnthropic(WrappedAnthropic):
    """A wrapped ``anthropic.AsyncAnthropic``."""

    _messages = AsyncMessages
    _beta_messages = _AsyncBetaMessages
