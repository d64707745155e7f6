from __future__ import annotations

import pytest

from compactor import ConfigError, TokenMeter
from compactor.tokens import Anchor, encoding_name, model_window
from tests.conftest import big, history, tool_turn


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4.1-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("anthropic/claude-sonnet-4-5", "cl100k_base"),
        ("deepseek/deepseek-chat", "deepseek"),
    ],
)
def test_each_model_family_gets_its_tokenizer(model: str, encoding: str) -> None:
    assert encoding_name(model) == encoding


def test_windows_come_from_the_model_map_or_the_config() -> None:
    assert model_window("gpt-4o") == 128_000
    assert model_window("deepseek/deepseek-chat") == 131_072
    assert model_window("gpt-4o", 16_000) == 16_000


def test_an_unknown_model_without_a_window_says_how_to_set_one() -> None:
    with pytest.raises(ConfigError, match=r"context_window=") as caught:
        model_window("acme/brand-new-model")
    assert "acme/brand-new-model" in str(caught.value)


def test_counts_include_per_message_overhead_and_tools() -> None:
    meter = TokenMeter("gpt-4o")
    messages = history(["some output"])
    bare = sum(meter.count_text(m["content"] or "") for m in messages)
    assert meter.count(messages, None) > bare
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    assert meter.count(messages, tools) > meter.count(messages, None)


def test_a_message_is_counted_once_and_recounted_when_replaced() -> None:
    meter = TokenMeter("gpt-4o")
    message = {"role": "tool", "tool_call_id": "a", "content": big(1)}
    first = meter.message_tokens(message)
    assert meter.message_tokens(message) == first
    message["content"] = "short"
    assert meter.message_tokens(message) < first


def test_deepseek_counts_with_its_own_tokenizer() -> None:
    deepseek, gpt = TokenMeter("deepseek/deepseek-chat"), TokenMeter("gpt-4o")
    text = big(3, 2000)
    assert deepseek.count_text(text) != gpt.count_text(text)


def anchor_for(meter: TokenMeter, messages: list, reported: int, completion: int | None) -> Anchor:
    return Anchor(
        reported=reported,
        local=meter.count(messages, None),
        sent_digest=meter.measure(messages, None, None).digest,
        sent_count=len(messages),
        completion=completion,
    )


def test_an_unrelated_request_is_scaled_by_the_reported_ratio() -> None:
    meter = TokenMeter("gpt-4o")
    sent = history([big(1)])
    anchor = anchor_for(meter, sent, round(meter.count(sent, None) * 1.3), None)
    other = history([big(2, 8000)])
    ratio = anchor.reported / anchor.local
    assert meter.estimate(other, None, anchor) == round(meter.count(other, None) * ratio)
    assert ratio == pytest.approx(1.3, abs=0.001)


def test_an_extension_is_the_reported_count_plus_the_new_messages() -> None:
    meter = TokenMeter("gpt-4o")
    sent = history([big(1)])
    anchor = anchor_for(meter, sent, 5000, completion=40)
    following = sent + tool_turn("next", "tiny")
    result_tokens = meter.message_tokens(following[-1])
    ratio = 5000 / meter.count(sent, None)
    expected = 5000 + 40 + 3 + result_tokens * ratio
    assert meter.estimate(following, None, anchor) == round(expected)


def test_changed_tools_break_the_extension() -> None:
    meter = TokenMeter("gpt-4o")
    sent = history([big(1)])
    anchor = anchor_for(meter, sent, 5000, completion=40)
    tools = [{"type": "function", "function": {"name": "x", "parameters": {}}}]
    following = sent + tool_turn("next", "tiny")
    scaled = round(meter.count(following, tools) * 5000 / anchor.local)
    assert meter.estimate(following, tools, anchor) == scaled
