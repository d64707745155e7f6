from __future__ import annotations

import asyncio

import pytest

from compactor.testing import FakeCompletion
from tests.conftest import history, tool_turn


def test_replies_come_in_order_with_tool_calls() -> None:
    fake = FakeCompletion()
    fake.enqueue(None, tool_calls=[("c1", "bash", {"command": "ls"})])
    fake.enqueue("done")
    first = fake(messages=history(["a"]))
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert first["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert fake(messages=history(["a"]))["choices"][0]["message"]["content"] == "done"
    with pytest.raises(AssertionError, match="no reply queued"):
        fake(messages=history(["a"]))


def test_usage_counts_the_request_and_the_shared_prefix() -> None:
    fake = FakeCompletion(scale=1.5)
    fake.enqueue()
    fake.enqueue()
    messages = history(["x" * 400])
    first = fake(messages=messages)["usage"]
    second = fake(messages=messages + tool_turn("n", "more"))["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["prompt_tokens"] > first["prompt_tokens"]
    shared = second["prompt_tokens_details"]["cached_tokens"]
    assert first["prompt_tokens"] - 10 <= shared <= first["prompt_tokens"]


def test_errors_are_raised_and_async_works() -> None:
    fake = FakeCompletion()
    fake.enqueue(error=RuntimeError("boom"))
    fake.enqueue("async")
    with pytest.raises(RuntimeError, match="boom"):
        fake(messages=history([]))
    reply = asyncio.run(fake.acompletion(messages=history([])))
    assert reply["choices"][0]["message"]["content"] == "async"
