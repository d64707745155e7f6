"""Compactor: the public face: compact(), wrap(), READ_TOOL_RESULT and the session log.

Every operation that may need an LLM (the summary tier) or the wrapped model is written once,
as a generator of steps that ``driving.run`` calls and ``driving.arun`` awaits. So ``compact()``
and ``acompact()``, and the sync and async wrappers, share one implementation.
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from compactor.adapters.calls import (
    AsyncUsageStream,
    Usage,
    UsageStream,
    error_scale,
    field,
    finish_reason_of,
    has_tool,
    is_async,
    is_context_error,
    signature_of,
    usage_of,
)
from compactor.adapters.litellm import LiteLLMSummarizer
from compactor.checkpoints import changes, config_digest, reply_message, take, toolset_digest
from compactor.compaction import Compaction, CompactResult
from compactor.config import CompactorConfig
from compactor.driving import ModelCall, Steps, arun, run
from compactor.errors import RecoveryBlockedError, StoreError
from compactor.events import Event, ModelCallEvent, Tier, Trigger
from compactor.messages import Message
from compactor.reading import answer
from compactor.session import Sent, Session
from compactor.stores import (
    DiskToolResultStore,
    JsonlSessionStore,
    SessionKey,
    SessionStore,
    ToolResultStore,
    check_id,
)
from compactor.strategies import higher
from compactor.strategies.summary import Target
from compactor.summarizer import Summarizer
from compactor.tokens import (
    TokenMeter,
    encoding_name,
    model_window,
    payback_ratio,
    text_counter,
)
from compactor.tool import TOOL_NAME, parse_arguments, schema

T = TypeVar("T")
Tools = Sequence[dict[str, Any]] | None

# The summariser's tokenizer may differ from ours: leave it a tenth of its window to spare.
_SUMMARY_MARGIN = 0.9


def default_home() -> Path:
    """Where the embedded stores live unless told: ``$COMPACTOR_HOME``, else ``.compactor``."""
    return Path(os.environ.get("COMPACTOR_HOME") or ".compactor")


class Compactor:
    """Keeps an agent's context inside the model's window without losing anything.

    Args:
        model: a litellm model name (``"gpt-4o"``, ``"deepseek/deepseek-chat"``, ...); it picks
            the tokenizer and, unless the config sets one, the context window.
        config: the compaction settings.
        tool_results: where full tool outputs are kept (default: diskcache under ``home``).
        sessions: where session events are logged (default: JSONL files under ``home``).
        home: folder of the default stores; default ``$COMPACTOR_HOME`` or ``.compactor``.
        summarizer: writes summaries and replans (default: litellm with ``summary_model``).
        tenant: the tenant every store call acts for.
        user: the user every store call acts for.

    Raises:
        ConfigError: the window of the model (or of the summary model) is unknown.
    """

    def __init__(
        self,
        model: str,
        *,
        config: CompactorConfig | None = None,
        tool_results: ToolResultStore | None = None,
        sessions: SessionStore | None = None,
        home: str | Path | None = None,
        summarizer: Summarizer | None = None,
        tenant: str = "default",
        user: str | None = None,
    ) -> None:
        self.model = model
        self.config = config or CompactorConfig()
        self.window = model_window(model, self.config.context_window)
        self.home = Path(home) if home else default_home()
        self.tenant = check_id(tenant, "tenant")
        self.user = None if user is None else check_id(user, "user")
        self.tool_results = tool_results or DiskToolResultStore(self.home / "tool_results")
        self.sessions = sessions or JsonlSessionStore(self.home / "sessions")
        self.summarizer: Summarizer = summarizer or LiteLLMSummarizer()
        self.meter = TokenMeter(model)
        self._target = self._summary_target()
        self._payback = payback_ratio(model, self.config.cache_horizon)
        self._config_digest = config_digest(model, self.config)
        self._sessions: dict[str, Session] = {}

    @classmethod
    def from_url(
        cls,
        url: str,
        model: str,
        *,
        prefix: str = "compactor",
        tool_result_ttl: float | None = None,
        config: CompactorConfig | None = None,
        summarizer: Summarizer | None = None,
        tenant: str = "default",
        user: str | None = None,
    ) -> Compactor:
        """A Compactor whose tool results and session logs live in one Redis server.

        Needs the ``redis`` extra. Both stores share one client made from ``url`` (with short
        timeouts: during an outage calls raise StoreError within seconds).

        Args:
            url: ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://``, ``unix://``).
            model: as for ``Compactor``.
            prefix: the first part of every key (one per deployment or tenant, say).
            tool_result_ttl: seconds after which stored tool outputs expire (None: never).
            config, summarizer, tenant, user: as for ``Compactor``.

        Raises:
            ConfigError: the server may evict keys (``maxmemory-policy``), or the model's
                window is unknown.
            StoreError: the server does not answer.
        """
        from compactor.stores.redis import RedisSessionStore, RedisToolResultStore, connect

        client = connect(url)
        return cls(
            model,
            config=config,
            tool_results=RedisToolResultStore(client, prefix=prefix, ttl=tool_result_ttl),
            sessions=RedisSessionStore(client, prefix=prefix),
            summarizer=summarizer,
            tenant=tenant,
            user=user,
        )

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
            run_id: starts a new run (a fresh summary budget) when it changes; by default a
                new user message does.

        Raises:
            InvalidMessagesError: the history is malformed; nothing was stored.
            ContextExhaustedError: the history cannot be brought under the window.
        """
        steps = self._compact_steps(messages, session_id, tools, max_tokens, run_id)
        return run(steps, self.summarizer)

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
        return await arun(steps, self.summarizer)

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """Wrap a completion function so that every call is compacted and measured.

        Works for ``litellm.completion`` / ``litellm.acompletion``, an OpenAI SDK client's
        ``chat.completions.create`` (sync or async), and any callable taking ``messages=`` and
        returning an OpenAI-shaped response. The wrapper takes ``fn``'s arguments plus
        ``session_id=`` (and optionally ``run_id=``), compacts ``messages``, calls ``fn``,
        records the response's usage and returns the response unchanged. With ``stream=True``
        the chunks pass through untouched and the final chunk's usage is recorded. A
        context-length error triggers one compaction at the next tier and one retry.
        """
        signature = signature_of(fn)
        if is_async(fn):

            @functools.wraps(fn)
            async def async_wrapper(
                *args: Any, session_id: str, run_id: str | None = None, **kwargs: Any
            ) -> Any:
                kwargs = self._call_kwargs(signature, args, kwargs)
                steps = self._call_steps(fn, kwargs, session_id, run_id)
                session, sent, started, response = await arun(steps, self.summarizer)
                return self._observe(session, sent, started, response, kwargs, AsyncUsageStream)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, session_id: str, run_id: str | None = None, **kwargs: Any) -> Any:
            kwargs = self._call_kwargs(signature, args, kwargs)
            steps = self._call_steps(fn, kwargs, session_id, run_id)
            session, sent, started, response = run(steps, self.summarizer)
            return self._observe(session, sent, started, response, kwargs, UsageStream)

        return wrapper

    def record_usage(self, session_id: str, response: object) -> ModelCallEvent:
        """Record a response's usage, for agents that call the model themselves.

        The usage anchors the next estimate of the session: call this with the response of
        the call made with the messages of the session's last ``compact()``.
        """
        session = self._session(session_id)
        usage, finish = usage_of(response), finish_reason_of(response)
        return self._record(session, session.sent, None, usage, finish, reply_message(response))

    @property
    def tool_schema(self) -> dict[str, Any]:
        """The OpenAI tool definition of READ_TOOL_RESULT, to add to the agent's tools."""
        return schema(self.config.read_limit_chars)

    def read_tool_result(
        self, session_id: str, tool_call_id: str, offset: int = 0, limit: int | None = None
    ) -> str:
        """The READ_TOOL_RESULT answer for a page of a stored result.

        Mistakes (an unknown id, an offset past the end) are answered as text saying what is
        valid, as the model would see them.

        Raises:
            StoreError: the result is known but its store failed or lost it.
        """
        args = parse_arguments({"tool_call_id": tool_call_id, "offset": offset, "limit": limit})
        return answer(self._session(session_id), args, self.config)

    def handle_tool_call(self, session_id: str, tool_call: object) -> dict[str, Any]:
        """Answer a READ_TOOL_RESULT call of the model: the tool message to append.

        Args:
            session_id: the session the agent runs in (never taken from the model).
            tool_call: the call, as a dict or an SDK object with ``id`` and ``function``.

        Raises:
            ValueError: the call is not a READ_TOOL_RESULT call.
        """
        function = field(tool_call, "function")
        name = field(function, "name")
        if name != TOOL_NAME:
            raise ValueError(f"not a {TOOL_NAME} call: {name!r}")
        args = parse_arguments(field(function, "arguments") or "{}")
        content = answer(self._session(session_id), args, self.config)
        return {"role": "tool", "tool_call_id": field(tool_call, "id"), "content": content}

    def events(self, session_id: str) -> list[Event]:
        """The session's events, oldest first."""
        if session_id in self._sessions:
            self._sessions[session_id].flush()
        return list(self.sessions.read(self._key(session_id)))

    def resume(self, session_id: str, *, tools: Tools = None) -> list[Message]:
        """Continue a session another process (or an earlier ``Compactor``) left.

        Restores the session's state from its log and returns the history of its latest
        checkpoint: pass it (with what happened since) to the next call.

        Args:
            session_id: the session.
            tools: the agent's tool schemas; they must be those of the checkpoint.

        Raises:
            RecoveryBlockedError: the checkpoint was taken under another schema, config or
                toolset (``changed`` names which); nothing was read into this process or
                written.
            StoreError: the session has no checkpoint.
        """
        key = self._key(session_id)
        kept = self.sessions.checkpoints(key)
        if not kept:
            raise StoreError(f"session {session_id!r} has no checkpoint to resume from")
        latest = kept[-1]
        changed = changes(latest, self._config_digest, toolset_digest(tools))
        if changed:
            raise RecoveryBlockedError(
                f"cannot resume session {session_id!r} from checkpoint {latest.checkpoint_id}: "
                f"the {', '.join(changed)} changed since it was taken",
                changed=changed,
            )
        session = self._sessions[session_id] = Session(
            key,
            sessions=self.sessions,
            tool_results=self.tool_results,
            meter=self.meter,
            config=self.config,
            saved=latest.state,
        )
        session.tools = list(tools) if tools else None
        return [dict(message) for message in latest.messages]

    def close(self) -> None:
        """Release the leases this compactor holds, so other writers can take the sessions."""
        for session in self._sessions.values():
            session.release()

    def __enter__(self) -> Compactor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
    ) -> Steps[CompactResult]:
        window = self._window_for(max_tokens)  # a bad max_tokens fails before anything is stored
        session = self._session(session_id)
        results = session.accept(messages, run_id)
        session.tools = list(tools) if tools else None
        compaction = Compaction(
            session,
            messages,
            results,
            tools=session.tools,
            window=window,
            trigger=trigger,
            scale=scale,
            config=self.config,
            target=self._target,
            payback=self._payback,
        )
        result: CompactResult = yield from compaction.run(floor)
        return result

    def _window_for(self, max_tokens: int | None) -> int:
        window = self.window - (max_tokens or 0)
        if window <= 0:
            raise ValueError(f"max_tokens={max_tokens} leaves no room in a {self.window} window")
        return window

    def _summary_target(self) -> Target:
        model = self.config.summary_model or self.model
        same = model == self.model
        window = self.window if same else model_window(model)  # an unknown model fails now
        encoding = encoding_name(model)

        def count(text: str) -> int:  # the tokenizer loads on the first summary, if ever
            return text_counter(encoding)(text)

        budget = int((window - self.config.summary_max_tokens) * _SUMMARY_MARGIN)
        return Target(
            model,
            budget,
            self.config.summary_max_tokens,
            self.config.summary_timeout,
            count,
            self.config.templates,
        )

    # -- sessions -----------------------------------------------------------------------------

    def _key(self, session_id: str) -> SessionKey:
        return SessionKey(session_id, self.tenant, self.user)

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = Session(
                self._key(session_id),
                sessions=self.sessions,
                tool_results=self.tool_results,
                meter=self.meter,
                config=self.config,
            )
            self._sessions[session_id] = session
        return session

    # -- wrapped calls ----------------------------------------------------------------------

    def _call_kwargs(
        self, signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The call's arguments by name, with the final chunk's usage asked for in streams."""
        if args:
            if signature is None:
                raise TypeError("pass the wrapped call's arguments by keyword")
            kwargs = dict(signature.bind_partial(*args, **kwargs).arguments)
        if "messages" not in kwargs:
            raise TypeError("a wrapped call needs messages=")
        if kwargs.get("stream") and kwargs.get("stream_options") is None:
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    def _call_steps(
        self, fn: Callable[..., Any], kwargs: dict[str, Any], session_id: str, run_id: str | None
    ) -> Steps[tuple[Session, Sent | None, float, Any]]:
        max_tokens = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
        session = self._session(session_id)

        def compact(
            trigger: Trigger = "pre_call", floor: Tier = "none", scale: float = 1.0
        ) -> Steps[CompactResult]:
            tools = self._offered(session, kwargs.get("tools"))
            return self._compact_steps(
                kwargs["messages"], session_id, tools, max_tokens, run_id, trigger, floor, scale
            )

        def request(result: CompactResult) -> ModelCall:
            tools = self._offered(session, kwargs.get("tools"))
            if tools != session.tools:
                # The first archive of the session adds READ_TOOL_RESULT after compaction
                # measured the request: measure what is really sent, for the anchor.
                measure = self.meter.measure(result.messages, tools, session.state.anchor)
                session.sent = Sent(
                    measure.tokens,
                    measure.local,
                    measure.digest,
                    len(result.messages),
                    result.window,
                )
            sent = {**kwargs, "messages": result.messages}
            return ModelCall(fn, {**sent, "tools": tools} if tools else sent)

        result = yield from compact()
        started = time.perf_counter()
        try:
            response = yield request(result)
        except Exception as exc:
            if not is_context_error(exc):
                raise
            scale = error_scale(exc, result.window, result.input_tokens)
            result = yield from compact("context_error", higher(result.tier), scale)
            started = time.perf_counter()
            response = yield request(result)
        return session, session.sent, started, response

    def _offered(self, session: Session, tools: Tools) -> Tools:
        """The agent's tools, with READ_TOOL_RESULT once something has been archived.

        Until then the tool would only cost its tokens on every call; offering it from the
        first archive on changes the tools once, in a call whose prefix changes anyway.
        """
        state = session.state
        archived = bool(state.archive) or state.condensed is not None
        if not tools or not self.config.add_read_tool or not archived:
            return tools
        return tools if has_tool(tools, TOOL_NAME) else [*tools, self.tool_schema]

    def _observe(
        self,
        session: Session,
        sent: Sent | None,
        started: float,
        response: Any,
        kwargs: dict[str, Any],
        stream_type: type[UsageStream] | type[AsyncUsageStream],
    ) -> Any:
        if not kwargs.get("stream"):
            usage, finish = usage_of(response), finish_reason_of(response)
            self._record(session, sent, started, usage, finish, reply_message(response))
            return response

        def on_end(usage: Usage | None, finish: str | None) -> None:
            self._record(session, sent, started, usage, finish)

        return stream_type(response, on_end)

    def _record(
        self,
        session: Session,
        sent: Sent | None,
        started: float | None,
        usage: Usage | None,
        finish: str | None,
        reply: Message | None = None,
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
        session.append(event)
        self._checkpoint(session, reply)
        return event

    def _checkpoint(self, session: Session, reply: Message | None) -> None:
        if self.config.checkpoint_keep <= 0:
            return
        checkpoint = take(session, self._config_digest, reply)
        if checkpoint is not None:
            self.sessions.put_checkpoint(
                session.key,
                checkpoint,
                keep_last=self.config.checkpoint_keep,
                lease=session.lease(),
            )
