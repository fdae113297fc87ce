"""The fidelity benchmark: what an agent still knows after compaction (``nox -s fidelity``).

See ``docs/fidelity.md`` for the fact rules and the scenarios measured.
"""
