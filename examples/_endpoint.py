"""Where the examples send their requests: the real API when a key is set, else a local fake.

Without ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` (or with ``--fake``), the examples talk to
``ctxengine_fakeapi.FakeAPI`` on 127.0.0.1 (no key, no network) and use a small
context window, so a few turns are enough to watch a compaction happen.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

SMALL_WINDOW = {
    "model": {"name": "claude-sonnet-4-6", "context_length": 8000},
    "auxiliary": {"compression": {"provider": "extractive"}},
    "prompt_caching": {"enabled": True},
}


@attrs.frozen
class Endpoint:
    """Client arguments and the ctxengine configuration to use with them."""

    base_url: str | None
    api_key: str | None
    config: dict[str, Any] | None
    fake: Any = None

    def client_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if self.base_url is not None:
            args["base_url"] = self.base_url
        if self.api_key is not None:
            args["api_key"] = self.api_key
        return args


@contextmanager
def endpoint(key_variable: str, *, openai: bool = False) -> Iterator[Endpoint]:
    """The real API when ``key_variable`` is set (and ``--fake`` not given), else a fake one."""
    if os.environ.get(key_variable) and "--fake" not in sys.argv:
        yield Endpoint(base_url=None, api_key=None, config=None)
        return
    from ctxengine_fakeapi import FakeAPI

    with FakeAPI() as api:
        url = api.openai_base_url if openai else api.base_url
        yield Endpoint(base_url=url, api_key="fake-key", config=SMALL_WINDOW, fake=api)


FILLER = "Here is the log of the last run, for context: " + "line of log output. " * 150
"""A long user message, so the fake conversation reaches the threshold in a few turns."""
