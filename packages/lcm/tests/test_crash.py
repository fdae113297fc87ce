"""A process killed (SIGKILL) in the middle of a long ingest loop loses no committed message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxengine_lcm.doctor import check_store
from ctxengine_lcm.store import Store

WRITER = textwrap.dedent(
    """
    import sys
    from ctxengine_lcm.ingest import prepare
    from ctxengine_lcm.backends import open_store

    store = open_store(sys.argv[1])
    conv = store.conversation_id("crash")
    batch = 0
    while True:
        msgs = [
            {"role": "user" if k % 2 == 0 else "assistant",
             "content": f"batch {batch} message {k} " + "payload " * 40}
            for k in range(50)
        ]
        rows = [
            prepare(msgs, k, "openai", count=lambda m: 60, session_key="crash",
                    large_output_tokens=10_000)[0]
            for k in range(len(msgs))
        ]
        ids = store.append(conv, rows, context=list(range(len(rows))))
        # Only reported after COMMIT returned: these ids are durable.
        print(batch, ids[-1], flush=True)
        batch += 1
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_sigkill_mid_ingest_loses_no_committed_message(
    store_target: Path | str, open_target: Callable[[], Store]
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store_target)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    committed: list[tuple[int, int]] = []
    try:
        for line in proc.stdout:
            batch, last_id = (int(x) for x in line.split())
            committed.append((batch, last_id))
            if len(committed) >= 40:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert len(committed) >= 40

    store = open_target()
    conv = store.find_conversation("crash")
    assert conv is not None
    rows = store.messages(conv)
    last_batch, last_id = committed[-1]
    # Every reported message is there, whole batches only (a batch is one transaction).
    assert {r.id for r in rows} >= set(range(1, last_id + 1))
    assert len(rows) % 50 == 0
    assert rows[last_id - 1].message()["content"].startswith(f"batch {last_batch} message 49 ")
    assert check_store(store) == []
