"""A real headless Chromium for the HTML report's tests (imported by them only; needs pytest),
driven over the DevTools protocol on a pipe.

No Python dependency: Chromium is started with ``--remote-debugging-pipe``, reads JSON commands
on file descriptor 3 and writes replies and events on 4, each message ending with a NUL byte.
:func:`find_chromium` locates the browser (``$CTXENGINE_CHROMIUM``, else ``chromium``,
``chromium-browser``, ``google-chrome`` on ``PATH``); ``nox -s tests`` installs Debian's
``chromium`` package when none is found, so the tests never skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 60.0


def find_chromium() -> str:
    """The Chromium executable; fails the test (never skips) with how to install one."""
    named = os.environ.get("CTXENGINE_CHROMIUM", "").strip()
    if named:
        return named
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "no Chromium found (looked for $CTXENGINE_CHROMIUM, " + ", ".join(CANDIDATES) + "); "
        "`nox -s tests` installs it (apt-get install -y chromium), or set CTXENGINE_CHROMIUM"
    )


class Browser:
    """One headless Chromium with one page; :meth:`open` a file, :meth:`evaluate` JavaScript.

    Uncaught exceptions and ``console.error`` calls of the page are collected in
    :attr:`errors`.
    """

    def __init__(self, executable: str) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="ctxengine-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # in the child: the protocol wants fds 3 (commands) and 4 (replies)
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self._process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",  # tests may run as root in a container
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,  # noqa: PLW1509  # single-threaded test setup
            # Kept open in the child: preexec_fn runs before the other descriptors are closed.
            pass_fds=(3, 4),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.errors: list[str] = []
        self._events: list[dict[str, Any]] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def _record(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"uncaught: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append("console.error: " + " ".join(str(a) for a in params["args"]))
        self._events.append(message)

    def _call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._send(message)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._record(reply)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A DevTools command on the page."""
        return self._call(method, params, self._session)

    def open(self, path: Path) -> None:
        """Load ``path`` and wait for its load event."""
        self._events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            self._record(self._receive(deadline))

    def events(self, method: str) -> list[dict[str, Any]]:
        """The parameters of every ``method`` event since the last :meth:`open`."""
        return [e.get("params", {}) for e in self._events if e.get("method") == method]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page (JSON-serialisable results)."""
        reply = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} raised: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def close(self) -> None:
        # Already gone is fine: the process is waited for, or killed, below either way.
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self._call("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()
