"""Runs one lcm_grep regex search in a separate process, so a runaway pattern can be killed.

Python's ``re`` cannot be interrupted from another thread, so the search runs here, reading the
store read-only; the parent kills this process when it exceeds its time cap. Protocol: one JSON
request on stdin (``db``, ``pattern``, ``ignore_case``, ``scopes``, ``conversation_id``,
``limit``), one JSON list of ``[kind, ref, role, snippet]`` on stdout. Only the standard library
is imported, so the process starts fast (run with ``python -I -S``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

QUERIES = {
    "messages": "SELECT id, role, text FROM messages WHERE pinned = 0 {where} ORDER BY id DESC",
    "summaries": "SELECT id, 'summary', content FROM summaries WHERE 1 = 1 {where} "
    "ORDER BY rowid DESC",
    "outputs": "SELECT id, 'tool', content FROM outputs WHERE 1 = 1 {where} ORDER BY rowid DESC",
}


def snippet(text: str, start: int, end: int, width: int = 80) -> str:
    """``text`` around ``[start, end)``, the match in brackets, whitespace collapsed (a
    ``start`` below 0 shows the beginning). The one snippet rule of every lcm_grep search; it
    lives here because this process imports only the standard library."""
    if start < 0:
        start = end = 0
    left = max(0, start - width)
    right = min(len(text), end + width)
    body = " ".join((text[left:start] + "[" + text[start:end] + "]" + text[end:right]).split())
    return ("..." if left else "") + body + ("..." if right < len(text) else "")


def run(request: dict[str, Any]) -> list[list[Any]]:
    flags = re.IGNORECASE if request.get("ignore_case") else 0
    regex = re.compile(request["pattern"], flags)
    # as_uri percent-encodes the path, so "?", "#" and "%" in it are not read as URI syntax.
    uri = Path(request["db"]).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    limit = int(request["limit"])
    conversation = request.get("conversation_id")
    hits: list[list[Any]] = []
    for scope in request["scopes"]:
        where = "" if conversation is None else "AND conversation_id = ?"
        args = () if conversation is None else (conversation,)
        for ref, role, text in conn.execute(QUERIES[scope].format(where=where), args):
            match = regex.search(text)
            if match is None:
                continue
            hits.append([scope, ref, role, snippet(text, match.start(), match.end())])
            if len(hits) >= limit:
                return hits
    return hits


def main() -> int:
    request = json.loads(sys.stdin.read())
    json.dump(run(request), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
