"""A scripted lossy summary model, served by :class:`~ctxengine_fakeapi.FakeAPI` to the
real ``anthropic`` SDK.

Each summary request is answered by :class:`LossyModel`: a summary in the template that
mentions about half of the facts of the messages being compacted (chosen by a stable hash of the
fact, so runs repeat), keeps every other line of the previous summary it is asked to update, and
stays within half of the token budget the prompt states. The compressor must make up for what it
leaves out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from benchmarks.fidelity.facts import Fact
from benchmarks.fidelity.harness import Replier, Session

from ctxengine import Message, SummaryProvider
from ctxengine._config.core import SummaryProviderSettings
from ctxengine._summarize import resolve_provider
from ctxengine_fakeapi import FakeAPI

__all__ = ["LossyModel", "dropped", "serve"]

_HEADINGS = ("## Goal", "## Constraints & Preferences", "## Progress", "### Done",
             "### In Progress", "### Blocked", "## Key Decisions", "## Relevant Files",
             "## Next Steps", "## Critical Context")  # fmt: skip


def dropped(fact: Fact) -> bool:
    """Whether the scripted model leaves ``fact`` out (about half of all facts)."""
    return hashlib.sha256(f"{fact.kind}:{fact.key}".encode()).digest()[0] % 2 == 1


@contextmanager
def serve() -> Iterator[tuple[LossyModel, SummaryProvider]]:
    """A lossy model answering on a running fake API, and an ``anthropic`` summary provider
    pointed at it. Call ``model.prepare(...)`` before each compaction."""
    model = LossyModel()
    with FakeAPI(responder=model.respond) as api:
        settings = SummaryProviderSettings(
            provider="anthropic",
            model="claude-haiku-4-5",
            base_url=api.base_url,
            api_key="fidelity",
            timeout=60.0,
        )
        provider = resolve_provider(settings, env={})
        assert provider is not None
        yield model, provider


_PREVIOUS = re.compile(r"<previous-summary>\n(.*?)\n</previous-summary>", re.S)
_BUDGET = re.compile(r"Stay under about ([\d,]+) tokens")


class LossyModel:
    """Answers summary requests with a lossy summary of the conversation being compacted.

    The replier hook (:meth:`prepare`) tells it which session and which messages are being
    compacted; :meth:`respond` answers the request from them and from the request's prompt
    (the previous summary to update, the token budget).

    :ivar replies: every reply given so far, in order (to measure the model alone).
    """

    def __init__(self) -> None:
        self.session: Session | None = None
        self.present: set[int] = set()
        self.replies: list[str] = []

    def for_session(self, session: Session) -> Replier:
        """The replier to pass to the harness for ``session``."""

        def prepare(conversation: Sequence[Message], origin: Sequence[int | None]) -> None:
            self.session = session
            self.present = {i for i in origin if i is not None}

        return prepare

    def respond(self, body: Mapping[str, Any]) -> str:
        prompt = _last_user_text(body)
        found = _PREVIOUS.search(prompt)
        budget = _BUDGET.search(prompt)
        max_chars = 4 * int(budget.group(1).replace(",", "")) // 2 if budget else 4_000
        facts: list[Fact] = []
        if self.session is not None and self.present:
            upto = max(self.present) + 1
            facts = [
                f for f in self.session.facts(upto) if f.home in self.present and not dropped(f)
            ]
        text = _reply(facts, found.group(1) if found else None, max_chars)
        self.replies.append(text)
        return text


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _reply(facts: Sequence[Fact], previous: str | None, max_chars: int) -> str:
    """A summary in the template with ``facts``, every other line of ``previous``, cut at
    ``max_chars`` (half the budget the compressor asked for)."""
    sections: dict[str, list[str]] = {h: [] for h in _HEADINGS}
    if previous:
        kept = [
            line
            for line in previous.splitlines()
            if line.strip() and not line.startswith("#") and not line.startswith("[")
        ]
        sections["## Progress"].extend(kept[::2])
    for fact in facts:
        if fact.kind == "ask":
            sections["## Goal"].append(f"- The user asked: {fact.probe}")
        elif fact.kind == "path":
            sections["## Relevant Files"].append(f"- {fact.probe} ({fact.action or 'used'})")
        elif fact.kind == "command":
            sections["### Done"].append(f"- Ran `{fact.probe}`")
        elif fact.kind == "error":
            if fact.status is not None:
                sections["### Blocked"].append(f"- `{fact.probe}` failed (exit {fact.status})")
            else:
                sections["## Critical Context"].append(f"- Error seen: {fact.probe}")
        else:
            sections["## Key Decisions"].append(f"- Uses {fact.probe}")
    lines: list[str] = []
    size = 0
    for heading in _HEADINGS:
        lines.append(heading)
        for line in sections[heading] or ["None."]:
            if size + len(line) > max_chars:
                break
            lines.append(line)
            size += len(line) + 1
    return "\n".join(lines)
