"""The two ways a CLI command (built-in or a plugin's) fails, and the exit code of each (printed
as ``ctxengine: <message>``).

Configuration problems (:class:`~ctxengine.ConfigError`, and an unknown engine under
``context.strict``) exit with 2 like usage errors; a conversation file that cannot be read
(:class:`~ctxengine.ConversationFileError`) exits with 1 like a :class:`CommandError`, so a
command reads its files with :func:`~ctxengine.read_conversations` as it is; anything else
unexpected exits with 1, with its traceback only under ``-v``.
"""

from __future__ import annotations


class UsageError(Exception):
    """The command line is wrong (exit code 2); the message is one line, starting with the
    sub-command it is about (printed after ``ctxengine: ``)."""


class CommandError(Exception):
    """The command failed at run time (exit code 1): unreadable input, an unwritable output, a
    missing optional dependency."""
