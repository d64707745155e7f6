"""The peers, replayed with their real packages: LangChain and pydantic-ai-harness.

They come in through the ``bench`` extra; a peer whose package is missing is reported by
``missing()``, never silently left out. Histories are converted from OpenAI dicts to each
framework's messages and back, and each peer runs offline: LangChain's middleware through
``wrap_model_call`` with a handler that captures the request, the harness's capabilities
through ``before_model_request`` with pydantic-ai's ``FunctionModel``.

- LangChain's ``ContextEditingMiddleware`` is stateless: it edits a copy of the full history
  on every call, so it is handed the full prefix each time.
- pydantic-ai-harness writes its edits back into the run's history, so later calls see the
  compacted history plus the new messages; its replay carries that history forward.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compactor.bench.policies import Policy, Prepared, Replay
from compactor.messages import Message

LANGCHAIN = ("langchain", "langchain_core")
_CLEARED = "[cleared]"
"""ClearToolUsesEdit's placeholder."""
HARNESS = ("pydantic_ai_harness", "pydantic_ai")


def missing() -> dict[str, str]:
    """Peers that cannot run here, with the reason."""
    out = {}
    for peer, modules in (("langchain", LANGCHAIN), ("pydantic-ai-harness", HARNESS)):
        absent = [m for m in modules if importlib.util.find_spec(m) is None]
        if absent:
            out[peer] = f"not installed ({', '.join(absent)}): pip install 'compactor[bench]'"
    return out


def policies() -> list[Policy]:
    """Every peer policy whose package is installed."""
    gone = missing()
    found: list[Policy] = []
    if "langchain" not in gone:
        found += [LangChainClear(None), LangChainClear(0.5)]
    if "pydantic-ai-harness" not in gone:
        found += [HarnessClear(0.5), HarnessTiered(0.5)]
    return found


# -- LangChain ------------------------------------------------------------------------------


@dataclass
class LangChainClear:
    """``ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger, keep=3)])``.

    Args:
        trigger: a share of the window, or None for LangChain's default (100,000 tokens).
    """

    trigger: float | None

    @property
    def name(self) -> str:
        return "langchain-default" if self.trigger is None else "langchain-scaled"

    def _tokens(self, window: int) -> int | None:
        return None if self.trigger is None else int(self.trigger * window)

    def describe(self, window: int) -> str:
        trigger = self._tokens(window)
        shown = "its default 100,000" if trigger is None else f"{trigger:,}"
        return (
            f"LangChain ContextEditingMiddleware + ClearToolUsesEdit(trigger={shown} "
            "tokens by its approximate counter, keep=3, placeholder '[cleared]'); stateless"
        )

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        return _LangChainReplay(self._tokens(window))


class _LangChainReplay:
    def __init__(self, trigger: int | None) -> None:
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        edit = (
            ClearToolUsesEdit(keep=3)
            if trigger is None
            else ClearToolUsesEdit(trigger=trigger, keep=3)
        )
        self.middleware = ContextEditingMiddleware(edits=[edit])
        self.model = FakeListChatModel(responses=["ok"])  # never called

    def prepare(self, prefix: list[Message]) -> Prepared:
        from langchain.agents.middleware.types import ModelRequest, ModelResponse
        from langchain_core.messages import AIMessage, SystemMessage, convert_to_messages

        converted = convert_to_messages(prefix)
        system = converted[0] if converted and isinstance(converted[0], SystemMessage) else None
        history: list[Any] = converted[1:] if system is not None else converted
        seen: dict[str, Any] = {}

        def handler(request: Any) -> Any:
            seen["request"] = request
            return ModelResponse(result=[AIMessage(content="")])

        request = ModelRequest(model=self.model, messages=history, system_message=system)
        started = time.perf_counter()
        self.middleware.wrap_model_call(request, handler)
        own_ms = (time.perf_counter() - started) * 1000
        # Its edits applied to the caller's own dicts: converting back would re-serialise every
        # tool call's arguments and charge LangChain for tokens it never added.
        cleared = {
            m.tool_call_id: m.content
            for m in seen["request"].messages
            if getattr(m, "type", "") == "tool" and m.content == _CLEARED
        }
        sent = [
            {**m, "content": cleared[m["tool_call_id"]]}
            if m["role"] == "tool" and m["tool_call_id"] in cleared
            else m
            for m in prefix
        ]
        return Prepared(sent, compactions=int(bool(cleared)), own_ms=own_ms)

    def observe(self, input_tokens: int, output_tokens: int) -> None:
        return None


# -- pydantic-ai-harness -------------------------------------------------------------------


@dataclass
class HarnessClear:
    """``ClearToolResults(max_tokens=share * window, keep_pairs=3)``."""

    share: float
    name: str = "harness-clear"

    def describe(self, window: int) -> str:
        return (
            f"pydantic-ai-harness ClearToolResults(max_tokens={int(self.share * window):,}"
            " by its chars/4 estimate, keep_pairs=3, placeholder '[tool result cleared]');"
            " edits persist in the run history"
        )

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        from pydantic_ai_harness.compaction import ClearToolResults

        return _HarnessReplay(ClearToolResults(max_tokens=int(self.share * window), keep_pairs=3))


@dataclass
class HarnessTiered:
    """``TieredCompaction([ClearToolResults, SlidingWindowCompaction(keep_messages=20)])``."""

    share: float
    name: str = "harness-tiered"

    def describe(self, window: int) -> str:
        return (
            "pydantic-ai-harness TieredCompaction(tiers=[ClearToolResults(keep_pairs=3), "
            "SlidingWindowCompaction(keep_messages=20)], target_tokens="
            f"{int(self.share * window):,}); the sliding window drops messages (lossy)"
        )

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        from pydantic_ai_harness.compaction import (
            ClearToolResults,
            SlidingWindowCompaction,
            TieredCompaction,
        )

        # A tier's own trigger is ignored inside TieredCompaction, but must be valid.
        tiers: list[Any] = [
            ClearToolResults(max_tokens=1, keep_pairs=3),
            SlidingWindowCompaction(max_messages=1, keep_messages=20),
        ]
        return _HarnessReplay(TieredCompaction(tiers=tiers, target_tokens=int(self.share * window)))


class _HarnessReplay:
    """A harness capability over a run history that keeps its edits, as pydantic-ai's agent
    graph does; each response carries the usage the provider reported for it, which the
    harness's estimates anchor on."""

    def __init__(self, capability: Any) -> None:
        self.capability = capability
        self.history: list[Any] = []
        self.seen = 0
        self.step = 0
        self.usage: tuple[int, int] | None = None

    def prepare(self, prefix: list[Message]) -> Prepared:
        from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
        from pydantic_ai.tools import RunContext
        from pydantic_ai.usage import RunUsage

        # Each new slice starts at the model's reply to the previous call (or at the start).
        self.history += _to_pydantic_ai(prefix[self.seen :], prefix, self.usage)
        self.seen = len(prefix)
        self.step += 1
        before = _shape(self.history)
        model = _model()
        context = RunContext(
            deps=None,
            model=model,
            usage=RunUsage(),
            messages=self.history,
            run_id="bench",
            run_step=self.step,
        )
        request = ModelRequestContext(
            model=model,
            messages=list(self.history),
            model_settings=None,
            model_request_parameters=ModelRequestParameters(),
        )
        started = time.perf_counter()
        request = asyncio.run(self.capability.before_model_request(context, request))
        own_ms = (time.perf_counter() - started) * 1000
        self.history = list(context.messages)
        changed = _shape(self.history) != before
        return Prepared(_to_openai(request.messages), compactions=int(changed), own_ms=own_ms)

    def observe(self, input_tokens: int, output_tokens: int) -> None:
        self.usage = (input_tokens, output_tokens)


def _model() -> Any:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    def never(messages: Any, info: Any) -> Any:  # the tiers used here never call the model
        return ModelResponse(parts=[TextPart("")])

    return FunctionModel(never, model_name="bench-replay")


def _shape(history: Sequence[Any]) -> tuple[int, int]:
    """Messages and cleared results of a history: what changes when the harness edits it."""
    from pydantic_ai.messages import ToolReturnPart

    cleared = sum(
        isinstance(p, ToolReturnPart) and p.content == "[tool result cleared]"
        for m in history
        for p in getattr(m, "parts", ())
    )
    return len(history), cleared


def _to_pydantic_ai(
    messages: Sequence[Message], everything: Sequence[Message], usage: tuple[int, int] | None
) -> list[Any]:
    """OpenAI dicts to pydantic-ai messages: a run of system/user/tool dicts is one request.

    ``usage`` is what the provider reported for the first reply among ``messages``.
    """
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    names = {c["id"]: c["function"]["name"] for m in everything for c in m.get("tool_calls") or ()}
    out: list[Any] = []
    parts: list[Any] = []
    for message in messages:
        role, content = message["role"], message.get("content")
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            response: list[Any] = [TextPart(content)] if content else []
            response += [
                ToolCallPart(
                    tool_name=c["function"]["name"],
                    args=c["function"]["arguments"],
                    tool_call_id=c["id"],
                )
                for c in message.get("tool_calls") or ()
            ]
            reported = RequestUsage()
            if usage is not None:
                reported = RequestUsage(input_tokens=usage[0], output_tokens=usage[1])
                usage = None
            out.append(ModelResponse(parts=response, usage=reported))
        elif role in ("system", "developer"):
            parts.append(SystemPromptPart(content or ""))
        elif role == "user":
            parts.append(
                UserPromptPart(content if isinstance(content, str) else json.dumps(content))
            )
        else:
            parts.append(
                ToolReturnPart(
                    tool_name=names.get(message["tool_call_id"], "tool"),
                    content=content or "",
                    tool_call_id=message["tool_call_id"],
                )
            )
    if parts:
        out.append(ModelRequest(parts=parts))
    return out


def _to_openai(history: Sequence[Any]) -> list[Message]:
    """pydantic-ai messages back to the OpenAI dicts a provider would receive."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    out: list[Message] = []
    for message in history:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {
                        "name": p.tool_name,
                        "arguments": p.args
                        if isinstance(p.args, str)
                        else json.dumps(p.args or {}),
                    },
                }
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            reply: Message = {"role": "assistant", "content": text or None}
            if calls:
                reply["tool_calls"] = calls
            out.append(reply)
        else:
            out += [_request_part(p) for p in message.parts]
    return [m for m in out if m]


def _request_part(part: Any) -> Message:
    from pydantic_ai.messages import SystemPromptPart, ToolReturnPart, UserPromptPart

    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        content = part.content if isinstance(part.content, str) else "".join(map(str, part.content))
        return {"role": "user", "content": content}
    if isinstance(part, ToolReturnPart):
        return {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "content": part.model_response_str(),
        }
    return {}
