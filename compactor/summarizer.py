"""The Summarizer extension point: who writes summaries and replans.

The summary strategy never calls a model itself: it yields a ``SummaryRequest`` and takes a
``SummaryReply``. The ``Compactor`` hands each request to its summarizer, calling
``summarize`` from sync code and awaiting ``asummarize`` from async code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from compactor.messages import Message


@dataclass(frozen=True)
class SummaryRequest:
    """One call a summary or replan needs."""

    kind: Literal["summary", "replan"]
    model: str
    messages: list[Message]
    """The prompt, as chat messages (rendered from the templates)."""
    max_tokens: int
    timeout: float
    """Seconds the call may take; a slower call counts as a failed attempt."""


@dataclass(frozen=True)
class SummaryReply:
    """What a summary or replan call returned."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Writes summaries and replans; the default calls litellm (``LiteLLMSummarizer``)."""

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        """Answer a request from sync code."""
        ...

    async def asummarize(self, request: SummaryRequest) -> SummaryReply:
        """Answer a request from async code."""
        ...
