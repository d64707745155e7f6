from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor import TOOL_NAME, Compactor, StoreError
from compactor.tool import schema
from tests.conftest import history, tool_turn

HEADER = re.compile(
    r"\[READ_TOOL_RESULT (\S+): chars (\d+)\.\.(\d+) of (\d+)"
    r"(?:; next offset (\d+)|; end of result)\]"
)


def page_through(compactor: Compactor, session: str, handle: str, limit: int) -> str:
    """Read a result page by page, following the answers' next offsets."""
    pieces, offset = [], 0
    while True:
        answer = compactor.read_tool_result(session, handle, offset, limit)
        assert len(answer) <= limit
        header, _, body = answer.partition("\n")
        match = HEADER.fullmatch(header)
        assert match, header
        start, end = int(match[2]), int(match[3])
        assert (start, end - start) == (offset, len(body))
        pieces.append(body)
        if match[5] is None:
            return "".join(pieces)
        offset = int(match[5])


@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=0, max_size=3000), limit=st.integers(min_value=120, max_value=900))
def test_pages_concatenate_to_the_original_exactly(text: str, limit: int) -> None:
    from compactor import CompactorConfig, MemorySessionStore, MemoryToolResultStore

    compactor = Compactor(
        "gpt-4o",
        config=CompactorConfig(context_window=100_000),
        tool_results=MemoryToolResultStore(),
        sessions=MemorySessionStore(),
    )
    compactor.compact(history([text]), session_id="s")
    assert page_through(compactor, "s", "call_0", limit) == text


def test_unicode_is_paged_by_characters(make_compactor: Callable[..., Compactor]) -> None:
    text = "naïve 🤖 café " * 300 + "終わり"
    compactor = make_compactor(100_000)
    compactor.compact(history([text]), session_id="s")
    assert page_through(compactor, "s", "call_0", 500) == text


def test_the_default_page_is_the_configured_cap(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(100_000, read_limit_chars=1000)
    compactor.compact(history(["x" * 5000]), session_id="s")
    answer = compactor.read_tool_result("s", "call_0")
    assert len(answer) <= 1000 and "next offset" in answer
    assert len(compactor.read_tool_result("s", "call_0", 0, 50_000)) <= 1000


@pytest.mark.parametrize(
    ("handle", "offset", "limit", "words"),
    [
        ("missing", 0, None, "no tool result with tool_call_id 'missing'"),
        ("call_0", 999, None, "offset 999 is past the end"),
        ("call_0", -1, None, "offset"),
        ("call_0", 0, 5, "limit 5 is too small"),
    ],
)
def test_mistakes_are_answered_as_text_saying_what_is_valid(
    make_compactor: Callable[..., Compactor],
    handle: str,
    offset: int,
    limit: int | None,
    words: str,
) -> None:
    compactor = make_compactor(100_000)
    compactor.compact(history(["y" * 100]), session_id="s")
    answer = compactor.read_tool_result("s", handle, offset, limit)
    assert answer.startswith("READ_TOOL_RESULT error:")
    assert words in answer


def test_an_unknown_id_lists_the_readable_ones(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(100_000)
    compactor.compact(history(["a", "b"]), session_id="s")
    assert "(newest first): t2, t1" in compactor.read_tool_result("s", "nope")


def test_handle_tool_call_answers_with_a_tool_message(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(100_000)
    compactor.compact(history(["hello world"]), session_id="s")
    call = {
        "id": "r1",
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": json.dumps({"tool_call_id": "call_0"})},
    }
    message = compactor.handle_tool_call("s", call)
    assert message["role"] == "tool" and message["tool_call_id"] == "r1"
    assert message["content"].endswith("\nhello world")


def test_bad_arguments_from_the_model_are_answered_as_text(
    make_compactor: Callable[..., Compactor],
) -> None:
    compactor = make_compactor(100_000)
    call = {"id": "r1", "function": {"name": TOOL_NAME, "arguments": "{not json"}}
    assert "not valid" in compactor.handle_tool_call("s", call)["content"]
    call = {
        "id": "r2",
        "function": {"name": TOOL_NAME, "arguments": '{"tool_call_id": "a", "x": 1}'},
    }
    assert "x: Extra inputs" in compactor.handle_tool_call("s", call)["content"]


def test_other_tools_are_not_handled(make_compactor: Callable[..., Compactor]) -> None:
    with pytest.raises(ValueError, match="not a READ_TOOL_RESULT call"):
        make_compactor().handle_tool_call("s", {"id": "1", "function": {"name": "bash"}})


def test_a_session_only_reads_its_own_results(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(100_000)
    compactor.compact(history(["secret"]), session_id="alice")
    assert "no tool result" in compactor.read_tool_result("bob", "call_0")


def test_reused_provider_ids_get_unique_handles(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(100_000)
    messages = history(["first"], prefix="call") + tool_turn("call_0", "second")
    compactor.compact(messages, session_id="s")
    assert compactor.read_tool_result("s", "t1").endswith("\nfirst")
    assert compactor.read_tool_result("s", "t2").endswith("\nsecond")
    ambiguous = compactor.read_tool_result("s", "call_0")
    assert "was used by several calls" in ambiguous and "t1, t2" in ambiguous


def test_a_result_lost_by_its_store_is_raised(make_compactor: Callable[..., Compactor]) -> None:
    compactor = make_compactor(100_000)
    compactor.compact(history(["data"]), session_id="s")
    compactor.tool_results._texts.clear()  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="missing"):
        compactor.read_tool_result("s", "call_0")


def test_the_schema_caps_the_limit() -> None:
    definition = schema(5000)
    assert definition["function"]["name"] == TOOL_NAME
    assert definition["function"]["parameters"]["properties"]["limit"]["maximum"] == 5000
    assert definition["function"]["parameters"]["required"] == ["tool_call_id"]
