"""Compactor: measures each call's context, compacts it in tiers, and drives wrapped calls.

Every operation that may need an LLM (the summary tier) or the wrapped model is written once,
as a generator of steps; ``_run`` and ``_arun`` drive it, the one calling and the other awaiting.
So ``compact()`` and ``acompact()``, and the sync and async wrappers, share one implementation.
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from compactor.adapters.calls import (
    AsyncUsageStream,
    Usage,
    UsageStream,
    finish_reason_of,
    is_context_error,
    usage_of,
)
from compactor.config import CompactorConfig
from compactor.errors import ContextExhaustedError, StoreError
from compactor.events import (
    CompactionEvent,
    Event,
    FailedEvent,
    Level,
    ModelCallEvent,
    RunStartedEvent,
    Tier,
    ToolResultEvent,
    Trigger,
)
from compactor.messages import Message, group_boundary, iter_tool_results, text_of, validate
from compactor.prompts import render
from compactor.state import SessionState
from compactor.stores import (
    DiskToolResultStore,
    JsonlSessionStore,
    SessionKey,
    SessionStore,
    ToolResultStore,
    check_id,
)
from compactor.strategies import (
    Slot,
    archive,
    band,
    build_view,
    higher,
    kept,
    rank,
    start_tier,
)
from compactor.tokens import Measure, TokenMeter, model_window
from compactor.tool import (
    TOOL_NAME,
    ReadArgs,
    answer_error,
    answer_page,
    minimum_limit,
    parse_arguments,
    schema,
)

T = TypeVar("T")
Tools = list[dict[str, Any]] | None


@dataclass(frozen=True)
class CompactResult:
    """What ``compact()`` decided for one call."""

    messages: list[Message]
    """The messages to send: a new list; the caller's list is never modified."""
    tier: Tier
    """The highest tier that changed the context in this call (``"none"`` if nothing did)."""
    input_tokens: int
    """Estimated input tokens of ``messages``."""
    input_tokens_before: int
    """Estimated input tokens before this call's compaction."""
    window: int
    """Input tokens available: the model's input limit less the output tokens reserved."""
    event: Event | None
    """The last compaction event of this call, or None."""
    events: tuple[Event, ...] = ()
    """Every compaction event of this call, in order."""


@dataclass(frozen=True)
class _Sent:
    """What the last compaction of a session produced, to anchor on the call's usage."""

    estimate: int
    local: int
    digest: str
    count: int
    window: int


@dataclass(frozen=True)
class _Seen:
    """The caller's history at the last compaction, so that only new messages are checked."""

    messages: list[Message]
    values: list[tuple[object, ...]]
    results: list[tuple[int, str]]


@dataclass
class _Live:
    """A session as this process holds it: the folded state and caches of rendered text."""

    key: SessionKey
    state: SessionState
    sent: _Sent | None = None
    seen: _Seen | None = None
    texts: dict[tuple[str, Level], str] = field(default_factory=dict)
    replacements: dict[tuple[str, Level], tuple[Message, Message]] = field(default_factory=dict)


@dataclass
class _Call:
    """One compaction in progress."""

    messages: Sequence[Message]
    tools: Tools
    window: int
    trigger: Trigger
    results: list[tuple[int, str]]
    """(index, handle) of every tool result that may be archived, oldest first."""
    scale: float = 1.0
    """Raises estimates after a context error proved them low."""


@dataclass(frozen=True)
class _ModelCall:
    """A step: call the wrapped function with these keyword arguments."""

    fn: Callable[..., Any]
    kwargs: dict[str, Any]


_Steps = Generator[_ModelCall, Any, T]


class Compactor:
    """Keeps an agent's context inside the model's window without losing anything.

    Args:
        model: a litellm model name (``"gpt-4o"``, ``"deepseek/deepseek-chat"``, ...); it picks
            the tokenizer and, unless the config sets one, the context window.
        config: the compaction settings.
        tool_results: where full tool outputs are kept (default: diskcache under ``home``).
        sessions: where session events are logged (default: JSONL files under ``home``).
        home: folder of the default stores; default ``$COMPACTOR_HOME`` or ``.compactor``.
        tenant: the tenant every store call acts for.
        user: the user every store call acts for.

    Raises:
        ConfigError: the model's window is unknown and the config sets none.
    """

    def __init__(
        self,
        model: str,
        *,
        config: CompactorConfig | None = None,
        tool_results: ToolResultStore | None = None,
        sessions: SessionStore | None = None,
        home: str | Path | None = None,
        tenant: str = "default",
        user: str | None = None,
    ) -> None:
        self.model = model
        self.config = config or CompactorConfig()
        self.window = model_window(model, self.config.context_window)
        self.home = Path(home or os.environ.get("COMPACTOR_HOME") or ".compactor")
        self.tenant = check_id(tenant, "tenant")
        self.user = None if user is None else check_id(user, "user")
        self.tool_results = tool_results or DiskToolResultStore(self.home / "tool_results")
        self.sessions = sessions or JsonlSessionStore(self.home / "sessions")
        self.meter = TokenMeter(model)
        self._live: dict[str, _Live] = {}

    # -- the public surface ---------------------------------------------------------------

    def compact(
        self,
        messages: Sequence[Message],
        *,
        session_id: str,
        tools: Tools = None,
        max_tokens: int | None = None,
        run_id: str | None = None,
    ) -> CompactResult:
        """Compact a history for the next call of a session.

        Args:
            messages: the agent's full history, OpenAI chat format; never modified.
            session_id: the session; its archived results and counters carry over.
            tools: the tool schemas the call sends (they count against the window).
            max_tokens: output tokens the call reserves; they are taken from the window.
            run_id: starts a new run (fresh summary budget) when it changes.

        Raises:
            InvalidMessagesError: the history is malformed; nothing was stored.
            ContextExhaustedError: the history cannot be brought under the window.
        """
        steps = self._compact_steps(messages, session_id, tools, max_tokens, run_id)
        return self._run(steps)

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        session_id: str,
        tools: Tools = None,
        max_tokens: int | None = None,
        run_id: str | None = None,
    ) -> CompactResult:
        """``compact()`` for async agents: the same steps, awaited."""
        steps = self._compact_steps(messages, session_id, tools, max_tokens, run_id)
        return await self._arun(steps)

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """Wrap a completion function so that every call is compacted and measured.

        The wrapper takes ``fn``'s arguments plus ``session_id=`` (and optionally ``run_id=``),
        compacts ``messages``, calls ``fn``, records the response's usage and returns the
        response unchanged. An async ``fn`` gives an async wrapper. With ``stream=True`` the
        chunks pass through untouched and the final chunk's usage is recorded. A context-length
        error triggers one compaction at the next tier and one retry.
        """
        signature = _signature(fn)
        if _is_async(fn):

            @functools.wraps(fn)
            async def async_wrapper(
                *args: Any, session_id: str, run_id: str | None = None, **kwargs: Any
            ) -> Any:
                kwargs = self._call_kwargs(signature, args, kwargs)
                live, sent, started, response = await self._arun(
                    self._call_steps(fn, kwargs, session_id, run_id)
                )
                return self._observe(live, sent, started, response, kwargs, AsyncUsageStream)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, session_id: str, run_id: str | None = None, **kwargs: Any) -> Any:
            kwargs = self._call_kwargs(signature, args, kwargs)
            live, sent, started, response = self._run(
                self._call_steps(fn, kwargs, session_id, run_id)
            )
            return self._observe(live, sent, started, response, kwargs, UsageStream)

        return wrapper

    def record_usage(self, session_id: str, response: object) -> ModelCallEvent:
        """Record a response's usage, for agents that call the model themselves.

        The usage anchors the next estimate of the session: call this with the response of
        the call made with the messages of the session's last ``compact()``.
        """
        live = self._session(session_id)
        return self._record(live, live.sent, None, usage_of(response), finish_reason_of(response))

    @property
    def tool_schema(self) -> dict[str, Any]:
        """The OpenAI tool definition of READ_TOOL_RESULT, to add to the agent's tools."""
        return schema(self.config.read_limit_chars)

    def read_tool_result(
        self, session_id: str, tool_call_id: str, offset: int = 0, limit: int | None = None
    ) -> str:
        """The READ_TOOL_RESULT answer for a page of an archived result.

        Mistakes (an unknown id, an offset past the end) are answered as text saying what is
        valid, as the model would see them.

        Raises:
            StoreError: the result is known but its store failed or lost it.
        """
        args = parse_arguments({"tool_call_id": tool_call_id, "offset": offset, "limit": limit})
        return self._answer(self._session(session_id), args)

    def handle_tool_call(self, session_id: str, tool_call: object) -> dict[str, Any]:
        """Answer a READ_TOOL_RESULT call of the model: the tool message to append.

        Args:
            session_id: the session the agent runs in (never taken from the model).
            tool_call: the call, as a dict or an SDK object with ``id`` and ``function``.

        Raises:
            ValueError: the call is not a READ_TOOL_RESULT call.
        """
        function = _field(tool_call, "function")
        name = _field(function, "name")
        if name != TOOL_NAME:
            raise ValueError(f"not a {TOOL_NAME} call: {name!r}")
        args = parse_arguments(_field(function, "arguments") or "{}")
        content = self._answer(self._session(session_id), args)
        return {"role": "tool", "tool_call_id": _field(tool_call, "id"), "content": content}

    def events(self, session_id: str) -> list[Event]:
        """The session's events, oldest first."""
        return list(self.sessions.read(self._key(session_id)))

    # -- compaction --------------------------------------------------------------------------

    def _compact_steps(
        self,
        messages: Sequence[Message],
        session_id: str,
        tools: Tools,
        max_tokens: int | None,
        run_id: str | None,
        trigger: Trigger = "pre_call",
        floor: Tier = "none",
        scale: float = 1.0,
    ) -> _Steps[CompactResult]:
        live = self._session(session_id)
        results = self._check(live, messages)
        self._begin_run(live, messages, run_id)
        call = _Call(
            messages,
            list(tools) if tools else None,
            self._window_for(max_tokens),
            trigger,
            results,
            scale,
        )
        view = self._view(live, call, live.state.archive)
        measure = self._measure(live, call, view)
        before = tokens = measure.tokens
        if live.state.raise_tier and trigger == "pre_call":
            # The last call stopped at its length limit while the context was full.
            floor = max(floor, higher(band(before / call.window, self.config)), key=rank)
        tier = start_tier(before / call.window, floor, self.config)
        events: list[Event] = []
        while tier != "none":
            event = yield from self._apply(live, call, tier, tokens)
            if event is not None:
                events.append(event)
                view = self._view(live, call, live.state.archive)
                measure = self._measure(live, call, view)
                tokens = measure.tokens
            if rank(tier) >= rank(floor) and tokens < self.config.summary_at * call.window:
                break
            tier = self._next_tier(live, call, tier, tokens)
        self._remember(live, call, view, measure)
        applied: Tier = max((_tier_of(e) for e in events), key=rank, default="none")
        last = events[-1] if events else None
        return CompactResult(view, applied, tokens, before, call.window, last, tuple(events))

    def _apply(self, live: _Live, call: _Call, tier: Tier, tokens: int) -> _Steps[Event | None]:
        if tier in ("offload", "placeholder"):
            return self._archive_step(live, call, tier, tokens)
        return None
        yield  # a generator, so that the summary tier can ask for an LLM call

    def _next_tier(self, live: _Live, call: _Call, tier: Tier, tokens: int) -> Tier:
        """The tier to try next while usage stays at or above the summary line."""
        if rank(tier) < rank("placeholder"):
            return higher(tier)
        if tokens <= call.window:
            return "none"  # it fits: sent as it is, nothing over the window
        self._fail(
            live,
            call,
            tokens,
            "tool results are archived and the request still does not fit the window",
        )
        return "none"

    def _archive_step(self, live: _Live, call: _Call, tier: Tier, tokens: int) -> Event | None:
        started = time.perf_counter()
        level: Level = "pointer" if tier == "offload" else "placeholder"
        keep = self.config.keep_offload if tier == "offload" else self.config.keep_placeholder
        slots = self._slots(live, call, level)
        changes = archive(slots, keep=keep, level=level)
        if not changes:
            return None
        before = self._view(live, call, live.state.archive)
        after = self._view(live, call, {**live.state.archive, **changes})
        event = CompactionEvent(
            tier="offload" if tier == "offload" else "placeholder",
            trigger=call.trigger,
            tokens_before=tokens,
            tokens_after=self._estimate(live, call, after),
            window=call.window,
            messages_before=len(before),
            messages_after=len(after),
            archived=list(changes),
            kept=kept(slots, changes),
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        return self._append(live, event)

    def _fail(self, live: _Live, call: _Call, tokens: int, reason: str) -> None:
        attempts = live.state.attempts + live.state.replans
        self._append(
            live, FailedEvent(reason=reason, tokens=tokens, window=call.window, attempts=attempts)
        )
        raise ContextExhaustedError(
            f"session {live.key.session_id!r}: {reason} ({tokens:,} tokens for a window of "
            f"{call.window:,})",
            session_id=live.key.session_id,
            run_id=live.state.run_id,
            tokens=tokens,
            window=call.window,
            attempts=attempts,
        )

    # -- the view of a history --------------------------------------------------------------

    def _view(self, live: _Live, call: _Call, levels: dict[str, Level]) -> list[Message]:
        def replace(index: int, handle: str, level: Level) -> Message:
            return self._replacement(live, handle, level, call.messages[index])

        return build_view(call.messages, call.results, levels, replace)

    def _slots(self, live: _Live, call: _Call, level: Level) -> list[Slot]:
        """The call's archivable tool results, with whether archiving each at ``level`` pays."""
        slots = []
        for index, handle in call.results:
            current = live.state.archive.get(handle)
            message = call.messages[index]
            worth = current != level and self._worth(live, handle, level, message)
            slots.append(Slot(index, handle, current, frozenset((level,) if worth else ())))
        return slots

    def _worth(self, live: _Live, handle: str, level: Level, message: Message) -> bool:
        """Whether archiving a result saves clearly more than its replacement costs."""
        chars = live.state.results[handle].chars
        if chars < self.config.min_offload_chars:
            return False
        return chars > 2 * len(self._archive_text(live, handle, level, message))

    def _replacement(self, live: _Live, handle: str, level: Level, message: Message) -> Message:
        cached = live.replacements.get((handle, level))
        if cached is not None and cached[0] is message:
            return cached[1]
        text = self._archive_text(live, handle, level, message)
        content = message["content"]
        others = (
            [p for p in content if p.get("type") != "text"] if isinstance(content, list) else []
        )
        new_content: Any = [{"type": "text", "text": text}, *others] if others else text
        replacement = {**message, "content": new_content}
        live.replacements[(handle, level)] = (message, replacement)
        return replacement

    def _archive_text(self, live: _Live, handle: str, level: Level, message: Message) -> str:
        """The pointer or placeholder of a result; rendered once, so the prefix stays stable."""
        if (handle, level) not in live.texts:
            chars = live.state.results[handle].chars
            folder = self.config.templates
            if level == "placeholder":
                text = render("placeholder.j2", folder, handle=handle, chars=chars)
            else:
                head, tail = _preview(text_of(message["content"]), self.config.preview_chars)
                text = render(
                    "pointer.j2",
                    folder,
                    handle=handle,
                    chars=chars,
                    head=head,
                    tail=tail,
                    limit=self.config.read_limit_chars,
                )
            live.texts[(handle, level)] = text
        return live.texts[(handle, level)]

    def _estimate(self, live: _Live, call: _Call, view: Sequence[Message]) -> int:
        return self._measure(live, call, view).tokens

    def _measure(self, live: _Live, call: _Call, view: Sequence[Message]) -> Measure:
        measure = self.meter.measure(view, call.tools, live.state.anchor)
        if call.scale == 1.0:
            return measure
        return Measure(round(measure.tokens * call.scale), measure.local, measure.digest)

    def _window_for(self, max_tokens: int | None) -> int:
        window = self.window - (max_tokens or 0)
        if window <= 0:
            raise ValueError(f"max_tokens={max_tokens} leaves no room in a {self.window} window")
        return window

    def _remember(
        self, live: _Live, call: _Call, view: Sequence[Message], measure: Measure
    ) -> None:
        live.sent = _Sent(measure.tokens, measure.local, measure.digest, len(view), call.window)

    # -- the session --------------------------------------------------------------------------

    def _key(self, session_id: str) -> SessionKey:
        return SessionKey(session_id, self.tenant, self.user)

    def _session(self, session_id: str) -> _Live:
        live = self._live.get(session_id)
        if live is None:
            key = self._key(session_id)
            state = SessionState()
            for event in self.sessions.read(key):
                state.apply(event)
            live = self._live[session_id] = _Live(key, state)
        return live

    def _append(self, live: _Live, event: Event) -> Event:
        """Log an event, then fold it into the state: the log is written first, so a crash
        between the two leaves the state to be rebuilt from the log, never ahead of it."""
        if event.run_id is None and live.state.run_id is not None:
            event = event.model_copy(update={"run_id": live.state.run_id})
        self.sessions.append(live.key, event)
        live.state.apply(event)
        return event

    def _begin_run(self, live: _Live, messages: Sequence[Message], run_id: str | None) -> None:
        run = run_id or _turn_of(messages)
        if run != live.state.run_id:
            self._append(live, RunStartedEvent(run_id=run))

    def _check(self, live: _Live, messages: Sequence[Message]) -> list[tuple[int, str]]:
        """Validate the history and store its new tool results; (index, handle) of each.

        An agent sends the same history again with a few messages added, so the part that is
        unchanged since the last call (same dicts, same values) is neither validated nor
        scanned again: per-call work stays proportional to what is new.
        """
        start = _unchanged(live.seen, messages) if live.seen is not None else 0
        start = group_boundary(messages, start)
        validate(messages, start)
        known = [r for r in live.seen.results if r[0] < start] if live.seen is not None else []
        results = known + self._register(live, messages, start)
        values = [tuple(message.values()) for message in messages]
        live.seen = _Seen(list(messages), values, results)
        return results

    def _register(
        self, live: _Live, messages: Sequence[Message], start: int
    ) -> list[tuple[int, str]]:
        """Store every tool result not seen before; the (index, handle) of each result."""
        found = []
        for index, call_id, name in iter_tool_results(messages, start):
            if name == TOOL_NAME:
                continue  # its answers are bounded by their limit and never archived again
            message = messages[index]
            digest = self.meter.message_digest(message)
            handle = live.state.handles.get(digest)
            if handle is None:
                handle = self._store(live, message, call_id, name, digest)
            found.append((index, handle))
        return found

    def _store(self, live: _Live, message: Message, call_id: str, name: str, digest: str) -> str:
        text = text_of(message["content"])
        handle = live.state.new_handle(call_id)
        self.tool_results.put(live.key, handle, text)
        event = ToolResultEvent(
            handle=handle,
            tool_call_id=call_id,
            tool_name=name,
            digest=digest,
            chars=len(text),
            tokens=self.meter.message_tokens(message),
        )
        self._append(live, event)
        return handle

    # -- READ_TOOL_RESULT -------------------------------------------------------------------

    def _answer(self, live: _Live, args: ReadArgs | str) -> str:
        folder = self.config.templates
        if isinstance(args, str):
            return answer_error(args, self._newest_handles(live), folder)
        info = live.state.results.get(args.tool_call_id)
        if info is None:
            problem = f"no tool result with tool_call_id {args.tool_call_id!r} in this session"
            return answer_error(problem, self._newest_handles(live), folder)
        if args.offset > info.chars:
            problem = (
                f"offset {args.offset} is past the end of {info.handle!r}, which has "
                f"{info.chars} chars; use an offset from 0 to {info.chars}"
            )
            return answer_error(problem, [], folder)
        limit = min(args.limit or self.config.read_limit_chars, self.config.read_limit_chars)
        smallest = minimum_limit(info.handle, info.chars, folder)
        if limit < smallest:
            return answer_error(f"limit {limit} is too small; use at least {smallest}", [], folder)

        def read(offset: int, count: int) -> str:
            text = self.tool_results.read(live.key, info.handle, offset, count)
            if text is None:
                raise StoreError(
                    f"tool result {info.handle!r} of session "
                    f"{live.key.session_id!r} is missing from its store"
                )
            return text

        return answer_page(info.handle, info.chars, args.offset, limit, read, folder)

    def _newest_handles(self, live: _Live) -> list[str]:
        return list(reversed(live.state.results))[:20]

    # -- wrapped calls ----------------------------------------------------------------------

    def _call_kwargs(
        self, signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The call's arguments by name, with READ_TOOL_RESULT and stream usage asked for."""
        if args:
            if signature is None:
                raise TypeError("pass the wrapped call's arguments by keyword")
            kwargs = dict(signature.bind_partial(*args, **kwargs).arguments)
        if "messages" not in kwargs:
            raise TypeError("a wrapped call needs messages=")
        tools = kwargs.get("tools")
        if tools and self.config.add_read_tool and not _has_tool(tools, TOOL_NAME):
            kwargs["tools"] = [*tools, self.tool_schema]
        if kwargs.get("stream") and kwargs.get("stream_options") is None:
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    def _call_steps(
        self, fn: Callable[..., Any], kwargs: dict[str, Any], session_id: str, run_id: str | None
    ) -> _Steps[tuple[_Live, _Sent | None, float, Any]]:
        max_tokens = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
        compact = functools.partial(
            self._compact_steps,
            kwargs["messages"],
            session_id,
            kwargs.get("tools"),
            max_tokens,
            run_id,
        )
        result = yield from compact()
        started = time.perf_counter()
        try:
            response = yield _ModelCall(fn, {**kwargs, "messages": result.messages})
        except Exception as exc:
            if not is_context_error(exc):
                raise
            # The provider counted more than the window, so our estimate was low: scale it up.
            scale = max(1.0, (result.window + 1) / max(result.input_tokens, 1))
            result = yield from compact("context_error", higher(result.tier), scale)
            started = time.perf_counter()
            response = yield _ModelCall(fn, {**kwargs, "messages": result.messages})
        live = self._session(session_id)
        return live, live.sent, started, response

    def _observe(
        self,
        live: _Live,
        sent: _Sent | None,
        started: float,
        response: Any,
        kwargs: dict[str, Any],
        stream_type: type[UsageStream] | type[AsyncUsageStream],
    ) -> Any:
        if not kwargs.get("stream"):
            self._record(live, sent, started, usage_of(response), finish_reason_of(response))
            return response

        def on_end(usage: Usage | None, finish: str | None) -> None:
            self._record(live, sent, started, usage, finish)

        return stream_type(response, on_end)

    def _record(
        self,
        live: _Live,
        sent: _Sent | None,
        started: float | None,
        usage: Usage | None,
        finish: str | None,
    ) -> ModelCallEvent:
        reported = usage.input_tokens if usage else None
        window = sent.window if sent else self.window
        used = reported or (sent.estimate if sent else 0)
        event = ModelCallEvent(
            model=self.model,
            estimated_input_tokens=sent.estimate if sent else None,
            local_input_tokens=sent.local if sent else None,
            reported_input_tokens=reported,
            output_tokens=usage.output_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            finish_reason=finish,
            latency_ms=(time.perf_counter() - started) * 1000 if started is not None else None,
            sent_digest=sent.digest if sent else None,
            sent_count=sent.count if sent else None,
            raise_tier=finish == "length" and used >= self.config.offload_at * window,
        )
        self._append(live, event)
        return event

    # -- drivers ------------------------------------------------------------------------------

    def _run(self, steps: _Steps[T]) -> T:
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(reply)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                reply, error = step.fn(**step.kwargs), None
            except Exception as exc:
                reply, error = None, exc

    async def _arun(self, steps: _Steps[T]) -> T:
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(reply)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                reply, error = await step.fn(**step.kwargs), None
            except Exception as exc:
                reply, error = None, exc


def _unchanged(seen: _Seen, messages: Sequence[Message]) -> int:
    """How many leading messages are the very dicts, with the very values, seen last time."""
    count = 0
    for old, values, new in zip(seen.messages, seen.values, messages, strict=False):
        if old is not new or tuple(new.values()) != values:
            break
        count += 1
    return count


def _tier_of(event: Event) -> Tier:
    tier: Tier = getattr(event, "tier", None) or "replan"
    return tier


def _turn_of(messages: Sequence[Message]) -> str:
    """The automatic run id: a new user message starts a new run."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "user":
            return f"turn-{index}"
    return "turn-0"


def _preview(text: str, size: int) -> tuple[str, str]:
    """Head and tail of a text: errors and summaries tend to sit at the end of tool output."""
    if len(text) <= size:
        return text, ""
    head = size * 2 // 3
    return text[:head], text[len(text) - (size - head) :]


def _field(obj: object, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _has_tool(tools: Sequence[Any], name: str) -> bool:
    return any(_field(_field(tool, "function"), "name") == name for tool in tools)


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _is_async(fn: Callable[..., Any]) -> bool:
    # SDK methods are often sync wrappers (functools.wraps) around an ``async def``.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn))
