"""What compactor reads from model calls: usage, finish reasons, context errors, streams.

Responses are read by shape (attribute or key), so litellm's ``ModelResponse``, the OpenAI
SDK's ``ChatCompletion`` and plain dicts all work. Exception types are looked up in
``sys.modules`` rather than imported: an error from litellm means litellm is already loaded,
and ``import compactor`` must never pay for importing it.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """The token usage a provider reported for one call."""

    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None


def field(obj: object, name: str) -> Any:
    """``obj.name`` or ``obj[name]``, whichever the response has; None if neither."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def usage_of(response: object) -> Usage | None:
    """The usage of a response or of a stream's final chunk; None if it carries none."""
    usage = field(response, "usage")
    if usage is None:
        return None
    details = field(usage, "prompt_tokens_details")
    cached = field(details, "cached_tokens") if details is not None else None
    return Usage(
        _int(field(usage, "prompt_tokens")),
        _int(field(usage, "completion_tokens")),
        _int(cached),
    )


def finish_reason_of(response: object) -> str | None:
    """The finish reason of the first choice, if any."""
    choices = field(response, "choices") or ()
    for choice in choices:
        reason = field(choice, "finish_reason")
        if reason:
            return str(reason)
    return None


def is_context_error(exc: BaseException) -> bool:
    """Whether a call failed because its input did not fit the model's context window."""
    litellm = sys.modules.get("litellm")
    if litellm is not None and isinstance(exc, litellm.ContextWindowExceededError):
        return True
    openai = sys.modules.get("openai")
    if openai is not None and isinstance(exc, openai.BadRequestError):
        return getattr(exc, "code", None) == "context_length_exceeded"
    return False


_COUNTED = re.compile(
    r"(?:resulted in|prompt is too long:?|requested) (\d[\d,]*) (?:input )?tokens"
)


def counted_tokens(exc: BaseException) -> int | None:
    """The input tokens a provider says a rejected request had, if its message says so."""
    match = _COUNTED.search(str(exc))
    return int(match[1].replace(",", "")) if match else None


MAX_GUESS = 1.5
"""After a context error with no count in its message, estimates are raised at most this much."""


def error_scale(exc: BaseException, window: int, estimate: int) -> float:
    """How much a context error says our estimate was low.

    The provider's own count, when its message gives one, is exact. Otherwise the request had
    at least ``window + 1`` tokens; a gap wider than ``MAX_GUESS`` points at something other
    than our count (a window set too large, say), which no amount of compaction would fix.
    """
    counted = counted_tokens(exc)
    if counted is not None:
        return max(1.0, counted / max(estimate, 1))
    return min(MAX_GUESS, max(1.0, (window + 1) / max(estimate, 1)))


def has_tool(tools: Sequence[Any], name: str) -> bool:
    """Whether a list of tool schemas has a function called ``name``."""
    return any(field(field(tool, "function"), "name") == name for tool in tools)


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    """``fn``'s signature, or None for callables that have none to show."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` gives a coroutine."""
    # SDK methods are often sync wrappers (functools.wraps) around an ``async def``.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn))


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


class _Watch:
    """Collects usage and finish reason from stream chunks and reports them once, at the end."""

    def __init__(self, on_end: Callable[[Usage | None, str | None], None]) -> None:
        self._on_end = on_end
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._ended = False

    def see(self, chunk: object) -> None:
        self._usage = usage_of(chunk) or self._usage
        self._finish = finish_reason_of(chunk) or self._finish

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_end(self._usage, self._finish)


class UsageStream:
    """A sync stream passed through chunk by chunk; usage is recorded when it ends."""

    def __init__(self, stream: Any, on_end: Callable[[Usage | None, str | None], None]) -> None:
        self._stream = stream
        self._chunks: Iterator[Any] = iter(stream)
        self._watch = _Watch(on_end)

    def __iter__(self) -> UsageStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self._watch.end()
            raise
        self._watch.see(chunk)
        return chunk

    def __enter__(self) -> UsageStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying stream (if it can be) and record what was seen."""
        self._watch.end()
        close = getattr(self._stream, "close", None)
        if callable(close):
            close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class AsyncUsageStream:
    """An async stream passed through chunk by chunk; usage is recorded when it ends."""

    def __init__(self, stream: Any, on_end: Callable[[Usage | None, str | None], None]) -> None:
        self._stream = stream
        self._chunks: AsyncIterator[Any] = stream.__aiter__()
        self._watch = _Watch(on_end)

    def __aiter__(self) -> AsyncUsageStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._watch.end()
            raise
        self._watch.see(chunk)
        return chunk

    async def __aenter__(self) -> AsyncUsageStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the underlying stream (if it can be) and record what was seen."""
        self._watch.end()
        for name in ("aclose", "close"):
            close = getattr(self._stream, name, None)
            if callable(close):
                result = close()
                if hasattr(result, "__await__"):
                    await result
                return

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
