"""The critical-context ledger: what a summary of a stretch of conversation must not lose.

:func:`build_ledger` reads a message list (OpenAI chat or Anthropic Messages format, from any of
the common agent styles) in one pass and collects, in order of first appearance and without
duplicates:

- **paths** touched, each with what was done to it (``read``, ``edited``, ``created``,
  ``deleted``, ``listed`` or ``mentioned``, the strongest seen): tool-call arguments
  (``file_path``, ``path``, ``paths``, ...), ``apply_patch`` headers, path-looking tokens in shell
  commands (the verb of each simple command says what happens to them: ``rm`` deletes, ``sed -i``
  edits, a redirect creates) and in user/assistant text;
- **commands**: shell commands run (the ``command``/``cmd`` argument of shell tools, an argv
  ``["bash", "-lc", script]`` as its script, the fenced ``bash`` block of agents that act through
  their text, such as mini-swe-agent), shortened by :func:`shorten_command`, each with the exit
  codes its runs reported, in every common format (see :func:`exit_code_of`);
- **errors**: distinctive error lines of tool results and user text (tracebacks, ``error:``,
  ``FAILED``, ``fatal:``, ``panic:``, ``No such file``, ``command not found``, make's
  ``Error 2`` ...), each with the command or tool that produced it and whether a later run of the
  same command or call succeeded (``resolved``);
- **asks**: the text of each real user message, truncated (observations of text-acting agents,
  ``<returncode>…`` or ``OBSERVATION:`` user messages, are tool output, not asks);
- **identifiers**: id-like tokens (``ZFA04Y``, ``mia_li_3668``, ``#123``, ``a1b2c3d``, ports)
  that a user message or a tool result gave and a later assistant call or text used, with the
  argument they were passed as;
- **tools**: each tool's name with how often it was called.

Every item is passed through :func:`ctxengine.messages.redact` on entry, so whatever renders the
ledger (the local digest, the critical-context addendum of an LLM summary) carries no secrets and
shows the items byte-for-byte as stored here: checking ``item in summary`` is meaningful.

When a summary cannot hold everything, :func:`fit_ledger` decides what goes, least needed first
(listed-only paths, old successful commands, resolved errors, read-only paths) and never an
unresolved error, an edited file, a user ask or an identifier while anything else can go; what it
drops is counted in the rendered text, never silent. :func:`render_ledger` renders a ledger that
way; :func:`parse_ledger` reads one back from a summary, and :func:`merge_ledgers` combines an
earlier summary's ledger with the next span's, so items survive successive compactions.
:func:`missing_from` tells which items a summary left out.

The package is split by job: :mod:`.model` (the fact types), the extraction of each kind of
fact (:mod:`.paths`, :mod:`.commands`, :mod:`.errors`, :mod:`.identifiers`, :mod:`.tools`) and
the pass that collects them (:mod:`.extract`), :mod:`.merge`, :mod:`.fit`, :mod:`.render`,
:mod:`.parse` and :mod:`.spans` (how items are quoted). The names listed here are the package's
interface; an underscored name is shared between its modules only.
"""

from __future__ import annotations

from ctxengine_compressor.ledger.commands import exit_code_of, shorten_command, truncate
from ctxengine_compressor.ledger.extract import build_ledger
from ctxengine_compressor.ledger.fit import (
    FittedLedger,
    Unit,
    command_bullet,
    fit_ledger,
    fit_units,
    ledger_units,
    units_ledger,
)
from ctxengine_compressor.ledger.merge import merge_ledgers, missing_from, present_in, readable_text
from ctxengine_compressor.ledger.model import ACTIONS, ASK_CHARS, COMMAND_CHARS, ERROR_CHARS, Ledger
from ctxengine_compressor.ledger.parse import ParsedSummary, parse_ledger
from ctxengine_compressor.ledger.render import bounded_bullets, render_ledger
from ctxengine_compressor.ledger.spans import code_span

__all__ = [
    "ACTIONS",
    "ASK_CHARS",
    "COMMAND_CHARS",
    "ERROR_CHARS",
    "FittedLedger",
    "Ledger",
    "ParsedSummary",
    "Unit",
    "bounded_bullets",
    "build_ledger",
    "code_span",
    "command_bullet",
    "exit_code_of",
    "fit_ledger",
    "fit_units",
    "ledger_units",
    "merge_ledgers",
    "missing_from",
    "parse_ledger",
    "present_in",
    "readable_text",
    "render_ledger",
    "shorten_command",
    "truncate",
    "units_ledger",
]
