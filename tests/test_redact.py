"""redact(): secrets are masked with stable markers, ordinary code, paths and commands are not."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxengine._messages.redact import REDACTION_PREFIX, redact
from ctxengine.testing.transcripts import transcript_file, transcript_files

# Test fixtures only: these look like real credentials but are made up.
ANTHROPIC_KEY = "sk-ant-api03-" + "Ab1" * 30
OPENAI_KEY = "sk-proj-" + "x9Y" * 16
GITHUB_TOKEN = "ghp_" + "a1B2" * 9
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {ANTHROPIC_KEY} end", "key [REDACTED:api_key] end"),
        (f"OPENAI_API_KEY={OPENAI_KEY}", "OPENAI_API_KEY=[REDACTED:api_key]"),
        (f"git remote add o https://{GITHUB_TOKEN}@github.com/a/b", None),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "[REDACTED:api_key]"),
        ("SLACK=xoxb-1234567890-abcdefghij", "SLACK=[REDACTED:token]"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "aws [REDACTED:api_key] key"),
        ("maps AIzaSyA1234567890abcdefghijklmnopqrstuv", "maps [REDACTED:api_key]"),
        (
            "curl -H 'Authorization: Bearer abc.def.ghi123' https://api.example.com",
            "curl -H 'Authorization: Bearer [REDACTED:token]' https://api.example.com",
        ),
        ("authorization: Basic dXNlcjpwYXNz", "authorization: Basic [REDACTED:token]"),
        ("got Bearer abcdefghijklmnopqrstuvwxyz012", "got Bearer [REDACTED:token]"),
        (f"cookie={JWT};", "cookie=[REDACTED:jwt];"),
        (
            "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nzz==\n"
            "-----END RSA PRIVATE KEY-----\nafter",
            "a\n[REDACTED:private_key]\nafter",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz", "[REDACTED:private_key]"),
        ("DB_PASSWORD=hunter2\nAPI_KEY=abcdef", None),
        (
            '{"password": "hunter2", "api_key": "zzz999zzz"}',
            '{"password": "[REDACTED:password]", "api_key": "[REDACTED:api_key]"}',
        ),
        ('{\\"password\\": \\"hunter2\\"}', '{\\"password\\": \\"[REDACTED:password]\\"}'),
        ("password: s3cr3t!", "password: [REDACTED:password]"),
        ("passwd: 'abc'", "passwd: '[REDACTED:password]'"),
        ("secret=abc123", "secret=[REDACTED:secret]"),
        ("https://x.test/cb?token=abc123def&x=1", "https://x.test/cb?token=[REDACTED:token]&x=1"),
        (
            "mysql --password hunter2 --user root",
            "mysql --password [REDACTED:password] --user root",
        ),
        ("tool --api-key=abcd1234 run", "tool --api-key=[REDACTED:api_key] run"),
        ("PGPASSWORD=pg_pw psql -h db", "PGPASSWORD=[REDACTED:password] psql -h db"),
        (
            "postgres://app:s3cret@db.example.com:5432/prod",
            "postgres://app:[REDACTED:password]@db.example.com:5432/prod",
        ),
        ("redis://:pw123@localhost:6379/0", "redis://:[REDACTED:password]@localhost:6379/0"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = [REDACTED:secret]",
        ),
    ],
)
def test_secrets_are_masked(text: str, expected: str | None) -> None:
    out = redact(text)
    if expected is not None:
        assert out == expected
    assert REDACTION_PREFIX in out
    # No fragment of the secret value survives.
    for secret in (ANTHROPIC_KEY, OPENAI_KEY, GITHUB_TOKEN, JWT, "hunter2", "s3cret", "pw123"):
        assert secret not in out
    assert redact(out) == out, "redact must be idempotent"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my db password is hunter2", "my db password is [REDACTED:password]"),
        ("my db password is hunter2.", "my db password is [REDACTED:password]."),
        ("The API token was ab12cd34!", "The API token was [REDACTED:token]"),
        ("the api key is abc123XYZ", "the api key is [REDACTED:api_key]"),
        ("my aPi kEy is Xy9abc!", "my aPi kEy is [REDACTED:api_key]"),
        ("my secret is: 8f3k2x", "my secret is: [REDACTED:secret]"),
        ("Password: Hunter22", "Password: [REDACTED:password]"),
        ("the passwd is 48213", "the passwd is [REDACTED:password]"),
        ("the password is `letmein`", "the password is `[REDACTED:password]`"),
        ("DB password: p@ssw0rd, user root", "DB password: [REDACTED:password], user root"),
        ("use token=x9y8z7 here", "use token=[REDACTED:token] here"),
    ],
)
def test_prose_secrets_are_masked(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected
    # The same inside a long text (past the short-text prefilter, which must not hide any).
    padding = "x" * 5_000 + " "
    assert redact(padding + text) == padding + expected


@pytest.mark.parametrize(
    "text",
    [
        "the token is valid",
        "the token is one-time and expires",
        "my password is stored hashed",
        "token: 5",
        "the token was a1.b2()",
        "api_key = os.environ[x]",
        "the password is 'pa ss'",
        "the secret is out",
    ],
)
def test_prose_without_a_secret_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_env_file_keeps_keys_and_masks_values() -> None:
    assert redact("DB_PASSWORD=hunter2\nAPI_KEY=abcdef\nDEBUG=1\n") == (
        "DB_PASSWORD=[REDACTED:password]\nAPI_KEY=[REDACTED:api_key]\nDEBUG=1\n"
    )


def test_github_token_in_url_is_masked_and_url_kept() -> None:
    out = redact(f"git remote add o https://{GITHUB_TOKEN}@github.com/a/b")
    assert out == "git remote add o https://[REDACTED:api_key]@github.com/a/b"


@pytest.mark.parametrize(
    "text",
    [
        "secret_key_base: secret_key_base",
        "token = get_token()",
        "password: hash_v2(x)",
        "max_tokens=100, token_count = 5",
        "client(api_key=api_key)",
        "def login(password: str, token: str | None = None) -> None:",
        "export GITHUB_TOKEN=$(gh auth token)",
        "API_KEY=${API_KEY}",
        "password: <your password>",
        "https://example.com:8080/path?x=1",
        "git@github.com:foo/bar.git",
        "ssh://git@example.com:22/repo.git",
        "bypass: true",
        "docker login --password-stdin",
        "--password $DB_PASSWORD",
        '"token": "the API token"',
        "mix phx.gen.secret",
        "task-sk-abcdefghijklmnopqrstuvwxyz12345",
        "the bearer token is sent in a header",
        "lib/spotter/transcripts/annotation.ex:42: warning: unused variable token",
        "cd /home/USER/projects/app && mix test test/app/token_test.exs --trace",
        "PASSWORD=[REDACTED:password]",
        "%{password: password, password_confirmation: password}",
        "keys: [:id, :token], primary_key: true",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_rejects_non_strings_with_clear_error() -> None:
    with pytest.raises(TypeError, match="redact\\(\\) takes a str, got bytes"):
        redact(b"password=x")  # type: ignore[arg-type]


def test_empty_text() -> None:
    assert redact("") == ""


# --- no false positives on real transcripts ------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _transcripts() -> list[Path]:
    return transcript_files()


_PATH_TOKEN = re.compile(r"(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+\.[A-Za-z]\w{0,7}")
_MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")
# The only real secrets in the transcripts: Phoenix secret_key_base values in config files
# (shown in file reads, JSON-escaped in a Write call). Anything else masked is a false positive.
_KNOWN_SECRET_CONTEXT = re.compile(r'secret_key_base: \\?"$')


def test_real_transcripts_survive_except_real_secrets() -> None:
    strings_seen = changed = tokens_checked = 0
    for path in _transcripts():
        for line in path.read_text(encoding="utf-8").splitlines():
            conversation = json.loads(line)
            for text in _strings(conversation["messages"]):
                strings_seen += 1
                out = redact(text)
                if out == text:
                    continue
                changed += 1
                for marker in _MARKER.finditer(out):
                    before = out[max(0, marker.start() - 20) : marker.start()]
                    assert _KNOWN_SECRET_CONTEXT.search(before), (
                        f"{path.name}: unexpected redaction after {before!r}"
                    )
                for token in _PATH_TOKEN.findall(text):
                    tokens_checked += 1
                    assert token in out, f"{path.name}: path {token!r} was altered"
    assert strings_seen > 20_000
    assert changed == 4  # the secret_key_base values, and nothing else
    assert tokens_checked > 0


def test_commands_and_paths_in_tool_calls_survive() -> None:
    """Every Bash command and file path argument in the Claude Code sessions is unchanged."""
    path = transcript_file("claude_code_spotter.anthropic.jsonl")
    checked = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        for msg in json.loads(line)["messages"]:
            if not isinstance(msg["content"], list):
                continue
            for block in msg["content"]:
                if block.get("type") != "tool_use":
                    continue
                for key in ("command", "file_path", "path", "pattern"):
                    value = block["input"].get(key)
                    if isinstance(value, str):
                        checked += 1
                        assert redact(value) == value
    assert checked > 800
