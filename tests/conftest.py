"""Shared fixtures: histories, a compactor on memory stores, and a mocked OpenAI endpoint.

Tests never reach the network: the real litellm (and OpenAI SDK) code runs, and respx answers
at the HTTP layer.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from compactor import Compactor, CompactorConfig, MemorySessionStore, MemoryToolResultStore
from compactor.testing import ScriptedSummarizer
from tests.redis_server import RedisServer

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
OPENAI_URL = "https://api.openai.com/v1/chat/completions"


def tool_turn(call_id: str, output: str, command: str = "ls") -> list[dict[str, Any]]:
    """An assistant tool call and its result."""
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
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def history(outputs: list[str], *, prefix: str = "call") -> list[dict[str, Any]]:
    """A system prompt, a task, and one tool turn per output."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the bug."},
    ]
    for number, output in enumerate(outputs):
        messages += tool_turn(f"{prefix}_{number}", output)
    return messages


def big(number: int, chars: int = 4000) -> str:
    """A tool output of about ``chars`` characters, different for every number."""
    line = f"result {number}: " + "lorem ipsum dolor sit amet " * 3 + "\n"
    return (line * (chars // len(line) + 1))[:chars]


def sized(number: int, tokens: int) -> str:
    """A tool output of ``tokens`` o200k tokens (to within a token), different per number."""
    from compactor.tokens import text_counter

    count = text_counter("o200k_base")
    low, high = 0, tokens * 8
    while low < high:  # the longest prefix of big() with at most ``tokens`` tokens
        middle = (low + high + 1) // 2
        if count(big(number, middle)) <= tokens:
            low = middle
        else:
            high = middle - 1
    return big(number, low)


@pytest.fixture
def make_compactor(tmp_path: Path) -> Callable[..., Compactor]:
    """Build a Compactor (gpt-4o) on memory stores (or on ``tmp_path`` with ``disk=True``)."""

    def make(
        window: int = 8000,
        *,
        model: str = "gpt-4o",
        disk: bool = False,
        summarizer: Any = None,
        **settings: Any,
    ) -> Compactor:
        config = CompactorConfig(context_window=window, **settings)
        summarizer = summarizer or ScriptedSummarizer()
        if disk:
            return Compactor(model, config=config, home=tmp_path / "home", summarizer=summarizer)
        return Compactor(
            model,
            config=config,
            tool_results=MemoryToolResultStore(),
            sessions=MemorySessionStore(),
            summarizer=summarizer,
        )

    return make


def completion_body(
    content: str | None = "ok",
    *,
    prompt_tokens: int = 100,
    completion_tokens: int = 5,
    cached_tokens: int = 0,
    finish_reason: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An OpenAI chat completion response."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }


def stream_body(
    text: str = "hello", *, prompt_tokens: int = 100, completion_tokens: int = 2
) -> bytes:
    """An OpenAI streaming response (server-sent events) ending with a usage chunk."""
    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
    }
    chunks = [
        {
            **base,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
            ],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    ]
    events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
    return (events + "data: [DONE]\n\n").encode()


CONTEXT_ERROR = {
    "error": {
        "message": "This model's maximum context length is 8000 tokens. However, your messages "
        "resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection that leaves this machine: tests mock providers at the HTTP layer."""
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (
            host.startswith(("127.", "::1", "/")) or host == "localhost"
        ):
            raise ConnectionError(f"tests must not reach the network (tried {address!r})")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def litellm_offline() -> Iterator[Any]:
    """litellm configured so that sync and async calls go through httpx, where respx is."""
    import litellm

    litellm.disable_aiohttp_transport = True
    litellm.in_memory_llm_clients_cache.flush_cache()
    # litellm's sync logging calls asyncio.get_event_loop(), which creates a loop nobody closes;
    # give it one that is closed when the test ends.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield litellm
    litellm.in_memory_llm_clients_cache.flush_cache()
    asyncio.set_event_loop(None)
    loop.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the whole run (AOF on, fsync every second); tests keep apart by
    key prefix. Fails in CI, and skips elsewhere, when redis-server is not installed."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix no other test uses."""
    return f"test-{uuid4().hex[:12]}"
