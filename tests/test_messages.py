from __future__ import annotations

from typing import Any

import pytest

from compactor import InvalidMessagesError
from compactor.messages import digest, text_of, tool_groups, validate
from tests.conftest import history, tool_turn


def call(call_id: str, name: str = "bash") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_a_valid_history_passes() -> None:
    messages = history(["a", "b"])
    validate(messages)
    assert [g.call_index for g in tool_groups(messages)] == [2, 4]


def test_parallel_results_may_come_in_any_order() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
    ]
    validate(messages)
    assert tool_groups(messages)[0].result_indices == (2, 3)


@pytest.mark.parametrize(
    ("messages", "index", "words"),
    [
        ([{"role": "tool", "tool_call_id": "x", "content": "1"}], 0, "no matching call"),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [call("a")]},
                {"role": "user", "content": "next"},
            ],
            1,
            "left without a result",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [call("a")]}],
            1,
            "without a result",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]}],
            0,
            "no id",
        ),
        ([{"role": "user", "content": 42}], 0, "content must be"),
        ([{"role": "user", "content": None}], 0, "needs content"),
        ([{"role": "wizard", "content": "hi"}], 0, "unknown role"),
        ([{"role": "user", "content": [{"text": "no type"}]}], 0, "'type'"),
        (["not a dict"], 0, "expected a dict"),
        (
            [{"role": "user", "content": "a"}, {"role": "tool", "content": "1"}],
            1,
            "no tool_call_id",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [call("a"), call("a")]}],
            0,
            "appears twice",
        ),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
            ],
            2,
            "no matching call",
        ),
    ],
)
def test_malformed_histories_name_the_index_and_the_problem(
    messages: list[Any], index: int, words: str
) -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        validate(messages)
    assert caught.value.index == index
    assert words in str(caught.value)


def test_not_a_list() -> None:
    with pytest.raises(InvalidMessagesError):
        validate("hello")


def test_text_of_joins_text_parts_only() -> None:
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "b"},
    ]
    assert text_of(parts) == "ab"
    assert text_of(None) == ""
    assert text_of("plain") == "plain"


def test_digest_is_stable_and_sensitive() -> None:
    first, second = tool_turn("a", "out")[1], tool_turn("a", "out")[1]
    assert digest(first) == digest(second)
    assert digest(first) != digest({**first, "content": "other"})
