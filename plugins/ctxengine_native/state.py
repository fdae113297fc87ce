"""Per-session state of the native engine, kept in ``ctx.state["native"]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import attrs

from ctxengine import CompactionGuard

if TYPE_CHECKING:
    from ctxengine import EngineContext

STATE_KEY = "native"
"""The key of this engine's entry in ``EngineContext.state``."""


class Closable(Protocol):
    def close(self) -> None: ...


@attrs.define
class NativeState:
    """What the native engine remembers between calls for one session.

    :ivar guard: the failure cooldown and recent savings every engine keeps.
    :ivar inband: a response reported a server-side compaction (``usage.iterations``): the
        history now holds a compaction block after what it replaced, and the next ``compress``
        drops what the server no longer reads.
    :ivar compactions: server-side compactions that changed the conversation.
    :ivar fallbacks: compactions handed to the fallback engine.
    :ivar servers: one SDK client per endpoint, made on first use.
    """

    guard: CompactionGuard = attrs.field(factory=CompactionGuard)
    inband: bool = False
    compactions: int = 0
    fallbacks: int = 0
    servers: dict[tuple[str, str, str], Closable] = attrs.field(factory=dict, repr=False)

    def close(self) -> None:
        """Close every client's connections."""
        servers, self.servers = self.servers, {}
        for server in servers.values():
            server.close()


def get_state(ctx: EngineContext) -> NativeState:
    """This session's state, created on first use."""
    return ctx.plugin_state(STATE_KEY, NativeState)
