"""The wrapper around litellm, through litellm's real code path; respx answers at HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx

from compactor import CompactionEvent, Compactor, ModelCallEvent
from tests.conftest import (
    CONTEXT_ERROR,
    OPENAI_URL,
    completion_body,
    history,
    sized,
    stream_body,
    tool_turn,
)

pytestmark = pytest.mark.usefixtures("litellm_offline")


def sent_messages(route: respx.Route, call: int = -1) -> list[dict[str, Any]]:
    return json.loads(route.calls[call].request.content)["messages"]


def on_the_wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as litellm sends them: it drops ``content: None``."""
    return [{k: v for k, v in m.items() if not (k == "content" and v is None)} for m in messages]


def model_calls(compactor: Compactor, session: str = "s") -> list[ModelCallEvent]:
    return [e for e in compactor.events(session) if isinstance(e, ModelCallEvent)]


@respx.mock
def test_a_sync_call_is_compacted_sent_and_measured(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            200,
            json=completion_body(
                "done", prompt_tokens=3210, completion_tokens=7, cached_tokens=1024
            ),
        )
    )
    compactor = make_compactor(8000)
    completion = compactor.wrap(litellm.completion)
    messages = history([sized(i, 1200) for i in range(5)])
    response = completion(model="gpt-4o", messages=messages, api_key="sk-test", session_id="s")
    assert isinstance(response, litellm.ModelResponse)
    assert response.choices[0].message.content == "done"
    sent = sent_messages(route)
    assert len(sent) == len(messages) and sent != messages  # compacted, nothing dropped
    assert sent[3]["content"].startswith("[archived t1: ")
    call = model_calls(compactor)[-1]
    assert (call.reported_input_tokens, call.output_tokens, call.cached_tokens) == (3210, 7, 1024)
    assert call.estimated_input_tokens and call.finish_reason == "stop"
    assert call.latency_ms is not None and call.latency_ms >= 0


@respx.mock
def test_positional_arguments_work(make_compactor: Callable[..., Compactor]) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(return_value=httpx.Response(200, json=completion_body()))
    completion = make_compactor(8000).wrap(litellm.completion)
    completion("gpt-4o", history(["a"]), api_key="sk-test", session_id="s")
    assert sent_messages(route) == on_the_wire(history(["a"]))


@respx.mock
def test_an_async_call_is_compacted_and_measured(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(200, json=completion_body(prompt_tokens=777))
    )
    compactor = make_compactor(8000)
    acompletion = compactor.wrap(litellm.acompletion)
    assert asyncio.iscoroutinefunction(acompletion)
    messages = history([sized(i, 1200) for i in range(5)])
    response = asyncio.run(
        acompletion(model="gpt-4o", messages=messages, api_key="sk-test", session_id="s")
    )
    assert response.usage.prompt_tokens == 777
    assert sent_messages(route)[3]["content"].startswith("[archived t1: ")
    assert model_calls(compactor)[-1].reported_input_tokens == 777


@respx.mock
def test_a_stream_passes_through_and_its_final_usage_is_recorded(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            200,
            content=stream_body("hello", prompt_tokens=321),
            headers={"content-type": "text/event-stream"},
        )
    )
    compactor = make_compactor(8000)
    completion = compactor.wrap(litellm.completion)
    stream = completion(
        model="gpt-4o", messages=history(["a"]), api_key="sk-test", stream=True, session_id="s"
    )
    assert model_calls(compactor) == []  # nothing is known before the stream ends
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "hello"
    body = json.loads(route.calls.last.request.content)
    assert body["stream_options"] == {"include_usage": True}
    call = model_calls(compactor)[-1]
    assert (call.reported_input_tokens, call.output_tokens, call.finish_reason) == (321, 2, "stop")


@respx.mock
def test_an_async_stream_passes_through_and_is_measured(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            200,
            content=stream_body("hi", prompt_tokens=55),
            headers={"content-type": "text/event-stream"},
        )
    )
    compactor = make_compactor(8000)
    acompletion = compactor.wrap(litellm.acompletion)

    async def consume() -> str:
        stream = await acompletion(
            model="gpt-4o", messages=history(["a"]), api_key="sk-test", stream=True, session_id="s"
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(consume()) == "hi"
    assert model_calls(compactor)[-1].reported_input_tokens == 55


@respx.mock
def test_the_callers_stream_options_are_kept(make_compactor: Callable[..., Compactor]) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            200, content=stream_body(), headers={"content-type": "text/event-stream"}
        )
    )
    completion = make_compactor(8000).wrap(litellm.completion)
    list(
        completion(
            model="gpt-4o",
            messages=history(["a"]),
            api_key="sk-test",
            stream=True,
            stream_options={"include_usage": False},
            session_id="s",
        )
    )
    assert json.loads(route.calls.last.request.content)["stream_options"] == {
        "include_usage": False
    }


@respx.mock
def test_a_context_error_compacts_one_tier_higher_and_retries(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(
        side_effect=[
            httpx.Response(400, json=CONTEXT_ERROR),
            httpx.Response(200, json=completion_body("after retry")),
        ]
    )
    compactor = make_compactor(8000)
    completion = compactor.wrap(litellm.completion)
    messages = history([sized(i, 600) for i in range(4)])  # about 31%: no compaction
    response = completion(
        model="gpt-4o", messages=messages, api_key="sk-test", num_retries=0, session_id="s"
    )
    assert response.choices[0].message.content == "after retry"
    assert route.call_count == 2
    assert sent_messages(route, 0) == on_the_wire(messages)
    assert sent_messages(route, 1)[3]["content"].startswith("[archived t1: ")
    compaction = [e for e in compactor.events("s") if isinstance(e, CompactionEvent)][-1]
    assert compaction.trigger == "context_error"


@respx.mock
def test_a_second_context_error_propagates(make_compactor: Callable[..., Compactor]) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(return_value=httpx.Response(400, json=CONTEXT_ERROR))
    completion = make_compactor(8000).wrap(litellm.completion)
    with pytest.raises(litellm.ContextWindowExceededError):
        completion(
            model="gpt-4o",
            messages=history([sized(i, 600) for i in range(4)]),
            api_key="sk-test",
            num_retries=0,
            session_id="s",
        )
    assert route.call_count == 2


@respx.mock
def test_other_errors_are_not_retried(make_compactor: Callable[..., Compactor]) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            401, json={"error": {"message": "bad key", "type": "auth", "code": "invalid_api_key"}}
        )
    )
    completion = make_compactor(8000).wrap(litellm.completion)
    with pytest.raises(litellm.AuthenticationError):
        completion(
            model="gpt-4o",
            messages=history(["a"]),
            api_key="sk-test",
            num_retries=0,
            session_id="s",
        )
    assert route.call_count == 1


@respx.mock
def test_reported_usage_anchors_the_next_tier_choice(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    compactor = make_compactor(10_000)
    completion = compactor.wrap(litellm.completion)
    route = respx.post(OPENAI_URL)
    messages = history([sized(i, 1100) for i in range(4)])  # about 45% by the local count
    local = compactor.compact(messages, session_id="probe").input_tokens
    assert local < 0.5 * 10_000
    route.mock(
        return_value=httpx.Response(
            200, json=completion_body(prompt_tokens=round(local * 1.3), completion_tokens=10)
        )
    )
    completion(model="gpt-4o", messages=messages, api_key="sk-test", session_id="s")
    messages = messages + tool_turn("call_9", "short")
    unanchored = make_compactor(10_000).compact(messages, session_id="x")
    assert unanchored.tier == "none"  # the local count alone would not compact yet
    completion(model="gpt-4o", messages=messages, api_key="sk-test", session_id="s")
    compaction = [e for e in compactor.events("s") if isinstance(e, CompactionEvent)][-1]
    assert compaction.tier == "offload"
    assert compaction.tokens_before > 0.5 * 10_000


@respx.mock
def test_read_tool_result_is_offered_once_something_is_archived(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    route = respx.post(OPENAI_URL).mock(return_value=httpx.Response(200, json=completion_body()))
    compactor = make_compactor(8000)
    completion = compactor.wrap(litellm.completion)
    bash = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}

    def offered(messages: list[dict[str, Any]]) -> list[str]:
        completion(
            model="gpt-4o", messages=messages, tools=[bash], api_key="sk-test", session_id="s"
        )
        tools = json.loads(route.calls.last.request.content)["tools"]
        return [t["function"]["name"] for t in tools]

    assert offered(history(["a"])) == ["bash"]  # nothing archived: the tool would only cost
    messages = history([sized(i, 1200) for i in range(5)])
    assert offered(messages) == ["bash", "READ_TOOL_RESULT"]
    assert sent_messages(route)[3]["content"].startswith("[archived t")
    # the tool joined after compaction measured the request: the anchor counts what was sent
    body = json.loads(route.calls.last.request.content)
    sent = [{**m, "content": m.get("content")} for m in body["messages"]]
    assert model_calls(compactor)[-1].local_input_tokens == compactor.meter.count(
        sent, body["tools"]
    )
    assert offered(messages) == ["bash", "READ_TOOL_RESULT"]  # from then on, every call


@respx.mock
def test_a_length_finish_at_high_usage_raises_the_next_calls_tier(
    make_compactor: Callable[..., Compactor],
) -> None:
    import litellm

    respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(
            200, json=completion_body(prompt_tokens=5500, finish_reason="length")
        )
    )
    compactor = make_compactor(10_000)
    completion = compactor.wrap(litellm.completion)
    messages = history([sized(i, 1300) for i in range(4)])  # about 53%: offload
    completion(model="gpt-4o", messages=messages, api_key="sk-test", session_id="s")
    assert model_calls(compactor)[-1].raise_tier
    messages = messages + tool_turn("call_8", "short")
    completion(model="gpt-4o", messages=messages, api_key="sk-test", session_id="s")
    compactions = [e for e in compactor.events("s") if isinstance(e, CompactionEvent)]
    assert [(e.tier, e.trigger) for e in compactions] == [
        ("offload", "pre_call"),
        ("placeholder", "finish_length"),
    ]
