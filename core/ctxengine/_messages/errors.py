"""What a malformed message list is reported as: :class:`Problem`, :class:`MessageFormatError`."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = ["MessageFormatError", "Problem"]


class MessageFormatError(ValueError):
    """A message list that cannot be read or sent as it is.

    The message names the offending index (``"messages[3]: ..."``) and what is allowed.
    ``problems`` holds the individual findings when raised for a list that breaks the rules.
    """

    def __init__(self, message: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(message)
        self.problems: list[Problem] = list(problems)


@attrs.frozen
class Problem:
    """One finding of :func:`validate`.

    :ivar index: the message index, or ``None`` for request-level findings (system, tools,
        breakpoint count).
    :ivar rule: a stable id such as ``"tool-call-unanswered"``; safe to match on.
    :ivar message: readable text starting with the location (``"messages[3]: ..."``).
    """

    index: int | None
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.message} [{self.rule}]"
