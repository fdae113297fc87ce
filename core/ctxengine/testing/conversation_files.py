"""Pytest fixtures: conversation files in each shape :func:`ctxengine.read_conversations` reads,
for tests of commands that take one (``ctxengine compress``, ``ctxengine replay``).

Use them from a ``conftest.py`` (``from ctxengine.testing.conversation_files import jsonl``...).
Each is a path under the test's ``tmp_path``, written from :mod:`ctxengine.testing.samples`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxengine.testing import samples


@pytest.fixture
def openai_list(tmp_path: Path) -> Path:
    """A JSON list of OpenAI messages (one conversation, id ``conversation-0``)."""
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(samples.openai_conversation()))
    return path


@pytest.fixture
def anthropic_object(tmp_path: Path) -> Path:
    """A JSON object with ``id`` (``demo``), ``system`` and Anthropic ``messages``."""
    system, messages = samples.anthropic_conversation()
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"id": "demo", "system": system, "messages": messages}, indent=2))
    return path


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    """JSONL with two conversations: ``one`` (OpenAI) and ``two`` (Anthropic, with a system)."""
    system, messages = samples.anthropic_conversation()
    lines = [
        json.dumps({"id": "one", "messages": samples.openai_conversation()}),
        json.dumps({"id": "two", "system": system, "messages": messages}),
    ]
    path = tmp_path / "convs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path
