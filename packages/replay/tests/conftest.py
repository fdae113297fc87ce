"""Every test runs with its own CTXENGINE_HOME and no stray CTXENGINE_* variables; the CLI's
tests read the conversation files of ctxengine.testing."""

from ctxengine.testing.conversation_files import jsonl, openai_list
from ctxengine.testing.isolation import isolated_home

__all__ = ["isolated_home", "jsonl", "openai_list"]
