"""Masking of secrets in text that leaves the process or outlives the turn it came from.

:func:`redact` runs over text before it is sent to a summary model and over every summary or
digest the compressor writes, so an API key pasted into a terminal hours ago is not copied into
every later prompt. Each secret is replaced by a stable marker ``[REDACTED:<kind>]`` (kinds:
``api_key``, ``token``, ``jwt``, ``private_key``, ``password``, ``secret``). When a secret sits
inside a larger construct only the secret is replaced: ``postgres://app:hunter2@db/prod`` becomes
``postgres://app:[REDACTED:password]@db/prod`` and ``DB_PASSWORD=x1`` keeps its key.

The patterns are deliberately specific: ordinary code, paths, commands and prose come out
unchanged. ``redact`` is idempotent: a marker is never itself taken for a secret.

Every pattern starts with a literal, and boundary conditions a leading look-behind would state
are checked in Python on the candidate matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["REDACTION_PREFIX", "redact"]

REDACTION_PREFIX = "[REDACTED"
"""Every marker starts with this text."""

_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_KEY_CHARS = _IDENT_CHARS | {"."}


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _preceded_by_ident(text: str, pos: int) -> bool:
    return pos > 0 and text[pos - 1] in _IDENT_CHARS


# --- fixed-shape tokens --------------------------------------------------------------------------

_Token = tuple[re.Pattern[str], str]

# Each pattern starts with a literal; a match preceded by an identifier character (``task-sk-…``)
# is not a token start and is left alone.
_TOKENS: tuple[_Token, ...] = (
    # OpenAI (sk-…, sk-proj-…) and Anthropic (sk-ant-…) keys. The digit look-ahead keeps slugs
    # such as ``sk-long-branch-name`` intact.
    (re.compile(r"sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"), "api_key"),
    (re.compile(r"g(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})"), "api_key"),
    (re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,}"), "token"),
    (re.compile(r"A(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"), "api_key"),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"), "api_key"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "jwt"),
)

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)


def _token_repl(kind: str) -> Callable[[re.Match[str]], str]:
    mark = _marker(kind)

    def repl(m: re.Match[str]) -> str:
        return m.group(0) if _preceded_by_ident(m.string, m.start()) else mark

    return repl


# --- secrets inside a construct: only group "val" is replaced ------------------------------------

# "Authorization: Bearer x" / "authorization=Token x"; the leading A/a is checked in Python.
_AUTHORIZATION = re.compile(
    r"(?:uthorization|UTHORIZATION)\s*[:=]\s*\\?[\"']?\s*(?:[Bb]earer|BEARER|[Bb]asic|BASIC|"
    r"[Tt]oken|TOKEN)\s+(?!\[REDACTED)(?P<val>[^\s\"'\\,;]+)"
)
# A bare "Bearer <token>" of token shape (prose such as "bearer tokens" is too short).
_BEARER = re.compile(r"earer\s+(?!\[REDACTED)(?P<val>[A-Za-z0-9._~+/-]{16,}=*)")
# scheme://user:password@host: keep scheme, user and host.
_URL_CREDENTIALS = re.compile(r"://[^\s:/@\"'<>\[\]]*:(?P<val>[^\s@/\"'<>\[\]]+)@(?=[A-Za-z0-9\[])")
# --password x, --api-key=x, --db-token x
_CLI_FLAG = re.compile(
    r"--(?P<key>[A-Za-z0-9-]*?(?:password|passwd|token|secret|api-key|apikey|access-key))"
    r"(?:=|[ \t]+)(?P<val>[^\s\"'\\]+)"
)


def _masked(m: re.Match[str], kind: str) -> str:
    whole, base = m.group(0), m.start(0)
    return f"{whole[: m.start('val') - base]}{_marker(kind)}{whole[m.end('val') - base :]}"


def _word_repl(first: str) -> Callable[[re.Match[str]], str]:
    """A replacement for a pattern that leaves out its word's first letter (one of ``first``):
    the token is masked when that letter stands before the match and starts a word."""

    def repl(m: re.Match[str]) -> str:
        start = m.start()
        if start == 0 or m.string[start - 1] not in first:
            return m.group(0)
        return m.group(0) if _preceded_by_ident(m.string, start - 1) else _masked(m, "token")

    return repl


def _url_repl(m: re.Match[str]) -> str:
    return _masked(m, "password")


def _cli_repl(m: re.Match[str]) -> str:
    value = m.group("val")
    if (
        _preceded_by_ident(m.string, m.start())
        or _is_placeholder(value)
        or value.startswith("-")
        or len(value) < 3
    ):
        return m.group(0)
    return _masked(m, _kind_for_key(m.group("key")))


# --- secrets in prose ---------------------------------------------------------------------------

# "my db password is hunter2", "the token was ab12cd", "secret: x9!" -- a secret word (whole, not
# part of an identifier: checked in Python), "is"/"was"/":"/"=", then a quoted or bare value.
_PROSE_WORDS = ("password", "passwords", "passwd", "passphrase", "pwd", "secret", "token")
# Every alternative of the key starts with a plain letter (``a``/``A`` spelled out rather than
# ``[Aa]``), so the regex engine can skip to the candidate first letters.
_PROSE_API_KEY = r"a[Pp][Ii][ _-]?[Kk][Ee][Yy]|A[Pp][Ii][ _-]?[Kk][Ee][Yy]"
"""The words "api key" in prose, in any mix of case (the short-text prefilter needs them too)."""
_PROSE = re.compile(
    "(?P<key>"
    + "|".join(v for w in _PROSE_WORDS for v in (w, w.capitalize(), w.upper()))
    + "|"
    + _PROSE_API_KEY
    + ")"
    r"(?P<sep>[ \t]+(?i:is|was)[ \t]*:?[ \t]*|[ \t]*[:=][ \t]*)"
    r"(?:(?P<q>[\"'`])(?P<qval>[^\"'`\s]{3,200})(?P=q)"
    r"|(?P<val>[^\s\"'`,;&#()\[\]{}<>]{3,200}))"
)
_PROSE_END = ".:"
"""A full stop or colon ending a bare value ends the sentence, not the secret."""


def _prose_value_is_secret(value: str, quoted: bool, spoken: bool) -> bool:
    """Whether the word after "password is" / "token:" is a literal secret.

    Quoted values are. A bare word must look like one -- a digit, a symbol (not ``_``, ``.`` or
    ``-``, which identifiers and compound words use) or a capital after its first letter -- so
    prose ("the token is one-time") and code ("token: str", "token = get_token()") stay; after
    "is"/"was" a number of four or more digits (a PIN) counts too.
    """
    if _is_placeholder(value):
        return False
    if quoted:
        return True
    if value.isdigit():
        return spoken and len(value) >= 4
    if any(c.isdigit() for c in value) or any(c.isupper() for c in value[1:]):
        return True
    return any(not (c.isalnum() or c in "_.-") for c in value)


def _prose_repl(m: re.Match[str]) -> str:
    text, start = m.string, m.start()
    if _preceded_by_ident(text, start):
        return m.group(0)
    group = "qval" if m.group("qval") is not None else "val"
    value = m.group(group)
    end = m.end(group)
    if group == "val":
        if end < len(text) and text[end] == "(":
            return m.group(0)  # a call: code, not a secret
        trimmed = value.rstrip(_PROSE_END)
        end -= len(value) - len(trimmed)
        value = trimmed
    spoken = not m.group("sep").strip().startswith((":", "="))
    if len(value) < 3 or not _prose_value_is_secret(value, group == "qval", spoken):
        return m.group(0)
    whole = m.group(0)
    cut_start, cut_end = m.start(group) - start, end - start
    return f"{whole[:cut_start]}{_marker(_kind_for_key(m.group('key')))}{whole[cut_end:]}"


# --- key = value assignments ---------------------------------------------------------------------

# Candidate key words in the spellings keys use (snake, camel, SCREAMING); the key is then read
# back and forward from the hit and judged as a whole by _SECRET_KEY.
_KEY_HIT = re.compile(
    "|".join(
        variant
        for word in ("pass", "pwd", "secret", "token", "key", "credential")
        for variant in (word, word.capitalize(), word.upper())
    )
)
# A key whose value is a secret. It must END in one of these words so that ``max_tokens``,
# ``token_count`` or ``password_hash`` are not taken for secrets. Short words (``pass``, ``pwd``)
# count only as a whole key or after a separator (``db_pass``), never inside a word (``bypass``).
_SECRET_KEY = re.compile(
    r"(?:[a-z0-9_.-]*?(?:password|passwd|passphrase|token|secret|secret[_-]?key(?:[_-]?base)?|"
    r"api[_-]?key|access[_-]?key(?:[_-]?id)?|private[_-]?key|credentials?)"
    r"|(?:[a-z0-9_.-]*[_.-])?(?:pass|pwd))"
)
_Q = r"""(?:\\?["'])"""
# From the key's first character: optional quote, key, optional quote, separator, then either a
# quoted value (JSON, YAML, code, env files) or a bare one (PASSWORD=x, password: x).
_ASSIGNMENT = re.compile(
    rf"[A-Za-z0-9_.-]+{_Q}?(?P<sep>[ \t]*(?::|=>|:=|=)[ \t]*)"
    rf"(?:{_Q}(?P<qval>[^\"'\\\n]{{1,400}}){_Q}"
    # A bare value must end at a delimiter, not at a call or index: ``token = fetch(x)`` is code.
    r"|(?![\"'\\])(?P<val>[^\s\"'\\,;&()\[\]{}]+)(?=[\s\"'\\,;&)\]}]|$))"
)

# Values that are references or placeholders, never secrets themselves.
_PLACEHOLDER = re.compile(
    r"""(?:\$|%\(|\{|<|\[REDACTED|\*{3,}|\.{3}|…|x{3,}$|"""
    r"""(?:none|null|nil|true|false|undefined|changeme|redacted|your[_-].*|example.*)$)""",
    re.IGNORECASE,
)


def _kind_for_key(key: str) -> str:
    low = key.lower()
    if "pass" in low or "pwd" in low:
        return "password"
    if "token" in low:
        return "token"
    if "secret" in low:
        return "secret"
    if "api" in low or "access" in low:
        return "api_key"
    return "secret"


def _is_placeholder(value: str) -> bool:
    return not value or _PLACEHOLDER.match(value) is not None


def _bare_value_is_secret(key: str, sep: str, value: str) -> bool:
    """Whether an unquoted value after a secret-looking key is a literal secret.

    ``KEY=value`` with an upper-case key (env files, shell) is a literal even without digits.
    ``key: value``, ``key = value`` and ``f(key=value)`` may be code (``password: password``,
    ``api_key=api_key``, ``token: str``), so the value must look like a secret: a digit or a
    symbol, not just a number.
    """
    if _is_placeholder(value) or value.startswith("`"):
        return False
    if sep == "=" and key == key.upper():
        return len(value) >= 3
    if len(value) < 6 or value.isdigit() or value.startswith(("@", ":", "&", "%")):
        return False
    return any(c.isdigit() or not (c.isalnum() or c in "_.") for c in value)


def _redact_assignments(text: str) -> str:
    pieces: list[str] = []
    done = 0  # text[:done] is already in pieces
    for hit in _KEY_HIT.finditer(text):
        if hit.start() < done:
            continue
        start = hit.start()
        while start > done and text[start - 1] in _KEY_CHARS:
            start -= 1
        end = hit.end()
        n = len(text)
        while end < n and text[end] in _KEY_CHARS:
            end += 1
        key = text[start:end]
        if not _SECRET_KEY.fullmatch(key.lower()):
            continue
        m = _ASSIGNMENT.match(text, start)
        if m is None:
            continue
        group = "qval" if m.group("qval") is not None else "val"
        value = m.group(group)
        sep = m.group("sep").strip()
        if group == "qval":
            # Prose ("token": "the API token") has spaces; secrets do not.
            if _is_placeholder(value) or len(value) < 3 or any(c.isspace() for c in value):
                continue
        elif not _bare_value_is_secret(key, sep, value):
            continue
        pieces.append(text[done : m.start(group)])
        pieces.append(_marker(_kind_for_key(key)))
        done = m.end(group)
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


# Every rule needs one of these substrings; short texts without any are returned at once.
_ANY_TRIGGER = re.compile(
    "PRIVATE KEY|sk-|gh[pousr]_|github_pat_|xox|AKIA|ASIA|AIza|eyJ|uthorization|UTHORIZATION|"
    "earer|://|--|" + _KEY_HIT.pattern + "|" + _PROSE_API_KEY
)
_PREFILTER_CHARS = 4096

_SUBSTITUTIONS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("://", _URL_CREDENTIALS, _url_repl),
    ("--", _CLI_FLAG, _cli_repl),
)


def redact(text: str) -> str:
    """Return ``text`` with secrets replaced by ``[REDACTED:<kind>]`` markers.

    Masks API keys (Anthropic ``sk-ant-…``, OpenAI ``sk-…``, GitHub ``ghp_…``/``github_pat_…``,
    Slack ``xox…``, AWS ``AKIA…``, Google ``AIza…``), ``Authorization``/``Bearer`` tokens, JWTs,
    PEM private-key blocks, secret-looking assignments (``PASSWORD=…``, ``"api_key": "…"``,
    ``password: …``, ``--token …``), secrets in prose (``my db password is …``, ``the token
    was …``, ``secret: …``) and the password of ``scheme://user:password@host`` URLs.
    Everything else is returned unchanged, and ``redact(redact(t)) == redact(t)``.

    :raises TypeError: when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact() takes a str, got {type(text).__name__}")
    if not text:
        return text
    # On long texts nearly always something triggers: the prefilter is for short ones.
    if len(text) <= _PREFILTER_CHARS and _ANY_TRIGGER.search(text) is None:
        return text
    if "PRIVATE KEY-----" in text:
        text = _PRIVATE_KEY.sub(_marker("private_key"), text)
    for pattern, kind in _TOKENS:
        text = pattern.sub(_token_repl(kind), text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTHORIZATION.sub(_word_repl("Aa"), text)
    if "earer" in text:
        text = _BEARER.sub(_word_repl("Bb"), text)
    for needle, pattern, repl in _SUBSTITUTIONS:
        if needle in text:
            text = pattern.sub(repl, text)
    text = _PROSE.sub(_prose_repl, text)
    return _redact_assignments(text)
