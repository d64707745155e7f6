"""Context policies replayed side by side: none, compactor, and observation masking.

A policy starts one ``Replay`` per trajectory; the replay is asked, call after call, what it
would send for the history so far, and is told the usage the provider would report. The peers
that come from other packages (LangChain, pydantic-ai-harness) live in ``peers.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from compactor.compactor import Compactor
from compactor.config import CompactorConfig
from compactor.errors import ContextExhaustedError
from compactor.events import CompactionEvent, ReplanEvent, SummaryFailedEvent
from compactor.messages import Message
from compactor.stores import MemorySessionStore, MemoryToolResultStore
from compactor.testing import ScriptedSummarizer

SUMMARY_WORDS = 300
"""Every policy that summarises writes summaries of this length (the scripted summariser)."""


@dataclass
class Prepared:
    """What a policy sends for one call."""

    messages: list[Message] | None
    """None: the policy gave up (the session failed)."""
    retrievable_chars: int = 0
    """Characters of tool output left out of the context that can still be read back in
    full (checked against the policy's store, not assumed)."""
    compactions: int = 0
    """Compaction events the policy reported for this call."""
    summarizer_input: int = 0
    summarizer_output: int = 0
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Tools the policy adds to the agent's own (READ_TOOL_RESULT for compactor)."""
    own_ms: float | None = None
    """Time spent in the policy itself, where its replay also converts messages for it."""


class Replay(Protocol):
    """One policy on one trajectory."""

    def prepare(self, prefix: list[Message]) -> Prepared:
        """What the policy sends for this call, given the agent's full history so far."""
        ...

    def observe(self, input_tokens: int, output_tokens: int) -> None:
        """The usage the provider reported for the call just prepared."""
        ...


class Policy(Protocol):
    """A way of managing context, started afresh for every trajectory."""

    @property
    def name(self) -> str:
        """The policy's name in the results."""
        ...

    def describe(self, window: int) -> str:
        """The policy's configuration, for the results."""
        ...

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        """A replay for one trajectory."""
        ...


class _Unchanged:
    def prepare(self, prefix: list[Message]) -> Prepared:
        return Prepared(list(prefix))

    def observe(self, input_tokens: int, output_tokens: int) -> None:
        return None


class NoCompaction:
    """Send the whole history every time."""

    name = "none"

    def describe(self, window: int) -> str:
        return "the full history on every call"

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        return _Unchanged()


class ObservationMasking:
    """Keep the last ``keep`` tool outputs; older ones become a one-line placeholder.

    The simple baseline of "The Complexity Trap" (Lindenbauer et al., 2025), applied on every
    call whatever the usage: nothing is retrievable afterwards.
    """

    name = "masking"

    def __init__(self, keep: int = 10) -> None:
        self.keep = keep

    def describe(self, window: int) -> str:
        return (
            f"observation masking: the last {self.keep} tool outputs kept, older ones "
            "replaced by '[Old tool output omitted: N lines]' on every call"
        )

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        return _Masking(self.keep)


@dataclass
class _Masking:
    keep: int

    def prepare(self, prefix: list[Message]) -> Prepared:
        results = [i for i, m in enumerate(prefix) if m["role"] == "tool"]
        old = set(results[: max(len(results) - self.keep, 0)])
        sent = [_masked(m) if i in old else m for i, m in enumerate(prefix)]
        return Prepared(sent, compactions=int(bool(old)))

    def observe(self, input_tokens: int, output_tokens: int) -> None:
        return None


def _masked(message: Message) -> Message:
    lines = str(message.get("content") or "").count("\n") + 1
    return {**message, "content": f"[Old tool output omitted: {lines} lines]"}


class CompactorPolicy:
    """compactor with its defaults; summaries by the scripted summariser."""

    name = "compactor"

    def __init__(self, config: CompactorConfig | None = None) -> None:
        self.config = config or CompactorConfig()

    def describe(self, window: int) -> str:
        c = self.config
        return (
            f"compactor defaults: offload at {c.offload_at:.0%} (keep {c.keep_offload}), "
            f"placeholder at {c.placeholder_at:.0%} (keep {c.keep_placeholder}), summary at "
            f"{c.summary_at:.0%} ({SUMMARY_WORDS}-word scripted summaries), window {window:,}"
        )

    def start(self, tools: Sequence[dict[str, Any]], window: int, model: str) -> Replay:
        config = self.config.model_copy(update={"context_window": window})
        compactor = Compactor(
            model,
            config=config,
            tool_results=MemoryToolResultStore(),
            sessions=MemorySessionStore(),
            summarizer=ScriptedSummarizer(words=SUMMARY_WORDS),
        )
        return _CompactorReplay(compactor, list(tools))


class _CompactorReplay:
    """compactor as its wrapper drives it: READ_TOOL_RESULT is offered once something is
    archived."""

    def __init__(self, compactor: Compactor, tools: list[dict[str, Any]]) -> None:
        self.compactor = compactor
        self.tools = tools

    def prepare(self, prefix: list[Message]) -> Prepared:
        session = self.compactor._session("bench")
        try:
            tools = self.compactor._offered(session, self.tools)
            result = self.compactor.compact(prefix, session_id="bench", tools=tools)
        except ContextExhaustedError:
            return Prepared(None)
        usage = [
            e.summary_usage
            for e in result.events
            if isinstance(e, CompactionEvent | ReplanEvent | SummaryFailedEvent)
        ]
        offered = self.compactor._offered(session, self.tools) or []
        return Prepared(
            result.messages,
            retrievable_chars=self._retrievable(prefix, result.messages),
            compactions=sum(isinstance(e, CompactionEvent | ReplanEvent) for e in result.events),
            summarizer_input=sum(int(u.get("input_tokens", 0)) for u in usage),
            summarizer_output=sum(int(u.get("output_tokens", 0)) for u in usage),
            tools=[tool for tool in offered if tool not in self.tools],
        )

    def _retrievable(self, prefix: list[Message], sent: list[Message]) -> int:
        """Characters of the outputs left out of ``sent`` that the store holds in full."""
        present = {(m["tool_call_id"], str(m["content"])) for m in sent if m["role"] == "tool"}
        session = self.compactor._session("bench")
        found = 0
        for message in prefix:
            if message["role"] != "tool":
                continue
            if (message["tool_call_id"], str(message["content"])) in present:
                continue
            length = len(str(message["content"]))
            for handle in session.state.by_call.get(message["tool_call_id"], ()):
                if self.compactor.tool_results.size(session.key, handle) == length:
                    found += length
                    break
        return found

    def observe(self, input_tokens: int, output_tokens: int) -> None:
        usage = {"prompt_tokens": input_tokens, "completion_tokens": output_tokens}
        self.compactor.record_usage("bench", {"usage": usage})
