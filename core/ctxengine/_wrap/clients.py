"""The wrapped clients: every ``create``-style endpoint of ``anthropic`` and ``openai``, sync and
async, plain and ``stream=True``, with ``parse``; and Anthropic's ``messages.stream`` helper.

One endpoint class per way of waiting serves every API: ``messages`` (and ``beta.messages``),
``chat.completions`` and ``responses`` differ only in their :class:`Dialect` and in how a round's
stream is collected (:func:`_stream_setup`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxengine._wrap.base import Passthrough, WrappedClient, unsupported
from ctxengine._wrap.dialects import Api, given
from ctxengine._wrap.streams import (
    AnthropicCollector,
    AsyncChainedStream,
    AsyncHelperRound,
    AsyncMessageStreamChain,
    AsyncRawRound,
    ChainedStream,
    ChatCollector,
    Collector,
    HelperRound,
    MessageStreamChain,
    RawRound,
    ResponsesCollector,
    StreamManager,
)
from ctxengine._wrap.turn import Turn, WrappedConversation, arun, astream_rounds, run, stream_rounds


def _stream_setup(api: Api, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The arguments to stream with, and whether the usage chunk is the wrapper's own.

    A chat stream reports usage only with ``stream_options.include_usage``; when the host did
    not ask for it, the wrapper does (to record the usage) and keeps that chunk to itself.
    """
    if api != "openai.chat":
        return dict(kwargs), False
    options = kwargs.get("stream_options")
    options = dict(options) if given(options) and isinstance(options, Mapping) else {}
    if options.get("include_usage"):
        return dict(kwargs), False
    return {**kwargs, "stream_options": {**options, "include_usage": True}}, True


def _collector(api: Api, *, hide_usage: bool) -> Collector:
    if api == "anthropic.messages":
        return AnthropicCollector()
    return ChatCollector(hide_usage=hide_usage) if api == "openai.chat" else ResponsesCollector()


_HELPER_STREAMS: dict[Api, str] = {
    "openai.chat": "chat.completions.stream",
    "openai.responses": "responses.stream",
}
"""The OpenAI streaming helpers, which the wrapper does not cover."""


class Endpoint(Passthrough):
    """One endpoint (``messages``, ``chat.completions`` or ``responses``) of a wrapped sync
    client: the SDK's methods with the ctxengine loop."""

    def __init__(self, resource: Any, conversation: WrappedConversation, api: Api) -> None:
        super().__init__(resource)
        self._conversation = conversation
        self.api = api

    def _turn(self, kwargs: Mapping[str, Any], *, stream: bool = False) -> Turn:
        return Turn(self._conversation, self.api, kwargs, stream=stream)

    def _no_helper_stream(self) -> None:
        if self.api in _HELPER_STREAMS:
            raise unsupported(
                f"{_HELPER_STREAMS[self.api]} (the streaming helper)", "use create(stream=True)"
            )

    def create(self, **kwargs: Any) -> Any:
        """The SDK's ``create``; returns the SDK's response, or with ``stream=True`` a stream of
        the SDK's events over every round."""
        if kwargs.get("stream") is not True:
            return run(self._turn(kwargs), self._wrapped.create)
        arguments, hide_usage = _stream_setup(self.api, kwargs)
        turn = self._turn(arguments, stream=True)

        def open_round(request: dict[str, Any]) -> RawRound:
            stream = self._wrapped.create(**request)
            return RawRound(stream, _collector(self.api, hide_usage=hide_usage))

        return ChainedStream(lambda opened: stream_rounds(turn, open_round, opened))

    def parse(self, **kwargs: Any) -> Any:
        """The SDK's ``parse`` (structured output)."""
        return run(self._turn(kwargs), self._wrapped.parse)

    def stream(self, **kwargs: Any) -> StreamManager:
        """Anthropic's ``messages.stream``: ``with ... as stream`` gives the SDK's stream
        interface over every round."""
        self._no_helper_stream()
        turn = self._turn(kwargs, stream=True)

        def open_round(request: dict[str, Any]) -> HelperRound:
            return HelperRound(self._wrapped.stream(**request))

        return StreamManager(
            lambda: MessageStreamChain(lambda opened: stream_rounds(turn, open_round, opened))
        )


class AsyncEndpoint(Endpoint):
    """:class:`Endpoint` of a wrapped async client."""

    async def create(self, **kwargs: Any) -> Any:
        """:meth:`Endpoint.create` for the async client."""
        if kwargs.get("stream") is not True:
            return await arun(self._turn(kwargs), self._wrapped.create)
        arguments, hide_usage = _stream_setup(self.api, kwargs)
        turn = self._turn(arguments, stream=True)

        async def open_round(request: dict[str, Any]) -> AsyncRawRound:
            stream = await self._wrapped.create(**request)
            return AsyncRawRound(stream, _collector(self.api, hide_usage=hide_usage))

        chain = AsyncChainedStream(lambda opened: astream_rounds(turn, open_round, opened))
        return await chain.start()

    async def parse(self, **kwargs: Any) -> Any:
        """:meth:`Endpoint.parse` for the async client."""
        return await arun(self._turn(kwargs), self._wrapped.parse)

    def stream(self, **kwargs: Any) -> StreamManager:
        """:meth:`Endpoint.stream` for the async client (``async with``)."""
        self._no_helper_stream()
        turn = self._turn(kwargs, stream=True)

        async def open_round(request: dict[str, Any]) -> AsyncHelperRound:
            return await AsyncHelperRound(self._wrapped.stream(**request)).open()

        async def start() -> AsyncMessageStreamChain:
            chain = AsyncMessageStreamChain(lambda opened: astream_rounds(turn, open_round, opened))
            await chain.start()
            return chain

        return StreamManager(start)


class _NoToolRunner:
    def tool_runner(self, **kwargs: Any) -> Any:
        raise unsupported(
            "client.beta.messages.tool_runner (it keeps the history itself, in a message thread)",
            "loop over wrapped.messages.create, which answers the engine's tools for you",
        )


class _BetaMessages(_NoToolRunner, Endpoint):
    pass


class _AsyncBetaMessages(_NoToolRunner, AsyncEndpoint):
    pass


class _Resource(Passthrough):
    """A namespace of the SDK client (``beta``, ``chat``) with one wrapped endpoint in it."""

    def __init__(self, resource: Any, name: str, endpoint: Endpoint) -> None:
        super().__init__(resource)
        setattr(self, name, endpoint)


class WrappedAnthropic(WrappedClient):
    """A wrapped ``anthropic.Anthropic`` (or a platform client with the same ``messages``);
    ``beta.messages`` runs the same loop, the rest of ``beta`` is the SDK's own."""

    _endpoints: tuple[type[Endpoint], type[Endpoint]] = (Endpoint, _BetaMessages)

    def __init__(self, client: Any, conversation: WrappedConversation) -> None:
        super().__init__(client, conversation)
        endpoint, beta = self._endpoints
        self.messages = endpoint(client.messages, conversation, "anthropic.messages")
        if hasattr(client, "beta"):
            messages = beta(client.beta.messages, conversation, "anthropic.messages")
            self.beta = _Resource(client.beta, "messages", messages)


class WrappedAsyncAnthropic(WrappedAnthropic):
    """A wrapped ``anthropic.AsyncAnthropic``."""

    _endpoints = (AsyncEndpoint, _AsyncBetaMessages)


class WrappedOpenAI(WrappedClient):
    """A wrapped ``openai.OpenAI`` (or ``AzureOpenAI``)."""

    _endpoint: type[Endpoint] = Endpoint

    def __init__(self, client: Any, conversation: WrappedConversation) -> None:
        super().__init__(client, conversation)
        completions = self._endpoint(client.chat.completions, conversation, "openai.chat")
        self.chat = _Resource(client.chat, "completions", completions)
        self.responses = self._endpoint(client.responses, conversation, "openai.responses")


class WrappedAsyncOpenAI(WrappedOpenAI):
    """A wrapped ``openai.AsyncOpenAI``."""

    _endpoint = AsyncEndpoint
