"""Database URLs in settings: their printable form (no password)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit


def redact_url(url: str) -> str:
    """``url`` fit for logs and error messages: any password (in the authority or as a
    ``password=`` query parameter) replaced by ``***``; anything unparsable is hidden whole."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = urlencode(
            [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, True)],
            safe="/*:",
        )
        # Built by hand: urlunsplit drops the "//" of an empty host (postgresql:///db).
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:
        return "<unparsable database URL>"


__all__ = ["redact_url"]
