"""Helpers shared by the lcm tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

TRANSCRIPTS = Path(os.environ.get("CTXENGINE_TRANSCRIPTS", "/work/shared/data/transcripts"))


def lcm_config(db_path: Path, *, context_length: int = 16_000, **options: Any) -> dict[str, Any]:
    """A kernel config selecting lcm on ``db_path`` with the extractive provider."""
    return {
        "context": {"engine": "lcm", "strict": True},
        "model": {"name": "claude-sonnet-4-6", "context_length": context_length},
        "auxiliary": {"compression": {"provider": "extractive"}},
        "engines": {"lcm": {"db_path": str(db_path), **options}},
    }


def load_sessions(name: str) -> list[dict[str, Any]]:
    """The sessions of one transcript file (skips the test when the data is missing)."""
    path = TRANSCRIPTS / name
    if not path.exists():
        pytest.skip(f"transcripts not found at {path}")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
