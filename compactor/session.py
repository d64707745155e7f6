"""A session as one process holds it: its folded state, its stores, and its rendered texts.

The texts that replace archived results (pointers, placeholders, summaries) are rendered once
and reused as the very same strings on every later call, so the prompt prefix stays
byte-stable and provider prompt caches keep hitting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from compactor.config import CompactorConfig
from compactor.events import Event, EventBase, Level, RunStartedEvent, ToolResultEvent
from compactor.messages import (
    Message,
    ToolResultAt,
    group_boundary,
    iter_tool_results,
    text_digest,
    text_of,
    validate,
)
from compactor.prompts import render
from compactor.state import INPUT, Condensed, SessionState, dump_state, load_state
from compactor.stores import Lease, SessionKey, SessionStore, ToolResultStore
from compactor.strategies import build_view
from compactor.tokens import TokenMeter
from compactor.tool import TOOL_NAME


@dataclass(frozen=True, slots=True)
class Placed:
    """An archivable tool result of a history, and the call that asked for it."""

    index: int
    """Position of the tool message."""
    handle: str
    call_index: int
    """Position of the assistant message that made the call."""
    input: str | None
    """Handle of the call's arguments, when they are long enough to archive too."""
    arguments: str
    """The call's arguments, as the caller sent them."""


E = TypeVar("E", bound=EventBase)

Results = list[Placed]
"""The archivable tool results of a history, oldest first."""


@dataclass(frozen=True)
class Sent:
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
    results: Results


class Session:
    """One session: the state folded from its log, and what this process has rendered."""

    def __init__(
        self,
        key: SessionKey,
        *,
        sessions: SessionStore,
        tool_results: ToolResultStore,
        meter: TokenMeter,
        config: CompactorConfig,
        saved: dict[str, Any] | None = None,
    ) -> None:
        self.key = key
        self.sessions = sessions
        self.tool_results = tool_results
        self.meter = meter
        self.config = config
        self.state = SessionState()
        self.seq = 0
        """Position in the log of the last event folded into the state."""
        self.sent: Sent | None = None
        self.tools: list[dict[str, Any]] | None = None
        """The tools of the session's last compaction."""
        self._lease: Lease | None = None
        self._pending: list[Event] = []
        self._seen: _Seen | None = None
        self._texts: dict[tuple[str, Level], str] = {}
        self._replacements: dict[tuple[str, Level], tuple[Message, Message]] = {}
        self._calls: dict[tuple[tuple[str, Level], ...], tuple[Message, Message]] = {}
        self._condensed: tuple[Condensed, Message] | None = None
        self.reload(saved)

    def reload(self, saved: dict[str, Any] | None = None) -> None:
        """Fold the session's log again (another process may have written to it).

        Args:
            saved: a checkpoint's state (see ``saved``): folding starts from it, and only the
                events logged after it are applied.
        """
        self.flush()
        self.state = load_state(saved["state"]) if saved else SessionState()
        self.seq = saved["seq"] if saved else 0
        for entry in self.sessions.entries(self.key):
            if entry.seq > self.seq:
                self.state.apply(entry.event)
                self.seq = entry.seq

    def saved(self) -> dict[str, Any]:
        """The state as a checkpoint keeps it: where in the log it stands, and what it is."""
        return {"seq": self.seq, "state": dump_state(self.state)}

    def append(self, event: Event) -> Event:
        """Log an event, then fold it into the state.

        The log is written first: a crash between the two leaves a state to be rebuilt from
        the log, never one ahead of it.
        """
        event = self._in_run(event)
        self.flush()
        self.seq = self.sessions.append(self.key, event, lease=self.lease()).seq
        self.state.apply(event)
        return event

    def defer(self, event: ToolResultEvent) -> None:
        """Fold a tool-result event now and log it with the next event (or ``flush``).

        Its only content is the handle of a result already durable in the tool-result store,
        given in history order: after a crash that loses it, the next compaction registers
        the same result again under the same handle. So compact() need not wait for it: it
        is written, in one write and one sync with the others pending, before the next event
        that could use it.
        """
        event = self._in_run(event)
        self._pending.append(event)
        self.state.apply(event)

    def flush(self) -> None:
        """Log the deferred tool-result events."""
        if self._pending:
            self.tool_results.sync()  # the outputs before the events that point to them
            entries = self.sessions.append_many(self.key, self._pending, lease=self.lease())
            self.seq = entries[-1].seq
            self._pending = []

    def _in_run(self, event: E) -> E:
        if event.run_id is None and self.state.run_id is not None:
            return event.model_copy(update={"run_id": self.state.run_id})
        return event

    def lease(self) -> Lease:
        """This writer's lease on the session: taken on the first write, renewed at half-life.

        Raises:
            LeaseHeldError: another live writer holds the session.
            LeaseLostError: another writer took the session over.
        """
        ttl, now = self.config.lease_ttl, time.time()
        if self._lease is None:
            self._lease = self.sessions.acquire(self.key, ttl=ttl)
        elif now > self._lease.expires_at - ttl / 2:
            self._lease = self.sessions.renew(self._lease, ttl=ttl)
        return self._lease

    def release(self) -> None:
        """Log what is deferred, then give the lease up so another writer can take it at once."""
        self.flush()
        if self._lease is not None:
            self.sessions.release(self._lease)
            self._lease = None

    @property
    def history(self) -> list[Message] | None:
        """The caller's history at the last compaction."""
        return None if self._seen is None else list(self._seen.messages)

    # -- a new history ----------------------------------------------------------------------

    def accept(self, messages: Sequence[Message], run_id: str | None) -> Results:
        """Validate a history, start a run if it begins one, and store its new tool results.

        An agent sends the same history again with a few messages added, so the part that is
        unchanged since the last call (same dicts, same values) is neither validated nor
        scanned again: per-call work stays proportional to what is new.

        Raises:
            InvalidMessagesError: before anything is stored.
        """
        values = [tuple(message.values()) for message in messages]
        same = _unchanged(self._seen, messages, values) if self._seen is not None else 0
        start = group_boundary(messages, same)
        validate(messages, start)
        self._begin_run(messages, run_id)
        known = [p for p in self._seen.results if p.index < start] if self._seen else []
        results = known + self._register(messages, start)
        self._seen = _Seen(list(messages), values, results)
        return results

    def _begin_run(self, messages: Sequence[Message], run_id: str | None) -> None:
        """Start a new run when the run id changes: a new user message, or a new ``run_id``."""
        run = run_id or _turn_of(messages)
        if run != self.state.run_id:
            self.append(RunStartedEvent(run_id=run))

    def _register(self, messages: Sequence[Message], start: int) -> Results:
        found = []
        for at in iter_tool_results(messages, start):
            if at.name == TOOL_NAME:
                continue  # its answers are bounded by their limit and never archived again
            message = messages[at.index]
            # The call's arguments are part of what identifies a result: providers reuse ids,
            # and two writes that both answer "ok" must not share the first one's input.
            digest = text_digest(self.meter.message_digest(message) + at.arguments)
            handle = self.state.handles.get(digest)
            if handle is None:
                handle = self._store(message, at, digest)
            given = f"{handle}{INPUT}"
            stored = given if given in self.state.results else None
            found.append(Placed(at.index, handle, at.call_index, stored, at.arguments))
        return found

    def _store(self, message: Message, at: ToolResultAt, digest: str) -> str:
        """Store a new result, and its call's arguments when they are long enough to archive:
        agents that write files through a tool send most of their tokens as arguments."""
        handle = self.state.new_handle()
        text = text_of(message["content"])
        self._put(handle, text, at, digest, self.meter.message_tokens(message))
        if len(at.arguments) >= self.config.min_offload_chars:
            tokens = self.meter.count_text(at.arguments)
            self._put(f"{handle}{INPUT}", at.arguments, at, f"{digest}{INPUT}", tokens)
        return handle

    def _put(self, handle: str, text: str, at: ToolResultAt, digest: str, tokens: int) -> None:
        self.tool_results.put(self.key, handle, text)
        self.defer(
            ToolResultEvent(
                handle=handle,
                tool_call_id=at.call_id,
                tool_name=at.name,
                digest=digest,
                chars=len(text),
                tokens=tokens,
            )
        )

    # -- the view ---------------------------------------------------------------------------

    def condensed_for(self, messages: Sequence[Message]) -> Condensed | None:
        """The session's summary or replan, if it still stands for part of this history."""
        condensed = self.state.condensed
        if condensed is None or condensed.covered > len(messages):
            return None
        last = messages[condensed.covered - 1]
        return condensed if self.meter.message_digest(last) == condensed.covered_digest else None

    def view(
        self,
        messages: Sequence[Message],
        results: Results,
        levels: dict[str, Level],
        condensed: Condensed | None,
    ) -> list[Message]:
        """What to send for a history, given how results are archived and what is condensed."""
        start = condensed.covered if condensed is not None else 0
        changed: dict[int, Message] = {}
        inputs: dict[int, list[tuple[str, Level]]] = {}
        for placed in results:
            if placed.index < start:
                continue
            level = levels.get(placed.handle)
            if level is not None:
                changed[placed.index] = self.result_replacement(
                    placed.handle, level, messages[placed.index]
                )
            input_level = levels.get(placed.input) if placed.input else None
            if placed.input and input_level is not None:
                inputs.setdefault(placed.call_index, []).append((placed.input, input_level))
        for index, archived in inputs.items():
            changed[index] = self.call_replacement(messages[index], tuple(archived))
        part = None
        if condensed is not None:
            part = (condensed.head, condensed.covered, self.condensed_message(condensed))
        return build_view(messages, changed, part)

    def result_replacement(self, handle: str, level: Level, message: Message) -> Message:
        """The tool message that stands for an archived result (the same object each call)."""
        cached = self._replacements.get((handle, level))
        if cached is not None and cached[0] is message:
            return cached[1]
        text = self.archive_text(handle, level, text_of(message["content"]))
        content = message["content"]
        others = (
            [p for p in content if p.get("type") != "text"] if isinstance(content, list) else []
        )
        new_content: Any = [{"type": "text", "text": text}, *others] if others else text
        replacement = {**message, "content": new_content}
        self._replacements[(handle, level)] = (message, replacement)
        return replacement

    def call_replacement(
        self, message: Message, archived: tuple[tuple[str, Level], ...]
    ) -> Message:
        """The assistant message whose long tool-call arguments are archived.

        The arguments stay valid JSON (providers parse them), holding the pointer or the
        placeholder of the stored original.
        """
        cached = self._calls.get(archived)
        if cached is not None and cached[0] is message:
            return cached[1]
        by_call = {
            self.state.results[handle].tool_call_id: (handle, level) for handle, level in archived
        }
        calls = []
        for call in message["tool_calls"]:
            if call["id"] not in by_call:
                calls.append(call)
                continue
            handle, level = by_call[call["id"]]
            text = self.archive_text(handle, level, call["function"]["arguments"])
            arguments = json.dumps({"archived": text}, ensure_ascii=False)
            calls.append({**call, "function": {**call["function"], "arguments": arguments}})
        replacement = {**message, "tool_calls": calls}
        self._calls[archived] = (message, replacement)
        return replacement

    def archive_text(self, handle: str, level: Level, original: str) -> str:
        """The pointer or placeholder of a stored text; rendered once."""
        if (handle, level) not in self._texts:
            self._texts[(handle, level)] = self._render_archive(handle, level, original)
        return self._texts[(handle, level)]

    def _render_archive(self, handle: str, level: Level, original: str) -> str:
        chars = self.state.results[handle].chars
        folder = self.config.templates
        if level == "placeholder":
            return render("placeholder.j2", folder, handle=handle, chars=chars)
        head, tail = _preview(original, self.config.preview_chars)
        return render(
            "pointer.j2",
            folder,
            handle=handle,
            chars=chars,
            head=head,
            tail=tail,
            limit=self.config.read_limit_chars,
        )

    def worth(self, handle: str, level: Level, original: str) -> bool:
        """Whether archiving a text saves clearly more than its replacement costs."""
        chars = self.state.results[handle].chars
        if chars < self.config.min_offload_chars:
            return False
        return chars > 2 * len(self.archive_text(handle, level, original))

    def condensed_message(self, condensed: Condensed) -> Message:
        """The user message that stands for a condensed part (the same object each call)."""
        if self._condensed is None or self._condensed[0] != condensed:
            ranges = handle_ranges(condensed.handles)
            folder = self.config.templates
            if condensed.kind == "summary":
                text = render(
                    "summary_message.j2", folder, summary=condensed.summary, ranges=ranges
                )
            else:
                text = render(
                    "replan.j2",
                    folder,
                    summary=condensed.summary,
                    plan=condensed.plan,
                    ranges=ranges,
                )
            self._condensed = (condensed, {"role": "user", "content": text})
        return self._condensed[1]


def handle_ranges(handles: Sequence[str]) -> str:
    """Handles written compactly: ``t1-t4, t7, t9.in``. Every handle is listed, in order."""
    numbered = sorted(int(h[1:]) for h in handles if _numbered(h))
    spans: list[list[int]] = []
    for number in numbered:
        if spans and spans[-1][1] == number - 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    written = [f"t{a}" if a == b else f"t{a}-t{b}" for a, b in spans]
    return ", ".join([*written, *(h for h in handles if not _numbered(h))])


def _numbered(handle: str) -> bool:
    return handle[:1] == "t" and handle[1:].isdigit()


def _unchanged(seen: _Seen, messages: Sequence[Message], values: list[tuple[object, ...]]) -> int:
    """How many leading messages are the very dicts, with the very values, seen last time."""
    count = 0
    for old, old_values, new, new_values in zip(
        seen.messages, seen.values, messages, values, strict=False
    ):
        if old is not new or old_values != new_values:
            break
        count += 1
    return count


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
