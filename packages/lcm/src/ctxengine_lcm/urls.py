"""PostgreSQL URLs as the lcm settings take them, and their printable form (no password): the
helpers of :mod:`ctxengine_fleet.postgres`, under the names this package has used."""

from __future__ import annotations

from ctxengine_fleet.postgres import POSTGRES_SCHEMES, is_database_url, redact_url

__all__ = ["POSTGRES_SCHEMES", "is_database_url", "redact_url"]
