"""Every script in examples/ runs against the local fake API (no key, no network)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def test_there_is_an_example_per_wrapper_and_adapter() -> None:
    names = {p.stem for p in SCRIPTS}
    assert {"wrap_anthropic", "wrap_openai", "langchain_agent", "pydantic_ai_agent"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_runs_and_compacts(script: Path, tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith("CTXENGINE_")
    }
    env["CTXENGINE_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, str(script), "--fake"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "compacted=True" in out or any(f"{n} compaction(s)" in out for n in range(1, 10)), out
