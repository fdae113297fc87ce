"""The wrapped ``openai`` clients: ``chat.completions.create`` / ``.parse`` and
``responses.create`` / ``.parse`` (plain and ``stream=True``), sync and async."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxengine._wrap.base import Passthrough, WrappedClient, unsupported
from ctxengine._wrap.dialects import Api, given
from ctxengine._wrap.streams import (
    AsyncChainedStream,
    AsyncRawRound,
    ChainedStream,
    ChatCollector,
    Collector,
    RawRound,
    ResponsesCollector,
)
from ctxengine._wrap.turn import Turn, WrappedConversation, arun, astream_rounds, run, stream_rounds


def _stream_arguments(api: Api, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
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
    return ChatCollector(hide_usage=hide_usage) if api == "openai.chat" else ResponsesCollector()


_HELPER_STREAMS: dict[Api, str] = {
    "openai.chat": "chat.completions.stream",
    "openai.responses": "responses.stream",
}


class _Endpoint(Passthrough):
    """One ``create``-style endpoint (``chat.completions`` or ``responses``) for ``api``."""

    def __init__(self, resource: Any, conversation: WrappedConversation, api: Api) -> None:
        super().__init__(resource)
        self._conversation = conversation
        self.api = api

    def stream(self, **kwargs: Any) -> Any:
        raise unsupported(
            f"{_HELPER_STREAMS[self.api]} (the streaming helper)", "use create(stream=True)"
        )


class _SyncEndpoint(_Endpoint):
    """The endpoint of a wrapped ``openai.OpenAI``."""

    def create(self, **kwargs: Any) -> Any:
        """The SDK's ``create`` with the ctxengine loop; the SDK's response, or with
        ``stream=True`` a stream of the SDK's chunks/events over every round."""
        if kwargs.get("stream") is True:
            arguments, hide_usage = _stream_arguments(self.api, kwargs)
            turn = Turn(self._conversation, self.api, arguments, stream=True)

            def open_round(request: dict[str, Any]) -> RawRound:
                stream = self._wrapped.create(**request)
                return RawRound(stream, _collector(self.api, hide_usage=hide_usage))

            return ChainedStream(lambda opened: stream_rounds(turn, open_round, opened))
        return run(Turn(self._conversation, self.api, kwargs, stream=False), self._wrapped.create)

    def parse(self, **kwargs: Any) -> Any:
        """The SDK's ``parse`` (structured output) with the ctxengine loop."""
        return run(Turn(self._conversation, self.api, kwargs, stream=False), self._wrapped.parse)


class _AsyncEndpoint(_Endpoint):
    """The endpoint of a wrapped ``openai.AsyncOpenAI``."""

    async def create(self, **kwargs: Any) -> Any:
        """:meth:`_SyncEndpoint.create` for the async client."""
        if kwargs.get("stream") is True:
            arguments, hide_usage = _stream_arguments(self.api, kwargs)
            turn = Turn(self._conversation, self.api, arguments, stream=True)

            async def open_round(request: dict[str, Any]) -> AsyncRawRound:
                stream = await self._wrapped.create(**request)
                return AsyncRawRound(stream, _collector(self.api, hide_usage=hide_usage))

            chain = AsyncChainedStream(lambda opened: astream_rounds(turn, open_round, opened))
            return await chain.start()
        turn = Turn(self._conversation, self.api, kwargs, stream=False)
        return await arun(turn, self._wrapped.create)

    async def parse(self, **kwargs: Any) -> Any:
        """:meth:`_SyncEndpoint.parse` for the async client."""
        turn = Turn(self._conversation, self.api, kwargs, stream=False)
        return await arun(turn, self._wrapped.parse)


class _Chat(Passthrough):
    def __init__(self, chat: Any, completions: _Endpoint) -> None:
        super().__init__(chat)
        self.completions = completions


class WrappedOpenAI(WrappedClient):
    """A wrapped ``openai.OpenAI`` (or ``AzureOpenAI``)."""

    _endpoint: type[_Endpoint] = _SyncEndpoint

    def __init__(self, client: Any, conversation: WrappedConversation) -> None:
        super().__init__(client, conversation)
        completions = self._endpoint(client.chat.completions, conversation, "openai.chat")
        self.chat = _Chat(client.chat, completions)
        self.responses = self._endpoint(client.responses, conversation, "openai.responses")


class WrappedAsyncOpenAI(WrappedOpenAI):
    """A wrapped ``openai.AsyncOpenAI``."""

    _endpoint = _AsyncEndpoint
