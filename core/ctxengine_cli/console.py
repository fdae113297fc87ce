"""Where the CLI's reports go: emoji status lines, or plain text where they cannot be shown.

Plain text is chosen when ``--plain`` is given, when ``NO_COLOR`` is set to anything but the empty
string (https://no-color.org: the user wants no decoration), or when the output's encoding cannot
encode the status symbols (a cp1252 Windows console, ``PYTHONIOENCODING=ascii``, a log file opened
with a legacy encoding). In plain mode each status symbol becomes a word or nothing
(``⚠️  x`` -> ``warning: x``), and on any stream every character its encoding cannot encode is
written as ``?``: printing a report never raises ``UnicodeEncodeError``.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from typing import Protocol

STATUS_SYMBOLS = "🧠💾📝⚠️"
"""The symbols the kernel's status and cache lines start with."""

_WARNING = re.compile("\u26a0\ufe0f?[ \t]*")
# Pictographs (U+1F000-U+1FAFF), dingbats and misc symbols, each with an optional variation
# selector and the spaces that separate it from its text.
_SYMBOL = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf]\ufe0f?[ \t]*")


class Writer(Protocol):
    """Anything with ``write(str)``: a text stream, ``io.StringIO``, a :class:`Console`."""

    def write(self, text: str, /) -> object: ...


def plain_text(text: str) -> str:
    """``text`` without status symbols: ``⚠️`` becomes ``warning:``, the others disappear."""
    return _SYMBOL.sub("", _WARNING.sub("warning: ", text))


def can_encode(stream: object, text: str = STATUS_SYMBOLS) -> bool:
    """Whether ``stream``'s encoding can encode ``text`` (streams without one, such as
    ``io.StringIO``, hold text and can)."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    except LookupError:  # an encoding Python does not know: assume the worst
        return False
    return True


def wants_plain(stream: object, env: Mapping[str, str], *, flag: bool = False) -> bool:
    """Plain text for ``--plain``, a non-empty ``NO_COLOR``, or a stream that cannot encode the
    status symbols."""
    return flag or bool(env.get("NO_COLOR", "")) or not can_encode(stream)


class Console:
    """A text stream wrapper that applies :func:`plain_text` in plain mode and never fails on a
    character the stream cannot encode (it becomes ``?``)."""

    def __init__(self, stream: Writer, *, plain: bool) -> None:
        self.stream = stream
        self.plain = plain
        encoding = getattr(stream, "encoding", None)
        self._encoding: str | None = None
        if encoding:
            try:
                self._encoding = codecs.lookup(encoding).name
            except LookupError:
                self._encoding = "ascii"

    def write(self, text: str) -> int:
        if self.plain:
            text = plain_text(text)
        if self._encoding is not None:
            text = text.encode(self._encoding, "replace").decode(self._encoding)
        self.stream.write(text)
        return len(text)

    def line(self, text: str = "") -> None:
        """Write ``text`` and a newline."""
        self.write(text + "\n")

    def flush(self) -> None:
        flush = getattr(self.stream, "flush", None)
        if flush is not None:
            flush()
