"""Property tests: whatever the history and the window, compaction keeps a valid chat."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor import (
    Compactor,
    CompactorConfig,
    ContextExhaustedError,
    MemorySessionStore,
    MemoryToolResultStore,
    ToolResultEvent,
)
from compactor.messages import validate
from compactor.testing import ScriptedSummarizer

outputs = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=0, max_value=6000).map(lambda n: ("out " * (n // 4 + 1))[:n]),
)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid chats: user turns, plain replies and groups of parallel tool calls whose
    provider ids may repeat across turns."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "agent"},
        {"role": "user", "content": "task"},
    ]
    for turn in range(draw(st.integers(min_value=0, max_value=14))):
        kind = draw(st.sampled_from(["tools", "tools", "tools", "reply", "user"]))
        if kind == "user":
            messages.append({"role": "user", "content": draw(st.text(max_size=30))})
        elif kind == "reply":
            messages.append({"role": "assistant", "content": draw(st.text(max_size=30))})
        else:
            width = draw(st.integers(min_value=1, max_value=4))
            reuse = draw(st.booleans())
            ids = [f"call_{i}" if reuse else f"t{turn}_{i}" for i in range(width)]
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"c": i})},
                }
                for i in ids
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for call_id in draw(st.permutations(ids)):
                content: Any = draw(outputs)
                if draw(st.integers(min_value=0, max_value=5)) == 0:
                    content = [{"type": "text", "text": content}]
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return messages


def call_ids(messages: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    asked = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return asked, answered


def assert_calls_kept(sent: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """The calls sent are the original ones in order, or (after a summary or replan) the
    newest of them: whole groups are condensed, never split."""
    asked, answered = call_ids(sent)
    all_asked, all_answered = call_ids(original)
    assert asked == all_asked[len(all_asked) - len(asked) :]
    assert answered == all_answered[len(all_answered) - len(answered) :]
    assert sorted(asked) == sorted(answered)


def new_compactor(window: int, keep: int) -> Compactor:
    config = CompactorConfig(
        context_window=window, keep_offload=keep, keep_placeholder=min(keep, 1), min_offload_chars=0
    )
    return Compactor(
        "gpt-4o",
        config=config,
        tool_results=MemoryToolResultStore(),
        sessions=MemorySessionStore(),
        summarizer=ScriptedSummarizer(words=40),
    )


def assert_nothing_lost(compactor: Compactor, session: str) -> None:
    """Every tool result of the session is still readable in full through its handle."""
    handles = [e.handle for e in compactor.events(session) if isinstance(e, ToolResultEvent)]
    for handle in handles:
        answer = compactor.read_tool_result(session, handle, 0, 100_000)
        assert not answer.startswith("READ_TOOL_RESULT error"), answer


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=histories(),
    window=st.integers(min_value=300, max_value=20_000),
    keep=st.integers(min_value=0, max_value=4),
)
def test_every_tier_keeps_a_valid_chat(
    messages: list[dict[str, Any]], window: int, keep: int
) -> None:
    compactor = new_compactor(window, keep)
    original = copy.deepcopy(messages)
    try:
        result = compactor.compact(messages, session_id="p")
    except ContextExhaustedError as exc:
        assert exc.tokens > exc.window  # only raised for what cannot fit
        return
    finally:
        assert messages == original  # the caller's list and dicts are untouched
    validate(result.messages)
    assert_calls_kept(result.messages, messages)
    if result.tier not in ("summary", "replan"):
        assert call_ids(result.messages) == call_ids(messages)
    assert result.input_tokens <= result.window
    assert_nothing_lost(compactor, "p")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=histories(), window=st.integers(min_value=1500, max_value=8000))
def test_a_growing_session_stays_valid_at_every_call(
    messages: list[dict[str, Any]], window: int
) -> None:
    compactor = new_compactor(window, 3)
    for end in range(2, len(messages) + 1):
        prefix = messages[:end]
        if prefix[-1]["role"] == "assistant" and prefix[-1].get("tool_calls"):
            continue  # the agent is still running the tools
        if end < len(messages) and messages[end]["role"] == "tool":
            continue  # some results of the group are still missing
        try:
            result = compactor.compact(prefix, session_id="g")
        except ContextExhaustedError:
            return
        validate(result.messages)
        assert_calls_kept(result.messages, prefix)
    assert_nothing_lost(compactor, "g")
