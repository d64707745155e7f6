"""Archiving beyond the basics: long tool inputs, short handles, and cache-aware batching."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from compactor import CompactionEvent, Compactor, CompactorConfig
from compactor.messages import validate
from compactor.session import handle_ranges
from compactor.tokens import payback_ratio
from tests.conftest import big, history, sized


def write_turn(number: int, body: str) -> list[dict]:
    """A call that writes a file through bash: a long input, an empty result."""
    call_id = f"w{number}"
    command = f"cat > file{number}.py <<'EOF'\n{body}\nEOF"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": ""},
    ]


def test_long_inputs_are_archived_with_their_calls_and_stay_readable(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    messages = history([])
    for number in range(6):
        messages += write_turn(number, sized(number, 1000))
    result = compactor.compact(messages, session_id="s")
    assert result.tier != "none"
    validate(result.messages)
    sent = [m for m in result.messages if m["role"] == "assistant"]
    archived = json.loads(sent[0]["tool_calls"][0]["function"]["arguments"])
    assert archived["archived"].startswith("[archived t1.in: ")
    kept = json.loads(sent[-1]["tool_calls"][0]["function"]["arguments"])
    assert kept["command"].startswith("cat > file5.py")  # the newest calls keep their input
    original = messages[2]["tool_calls"][0]["function"]["arguments"]
    assert compactor.read_tool_result("s", "t1.in", 0, 12_000).endswith(original[-200:])


def test_handles_are_short_and_listed_compactly() -> None:
    assert handle_ranges(["t1", "t2", "t3", "t5", "t7", "t8", "t9.in"]) == "t1-t3, t5, t7-t8, t9.in"
    assert handle_ranges([]) == ""


def test_payback_follows_the_models_cache_discount() -> None:
    # DeepSeek bills cached input at a tenth: a rewrite must save 0.9 of what it makes uncached
    # over 10 calls; gpt-4o bills it at half, so rewrites pay back much sooner.
    assert payback_ratio("deepseek/deepseek-chat", 10) == pytest.approx(0.9)
    assert payback_ratio("gpt-4o", 10) == pytest.approx(0.1)
    assert payback_ratio("acme/unknown", 10) == 0.0


def test_small_rewrites_near_the_end_wait_until_they_pay(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(20_000, model="deepseek/deepseek-chat")
    outputs = [sized(i, 1800) for i in range(6)]
    first = compactor.compact(history(outputs), session_id="s")
    assert first.tier == "offload"  # the first batch saves most of what it rewrites
    # one small result becomes older than the newest three: archiving it would save a few
    # hundred tokens and make the three large results after it uncached
    grown = [*outputs, sized(20, 300), *(sized(21 + i, 2000) for i in range(3))]
    later = compactor.compact(history(grown), session_id="s")
    assert 0.5 <= later.input_tokens / later.window < 0.8
    assert later.tier == "none"
    assert later.messages[: len(first.messages)] == first.messages


def test_the_gate_never_holds_back_what_the_window_needs(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000, model="deepseek/deepseek-chat")
    outputs = [sized(i, 1400) for i in range(5)] + [big(9, 400)]
    result = compactor.compact(history(outputs), session_id="s")
    assert result.input_tokens_before >= 0.95 * result.window
    assert result.input_tokens < 0.95 * result.window
    assert any(isinstance(e, CompactionEvent) for e in result.events)


def test_tool_result_events_are_logged_before_anything_that_uses_them(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(100_000)
    compactor.compact(history(["a" * 300, "b" * 300]), session_id="s")
    key = compactor._key("s")
    assert [e.kind for e in compactor.sessions.read(key)] == ["run_started"]  # deferred
    compactor.record_usage("s", {"usage": {"prompt_tokens": 200, "completion_tokens": 5}})
    kinds = [e.kind for e in compactor.sessions.read(key)]
    assert kinds == ["run_started", "tool_result", "tool_result", "model_call"]


def test_a_crash_that_loses_deferred_events_gives_the_same_handles_again(
    tmp_path: Path,
) -> None:
    config = CompactorConfig(context_window=100_000)
    messages = history(["first output " * 30, "second output " * 30])
    lost = Compactor("gpt-4o", config=config, home=tmp_path)
    lost.compact(messages, session_id="s")
    del lost  # the process dies before anything else is logged
    again = Compactor("gpt-4o", config=config, home=tmp_path)
    again.compact(messages, session_id="s")
    assert again.read_tool_result("s", "t2").endswith("second output ")
    assert again.read_tool_result("s", "t1").endswith("first output ")


def test_calls_that_reuse_an_id_and_answer_alike_keep_their_own_inputs(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(100_000)
    first, second = sized(1, 400), sized(2, 400)
    messages = history([])
    for body in (first, second):  # both calls are "w0" and both answer ""
        messages += write_turn(0, body)
    compactor.compact(messages, session_id="s")
    inputs = [compactor.read_tool_result("s", f"{h}.in", 0, 12_000) for h in ("t1", "t2")]
    assert inputs[0].endswith(
        json.dumps({"command": f"cat > file0.py <<'EOF'\n{first}\nEOF"})[-60:]
    )
    assert inputs[1].endswith(
        json.dumps({"command": f"cat > file0.py <<'EOF'\n{second}\nEOF"})[-60:]
    )


def test_nothing_archived_ever_moves_back_to_a_larger_form(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(8000)
    messages = history([])
    for number in range(6):
        messages += write_turn(number, sized(number, 1200))
    first = compactor.compact(messages, session_id="s")  # over the placeholder line
    assert first.tier == "placeholder"
    levels = dict(compactor._session("s").state.archive)
    assert levels["t1.in"] == "placeholder"
    more = list(messages)
    for number in range(10, 13):  # back into the offload band: its tier runs again
        more += write_turn(number, sized(number, 1200))
    again = compactor.compact(more, session_id="s")
    assert again.tier == "offload"
    assert all(
        compactor._session("s").state.archive[h] == "placeholder"
        for h in levels
        if levels[h] == "placeholder"
    )


def test_outputs_are_made_durable_before_the_log_points_to_them(tmp_path: Path) -> None:
    from compactor import DiskToolResultStore, MemorySessionStore

    order: list[str] = []

    class Watched(DiskToolResultStore):
        def put(self, key, handle, text):  # type: ignore[no-untyped-def]
            order.append(f"put {handle}")
            super().put(key, handle, text)

        def sync(self) -> None:
            order.append("sync")
            super().sync()

    class Log(MemorySessionStore):
        def append_many(self, key, events, **kwargs):  # type: ignore[no-untyped-def]
            order.append(f"log {len(events)}")
            return super().append_many(key, events, **kwargs)

    compactor = Compactor(
        "gpt-4o",
        config=CompactorConfig(context_window=100_000),
        tool_results=Watched(tmp_path),
        sessions=Log(),
    )
    compactor.compact(history(["a" * 300, "b" * 300]), session_id="s")
    assert order == ["log 1", "put t1", "put t2"]  # run_started; then no sync in compact()
    compactor.record_usage("s", {"usage": {"prompt_tokens": 99, "completion_tokens": 1}})
    assert order[3:] == ["sync", "log 2", "log 1"]  # outputs, their events, the model call
