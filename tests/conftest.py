"""Shared fixtures: every test runs with its own CTXENGINE_HOME and no stray CTXENGINE_* vars."""

from __future__ import annotations

import os

from ctxengine.testing.conversation_files import anthropic_object, jsonl, openai_list
from ctxengine.testing.isolation import isolated_home

# The end-to-end suite starts a real local model; only `nox -s e2e` (which installs it) runs it.
collect_ignore = [] if os.environ.get("CTXENGINE_E2E") == "1" else ["e2e"]

__all__ = ["anthropic_object", "collect_ignore", "isolated_home", "jsonl", "openai_list"]
