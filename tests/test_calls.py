"""Reading responses, streams and errors of any OpenAI-shaped client."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx
import openai
import pytest

from compactor.adapters.calls import (
    AsyncUsageStream,
    Usage,
    UsageStream,
    counted_tokens,
    finish_reason_of,
    is_context_error,
    usage_of,
)


def test_usage_is_read_from_dicts_and_objects() -> None:
    as_dict = {
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 4},
        }
    }
    as_object = SimpleNamespace(
        usage=SimpleNamespace(prompt_tokens=10, completion_tokens=2, prompt_tokens_details=None)
    )
    assert usage_of(as_dict) == Usage(10, 2, 4)
    assert usage_of(as_object) == Usage(10, 2, None)
    assert usage_of({"choices": []}) is None


def test_the_first_finish_reason_is_read() -> None:
    response = {"choices": [{"finish_reason": None}, {"finish_reason": "length"}]}
    assert finish_reason_of(response) == "length"
    assert finish_reason_of({}) is None


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130,542 tokens.",
            130_542,
        ),
        ("prompt is too long: 208000 tokens > 200000 maximum", 208_000),
        ("context window exceeded", None),
    ],
)
def test_a_providers_own_count_is_read_from_its_error(message: str, tokens: int | None) -> None:
    assert counted_tokens(Exception(message)) == tokens


def test_context_errors_are_recognised_by_type_and_code() -> None:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx.Response(400, request=request)
    too_long = openai.BadRequestError(
        "too long", response=response, body={"code": "context_length_exceeded"}
    )
    other = openai.BadRequestError("bad", response=response, body={"code": "invalid_value"})
    assert is_context_error(too_long)
    assert not is_context_error(other)
    assert not is_context_error(ValueError("context_length_exceeded"))


def test_streams_report_usage_once_when_they_end() -> None:
    seen: list[tuple[Usage | None, str | None]] = []
    chunks = [
        {"choices": [{"finish_reason": None}]},
        {"choices": [{"finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
    ]
    stream = UsageStream(iter(chunks), lambda *args: seen.append(args))
    assert list(stream) == chunks
    stream.close()
    assert seen == [(Usage(5, 1, None), "stop")]

    async def agen():  # type: ignore[no-untyped-def]
        for chunk in chunks:
            yield chunk

    async def consume() -> list[object]:
        return [chunk async for chunk in AsyncUsageStream(agen(), lambda *a: seen.append(a))]

    assert asyncio.run(consume()) == chunks
    assert len(seen) == 2
