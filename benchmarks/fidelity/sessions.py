"""The sessions the fidelity benchmark measures: every bundled real session, in its own format,
plus generated sessions of agent styles the bundled data lacks (:mod:`.generate`)."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks.fidelity.harness import Session

from ctxengine import Format
from ctxengine.testing.transcripts import TRANSCRIPTS, load_sessions

__all__ = ["bundled_sessions"]

# File name prefix -> agent style.
_STYLES = {
    "claude_code": "claude_code",
    "openhands": "openhands",
    "tau_bench": "tau_bench",
}


def bundled_sessions() -> Iterator[Session]:
    """Every session of every bundled transcript file (``tests/data/transcripts/*.jsonl``)."""
    for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
        fmt: Format = "anthropic" if path.name.endswith(".anthropic.jsonl") else "openai"
        style = next((s for p, s in _STYLES.items() if path.name.startswith(p)), "other")
        for number, row in enumerate(load_sessions(path.name)):
            yield Session(
                f"{path.name.split('.')[0]}#{number}",
                style,
                fmt,
                row.get("system") if fmt == "anthropic" else None,
                row["messages"],
            )
