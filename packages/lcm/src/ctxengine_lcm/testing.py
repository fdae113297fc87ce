"""Helpers for testing code that runs on the lcm engine (no network, a temporary store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def lcm_config(db_path: Path, *, context_length: int = 16_000, **options: Any) -> dict[str, Any]:
    """A kernel configuration selecting ``lcm`` on ``db_path`` with the extractive provider.

    Keyword options go to ``engines.lcm`` (e.g. ``fresh_tail_count=4``).
    """
    return {
        "context": {"engine": "lcm", "strict": True},
        "model": {"name": "claude-sonnet-4-6", "context_length": context_length},
        "auxiliary": {"compression": {"provider": "extractive"}},
        "engines": {"lcm": {"db_path": str(db_path), **options}},
    }
