"""The summary tier through litellm's real code path; respx answers at the HTTP layer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx

from compactor import (
    CompactionEvent,
    Compactor,
    ContextExhaustedError,
    FailedEvent,
    LiteLLMSummarizer,
    ReplanEvent,
    SummaryFailedEvent,
)
from tests.conftest import OPENAI_URL, completion_body
from tests.test_summary import chatty, task

pytestmark = pytest.mark.usefixtures("litellm_offline")

SERVER_ERROR = httpx.Response(500, json={"error": {"message": "overloaded", "type": "server"}})


def summary_reply(text: str) -> httpx.Response:
    return httpx.Response(200, json=completion_body(text, prompt_tokens=900, completion_tokens=60))


@pytest.fixture
def compactor(make_compactor: Callable[..., Compactor]) -> Compactor:
    summarizer = LiteLLMSummarizer(api_key="sk-test", num_retries=0, max_retries=0)
    return make_compactor(8000, summarizer=summarizer, summary_model="gpt-4o-mini")


def body(route: respx.Route, call: int) -> dict[str, Any]:
    return json.loads(route.calls[call].request.content)


def of(kind: type, compactor: Compactor) -> list[Any]:
    return [e for e in compactor.events("s") if isinstance(e, kind)]


@respx.mock
def test_the_summary_request_is_the_rendered_template_without_full_results(
    compactor: Compactor,
) -> None:
    route = respx.post(OPENAI_URL).mock(return_value=summary_reply("Found the bug in parser.py."))
    messages = task() + chatty(26, output=600)
    result = compactor.compact(messages, session_id="s")
    assert route.call_count == 1
    request = body(route, 0)
    assert request["model"] == "gpt-4o-mini" and request["max_tokens"] == 2000
    prompt = request["messages"][0]["content"]
    assert prompt.startswith("You are compacting the history of an AI agent")
    assert "<task>\nFix the failing test.\n</task>" in prompt
    assert "[archived t4: 2,400 chars]" in prompt
    assert messages[9]["content"] not in prompt  # the full output of call_3
    assert "Found the bug in parser.py." in result.messages[2]["content"]
    event = of(CompactionEvent, compactor)[-1]
    assert event.summary_usage["input_tokens"] == 900
    assert event.summary_usage["cost_usd"] > 0


@respx.mock
def test_a_failed_attempt_then_a_good_one(compactor: Compactor) -> None:
    route = respx.post(OPENAI_URL).mock(side_effect=[SERVER_ERROR, summary_reply("Second try.")])
    result = compactor.compact(task() + chatty(26), session_id="s")
    assert route.call_count == 2
    assert result.tier == "summary" and result.event.attempt == 2
    assert "InternalServerError" in of(SummaryFailedEvent, compactor)[0].reason


@respx.mock
def test_two_failed_attempts_lead_to_a_replan(compactor: Compactor) -> None:
    route = respx.post(OPENAI_URL).mock(
        side_effect=[SERVER_ERROR, SERVER_ERROR, summary_reply("1. Patch parser.py\n2. Test")]
    )
    result = compactor.compact(task() + chatty(26), session_id="s")
    assert route.call_count == 3
    assert body(route, 2)["messages"][0]["content"].startswith("An AI agent has run out")
    assert result.tier == "replan"
    assert "1. Patch parser.py" in result.messages[-1]["content"]
    assert of(ReplanEvent, compactor)[0].plan == "1. Patch parser.py\n2. Test"


@respx.mock
def test_a_failed_replan_is_context_exhausted(compactor: Compactor) -> None:
    respx.post(OPENAI_URL).mock(return_value=SERVER_ERROR)
    with pytest.raises(ContextExhaustedError) as caught:
        compactor.compact(task() + chatty(26), session_id="s")
    assert caught.value.attempts == 2
    assert isinstance(caught.value.__cause__, Exception)
    assert "replan call failed" in of(FailedEvent, compactor)[0].reason


@respx.mock
def test_async_compaction_summarises_through_acompletion(compactor: Compactor) -> None:
    route = respx.post(OPENAI_URL).mock(return_value=summary_reply("Async summary."))
    result = asyncio.run(compactor.acompact(task() + chatty(26), session_id="s"))
    assert route.call_count == 1
    assert result.tier == "summary" and "Async summary." in result.messages[2]["content"]
