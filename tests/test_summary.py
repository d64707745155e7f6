"""The summary tier, replan and FAILED, with the scripted summarizer (no model)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactor import (
    CompactionEvent,
    Compactor,
    CompactorConfig,
    ContextExhaustedError,
    FailedEvent,
    ReplanEvent,
    SummaryFailedEvent,
)
from compactor.messages import validate
from compactor.testing import ScriptedSummarizer
from tests.conftest import big

SUMMARY_MODEL = "gpt-4o-mini"  # a large window: one request per summary


def thinking(number: int, tokens: int) -> str:
    return (f"Thought {number}: the parser may mishandle nested blocks. " * (tokens // 10))[
        : tokens * 4
    ]


def chatty(turns: int, *, thought: int = 300, output: int = 120, start: int = 0) -> list[dict]:
    """Tool turns whose assistant messages think aloud: placeholders cannot shrink those."""
    messages = []
    for number in range(start, start + turns):
        call_id = f"call_{number}"
        messages += [
            {
                "role": "assistant",
                "content": thinking(number, thought),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"ls {number}"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": big(number, output * 4)},
        ]
    return messages


def task(text: str = "Fix the failing test.") -> list[dict]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": text},
    ]


def of(kind: type, compactor: Compactor, session: str = "s") -> list[Any]:
    return [e for e in compactor.events(session) if isinstance(e, kind)]


@pytest.fixture
def make(make_compactor: Callable[..., Compactor]) -> Callable[..., Compactor]:
    """An 8000-token gpt-4o compactor whose summaries are written by a large-window model."""

    def build(**settings: Any) -> Compactor:
        settings.setdefault("summary_model", SUMMARY_MODEL)
        return make_compactor(8000, **settings)

    return build


def test_a_summary_replaces_the_middle_and_keeps_head_and_latest_turn(
    make: Callable[..., Compactor],
) -> None:
    summarizer = ScriptedSummarizer(words=60)
    compactor = make(summarizer=summarizer)
    messages = task() + chatty(26)
    result = compactor.compact(messages, session_id="s")
    assert result.tier == "summary"
    validate(result.messages)
    assert result.messages[:2] == messages[:2]
    summary = result.messages[2]
    assert summary["role"] == "user" and "Summary 1:" in summary["content"]
    assert result.messages[3:] == [messages[-2], messages[-1]]  # the latest turn, untouched
    assert result.input_tokens < 0.95 * result.window
    event = of(CompactionEvent, compactor)[-1]
    assert (event.tier, event.attempt, event.covered, event.head) == ("summary", 1, 52, 2)
    assert event.summary.startswith("Summary 1:")
    assert event.summary_usage["calls"] == 1


def test_the_summary_lists_every_archived_handle_and_each_stays_readable(
    make: Callable[..., Compactor],
) -> None:
    compactor = make()
    result = compactor.compact(task() + chatty(26), session_id="s")
    event = result.event
    assert isinstance(event, CompactionEvent) and event.tier == "summary"
    assert event.archived == [f"t{n}" for n in range(1, 26)]
    assert event.kept == ["t26"]
    assert "READ_TOOL_RESULT(tool_call_id=...): t1-t25" in result.messages[2]["content"]
    for number, handle in enumerate(event.archived):
        assert compactor.read_tool_result("s", handle).endswith(big(number, 480)[-50:])


def test_the_summariser_sees_placeholders_never_full_results(
    make: Callable[..., Compactor],
) -> None:
    summarizer = ScriptedSummarizer()
    compactor = make(summarizer=summarizer)
    messages = task() + chatty(20, output=800) + chatty(8, thought=500, start=20)
    compactor.compact(messages, session_id="s")
    prompt = summarizer.requests[0].messages[0]["content"]
    assert "Fix the failing test." in prompt
    assert "[archived t1: 3,200 chars]" in prompt
    assert big(0, 3200)[:200] not in prompt
    assert "Thought 0: the parser" in prompt


def test_a_long_history_is_summarised_in_chunks_within_the_summary_window(
    make: Callable[..., Compactor],
) -> None:
    summarizer = ScriptedSummarizer(words=40)
    compactor = make(summarizer=summarizer, summary_model="gpt-4o", summary_max_tokens=300)
    budget = compactor._target.budget  # the summary model's window is 8000 tokens too
    assert budget == int((8000 - 300) * 0.9)
    compactor.compact(task() + chatty(26), session_id="s")
    assert len(summarizer.requests) >= 2
    for request in summarizer.requests:
        assert compactor.meter.count_text(request.messages[0]["content"]) <= budget
    later = summarizer.requests[1].messages[0]["content"]
    assert "Summary 1:" in later  # each chunk folds in the summary of the ones before


def test_a_failed_attempt_is_recorded_and_the_next_one_is_used(
    make: Callable[..., Compactor],
) -> None:
    summarizer = ScriptedSummarizer()
    summarizer.enqueue(TimeoutError("summary call timed out"))
    compactor = make(summarizer=summarizer)
    result = compactor.compact(task() + chatty(26), session_id="s")
    failed = of(SummaryFailedEvent, compactor)
    assert [(f.attempt, "timed out" in f.reason) for f in failed] == [(1, True)]
    assert result.tier == "summary" and result.event.attempt == 2
    assert [(e.kind, getattr(e, "tier", None)) for e in result.events] == [
        ("compaction", "placeholder"),
        ("summary_failed", None),
        ("compaction", "summary"),
    ]


def test_empty_and_useless_summaries_count_as_attempts(
    make: Callable[..., Compactor],
) -> None:
    summarizer = ScriptedSummarizer()
    summarizer.enqueue("   ")
    summarizer.enqueue(big(1, 40_000))  # longer than what it replaces
    compactor = make(summarizer=summarizer)
    result = compactor.compact(task() + chatty(26), session_id="s")
    reasons = [f.reason for f in of(SummaryFailedEvent, compactor)]
    assert reasons[0] == "the summary call returned no text"
    assert reasons[1].startswith("the summary leaves usage at")
    assert result.tier == "replan"


def test_spent_attempts_lead_to_a_replan_of_system_task_and_plan(
    make: Callable[..., Compactor],
) -> None:
    summarizer = ScriptedSummarizer(words=50)
    summarizer.enqueue(RuntimeError("rate limited"))
    summarizer.enqueue(RuntimeError("rate limited"))
    compactor = make(summarizer=summarizer)
    messages = task() + chatty(26)
    result = compactor.compact(messages, session_id="s")
    assert result.tier == "replan"
    assert result.messages[:2] == messages[:2] and len(result.messages) == 3
    replan = result.messages[2]["content"]
    assert "Plan 3:" in replan and "READ_TOOL_RESULT(tool_call_id=...): t1-t26" in replan
    assert summarizer.requests[-1].kind == "replan"
    event = of(ReplanEvent, compactor)[-1]
    assert event.covered == len(messages) and event.archived[-1] == "t26"
    assert compactor.read_tool_result("s", "call_25").endswith(big(25, 480)[-30:])


def test_a_failed_replan_raises_and_logs_failed(make: Callable[..., Compactor]) -> None:
    summarizer = ScriptedSummarizer()
    for _ in range(3):
        summarizer.enqueue(ConnectionError("provider down"))
    compactor = make(summarizer=summarizer)
    with pytest.raises(ContextExhaustedError) as caught:
        compactor.compact(task() + chatty(26), session_id="s")
    error = caught.value
    assert (error.session_id, error.window, error.attempts) == ("s", 8000, 2)
    assert error.run_id == "turn-1" and error.tokens >= 0.95 * 8000
    assert "replan call failed" in str(error) and "provider down" in str(error)
    failed = of(FailedEvent, compactor)[-1]
    assert failed.attempts == 2 and "replan" in failed.reason


def test_a_replan_that_cannot_fit_fails(make: Callable[..., Compactor]) -> None:
    compactor = make()
    with pytest.raises(ContextExhaustedError, match="still does not fit"):
        compactor.compact(task(big(1, 40_000)) + chatty(3), session_id="s")


def test_later_calls_keep_the_summary_and_stay_prefix_stable(
    make: Callable[..., Compactor],
) -> None:
    compactor = make()
    messages = task() + chatty(26)
    first = compactor.compact(messages, session_id="s")
    second = compactor.compact(messages + chatty(1, start=26), session_id="s")
    assert second.tier == "none"
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[2] is first.messages[2]


def test_counters_reset_on_a_new_run(make: Callable[..., Compactor]) -> None:
    summarizer = ScriptedSummarizer()
    compactor = make(summarizer=summarizer)
    messages = task() + chatty(26)
    compactor.compact(messages, session_id="s")
    assert compactor._session("s").state.attempts == 1
    messages += [{"role": "user", "content": "Now also fix the docs."}]
    compactor.compact(messages, session_id="s")
    assert compactor._session("s").state.attempts == 0
    compactor.compact(messages, session_id="s", run_id="retry-7")
    assert compactor._session("s").state.run_id == "retry-7"


def test_counters_survive_a_new_compactor_on_the_same_home(tmp_path: Path) -> None:
    summarizer = ScriptedSummarizer()
    summarizer.enqueue(RuntimeError("down"))
    config = CompactorConfig(context_window=8000, summary_model=SUMMARY_MODEL)
    messages = task() + chatty(26)
    first = Compactor("gpt-4o", config=config, home=tmp_path, summarizer=summarizer)
    first.compact(messages, session_id="s")
    first.close()  # gives the session's write lease up
    second = Compactor("gpt-4o", config=config, home=tmp_path, summarizer=summarizer)
    state = second._session("s").state
    assert (state.attempts, state.replans, state.run_id) == (2, 0, "turn-1")
    assert state.condensed is not None and state.condensed.kind == "summary"
    again = second.compact(messages + chatty(24, thought=400, start=26), session_id="s")
    assert again.tier == "replan"  # attempts were spent in this run by the first instance
