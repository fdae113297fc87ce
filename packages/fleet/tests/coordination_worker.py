"""A worker process for the coordination tests: one kernel, commands on stdin, answers on stdout.

Run as ``python coordination_worker.py '<json options>'`` (beside this file); it prints
``{"ready": pid}``, then answers each command line (JSON) with one JSON line. Options:

- ``config``: the kernel configuration (a mapping shaped like ``config.yaml``);
- ``rendezvous``: a folder; the summary provider of a process that compacts writes
  ``holder-<pid>`` there and waits until ``expect_busy`` files ``busy-*`` exist (each written
  by a process the gateway safety net answered "busy"), so every other worker tries the
  session while the compaction runs.

Commands (``op``):

- ``hygiene``: ``kernel.hygiene(session, messages, last_prompt_tokens=...)``;
- ``turn``: one agent turn at clock time ``now``: ``should_compress`` on ``messages``, then
  ``compress`` when it says so (the summary provider fails when ``fail_summary``), then, when
  ``usage_factor`` is given, ``prepare`` and ``update_usage`` for the request sent after it (the
  provider counting ``usage_factor`` times the local count).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import ctxengine
from ctxengine import SUMMARY_HEADINGS

WAIT_S = 60.0
"""Longest the compacting worker waits for the others (the test fails on it, never hangs)."""


class Provider:
    """A summary provider for the tests: a reply in the template, or a network failure."""

    name = "scripted"
    model = "scripted-1"
    context_length = 200_000

    def __init__(self, rendezvous: Path | None, expect_busy: int) -> None:
        self.rendezvous = rendezvous
        self.expect_busy = expect_busy
        self.fail = False

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        del system, max_tokens
        if self.fail:
            raise ConnectionError("scripted outage")
        if self.rendezvous is not None:
            (self.rendezvous / f"holder-{os.getpid()}").touch()
            deadline = time.monotonic() + WAIT_S
            while len(list(self.rendezvous.glob("busy-*"))) < self.expect_busy:
                if time.monotonic() > deadline:
                    raise TimeoutError("the other workers never reported busy")
                time.sleep(0.01)
        # The summary names how much it covers, so two workers' summaries can be compared.
        lines = [f"{head}\n- {len(prompt)} characters summarised" for head in SUMMARY_HEADINGS]
        return "\n".join(lines)

    async def acomplete(self, system: str, prompt: str, max_tokens: int) -> str:
        return self.complete(system, prompt, max_tokens)


def main() -> int:
    options: dict[str, Any] = json.loads(sys.argv[1])
    rendezvous = Path(options["rendezvous"]) if options.get("rendezvous") else None
    provider = Provider(rendezvous, int(options.get("expect_busy", 0)))
    now = [1_000.0]
    kernel = ctxengine.load(options["config"], clock=lambda: now[0])
    kernel.use_summary_provider(provider)
    out = sys.stdout

    def say(**answer: Any) -> None:
        out.write(json.dumps(answer) + "\n")
        out.flush()

    say(ready=os.getpid())
    for line in sys.stdin:
        command = json.loads(line)
        session = kernel.session(command["session"])
        if command["op"] == "hygiene":
            report = session.hygiene(
                command["messages"], last_prompt_tokens=command.get("last_prompt_tokens")
            )
            if rendezvous is not None and not report.compacted:
                (rendezvous / f"busy-{os.getpid()}").touch()
            say(
                compacted=report.compacted,
                notice=report.notice,
                unchanged=report.messages == command["messages"],
                messages=len(report.messages),
            )
        elif command["op"] == "turn":
            now[0] = float(command["now"])
            provider.fail = bool(command.get("fail_summary"))
            messages, system = command["messages"], command.get("system")
            should = session.should_compress(messages, system)
            result = session.compress(messages, system) if should else None
            if result is not None:
                messages, system = result.messages, result.system
            factor = command.get("usage_factor")
            if factor is not None:
                # The provider's count of the request sent next, ``factor`` x the local count.
                local = session.ctx.tokens.count(messages, system)
                session.prepare({"messages": messages, "system": system})
                session.update_usage({"input_tokens": round(local * factor), "output_tokens": 40})
            say(
                should=should,
                status=None if result is None else result.status,
                reason=None if result is None else result.reason,
                messages=messages,
                system=system,
                ratio=session.ctx.tokens.ratio,
            )
        else:
            say(error=f"unknown op {command['op']!r}")
    kernel.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
