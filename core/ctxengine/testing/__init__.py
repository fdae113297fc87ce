"""Test helpers shipped with ctxengine: a local fake of the Anthropic and OpenAI HTTP APIs.

Nothing here is imported by ``import ctxengine``; tests and third-party engines import
:mod:`ctxengine.testing.fake_api` explicitly.
"""
