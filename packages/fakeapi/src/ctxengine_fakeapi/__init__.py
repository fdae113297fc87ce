"""ctxengine-fakeapi: a local fake of the Anthropic and OpenAI HTTP APIs, for tests and replays.

:class:`FakeAPI` (:mod:`ctxengine_fakeapi.server`) serves the Anthropic Messages API, OpenAI chat
completions and the Responses API on ``127.0.0.1`` to the real SDKs, with scripted replies
(:mod:`ctxengine_fakeapi.script`), request checks (:mod:`ctxengine_fakeapi.checks`,
:mod:`ctxengine_fakeapi.responses`), server-sent event streams (:mod:`ctxengine_fakeapi.streams`),
a prompt-cache simulation (:mod:`ctxengine_fakeapi.cachesim`) and server-side context management
(:mod:`ctxengine_fakeapi.native`). It imports only ctxengine's public SDK.
"""

from __future__ import annotations

from ctxengine_fakeapi.checks import check_anthropic_request, check_openai_request
from ctxengine_fakeapi.script import RecordedReply, RecordedRequest, Step
from ctxengine_fakeapi.server import FakeAPI

__version__ = "0.1.0"

__all__ = [
    "FakeAPI",
    "RecordedReply",
    "RecordedRequest",
    "Step",
    "__version__",
    "check_anthropic_request",
    "check_openai_request",
]
