"""The wrapper around OpenAI SDK clients and plain callables; respx answers at HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import openai
import pytest
import respx

from compactor import CompactionEvent, Compactor, ModelCallEvent
from compactor.testing import FakeCompletion
from tests.conftest import (
    CONTEXT_ERROR,
    OPENAI_URL,
    completion_body,
    history,
    sized,
    stream_body,
)


def calls(compactor: Compactor) -> list[ModelCallEvent]:
    return [e for e in compactor.events("s") if isinstance(e, ModelCallEvent)]


def sync_client() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", http_client=httpx.Client(), max_retries=0)


def async_client() -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="sk-test", http_client=httpx.AsyncClient(), max_retries=0)


@respx.mock
def test_a_sync_client_is_compacted_and_measured(
    make_compactor: Callable[..., Compactor],
) -> None:
    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(200, json=completion_body("hi", prompt_tokens=4321))
    )
    compactor = make_compactor(8000)
    create = compactor.wrap(sync_client().chat.completions.create)
    response = create(
        model="gpt-4o", messages=history([sized(i, 1200) for i in range(5)]), session_id="s"
    )
    assert isinstance(response, openai.types.chat.ChatCompletion)
    sent = json.loads(route.calls.last.request.content)["messages"]
    assert sent[3]["content"].startswith("[archived t1: ")
    assert calls(compactor)[-1].reported_input_tokens == 4321


@respx.mock
def test_an_async_client_is_compacted_and_measured(
    make_compactor: Callable[..., Compactor],
) -> None:
    respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(200, json=completion_body(prompt_tokens=99))
    )
    compactor = make_compactor(8000)
    create = compactor.wrap(async_client().chat.completions.create)
    assert asyncio.iscoroutinefunction(create)
    response = asyncio.run(create(model="gpt-4o", messages=history(["a"]), session_id="s"))
    assert response.usage.prompt_tokens == 99
    assert calls(compactor)[-1].reported_input_tokens == 99


@respx.mock
def test_sync_and_async_streams_pass_through_and_are_measured(
    make_compactor: Callable[..., Compactor],
) -> None:
    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            200,
            content=stream_body("abc", prompt_tokens=77),
            headers={"content-type": "text/event-stream"},
        )
    )
    compactor = make_compactor(8000)
    create = compactor.wrap(sync_client().chat.completions.create)
    with create(model="gpt-4o", messages=history(["a"]), stream=True, session_id="s") as stream:
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "abc"
    assert json.loads(route.calls.last.request.content)["stream_options"] == {"include_usage": True}
    assert calls(compactor)[-1].reported_input_tokens == 77

    acreate = compactor.wrap(async_client().chat.completions.create)

    async def consume() -> str:
        stream = await acreate(model="gpt-4o", messages=history(["a"]), stream=True, session_id="s")
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(consume()) == "abc"
    assert len(calls(compactor)) == 2


@respx.mock
def test_a_context_length_error_is_retried_once_compacted(
    make_compactor: Callable[..., Compactor],
) -> None:
    route = respx.post(OPENAI_URL).mock(
        side_effect=[
            httpx.Response(400, json=CONTEXT_ERROR),
            httpx.Response(200, json=completion_body("fits now")),
        ]
    )
    compactor = make_compactor(8000)
    create = compactor.wrap(sync_client().chat.completions.create)
    response = create(
        model="gpt-4o", messages=history([sized(i, 600) for i in range(4)]), session_id="s"
    )
    assert response.choices[0].message.content == "fits now"
    assert route.call_count == 2
    retry = json.loads(route.calls[1].request.content)["messages"]
    assert retry[3]["content"].startswith("[archived t1: ")
    events = [e for e in compactor.events("s") if isinstance(e, CompactionEvent)]
    assert events[-1].trigger == "context_error"


@respx.mock
def test_a_second_context_length_error_propagates(
    make_compactor: Callable[..., Compactor],
) -> None:
    route = respx.post(OPENAI_URL).mock(return_value=httpx.Response(400, json=CONTEXT_ERROR))
    create = make_compactor(8000).wrap(sync_client().chat.completions.create)
    with pytest.raises(openai.BadRequestError):
        create(model="gpt-4o", messages=history([sized(i, 600) for i in range(4)]), session_id="s")
    assert route.call_count == 2  # retried once, compacted, then given up


def test_a_plain_callable_works(make_compactor: Callable[..., Compactor]) -> None:
    fake = FakeCompletion(scale=1.2)
    fake.enqueue("plain")
    compactor = make_compactor(8000)
    reply = compactor.wrap(fake)(messages=history(["a"]), session_id="s")
    assert reply["choices"][0]["message"]["content"] == "plain"
    assert calls(compactor)[-1].reported_input_tokens == reply["usage"]["prompt_tokens"]
