"""The README's quick start, run as written against a mocked provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from compactor import Compactor, CompactorConfig, reply_message
from tests.conftest import OPENAI_URL, completion_body, sized

pytestmark = pytest.mark.usefixtures("litellm_offline")

BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


@respx.mock
def test_the_quick_start_loop_runs_and_pages_an_archived_result(tmp_path: Path) -> None:
    import litellm

    replies = [
        completion_body(
            None, tool_calls=[call(f"c{i}", "bash", {"command": "cat"})], finish_reason="tool_calls"
        )
        for i in range(5)
    ]
    replies.append(
        completion_body(
            None,
            tool_calls=[call("r", "READ_TOOL_RESULT", {"tool_call_id": "t1", "limit": 300})],
            finish_reason="tool_calls",
        )
    )
    replies.append(completion_body("The bug is in parser.py."))
    respx.post(OPENAI_URL).mock(side_effect=[httpx.Response(200, json=r) for r in replies])

    compactor = Compactor("gpt-4o", config=CompactorConfig(context_window=6000), home=tmp_path)
    completion = compactor.wrap(litellm.completion)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the bug."}]
    while True:
        response = completion(
            model="gpt-4o", messages=messages, tools=[BASH], session_id="run-42", api_key="sk-test"
        )
        message = reply_message(response)
        assert message is not None
        messages.append(message)
        if not message.get("tool_calls"):
            break
        for tool_call in message["tool_calls"]:
            if tool_call["function"]["name"] == "READ_TOOL_RESULT":
                messages.append(compactor.handle_tool_call("run-42", tool_call))
            else:
                output = sized(len(messages), 900)
                messages.append(
                    {"role": "tool", "tool_call_id": tool_call["id"], "content": output}
                )
    assert messages[-1]["content"] == "The bug is in parser.py."
    page = messages[-2]["content"]
    assert page.startswith("[READ_TOOL_RESULT t1: chars 0..") and len(page) <= 300
    assert messages[2]["content"].startswith(page.partition("\n")[2])
