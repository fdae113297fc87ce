"""A chat gateway with ctxengine's safety net: long chats are compacted before the agent sees them.

    python examples/gateway.py --store chats/ incoming.tsv      # or - for stdin

Each line of the input is one incoming chat message, ``CHAT_ID<TAB>text``; each reply is printed
as ``CHAT_ID<TAB>reply``. Without an input file it plays a demo chat that grows until the safety
net compacts it. The gateway keeps every chat's history in ``--store`` (one JSON file per
chat: the system prompt, the messages, and the prompt size the API reported for the last turn).
Before a new message goes to the model, ``kernel.hygiene`` checks the stored history: at 85 % of
the window (``gateways.hygiene.threshold``) or at the hard message limit it compacts it with
the selected engine, and the gateway stores the shorter history only when that really happened.
The notice says what was done (or why nothing was dropped).

With ``ANTHROPIC_API_KEY`` set, the model is whatever the ``anthropic`` SDK is configured for
(``ANTHROPIC_BASE_URL`` for a gateway) and ctxengine reads ``config.yaml``; without a key, or
with ``--fake``, it is the local fake API (``ctxengine_fakeapi``) with a small window.

A real gateway would handle chats concurrently: two workers on the same chat never both compact
it (the second gets the history back unchanged, with a notice), and ``await
kernel.ahygiene(...)`` is the async variant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import anthropic
from _endpoint import FILLER, endpoint

import ctxengine

log = logging.getLogger("gateway")

SYSTEM = "You are a friendly assistant in a group chat. Answer briefly."


class ChatStore:
    """Every chat's history as one JSON file ``<folder>/<chat id>.json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, chat_id: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", chat_id)
        return self.folder / f"{safe}.json"

    def load(self, chat_id: str) -> dict[str, Any]:
        """``{"system", "messages", "last_prompt_tokens"}``; a new chat starts empty."""
        path = self._path(chat_id)
        if not path.exists():
            return {"system": SYSTEM, "messages": [], "last_prompt_tokens": None}
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def save(self, chat_id: str, chat: dict[str, Any]) -> None:
        path = self._path(chat_id)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(chat, ensure_ascii=False), encoding="utf-8")
        temporary.replace(path)  # a crash mid-write never leaves half a history


class Gateway:
    """Hands each incoming message to the model, with the safety net in front."""

    def __init__(self, kernel: ctxengine.Kernel, store: ChatStore, client: Any) -> None:
        self.kernel = kernel
        self.store = store
        self.client = client
        self.compactions = 0

    def handle(self, chat_id: str, text: str) -> str:
        chat = self.store.load(chat_id)
        history = chat["messages"]
        report = self.kernel.hygiene(
            chat_id, history, system=chat["system"], last_prompt_tokens=chat["last_prompt_tokens"]
        )
        if report.compacted:
            self.compactions += 1
            history = report.messages
            chat["messages"], chat["system"] = history, report.system
            chat["last_prompt_tokens"] = None  # that size described the old, longer history
            self.store.save(chat_id, chat)
        log.info("hygiene for %s: %s", chat_id, report.notice)

        messages = [*history, {"role": "user", "content": text}]
        session = self.kernel.session(chat_id)
        request = session.prepare(
            {"model": self.kernel.model.name, "system": chat["system"], "messages": messages}
        )
        response = self.client.messages.create(max_tokens=1024, **request)
        usage = session.update_usage(response.usage)
        reply = "".join(block.text for block in response.content if block.type == "text")
        chat["messages"] = [*messages, {"role": "assistant", "content": reply}]
        chat["last_prompt_tokens"] = usage.prompt_tokens
        self.store.save(chat_id, chat)
        return reply


def incoming(lines: Iterable[str]) -> Iterable[tuple[str, str]]:
    """``(chat id, text)`` for every ``CHAT_ID<TAB>text`` line; others are reported and
    skipped."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        chat_id, tab, text = line.rstrip("\n").partition("\t")
        if not tab or not chat_id or not text.strip():
            log.warning("line %d is not CHAT_ID<TAB>text; skipped", number)
            continue
        yield chat_id, text


def demo_messages() -> list[str]:
    """One chat that grows past the safety net's threshold of the small demo window."""
    return [f"demo\tMessage {n}: what failed? {FILLER}" for n in range(12)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "incoming",
        nargs="?",
        help="file of CHAT_ID<TAB>text lines, '-' for stdin (default: a demo chat that grows "
        "until the safety net compacts it)",
    )
    parser.add_argument(
        "--store", help="folder holding one JSON file per chat (default: a temporary one)"
    )
    parser.add_argument(
        "--fake", action="store_true", help="use the local fake API even when a key is set"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)

    if args.incoming is None:
        lines: Iterable[str] = demo_messages()
    elif args.incoming == "-":
        lines = sys.stdin
    else:
        lines = Path(args.incoming).read_text(encoding="utf-8").splitlines()
    with contextlib.ExitStack() as stack:
        where = stack.enter_context(endpoint("ANTHROPIC_API_KEY"))
        folder = args.store or stack.enter_context(tempfile.TemporaryDirectory(prefix="chats-"))
        kernel = ctxengine.load(where.config)  # config.yaml lookup (None), or a dict / path
        for line in kernel.status_lines():
            log.info("%s", line)
        client = anthropic.Anthropic(**where.client_args())
        gateway = Gateway(kernel, ChatStore(Path(folder)), client)
        for chat_id, text in incoming(lines):
            reply = gateway.handle(chat_id, text)
            print(f"{chat_id}\t{reply[:200]}", flush=True)
        kernel.close()
    print(f"{gateway.compactions} compaction(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
