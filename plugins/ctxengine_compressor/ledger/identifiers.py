"""Identifiers: the id-shaped tokens an assistant message uses, in its text or its
calls' arguments."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from ctxengine_compressor.ledger.paths import _PATH_ARGUMENT_KEYS
from ctxengine_compressor.ledger.tools import _Call, _is_shell_tool

# Identifier uses: argument values longer than this are file contents or patches.
_LONG_ARGUMENT = 300


# Arguments that hold paths (ledger items of their own) or a prose note, not ids to carry.
_NO_ID_KEYS = _PATH_ARGUMENT_KEYS | {"description"}


# Identifiers: tokens of letters, digits, "_" and "-" (four or more, at least one digit), or "#"
# and a number. Sizes, durations and ranges name no thing.
_IDENTIFIER = re.compile(r"(?<![\w#-])#?[A-Za-z0-9][\w-]{2,62}[A-Za-z0-9](?![\w-])|#\d{2,}\b")
_NOT_AN_IDENTIFIER = re.compile(r"\d+(?:[a-z]{1,3}|%|-\d+)|\d+-[A-Za-z]+|.*(?:a-z|A-Z|0-9).*")


_DIGIT = re.compile(r"\d")


def _identifier_tokens(text: str) -> list[str]:
    if _DIGIT.search(text) is None:
        return []
    # findall gives the tokens without building match objects; a token of letters only (most
    # words) holds no digit, and isalpha says so without a regex call.
    return [
        token
        for token in _IDENTIFIER.findall(text)
        if not token.isalpha() and _DIGIT.search(token) and not _NOT_AN_IDENTIFIER.fullmatch(token)
    ]


def _identifier_uses(text: str, calls: Sequence[_Call]) -> list[tuple[str, str]]:
    """``(token, argument key or "")`` for every id-shaped token an assistant message uses: in
    its text, in a command's first line, or in a short argument value."""
    found = [(token, "") for token in _identifier_tokens(text)]
    for call in calls:
        shell = _is_shell_tool(call.name)
        for key, value in call.arguments.items():
            if key not in _NO_ID_KEYS:
                found.extend((token, key) for token in _argument_tokens(key, value, shell))
    return found


def _argument_tokens(key: str, value: object, shell: bool) -> list[str]:
    """The id-shaped tokens of one argument value: a shell command's first line, or the short
    strings (and numbers) it holds; longer values are file contents or patches."""
    if isinstance(value, str):
        if shell and key in ("command", "cmd", "script"):
            return _identifier_tokens(value.split("\n", 1)[0])
        return [] if len(value) > _LONG_ARGUMENT else _identifier_tokens(value)
    tokens: list[str] = []
    for item in _flat_strings(value):
        if len(item) <= _LONG_ARGUMENT:
            tokens.extend(_identifier_tokens(item))
    return tokens


def _flat_strings(value: object) -> Iterator[str]:
    """The strings (and numbers, as text) a JSON value holds, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)
    elif isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _flat_strings(item)
