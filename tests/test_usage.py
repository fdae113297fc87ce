"""Usage normalisation across Anthropic, OpenAI chat and OpenAI Responses, dicts and SDK types."""

from __future__ import annotations

import types

import pytest

from ctxengine._accounting.cache_stats import cost_of
from ctxengine._accounting.models import lookup_model
from ctxengine._accounting.usage import Usage, normalize_usage

# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_dict_with_ttl_split() -> None:
    raw = {
        "input_tokens": 50,
        "output_tokens": 300,
        "cache_read_input_tokens": 10_000,
        "cache_creation_input_tokens": 2_500,
        "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 2_000},
    }
    usage = normalize_usage(raw)
    assert usage == Usage(
        input_tokens=50,
        output_tokens=300,
        cache_read_tokens=10_000,
        cache_write_5m_tokens=500,
        cache_write_1h_tokens=2_000,
    )
    assert usage.cache_write_tokens == 2_500
    assert usage.prompt_tokens == 50 + 10_000 + 2_500


def test_anthropic_total_without_split_counts_as_5m() -> None:
    usage = normalize_usage(
        {"input_tokens": 7, "output_tokens": 1, "cache_creation_input_tokens": 1_234}
    )
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (1_234, 0)


def test_anthropic_split_short_of_total_keeps_every_token() -> None:
    usage = normalize_usage(
        {
            "input_tokens": 1,
            "output_tokens": 1,
            "cache_creation_input_tokens": 1_000,
            "cache_creation": {"ephemeral_1h_input_tokens": 600},
        }
    )
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (400, 600)


def _read(raw: object) -> Usage | str:
    """The usage ``raw`` normalises to, or the message of the error it raises."""
    try:
        return normalize_usage(raw)
    except ValueError as exc:
        return str(exc)


def test_anthropic_sdk_usage_object() -> None:
    from anthropic.types import CacheCreation
    from anthropic.types import Usage as AnthropicUsage
    from anthropic.types.output_tokens_details import OutputTokensDetails

    sdk = AnthropicUsage(
        input_tokens=12,
        output_tokens=900,
        cache_read_input_tokens=40_000,
        cache_creation_input_tokens=3_000,
        cache_creation=CacheCreation(
            ephemeral_5m_input_tokens=1_000, ephemeral_1h_input_tokens=2_000
        ),
        output_tokens_details=OutputTokensDetails(thinking_tokens=700),
    )
    usage = normalize_usage(sdk)
    assert usage == Usage(12, 900, 40_000, 1_000, 2_000, 700)
    assert usage.cache_hit_ratio == pytest.approx(40_000 / 43_012)


def test_anthropic_sdk_usage_with_null_cache_fields() -> None:
    from anthropic.types import Usage as AnthropicUsage

    usage = normalize_usage(AnthropicUsage(input_tokens=5, output_tokens=6))
    assert usage == Usage(input_tokens=5, output_tokens=6)


# -- OpenAI chat -------------------------------------------------------------------------------


def test_openai_chat_prompt_tokens_include_cached() -> None:
    raw = {
        "prompt_tokens": 10_000,
        "completion_tokens": 500,
        "total_tokens": 10_500,
        "prompt_tokens_details": {"cached_tokens": 8_192},
        "completion_tokens_details": {"reasoning_tokens": 320},
    }
    usage = normalize_usage(raw)
    assert usage == Usage(
        input_tokens=10_000 - 8_192,
        output_tokens=500,
        cache_read_tokens=8_192,
        reasoning_tokens=320,
    )
    assert usage.prompt_tokens == 10_000


def test_openai_chat_router_cache_writes_are_split_out() -> None:
    # OpenRouter reports Claude cache writes inside prompt_tokens_details.
    raw = {
        "prompt_tokens": 5_000,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 3_000, "cache_write_tokens": 1_500},
    }
    usage = normalize_usage(raw)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_5m_tokens) == (
        500,
        3_000,
        1_500,
    )
    assert usage.prompt_tokens == 5_000


def test_openai_chat_sdk_object() -> None:
    from openai.types import CompletionUsage
    from openai.types.completion_usage import CompletionTokensDetails, PromptTokensDetails

    sdk = CompletionUsage(
        prompt_tokens=2_048,
        completion_tokens=64,
        total_tokens=2_112,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=1_024),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=32),
    )
    assert normalize_usage(sdk) == Usage(
        input_tokens=1_024, output_tokens=64, cache_read_tokens=1_024, reasoning_tokens=32
    )


def test_openai_chat_without_details() -> None:
    usage = normalize_usage({"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34})
    assert usage == Usage(input_tokens=30, output_tokens=4)


# -- OpenAI Responses --------------------------------------------------------------------------


def test_openai_responses_sdk_object() -> None:
    from openai.types.responses import ResponseUsage
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    sdk = ResponseUsage(
        input_tokens=3_000,
        input_tokens_details=InputTokensDetails(cached_tokens=2_000, cache_write_tokens=0),
        output_tokens=800,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=600),
        total_tokens=3_800,
    )
    assert normalize_usage(sdk) == Usage(
        input_tokens=1_000, output_tokens=800, cache_read_tokens=2_000, reasoning_tokens=600
    )


def test_openai_responses_dict_with_cache_writes_by_retention() -> None:
    raw = {
        "input_tokens": 10_000,
        "input_tokens_details": {
            "cached_tokens": 4_000,
            "cache_write_tokens": 5_000,
            "cache_write_tokens_details": {"ttl_30m_tokens": 3_000, "ttl_12h_tokens": 2_000},
        },
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10_010,
    }
    usage = normalize_usage(raw)
    assert usage == Usage(
        input_tokens=1_000,
        output_tokens=10,
        cache_read_tokens=4_000,
        cache_write_5m_tokens=3_000,
        cache_write_1h_tokens=2_000,
    )
    assert usage.prompt_tokens == 10_000


# -- containers, errors, arithmetic ------------------------------------------------------------


def test_usage_passes_through_and_responses_are_unwrapped() -> None:
    usage = Usage(input_tokens=1)
    assert normalize_usage(usage) is usage
    response = {"id": "msg_1", "type": "message", "usage": {"input_tokens": 3, "output_tokens": 4}}
    assert normalize_usage(response) == Usage(input_tokens=3, output_tokens=4)
    attribute_object = types.SimpleNamespace(prompt_tokens=9, completion_tokens=2)
    assert normalize_usage(attribute_object) == Usage(input_tokens=9, output_tokens=2)


def test_unknown_shape_names_the_keys_seen() -> None:
    with pytest.raises(ValueError) as excinfo:
        normalize_usage({"tokens": 5, "cost": 0.1})
    message = str(excinfo.value)
    assert "unrecognised usage shape: keys seen ['cost', 'tokens']" in message
    assert "OpenAI chat (prompt_tokens, completion_tokens)" in message


def test_non_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot read a usage report from int"):
        normalize_usage(42)


def test_bad_counts_name_the_field() -> None:
    with pytest.raises(ValueError, match="usage field 'input_tokens' must be a non-negative"):
        normalize_usage({"input_tokens": -1, "output_tokens": 0})
    with pytest.raises(
        ValueError,
        match=r"usage field 'prompt_tokens_details\.cached_tokens' must be .*, got 'many'",
    ):
        normalize_usage(
            {
                "prompt_tokens": 1,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": "many"},
            }
        )


def test_addition_and_cost() -> None:
    a = Usage(100, 10, 1_000, 200, 0, 5)
    b = Usage(50, 20, 0, 0, 400, 0)
    assert a + b == Usage(150, 30, 1_000, 200, 400, 5)
    model = lookup_model("claude-sonnet-4-5")  # $3 in / $15 out per MTok
    expected = (150 * 3.0 + 1_000 * 0.3 + 200 * 3.75 + 400 * 6.0 + 30 * 15.0) / 1_000_000
    assert cost_of(a + b, model).total == pytest.approx(expected)
    assert Usage().cache_hit_ratio == 0.0


def test_openrouter_claude_usage_with_writes_and_reads() -> None:
    """OpenRouter routing to Anthropic: chat shape, reads and writes both in the details."""
    usage = normalize_usage(
        {
            "prompt_tokens": 12_000,
            "completion_tokens": 300,
            "total_tokens": 12_300,
            "prompt_tokens_details": {"cached_tokens": 10_000, "cache_write_tokens": 1_500},
            "completion_tokens_details": {"reasoning_tokens": 0},
            "cost": 0.0123,
        }
    )
    assert usage == Usage(
        input_tokens=500,
        output_tokens=300,
        cache_read_tokens=10_000,
        cache_write_5m_tokens=1_500,
    )


def test_gemini_openai_compatible_usage() -> None:
    """Gemini's OpenAI-compatible endpoint: null details when nothing is cached, cached tokens
    inside prompt_tokens, thinking counted outside completion_tokens (the total says so)."""
    cold = normalize_usage(
        {
            "prompt_tokens": 1_469,
            "completion_tokens": 744,
            "total_tokens": 2_496,
            "prompt_tokens_details": None,
            "completion_tokens_details": {"reasoning_tokens": 283},
        }
    )
    assert cold == Usage(input_tokens=1_469, output_tokens=1_027, reasoning_tokens=283)
    warm = normalize_usage(
        {
            "prompt_tokens": 1_470,
            "completion_tokens": 60,
            "total_tokens": 1_530,
            "prompt_tokens_details": {"cached_tokens": 1_018},
        }
    )
    assert warm == Usage(input_tokens=452, output_tokens=60, cache_read_tokens=1_018)


def test_openai_reasoning_inside_completion_tokens_is_not_added_twice() -> None:
    usage = normalize_usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 80,
            "total_tokens": 180,
            "completion_tokens_details": {"reasoning_tokens": 50},
        }
    )
    assert (usage.output_tokens, usage.reasoning_tokens) == (80, 50)


def test_anthropic_response_keeps_the_cache_miss_reason() -> None:
    response = {
        "id": "msg_01",
        "type": "message",
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 900},
        "diagnostics": {
            "cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 880}
        },
    }
    usage = normalize_usage(response)
    assert (usage.cache_miss_reason, usage.cache_missed_tokens) == ("system_changed", 880)
    assert usage.cache_write_5m_tokens == 900
    # Without diagnostics, or with a null reason (still pending), nothing is said.
    assert normalize_usage({**response, "diagnostics": None}).cache_miss_reason is None
    pending = {**response, "diagnostics": {"cache_miss_reason": None}}
    assert normalize_usage(pending).cache_miss_reason is None
    with pytest.raises(ValueError, match=r"diagnostics\.cache_miss_reason\.type"):
        normalize_usage({**response, "diagnostics": {"cache_miss_reason": {"type": 3}}})
    total = usage + Usage(input_tokens=1)
    assert total.cache_miss_reason == "system_changed" and total.cache_missed_tokens == 880


# --- server-side context management -------------------------------------------------------------


def _iterations_usage() -> dict[str, object]:
    return {
        "input_tokens": 1_200,
        "output_tokens": 80,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 0,
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": 150_000,
                "output_tokens": 2_000,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
            {
                "type": "message",
                "input_tokens": 1_200,
                "output_tokens": 80,
                "cache_read_input_tokens": 300,
                "cache_creation_input_tokens": 0,
            },
        ],
    }


def test_compaction_iterations_are_kept_apart_from_the_context() -> None:
    usage = normalize_usage(_iterations_usage())
    # The top level is the context the model read after compacting.
    assert usage.prompt_tokens == 1_500
    assert usage.compacted
    assert usage.compaction == Usage(input_tokens=150_000, output_tokens=2_000)
    model = lookup_model("claude-sonnet-4-6")
    without = cost_of(normalize_usage({**_iterations_usage(), "iterations": []}), model).total
    assert cost_of(usage, model).total == pytest.approx(
        without + cost_of(Usage(input_tokens=150_000, output_tokens=2_000), model).total
    )
    total = usage + usage
    assert total.compaction == Usage(input_tokens=300_000, output_tokens=4_000)
    assert (usage + Usage()).compaction == usage.compaction


def test_cache_cost_prices_the_compaction_part_by_part() -> None:
    model = lookup_model("claude-sonnet-4-6")
    usage = normalize_usage(_iterations_usage())
    cost = cost_of(usage, model)
    assert cost.total == pytest.approx(
        cost.input_cost
        + cost.cache_read_cost
        + cost.cache_write_5m_cost
        + cost.cache_write_1h_cost
        + cost.output_cost
    )


def test_applied_edits_of_a_whole_response_fill_the_cleared_counts() -> None:
    response = {
        "usage": {"input_tokens": 900, "output_tokens": 10},
        "context_management": {
            "applied_edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "cleared_input_tokens": 4_000,
                    "cleared_tool_uses": 5,
                },
                {
                    "type": "clear_thinking_20251015",
                    "cleared_input_tokens": 600,
                    "cleared_thinking_turns": 2,
                },
            ]
        },
    }
    usage = normalize_usage(response)
    assert (usage.cleared_input_tokens, usage.cleared_tool_uses) == (4_600, 5)
    assert usage.cleared_thinking_turns == 2
    sdk_like = types.SimpleNamespace(
        usage=types.SimpleNamespace(input_tokens=900, output_tokens=10),
        context_management=types.SimpleNamespace(
            applied_edits=[
                types.SimpleNamespace(
                    type="clear_tool_uses_20250919", cleared_input_tokens=10, cleared_tool_uses=1
                )
            ]
        ),
    )
    assert normalize_usage(sdk_like).cleared_tool_uses == 1


def test_bad_iterations_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"usage field 'iterations\[0\]\.input_tokens'"):
        normalize_usage(
            {"input_tokens": 1, "iterations": [{"type": "compaction", "input_tokens": -1}]}
        )
    with pytest.raises(ValueError, match="usage field 'iterations' must be a list"):
        normalize_usage({"input_tokens": 1, "iterations": 3})


def test_sdk_responses_read_as_their_dumps() -> None:
    """Whole SDK responses and usage objects are read without dumping them (keys they do not
    declare come from their extras); the figures equal those of the same data as dicts."""
    from anthropic.types import Message
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    anthropic_response = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 12,
                "output_tokens": 7,
                "cache_read_input_tokens": 4_000,
                "cache_creation_input_tokens": 300,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": 100,
                    "ephemeral_1h_input_tokens": 200,
                },
            },
            # Not declared by this SDK's Message: kept in its extras.
            "context_management": {
                "applied_edits": [{"cleared_input_tokens": 50, "cleared_tool_uses": 2}]
            },
            "diagnostics": {
                "cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 9}
            },
        }
    )
    chat_response = ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt",
            "choices": [],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 3,
                "total_tokens": 103,
                "prompt_tokens_details": {"cached_tokens": 60},
            },
        }
    )
    responses_response = Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 1,
            "model": "gpt",
            "output": [],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 50,
                "output_tokens": 5,
                "total_tokens": 55,
                "input_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 4},
                "output_tokens_details": {"reasoning_tokens": 1},
            },
        }
    )
    for response in (anthropic_response, chat_response, responses_response):
        expected = normalize_usage(response.model_dump())
        assert normalize_usage(response) == expected
        usage = response.usage
        assert usage is not None
        assert normalize_usage(usage) == normalize_usage(usage.model_dump())
    read = normalize_usage(anthropic_response)
    assert (read.cleared_input_tokens, read.cleared_tool_uses) == (50, 2)
    assert read.cache_miss_reason == "tools_changed"
    assert (read.cache_write_5m_tokens, read.cache_write_1h_tokens) == (100, 200)
    # A token key present as None reads as absent: the response is still read as a whole one.
    with_none = types.SimpleNamespace(
        usage={"input_tokens": 3, "output_tokens": 1}, input_tokens=None, id="msg_2"
    )
    assert normalize_usage(with_none) == Usage(input_tokens=3, output_tokens=1)
