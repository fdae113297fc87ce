"""``lcm_grep`` on the PostgreSQL store: the same three modes, done by the server.

- **full_text**: the tool's query syntax (FTS5's: words ANDed, ``"quoted phrase"``, ``OR``,
  ``NOT``, ``AND``, parentheses, ``prefix*``, ``a + b`` phrases) is translated by
  :func:`tsquery` into a ``tsquery`` built from ``phraseto_tsquery``/``to_tsquery`` calls with
  the user's words as parameters, matched against the stored ``tsvector`` columns (GIN) and
  ranked by ``ts_rank``, newest first among equals. ``NEAR(...)``, column filters and ``^`` are
  refused with a tool error, as FTS5 refuses a malformed query.
- **literal**: ``ILIKE`` (case-insensitive, like SQLite's ``LIKE``), and **regex**: the ``~``
  operator, both served by the ``pg_trgm`` GIN indexes when the pattern has three or more
  characters of literal text. A Python regex is rewritten into PostgreSQL's syntax first
  (:func:`postgres_regex`): its flags, ``\\b``/``\\B``, ``\\xhh`` and named groups.

Messages are searched in ``message_search`` (their indexed copy), after their conversation's
queued messages (all queued messages, for a store-wide search) are indexed.

Every query runs with a ``statement_timeout`` (``engines.lcm.regex_timeout_s``), so a hostile
pattern costs the server at most that long and the caller gets a :class:`ToolError` saying so.
Snippets are cut in Python around the first match.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

import attrs

from ctxengine import ToolError
from ctxengine_lcm.regex_worker import snippet
from ctxengine_lcm.store import QueryRejected, QueryTimeout
from ctxengine_lcm.store_postgres import FTS_CONFIG, PUNCTUATION, PostgresStore

Row = tuple[str, "str | int", "str | None", str]
"""``(scope, ref, role, snippet)``, as the searcher decorates it."""

_PUNCTUATION = re.compile(PUNCTUATION)
_TABLE = {
    "messages": ("message_search", "text", "t.role", "t.id", " AND t.pinned = 0"),
    "summaries": ("summaries", "content", "NULL", "t.rowid", ""),
    "outputs": ("outputs", "content", "NULL", "t.rowid", ""),
}
"""scope -> (table, text column, role expression, recency order, extra condition)."""

_MAX_DEPTH = 32
"""Deepest parenthesis nesting a full-text query may have."""


# -- the full-text query language ---------------------------------------------------------------


@attrs.frozen
class TsQuery:
    """A translated full-text query: a SQL ``tsquery`` expression, its parameters, and the
    words it looks for (those not under ``NOT``), for the snippets."""

    sql: str
    params: tuple[str, ...]
    words: tuple[str, ...]


def _syntax(query: str, detail: str) -> ToolError:
    return ToolError(
        f"full-text query {query!r} is not valid FTS5 syntax ({detail}). Put literal text in "
        "double quotes "
        '(e.g. "foo.bar(x)"), or use mode="literal" for a plain substring or mode="regex"'
    )


def _unsupported(query: str, what: str) -> ToolError:
    return ToolError(
        f"full-text query {query!r} uses {what} (FTS5's NEAR groups, column filters and ^), "
        'which the PostgreSQL store does not support; use words, "phrases", AND, OR, NOT, '
        "parentheses and prefix*"
    )


def _is_bare(char: str) -> bool:
    """FTS5's bareword characters: ASCII letters, digits and ``_``, and anything non-ASCII."""
    return (char.isascii() and (char.isalnum() or char == "_")) or not char.isascii()


def _tokens(query: str) -> list[tuple[str, str]]:
    """``(kind, text)`` tokens: ``word``, ``phrase`` (quoted), or the punctuation itself."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c == '"':
            j, text = i + 1, []
            while True:
                k = query.find('"', j)
                if k < 0:
                    raise _syntax(query, "unterminated string")
                text.append(query[j:k])
                if query.startswith('"', k + 1):  # "" stands for one quote
                    text.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            out.append(("phrase", "".join(text)))
        elif c in "()*+":
            out.append((c, c))
            i += 1
        elif _is_bare(c):
            j = i
            while j < n and _is_bare(query[j]):
                j += 1
            word = query[i:j]
            if word == "NEAR" and query[j:].lstrip().startswith("("):
                raise _unsupported(query, "NEAR(...)")
            out.append(("word", word))
            i = j
        elif c in ":^{}-,":
            raise _unsupported(query, repr(c))
        else:
            raise _syntax(query, f"syntax error near {c!r}")
    return out


def tsquery(query: str) -> TsQuery:
    """Translate a full-text query (FTS5 syntax) into a ``tsquery`` SQL expression.

    Precedence as in FTS5: ``NOT`` binds tighter than ``AND`` (also implied between neighbours),
    which binds tighter than ``OR``; ``a NOT b`` means a and not b.

    :raises ToolError: a syntax error, an unsupported operator, or nesting deeper than 32.
    """
    tokens = _tokens(query)
    pos = 0
    params: list[str] = []
    words: list[str] = []

    def peek() -> tuple[str, str] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, str]:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def keyword(token: tuple[str, str] | None, name: str) -> bool:
        return token is not None and token == ("word", name)

    def or_expr(depth: int, positive: bool) -> str:
        parts = [and_expr(depth, positive)]
        while keyword(peek(), "OR"):
            take()
            parts.append(and_expr(depth, positive))
        return parts[0] if len(parts) == 1 else "(" + " || ".join(parts) + ")"

    def and_expr(depth: int, positive: bool) -> str:
        parts = [not_expr(depth, positive)]
        while True:
            token = peek()
            if token is None or token[0] == ")" or keyword(token, "OR"):
                break
            if keyword(token, "AND"):
                take()
            parts.append(not_expr(depth, positive))
        return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"

    def not_expr(depth: int, positive: bool) -> str:
        left = unary(depth, positive)
        while keyword(peek(), "NOT"):
            take()
            left = f"({left} && !!{unary(depth, False)})"
        return left

    def unary(depth: int, positive: bool) -> str:
        token = peek()
        if token is None:
            raise _syntax(query, "it ends where a word or phrase was expected")
        if token[0] == "(":
            if depth >= _MAX_DEPTH:
                raise _syntax(query, f"parentheses nested deeper than {_MAX_DEPTH}")
            take()
            inner = or_expr(depth + 1, positive)
            if peek() is None or take()[0] != ")":
                raise _syntax(query, "a '(' is not closed")
            return inner
        if token[0] not in ("word", "phrase") or token[1] in ("AND", "OR", "NOT"):
            raise _syntax(query, f"syntax error near {token[1]!r}")
        texts = [take()[1]]
        while peek() is not None and peek()[0] == "+":  # type: ignore[index]
            take()
            following = peek()
            if following is None or following[0] not in ("word", "phrase"):
                raise _syntax(query, "'+' must join two phrases")
            texts.append(take()[1])
        prefix = peek() is not None and peek()[0] == "*"  # type: ignore[index]
        if prefix:
            take()
        return phrase(" ".join(texts), prefix, positive)

    def phrase(text: str, prefix: bool, positive: bool) -> str:
        found = _PUNCTUATION.sub(" ", text).split()
        if positive:
            words.extend(found)
        if not prefix or not found:
            params.append(" ".join(found))
            return f"phraseto_tsquery('{FTS_CONFIG}', ?)"
        last = "'" + found[-1].replace("\\", "\\\\").replace("'", "''") + "':*"
        if len(found) == 1:
            params.append(last)
            return f"to_tsquery('{FTS_CONFIG}', ?)"
        params.extend((" ".join(found[:-1]), last))
        return f"tsquery_phrase(phraseto_tsquery('{FTS_CONFIG}', ?), to_tsquery('{FTS_CONFIG}', ?))"

    if not tokens:
        raise _syntax(query, "it has no words")
    sql = or_expr(0, True)
    if pos != len(tokens):
        raise _syntax(query, f"syntax error near {tokens[pos][1]!r}")
    return TsQuery(sql, tuple(params), tuple(words))


# -- Python regex syntax -> PostgreSQL ----------------------------------------------------------

_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def postgres_regex(pattern: str) -> str:
    """``pattern`` (Python ``re`` syntax) in PostgreSQL's ARE syntax, with the same meaning for
    everything both have: Python's default newline handling (``.`` stops at a newline, ``^``
    and ``$`` anchor the whole text) and its ``i``/``m``/``s``/``x`` flags become ARE options;
    ``\\b``/``\\B`` become ``\\y``/``\\Y``; ``\\xhh`` becomes ``\\u00hh`` (ARE's ``\\x`` takes
    every hex digit that follows); ``(?P<name>`` becomes ``(``. Anything else is passed on, and
    the server rejects what ARE does not have (a tool error)."""
    flags = ""
    rest = pattern
    while (match := _FLAGS.match(rest)) is not None:
        flags += match.group(1)
        rest = rest[match.end() :]
    multiline, dotall = "m" in flags, "s" in flags
    newline = {(False, False): "p", (True, False): "n", (False, True): "s", (True, True): "w"}
    options = (
        newline[(multiline, dotall)] + ("i" if "i" in flags else "") + ("x" if "x" in flags else "")
    )
    out: list[str] = []
    i, n = 0, len(rest)
    in_class = False
    while i < n:
        c = rest[i]
        if c == "\\" and i + 1 < n:
            nxt = rest[i + 1]
            if not in_class and nxt in "bB":
                out.append("\\y" if nxt == "b" else "\\Y")
                i += 2
            elif nxt == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", rest[i + 2 : i + 4]):
                out.append("\\u00" + rest[i + 2 : i + 4])
                i += 4
            else:
                out.append(rest[i : i + 2])
                i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            j = i + 1
            if rest.startswith("^", j):
                out.append("^")
                j += 1
            if rest.startswith("]", j):  # a leading ] is a member, not the end
                out.append("]")
                j += 1
            i = j
            continue
        if rest.startswith("(?P<", i):
            end = rest.find(">", i)
            out.append("(")
            i = end + 1 if end > 0 else n
            continue
        out.append(c)
        i += 1
    return f"(?{options})" + "".join(out)


# -- the queries --------------------------------------------------------------------------------


class PostgresSearch:
    """The three modes over one PostgreSQL store, bounded by ``timeout`` seconds in all."""

    def __init__(self, store: PostgresStore, conversation_id: int | None, timeout: float) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.timeout = timeout

    def full_text(self, query: str, scopes: Sequence[str], limit: int) -> list[Row]:
        translated = tsquery(query)
        found = _finder(translated.words)
        rows: list[Row] = []
        deadline = time.monotonic() + self.timeout
        for scope in scopes:
            table, column, role, order, extra = _TABLE[scope]
            where, args = self._where()
            sql = (
                f"SELECT t.id, {role}, t.{column} FROM {table} t,"
                f" (SELECT {translated.sql} AS q) x"
                f" WHERE t.tsv @@ x.q{extra}{where}"
                f" ORDER BY ts_rank(t.tsv, x.q) DESC, {order} DESC LIMIT ?"
            )
            params = (*translated.params, *args, limit - len(rows))
            for ref, r, text in self._run(sql, params, deadline, query):
                start, end = found(text)
                rows.append((scope, ref, r, snippet(text, start, end)))
            if len(rows) >= limit:
                break
        return rows

    def matching(
        self, pattern: str, scopes: Sequence[str], limit: int, *, regex: bool
    ) -> list[Row]:
        """Literal (``ILIKE``) or regex (``~``) search, newest first."""
        if regex:
            operand, operator = postgres_regex(pattern), "~"
            python = re.compile(pattern)

            def locate(text: str) -> tuple[int, int]:
                match = python.search(text)
                return (match.start(), match.end()) if match else (-1, -1)

        else:
            escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            operand, operator = f"%{escaped}%", "ILIKE"
            lowered = pattern.lower()

            def locate(text: str) -> tuple[int, int]:
                at = text.lower().find(lowered)
                return at, at + len(pattern) if at >= 0 else -1

        rows: list[Row] = []
        deadline = time.monotonic() + self.timeout
        for scope in scopes:
            table, column, role, order, extra = _TABLE[scope]
            where, args = self._where()
            escape = " ESCAPE '\\'" if not regex else ""
            sql = (
                f"SELECT t.id, {role}, t.{column} FROM {table} t"
                f" WHERE t.{column} {operator} ?{escape}{extra}{where}"
                f" ORDER BY {order} DESC LIMIT ?"
            )
            for ref, r, text in self._run(
                sql, (operand, *args, limit - len(rows)), deadline, pattern
            ):
                start, end = locate(text)
                rows.append((scope, ref, r, snippet(text, start, end)))
            if len(rows) >= limit:
                break
        return rows

    def _where(self) -> tuple[str, tuple[int, ...]]:
        if self.conversation_id is None:
            return "", ()
        # Typed: psycopg sends a small int as smallint, and the btree_gin operator class of a
        # BIGINT column has no cross-type equality, so the GIN index would not see it.
        return " AND t.conversation_id = ?::bigint", (self.conversation_id,)

    def _run(
        self, sql: str, params: Sequence[object], deadline: float, pattern: str
    ) -> list[tuple[str | int, str | None, str]]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _too_slow(pattern, self.timeout)
        try:
            return [(r[0], r[1], r[2]) for r in self.store.bounded_rows(sql, params, left)]
        except QueryTimeout as exc:
            raise _too_slow(pattern, self.timeout) from exc
        except QueryRejected as exc:
            raise ToolError(
                f"the PostgreSQL store rejected the pattern {pattern!r}: {exc}"
            ) from exc


def _too_slow(pattern: str, timeout: float) -> ToolError:
    return ToolError(
        f"search for {pattern!r} ran longer than {timeout:g} s and was stopped by the database; "
        'use a longer or simpler pattern, mode="full_text", or mode="literal"'
    )


def _finder(words: Sequence[str]) -> Callable[[str], tuple[int, int]]:
    """A function giving ``(start, end)`` of the first of ``words`` in a text (``-1`` if none)."""
    if not words:
        return lambda text: (-1, -1)
    longest_first = sorted(set(words), key=len, reverse=True)
    regex = re.compile("|".join(re.escape(w) for w in longest_first), re.IGNORECASE)

    def find(text: str) -> tuple[int, int]:
        match = regex.search(text)
        return (match.start(), match.end()) if match else (-1, -1)

    return find
