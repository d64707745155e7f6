"""Driving a generator of steps: the one place where sync and async differ.

Compaction and wrapped calls are written once, as generators that yield the calls they need
(the wrapped model, or a summary) and take the answers; ``run`` makes each call and
``arun`` awaits it, like httpx drives its auth flows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from compactor.errors import SummarizerError
from compactor.summarizer import Summarizer, SummaryReply, SummaryRequest

T = TypeVar("T")


@dataclass(frozen=True)
class ModelCall:
    """A step: call the wrapped function with these keyword arguments."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]


Step = ModelCall | SummaryRequest
Steps = Generator[Step, Any, T]


def run(steps: Steps[T], summarizer: Summarizer) -> T:
    """Drive ``steps`` to their result, calling what they ask for."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            if isinstance(step, SummaryRequest):
                reply, error = _summarize(summarizer, step), None
            else:
                reply, error = step.fn(**step.kwargs), None
        except Exception as exc:
            reply, error = None, exc


async def arun(steps: Steps[T], summarizer: Summarizer) -> T:
    """Drive ``steps`` to their result, awaiting what they ask for."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            if isinstance(step, SummaryRequest):
                reply, error = await _asummarize(summarizer, step), None
            else:
                reply, error = await step.fn(**step.kwargs), None
        except Exception as exc:
            reply, error = None, exc


def _summarize(summarizer: Summarizer, request: SummaryRequest) -> SummaryReply:
    try:
        return summarizer.summarize(request)
    except Exception as exc:
        raise SummarizerError(f"{type(exc).__name__}: {exc}") from exc


async def _asummarize(summarizer: Summarizer, request: SummaryRequest) -> SummaryReply:
    try:
        return await asyncio.wait_for(summarizer.asummarize(request), request.timeout)
    except Exception as exc:
        raise SummarizerError(f"{type(exc).__name__}: {exc}") from exc
