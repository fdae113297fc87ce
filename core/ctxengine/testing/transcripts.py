"""Where the real-session transcripts live, for tests and benchmarks.

``$CTXENGINE_TRANSCRIPTS`` when set; otherwise the copy bundled with the repository
(``tests/data/transcripts``, MIT-licensed sessions by others, licences beside them); otherwise a
``shared/data/transcripts`` folder beside an ancestor of this file.
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
    for candidate in (
        *(parent / "tests" / "data" / "transcripts" for parent in parents),
        *(parent / "shared" / "data" / "transcripts" for parent in parents),
    ):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "no tests/data/transcripts or shared/data/transcripts folder beside any parent of "
        f"{Path(__file__).resolve()}; set $CTXENGINE_TRANSCRIPTS to the transcripts folder"
    )


TRANSCRIPTS = transcripts_dir()


def load_sessions(name: str) -> list[dict[str, Any]]:
    """Every session (one JSON object per line) of the transcript file ``name``."""
    with (TRANSCRIPTS / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
