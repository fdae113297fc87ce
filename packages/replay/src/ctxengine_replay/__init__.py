"""ctxengine-replay: replay recorded agent sessions and compare what compaction and caching cost.

``ctxengine replay FILE...`` sends every turn of a recorded session through the selected engine
and cache strategy, prices each request against a simulated provider cache
(:mod:`ctxengine_fakeapi.cachesim`), and reports tokens and cost per scenario as text tables, JSON
and charts (:mod:`ctxengine_replay.report`, :mod:`ctxengine_replay.charts`,
:mod:`ctxengine_replay.html_report`). The replay itself is :func:`ctxengine_replay.replay.replay`;
its scenarios and gap distributions are in :mod:`ctxengine_replay.scenarios`.

This module is what the ``ctxengine`` CLI imports to find the command (an extension found through
the ``ctxengine.extensions`` entry-point group, never selected by a kernel unless
``context.extensions`` names it): it adds the command and imports nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine import hookimpl

if TYPE_CHECKING:
    from ctxengine import PluginCommands

__version__ = "0.1.0"
CTXENGINE_KIND = "extension"
"""It only adds a command; no kernel selects it unless ``context.extensions`` names it."""


@hookimpl
def register_commands(commands: PluginCommands) -> None:
    """``ctxengine replay``."""
    from ctxengine_replay.cli import register

    register(commands)
