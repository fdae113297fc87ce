"""Test helpers shipped with ctxengine: the conformance suite every engine runs
(:mod:`~ctxengine.testing.conformance`), sample conversations (:mod:`~ctxengine.testing.samples`),
the bundled transcripts (:mod:`~ctxengine.testing.transcripts`) and a throwaway PostgreSQL server
(:mod:`~ctxengine.testing.postgres`).

Nothing here is imported by ``import ctxengine``. The local fake of the Anthropic and OpenAI HTTP
APIs is the ``ctxengine-fakeapi`` distribution (:mod:`ctxengine_fakeapi`).
"""
