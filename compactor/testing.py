"""Test doubles for agents built on compactor: a scripted completion and a scripted summarizer.

``FakeCompletion`` stands in for ``litellm.completion`` (and ``.acompletion`` for
``litellm.acompletion``): queue replies with ``enqueue()``, and each call answers the next one,
with usage counted the way a provider would report it: the request's tokens (optionally scaled,
as a provider's tokenizer differs from ours), and as cached tokens the prefix shared with the
previous request, as prompt caching bills it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.messages import Message
from compactor.summarizer import SummaryReply, SummaryRequest
from compactor.tokens import TokenMeter


@dataclass(frozen=True)
class _Reply:
    content: str | None
    tool_calls: tuple[dict[str, Any], ...]
    finish_reason: str
    error: Exception | None


@dataclass
class FakeCompletion:
    """A scripted completion function that answers queued replies in order.

    Args:
        model: the model whose tokenizer counts the usage it reports.
        scale: reported input tokens are the local count times this.
    """

    model: str = "gpt-4o"
    scale: float = 1.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every request received, as keyword arguments."""
    _replies: deque[_Reply] = field(default_factory=deque)
    _meter: TokenMeter | None = None
    _previous: list[Message] = field(default_factory=list)

    def enqueue(
        self,
        content: str | None = "ok",
        *,
        tool_calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
        finish_reason: str | None = None,
        error: Exception | None = None,
    ) -> None:
        """Queue the next reply.

        Args:
            content: the assistant's text.
            tool_calls: ``(id, function name, arguments)`` of each tool call to make.
            finish_reason: default ``tool_calls`` when there are calls, else ``stop``.
            error: raise this instead of answering.
        """
        calls = tuple(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for call_id, name, arguments in tool_calls
        )
        reason = finish_reason or ("tool_calls" if calls else "stop")
        self._replies.append(_Reply(content, calls, reason, error))

    def __call__(self, *, messages: list[Message], **kwargs: Any) -> dict[str, Any]:
        """Answer the next queued reply (an OpenAI chat completion, as a dict)."""
        self.requests.append({"messages": messages, **kwargs})
        if not self._replies:
            raise AssertionError("FakeCompletion: no reply queued for this call")
        reply = self._replies.popleft()
        if reply.error is not None:
            raise reply.error
        return self._response(reply, messages, kwargs.get("tools"))

    async def acompletion(self, *, messages: list[Message], **kwargs: Any) -> dict[str, Any]:
        """The async twin of calling the fake."""
        return self(messages=messages, **kwargs)

    def _response(
        self, reply: _Reply, messages: list[Message], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        meter = self._meter = self._meter or TokenMeter(self.model)
        prompt = round(meter.count(messages, tools) * self.scale)
        cached = round(shared_prefix_tokens(meter, self._previous, messages) * self.scale)
        self._previous = list(messages)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [dict(call) for call in reply.tool_calls]
        output = meter.count_text(reply.content or "") + sum(
            meter.count_text(call["function"]["arguments"]) for call in reply.tool_calls
        )
        return {
            "id": f"fake-{len(self.requests)}",
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": output,
                "total_tokens": prompt + output,
                "prompt_tokens_details": {"cached_tokens": min(cached, prompt)},
            },
        }


def shared_prefix_tokens(
    meter: TokenMeter, previous: Sequence[Message], current: Sequence[Message]
) -> int:
    """Tokens of the leading messages two requests share: what a prompt cache can reuse."""
    total = 0
    for before, now in zip(previous, current, strict=False):
        if meter.message_digest(before) != meter.message_digest(now):
            break
        total += meter.message_tokens(now)
    return total


@dataclass
class ScriptedSummarizer:
    """A summarizer that needs no model: fixed-length summaries and plans, or scripted ones.

    Args:
        words: the length of every default summary and plan.
    """

    words: int = 150
    requests: list[SummaryRequest] = field(default_factory=list)
    """Every request received."""
    _script: deque[str | Exception] = field(default_factory=deque)

    def enqueue(self, text: str | Exception) -> None:
        """Answer the next request with ``text``, or raise it if it is an exception."""
        self._script.append(text)

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        """Answer from the script, or with a fixed-length text."""
        self.requests.append(request)
        scripted = self._script.popleft() if self._script else None
        if isinstance(scripted, Exception):
            raise scripted
        text = scripted if scripted is not None else self._default(request)
        return SummaryReply(
            text, input_tokens=_chars(request) // 4, output_tokens=len(text) // 4, cost_usd=0.0
        )

    async def asummarize(self, request: SummaryRequest) -> SummaryReply:
        """The async twin of ``summarize``."""
        return self.summarize(request)

    def _default(self, request: SummaryRequest) -> str:
        label = "Summary" if request.kind == "summary" else "Plan"
        filler = " ".join(f"point{number}" for number in range(self.words - 3))
        return f"{label} {len(self.requests)}: {filler}."


def _chars(request: SummaryRequest) -> int:
    return sum(len(str(message.get("content") or "")) for message in request.messages)
