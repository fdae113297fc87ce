"""What a test scripts :class:`~ctxengine_fakeapi.FakeAPI` with and reads back from it: the
scripted :class:`Step`, each :class:`RecordedRequest` and :class:`RecordedReply`, and the error
``type`` each API names per HTTP status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

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
ANTHROPIC_ERROR_TYPES = {
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
OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}
REASONS = {529: "Overloaded"}


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
