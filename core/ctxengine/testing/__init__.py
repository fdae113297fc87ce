"""Test helpers shipped with ctxengine: the conformance suite every engine runs
(:mod:`~ctxengine.testing.conformance`), sample conversations (:mod:`~ctxengine.testing.samples`),
the bundled transcripts (:mod:`~ctxengine.testing.transcripts`), and pytest fixtures: an isolated
``$CTXENGINE_HOME`` (:mod:`~ctxengine.testing.isolation`) and conversation files in each shape a
command reads (:mod:`~ctxengine.testing.conversation_files`). A throwaway PostgreSQL server is
``ctxengine_fleet.testing``.

Nothing here is imported by ``import ctxengine``. The local fake of the Anthropic and OpenAI HTTP
APIs is the ``ctxengine-fakeapi`` distribution (:mod:`ctxengine_fakeapi`).
"""
