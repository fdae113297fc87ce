"""Where the real-session transcripts live, for tests and benchmarks.

``$CTXENGINE_TRANSCRIPTS`` when set; otherwise the copy bundled with the repository
(``tests/data/transcripts``: MIT-licensed sessions by others, licences beside them). A missing
folder or file is an error, never a reason to skip: tests that read transcripts fail loudly when
the committed data is gone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def transcripts_dir() -> Path:
    """The transcripts folder.

    :raises FileNotFoundError: naming where it looked and the variable that overrides it.
    """
    configured = os.environ.get("CTXENGINE_TRANSCRIPTS")
    if configured:
        path = Path(configured)
        if not path.is_dir():
            raise FileNotFoundError(f"$CTXENGINE_TRANSCRIPTS={configured} is not a folder")
        return path
    parents = Path(__file__).resolve().parents
    for candidate in (parent / "tests" / "data" / "transcripts" for parent in parents):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "no tests/data/transcripts folder beside any parent of "
        f"{Path(__file__).resolve()}; set $CTXENGINE_TRANSCRIPTS to the transcripts folder"
    )


TRANSCRIPTS = transcripts_dir()


def transcript_file(name: str) -> Path:
    """The transcript file ``name`` (e.g. ``claude_code_spotter.openai.jsonl``).

    :raises FileNotFoundError: when it is missing (the committed data must be there).
    """
    path = TRANSCRIPTS / name
    if not path.is_file():
        raise FileNotFoundError(f"transcript {path} is missing; it is committed with the tests")
    return path


def transcript_files() -> list[Path]:
    """Every ``*.jsonl`` transcript, sorted.

    :raises FileNotFoundError: when there are none.
    """
    paths = sorted(TRANSCRIPTS.glob("*.jsonl"))
    if not paths:
        raise FileNotFoundError(f"no *.jsonl transcripts under {TRANSCRIPTS}")
    return paths


def load_sessions(name: str) -> list[dict[str, Any]]:
    """Every session (one JSON object per line) of the transcript file ``name``."""
    with transcript_file(name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
