"""Searching the store: full-text, literal substring, and regex (``lcm_grep``).

Validation and the hits' decoration (which summary covers a hit, whether it is in context) are
the same on both backends; the queries differ:

- SQLite: full-text through FTS5 (``LIKE`` where SQLite lacks it), newest first; full-text
  search over messages first brings the index up to date
  (:meth:`~ctxengine_lcm.store.Store.catch_up_index`), so it finds a message stored a moment
  ago; literal search is ``LIKE``; regex search runs Python's ``re`` in a child process;
- PostgreSQL: see :mod:`ctxengine_lcm.search_postgres` (ranked text search, ``pg_trgm``
  indexes, a statement timeout); every mode first indexes the messages ingest queued.

Every way in is bounded: ``limit`` is checked, full-text syntax errors become
:class:`~ctxengine.ToolError` with advice, and a regex is first checked for the shapes that
backtrack catastrophically (a quantified group that itself contains a quantifier, such as
``(a+)+$``; back-references) on both backends, and then run in a child process that is killed
after ``timeout`` seconds (SQLite) or under a ``statement_timeout`` of as long (PostgreSQL).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ctxengine import ToolError, bounded_repr
from ctxengine_lcm.regex_worker import snippet
from ctxengine_lcm.store import ContextItem, Store, message_ref

Mode = Literal["full_text", "regex", "literal"]
Scope = Literal["messages", "summaries", "outputs", "all"]
MODES: tuple[str, ...] = ("full_text", "regex", "literal")
SCOPES: tuple[str, ...] = ("messages", "summaries", "outputs", "all")
MAX_LIMIT = 500
MAX_PATTERN_CHARS = 1_000
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@attrs.frozen
class Hit:
    """One search result.

    :ivar covered_by: the summary in the active context that stands for this hit (expand it to
        read the original), or ``None`` when the hit itself is in the active context or is a
        summary in it.
    :ivar leaf: the nearest summary covering a message or output.
    """

    kind: str
    id: str
    message_id: int | None
    role: str | None
    snippet: str
    covered_by: str | None
    leaf: str | None
    in_context: bool

    def as_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


# -- validation ---------------------------------------------------------------------------------


def check_limit(value: object, default: int = 50) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(
            f"limit must be an integer from 1 to {MAX_LIMIT}, got {bounded_repr(value)}"
        )
    if not 1 <= value <= MAX_LIMIT:
        raise ToolError(f"limit must be from 1 to {MAX_LIMIT}, got {value}")
    return value


def check_choice(name: str, value: object, allowed: Sequence[str], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise ToolError(f"{name} must be one of {', '.join(allowed)}; got {bounded_repr(value)}")
    return str(value)


def check_regex(pattern: str) -> re.Pattern[str]:
    """Compile ``pattern`` after rejecting shapes known to backtrack catastrophically.

    :raises ToolError: invalid syntax, back-references, or a quantified group that contains a
        quantifier (``(a+)+``, ``(\\w*)*``, ``(x+y?){2,}``).
    """
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regex {bounded_repr(pattern)}: {exc}") from exc
    # (has a quantifier inside, has alternation inside) per open group
    stack: list[list[bool]] = [[False, False]]
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt.isdigit() and nxt != "0":
                raise ToolError(
                    f"regex {bounded_repr(pattern)} uses a back-reference (\\{nxt}); "
                    "back-references are not allowed because they can make the search run for hours"
                )
            i += 2
            continue
        if c == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            if pattern.startswith("(?P=", i):
                raise ToolError(
                    f"regex {bounded_repr(pattern)} uses a named back-reference; "
                    "back-references are not allowed because they can make the search run for hours"
                )
            stack.append([False, False])
            i += 1
            continue
        if c == ")":
            inner = stack.pop() if len(stack) > 1 else [False, False]
            quant = pattern[i + 1 : i + 2]
            repeated = quant in ("*", "+", "{")
            if repeated and inner[0]:
                raise ToolError(
                    f"regex {bounded_repr(pattern)} repeats a group that itself contains a "
                    "repetition (like (a+)+); such nested quantifiers can backtrack "
                    "catastrophically. Rewrite it without the nesting, e.g. (a+)+ -> a+"
                )
            stack[-1][0] = stack[-1][0] or inner[0] or repeated
            i += 1
            continue
        if c in "*+{":
            stack[-1][0] = True
        elif c == "|":
            stack[-1][1] = True
        i += 1
    return compiled


def fts_literal(text: str) -> str:
    """``text`` as one FTS5 phrase (double quotes doubled)."""
    return '"' + text.replace('"', '""') + '"'


def words(text: str) -> list[str]:
    return _WORD.findall(text)


# -- search -------------------------------------------------------------------------------------


class Searcher:
    """Search one store; ``conversation_id=None`` searches every conversation (CLI)."""

    def __init__(self, store: Store, conversation_id: int | None, *, timeout: float = 2.0) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.timeout = timeout

    def search(
        self,
        pattern: object,
        *,
        mode: object = None,
        scope: object = None,
        limit: object = None,
    ) -> list[Hit]:
        """Hits for ``pattern``, newest first within each scope (messages, summaries, outputs).

        :raises ToolError: for an empty or oversized pattern, an unknown mode or scope, a bad
            limit, a full-text syntax error, an unsafe or too slow regex.
        """
        if not isinstance(pattern, str) or not pattern.strip():
            raise ToolError("pattern must be a non-empty string")
        try:
            pattern.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(
                f"pattern holds a lone UTF-16 surrogate ({pattern[exc.start]!r}) at position "
                f"{exc.start}, which is not valid Unicode text; send the pattern as valid UTF-8"
            ) from exc
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ToolError(
                f"pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} allowed"
            )
        mode_ = check_choice("mode", mode, MODES, "full_text")
        scope_ = check_choice("scope", scope, SCOPES, "all")
        limit_ = check_limit(limit)
        scopes = ["messages", "summaries", "outputs"] if scope_ == "all" else [scope_]
        if mode_ == "regex":
            check_regex(pattern)
        with self.store.one_connection():
            if self.store.dialect == "postgresql":
                raw = self._postgres(pattern, mode_, scopes, limit_)
            elif mode_ == "regex":
                raw = self._regex(pattern, scopes, limit_)
            elif mode_ == "full_text" and self.store.fts:
                if "messages" in scopes:
                    # Ingest leaves messages out of the index; a search must see all of them.
                    self.store.catch_up_index()
                raw = self._fts(pattern, scopes, limit_)
            else:
                raw = self._like(pattern, scopes, limit_, all_words=mode_ == "full_text")
            return self._hits(raw[:limit_], self._active())

    def _postgres(
        self, pattern: str, mode: str, scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str | int, str | None, str]]:
        from ctxengine_lcm.search_postgres import PostgresSearch
        from ctxengine_lcm.store_postgres import PostgresStore

        if "\x00" in pattern:
            raise ToolError(
                "pattern holds a NUL character, which the PostgreSQL store cannot search"
            )
        assert isinstance(self.store, PostgresStore)
        if "messages" in scopes:
            # Ingest leaves messages for the index; a search must see all of them.
            self.store.catch_up_index(conversation_id=self.conversation_id)
        search = PostgresSearch(self.store, self.conversation_id, self.timeout)
        if mode == "full_text":
            return search.full_text(pattern, scopes, limit)
        return search.matching(pattern, scopes, limit, regex=mode == "regex")

    # -- back ends ---------------------------------------------------------------------------

    def _where(self, alias: str) -> tuple[str, tuple[int, ...]]:
        if self.conversation_id is None:
            return "", ()
        return f" AND {alias}.conversation_id = ?", (self.conversation_id,)

    def _fts(
        self, query: str, scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str | int, str | None, str]]:
        rows: list[tuple[str, str | int, str | None, str]] = []
        where, args = self._where("t")
        sql = {
            "messages": "SELECT t.id, t.role, snippet(messages_fts, 0, '[', ']', '...', 16)"
            " FROM messages_fts JOIN messages t ON t.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? AND t.pinned = 0{where}"
            " ORDER BY messages_fts.rowid DESC LIMIT ?",
            "summaries": "SELECT t.id, NULL, snippet(summaries_fts, 0, '[', ']', '...', 16)"
            " FROM summaries_fts JOIN summaries t ON t.rowid = summaries_fts.rowid"
            " WHERE summaries_fts MATCH ?{where} ORDER BY summaries_fts.rowid DESC LIMIT ?",
            "outputs": "SELECT t.id, NULL, snippet(outputs_fts, 0, '[', ']', '...', 16)"
            " FROM outputs_fts JOIN outputs t ON t.rowid = outputs_fts.rowid"
            " WHERE outputs_fts MATCH ?{where} ORDER BY outputs_fts.rowid DESC LIMIT ?",
        }
        with self.store.reading() as conn:
            for scope in scopes:
                try:
                    found = conn.execute(
                        sql[scope].format(where=where), (query, *args, limit - len(rows))
                    ).fetchall()
                except sqlite3.OperationalError as exc:
                    raise ToolError(
                        f"full-text query {bounded_repr(query)} is not valid FTS5 syntax "
                        f"({exc}). Put literal text in double quotes "
                        '(e.g. "foo.bar(x)"), or use mode="literal" for a plain substring or '
                        'mode="regex"'
                    ) from exc
                rows.extend((scope, ref, role, snip) for ref, role, snip in found)
                if len(rows) >= limit:
                    break
        return rows

    def _like(
        self, pattern: str, scopes: Sequence[str], limit: int, *, all_words: bool
    ) -> list[tuple[str, str | int, str | None, str]]:
        terms = words(pattern) if all_words else [pattern]
        # Stores written before arguments were indexed as written hold them JSON-escaped: a
        # literal search also matches that form, so old rows are found too.
        escaped = None if all_words else _json_escaped(pattern)
        if not terms:
            raise ToolError(
                f'pattern {bounded_repr(pattern)} has no searchable words; use mode="literal" or '
                '"regex" to search punctuation'
            )

        def escape(term: str) -> str:
            return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        column = {"messages": "text", "summaries": "content", "outputs": "content"}
        role = {"messages": "t.role", "summaries": "NULL", "outputs": "NULL"}
        order = {"messages": "t.id", "summaries": "t.rowid", "outputs": "t.rowid"}
        extra = {"messages": " AND t.pinned = 0", "summaries": "", "outputs": ""}
        where, args = self._where("t")
        rows: list[tuple[str, str | int, str | None, str]] = []
        with self.store.reading() as conn:
            for scope in scopes:
                like = f"t.{column[scope]} LIKE ? ESCAPE '\\'"
                likes = " AND ".join(like for _ in terms)
                values = [escape(t) for t in terms]
                if escaped is not None:
                    likes = f"({like} OR {like})"
                    values.append(escape(escaped))
                found = conn.execute(
                    f"SELECT t.id, {role[scope]}, t.{column[scope]} FROM {scope} t"
                    f" WHERE {likes}{extra[scope]}{where} ORDER BY {order[scope]} DESC LIMIT ?",
                    (*values, *args, limit - len(rows)),
                ).fetchall()
                for ref, r, text in found:
                    pos = text.lower().find(terms[0].lower())
                    size = len(terms[0])
                    if pos < 0 and escaped is not None:
                        pos, size = text.lower().find(escaped.lower()), len(escaped)
                    rows.append((scope, ref, r, snippet(text, pos, pos + size)))
                if len(rows) >= limit:
                    break
        return rows

    def _regex(
        self, pattern: str, scopes: Sequence[str], limit: int
    ) -> list[tuple[str, str | int, str | None, str]]:
        request = {
            "db": self.store.location,
            "pattern": pattern,
            "ignore_case": False,
            "scopes": list(scopes),
            "conversation_id": self.conversation_id,
            "limit": limit,
        }
        worker = Path(__file__).with_name("regex_worker.py")
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", str(worker)],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ToolError(
                f"regex {bounded_repr(pattern)} ran longer than {self.timeout:g} s and was "
                'stopped; use a simpler pattern, mode="full_text" or mode="literal"'
            ) from exc
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["unknown error"])[-1]
            raise ToolError(f"regex search failed: {last}")
        rows: list[list[Any]] = json.loads(done.stdout)
        return [(str(r[0]), r[1], r[2], str(r[3])) for r in rows]

    # -- decoration --------------------------------------------------------------------------

    def _hits(
        self, raw: Sequence[tuple[str, str | int, str | None, str]], active: set[ContextItem]
    ) -> list[Hit]:
        """The raw rows as hits, each with the summaries above it (three queries in all)."""
        store = self.store
        output_messages = store.output_messages([str(r[1]) for r in raw if r[0] == "outputs"])
        message_ids = {int(r[1]) for r in raw if r[0] == "messages"} | set(output_messages.values())
        above_messages = store.summaries_above("message", sorted(message_ids))
        above_summaries = store.summaries_above(
            "summary", [str(r[1]) for r in raw if r[0] == "summaries"]
        )
        hits: list[Hit] = []
        for scope, ref, role, text in raw:
            message_id: int | None = None
            if scope == "summaries":
                ident, kind = str(ref), "summary"
                chain = above_summaries.get(ident, [])
            else:
                if scope == "messages":
                    message_id = int(ref)
                    ident, kind = message_ref(message_id), "message"
                else:
                    message_id = output_messages.get(str(ref))
                    ident, kind = str(ref), "output"
                chain = above_messages.get(message_id, []) if message_id is not None else []
            covered_by = next((s for s in chain if ("summary", s) in active), None)
            if kind == "summary":
                in_context = ("summary", ident) in active
            else:
                in_context = message_id is not None and ("message", message_id) in active
            leaf = chain[0] if chain and kind != "summary" else None
            hits.append(Hit(kind, ident, message_id, role, text, covered_by, leaf, in_context))
        return hits

    def _active(self) -> set[ContextItem]:
        if self.conversation_id is None:
            return self.store.active_items()
        return set(self.store.context(self.conversation_id))


def _json_escaped(pattern: str) -> str | None:
    """``pattern`` as it reads inside a JSON string, when that differs from the pattern."""
    escaped = json.dumps(pattern, ensure_ascii=False)[1:-1]
    return escaped if escaped != pattern else None
