from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from compactor import (
    CompactionEvent,
    Compactor,
    CompactorConfig,
    ContextExhaustedError,
    FailedEvent,
    InvalidMessagesError,
    InvalidSessionIdError,
    ToolResultEvent,
)
from compactor.messages import validate
from tests.conftest import big, history, sized, tool_turn


def tool_contents(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def grow(compactor: Compactor, outputs: list[str], session: str = "s") -> list:
    """Call compact() once per tool turn, as an agent would; the results in order."""
    results = []
    for count in range(1, len(outputs) + 1):
        results.append(compactor.compact(history(outputs[:count]), session_id=session))
    return results


def test_below_the_offload_line_nothing_changes(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(100_000)
    messages = history([big(i) for i in range(5)])
    result = compactor.compact(messages, session_id="s")
    assert (result.tier, result.event) == ("none", None)
    assert result.messages == messages
    assert result.input_tokens == result.input_tokens_before < 0.5 * result.window


def test_offload_keeps_the_three_newest_and_points_to_the_rest(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    results = grow(compactor, [big(i) for i in range(6)])
    first = next(r for r in results if r.tier != "none")
    assert first.tier == "offload"
    assert 0.5 <= first.input_tokens_before / first.window < 0.8
    contents = tool_contents(first.messages)
    assert all(c.startswith("result") for c in contents[-3:])
    for number, pointer in enumerate(contents[:-3]):
        assert pointer.startswith(f"[archived t{number + 1}: ")
        assert f'READ_TOOL_RESULT(tool_call_id="t{number + 1}"' in pointer
        assert "4,000 chars" in pointer
    assert first.input_tokens < first.input_tokens_before


def test_placeholder_keeps_only_the_newest(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(8000)
    outputs = [sized(i, 400) for i in range(4)] + [sized(9, 5000)]  # about 87% of 8000
    result = compactor.compact(history(outputs), session_id="s")
    assert 0.8 <= result.input_tokens_before / result.window < 0.95
    assert result.tier == "placeholder"
    contents = tool_contents(result.messages)
    assert contents[-1] == outputs[-1]
    assert all(c.startswith("[archived t") and "\n" not in c for c in contents[:-1])


def test_archived_stays_archived_so_the_prefix_is_stable(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    results = grow(compactor, [big(i) for i in range(12)])
    for earlier, later in itertools.pairwise(results):
        if earlier.tier == "none" and later.tier == "none":
            # no compaction in between: what was sent is a prefix of what is sent next
            assert later.messages[: len(earlier.messages)] == earlier.messages
    archived = {e.archived[0] for r in results for e in r.events if isinstance(e, CompactionEvent)}
    last = results[-1].messages
    for handle in archived:
        assert any(c.startswith(f"[archived {handle}:") for c in tool_contents(last))


def test_a_result_not_much_larger_than_its_pointer_stays(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(2000, min_offload_chars=0)
    small = "x" * 400  # a pointer with a 120-char preview is about 240 chars
    result = compactor.compact(history([small] * 5 + [big(1, 3000)]), session_id="s")
    assert result.input_tokens_before >= 0.5 * result.window
    assert tool_contents(result.messages)[:5] == [small] * 5


def test_usage_over_the_summary_line_tries_placeholders_first(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    outputs = [sized(i, 2600) for i in range(3)] + [big(7, 200)]  # about 98% of 8000
    result = compactor.compact(history(outputs), session_id="s")
    assert result.input_tokens_before >= 0.95 * result.window
    assert [e.tier for e in result.events] == ["placeholder"]
    assert result.tier == "placeholder"
    assert result.input_tokens < 0.95 * result.window


def test_a_history_that_cannot_fit_raises_and_logs_failed(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(2000, max_summary_attempts=0, max_replans=0)
    messages = history(["ok"])
    messages[1]["content"] = big(1, 20_000)  # the task alone is over the window
    with pytest.raises(ContextExhaustedError) as caught:
        compactor.compact(messages, session_id="s")
    assert caught.value.window == 2000 and caught.value.tokens > 2000
    assert isinstance(compactor.events("s")[-1], FailedEvent)


def test_over_the_line_but_inside_the_window_is_sent_when_the_budget_is_spent(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(4000, max_summary_attempts=0, max_replans=0)
    messages = history(["ok"])
    messages[1]["content"] = sized(1, 3900)
    result = compactor.compact(messages, session_id="s")
    assert 0.95 <= result.input_tokens / result.window <= 1


def test_the_callers_messages_are_never_modified(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    messages = history([big(i) for i in range(8)])
    snapshot = copy.deepcopy(messages)
    result = compactor.compact(messages, session_id="s")
    assert result.tier != "none"
    assert messages == snapshot


def test_compaction_events_carry_the_numbers(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(8000)
    grow(compactor, [big(i) for i in range(6)])
    events = compactor.events("s")
    assert sum(isinstance(e, ToolResultEvent) for e in events) == 6
    compaction = next(e for e in events if isinstance(e, CompactionEvent))
    assert compaction.trigger == "pre_call" and compaction.window == 8000
    assert compaction.tokens_after < compaction.tokens_before
    assert compaction.messages_before == compaction.messages_after
    assert compaction.archived and compaction.kept[-3:] == compaction.kept
    assert compaction.run_id == "turn-1"


def test_max_tokens_is_taken_from_the_window(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(8000)
    assert compactor.compact(history(["a"]), session_id="s", max_tokens=3000).window == 5000
    with pytest.raises(ValueError, match="max_tokens"):
        compactor.compact(history(["a"]), session_id="fresh", max_tokens=8000)
    assert compactor.events("fresh") == []  # refused before anything was stored


def test_a_new_compactor_on_the_same_home_continues(tmp_path: Path) -> None:
    config = CompactorConfig(context_window=8000)
    outputs = [big(i) for i in range(7)]
    first = Compactor("gpt-4o", config=config, home=tmp_path)
    before = grow(first, outputs)[-1]
    first.close()
    second = Compactor("gpt-4o", config=config, home=tmp_path)
    again = second.compact(history(outputs), session_id="s")
    assert again.messages == before.messages
    assert again.event is None
    assert second.read_tool_result("s", "call_0").endswith(outputs[0][-100:])


def test_malformed_messages_are_refused_before_anything_is_stored(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    messages = [*history([big(1)]), {"role": "tool", "tool_call_id": "ghost", "content": "x"}]
    with pytest.raises(InvalidMessagesError, match=r"messages\[4\]"):
        compactor.compact(messages, session_id="s")
    assert compactor.events("s") == []


@pytest.mark.parametrize(
    "session_id", ["../x", "/etc/passwd", "a/b", "..", "", "a" * 200, "\uff531"]
)
def test_unsafe_session_ids_are_refused_before_touching_disk(
    tmp_path: Path, session_id: str
) -> None:
    compactor = Compactor("gpt-4o", config=CompactorConfig(context_window=8000), home=tmp_path)
    with pytest.raises(InvalidSessionIdError):
        compactor.compact(history(["a"]), session_id=session_id)
    assert not (tmp_path / "sessions").exists()


def test_read_tool_result_answers_are_never_archived(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000, read_limit_chars=4000)
    messages = history([big(i) for i in range(2)])
    read = compactor.handle_tool_call(
        "s",
        {
            "id": "r",
            "function": {"name": "READ_TOOL_RESULT", "arguments": '{"tool_call_id": "call_0"}'},
        },
    )
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "r",
                    "type": "function",
                    "function": {
                        "name": "READ_TOOL_RESULT",
                        "arguments": '{"tool_call_id": "call_0"}',
                    },
                }
            ],
        },
        read,
    ]
    for number in range(2, 8):
        messages += tool_turn(f"call_{number}", big(number))
    result = compactor.compact(messages, session_id="s")
    assert result.tier != "none"
    assert read in result.messages
    validate(result.messages)
