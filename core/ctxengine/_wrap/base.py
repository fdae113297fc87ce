"""What every wrapped client shares: the conversation it belongs to and a pass-through."""

from __future__ import annotations

from typing import Any

from ctxengine._kernel.session import Session
from ctxengine._wrap.record import CallRecord
from ctxengine._wrap.turn import WrappedConversation


class Passthrough:
    """Delegates every attribute it does not define to the object it wraps."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


class WrappedClient(Passthrough):
    """An SDK client whose model calls run the ctxengine loop (see :func:`ctxengine.wrap`).

    Everything the wrapper does not handle (``models``, ``files``, ``with_options``...) is the
    SDK client's own attribute, unchanged.
    """

    def __init__(self, client: Any, conversation: WrappedConversation) -> None:
        super().__init__(client)
        self.ctxengine = conversation
        """The wrapper's state: session, options, views and records."""

    @property
    def unwrapped(self) -> Any:
        """The SDK client itself."""
        return self._wrapped

    @property
    def session(self) -> Session:
        """The ctxengine session every call of this client belongs to."""
        return self.ctxengine.session

    @property
    def records(self) -> list[CallRecord]:
        """What each call did, oldest first (the last ``keep_records`` calls)."""
        return list(self.ctxengine.records)

    @property
    def last_record(self) -> CallRecord | None:
        """The record of the latest call, if any."""
        return self.ctxengine.records[-1] if self.ctxengine.records else None

    @property
    def engine_tool_names(self) -> frozenset[str]:
        """Names of the engine's tools: calls to these are the wrapper's, not the host's."""
        return self.ctxengine.engine_tool_names()

    def reset_history(self) -> None:
        """Forget the compacted view: the next call sends the host's history as it is."""
        self.ctxengine.reset()

    def __repr__(self) -> str:
        return f"<ctxengine wrapper of {self._wrapped!r}, session {self.session.id!r}>"


def unsupported(what: str, instead: str) -> NotImplementedError:
    """The error for an SDK entry point the wrapper does not cover (never a silent bypass)."""
    return NotImplementedError(
        f"ctxengine.wrap does not cover {what}; {instead}, or call it on `wrapped.unwrapped` "
        "and run the loop explicitly (docs/integrations.md)"
    )
