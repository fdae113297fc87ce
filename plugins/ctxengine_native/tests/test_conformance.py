"""The kernel's engine conformance suite, run against the native engine twice: with the fake API
compacting on its server, and with the server unreachable (every compaction falls back)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxengine.testing.conformance import EngineConformance
from ctxengine_fakeapi import FakeAPI


class TestNativeConformanceOnTheServer(EngineConformance):
    engine = "native"
    api: FakeAPI

    @pytest.fixture(autouse=True)
    def server(self) -> Iterator[None]:
        with FakeAPI() as fake:
            self.api = fake
            yield

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        return {"api": "anthropic", "base_url": self.api.base_url, "api_key": "test-key"}

    def test_compactions_happened_on_the_server(self, kernel: Any) -> None:
        from ctxengine.testing import samples

        system, messages = samples.conversation("anthropic")
        result = kernel.session("s").compress(messages, system, force=True)
        assert result.fallback is None, result.reason
        assert result.messages[0]["content"][0]["type"] == "compaction"


class TestNativeConformanceFallingBack(EngineConformance):
    engine = "native"

    def engine_options(self, tmp_path: Path) -> dict[str, Any]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return {"api": "anthropic", "base_url": f"http://127.0.0.1:{port}", "api_key": "k"}

    def config(self, tmp_path: Path) -> dict[str, Any]:
        # The fallback compressor's own key: a short protected tail, so the samples have a middle.
        config = super().config(tmp_path)
        config["engines"]["compressor"] = {"protect_last_n": 6}
        return config
