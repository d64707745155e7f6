"""A session as one process holds it: its folded state, its stores, and its rendered texts.

The texts that replace archived results (pointers, placeholders, summaries) are rendered once
and reused as the very same strings on every later call, so the prompt prefix stays
byte-stable and provider prompt caches keep hitting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compactor.config import CompactorConfig
from compactor.events import Event, Level, RunStartedEvent, ToolResultEvent
from compactor.messages import Message, group_boundary, iter_tool_results, text_of, validate
from compactor.prompts import render
from compactor.state import Condensed, SessionState
from compactor.stores import SessionKey, SessionStore, ToolResultStore
from compactor.strategies import build_view
from compactor.tokens import TokenMeter
from compactor.tool import TOOL_NAME

Results = list[tuple[int, str]]
"""``(index, handle)`` of the archivable tool results of a history, oldest first."""


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
    ) -> None:
        self.key = key
        self.sessions = sessions
        self.tool_results = tool_results
        self.meter = meter
        self.config = config
        self.state = SessionState()
        self.sent: Sent | None = None
        self._seen: _Seen | None = None
        self._texts: dict[tuple[str, Level], str] = {}
        self._replacements: dict[tuple[str, Level], tuple[Message, Message]] = {}
        self._condensed: tuple[Condensed, Message] | None = None
        self.reload()

    def reload(self) -> None:
        """Fold the session's log again (another process may have written to it)."""
        self.state = SessionState()
        for event in self.sessions.read(self.key):
            self.state.apply(event)

    def append(self, event: Event) -> Event:
        """Log an event, then fold it into the state.

        The log is written first: a crash between the two leaves a state to be rebuilt from
        the log, never one ahead of it.
        """
        if event.run_id is None and self.state.run_id is not None:
            event = event.model_copy(update={"run_id": self.state.run_id})
        self.sessions.append(self.key, event)
        self.state.apply(event)
        return event

    # -- a new history ----------------------------------------------------------------------

    def check(self, messages: Sequence[Message]) -> Results:
        """Validate a history and store its new tool results.

        An agent sends the same history again with a few messages added, so the part that is
        unchanged since the last call (same dicts, same values) is neither validated nor
        scanned again: per-call work stays proportional to what is new.

        Raises:
            InvalidMessagesError: before anything is stored.
        """
        start = _unchanged(self._seen, messages) if self._seen is not None else 0
        start = group_boundary(messages, start)
        validate(messages, start)
        known = [r for r in self._seen.results if r[0] < start] if self._seen else []
        results = known + self._register(messages, start)
        values = [tuple(message.values()) for message in messages]
        self._seen = _Seen(list(messages), values, results)
        return results

    def begin_run(self, messages: Sequence[Message], run_id: str | None) -> None:
        """Start a new run when the run id changes: a new user message, or a new ``run_id``."""
        run = run_id or _turn_of(messages)
        if run != self.state.run_id:
            self.append(RunStartedEvent(run_id=run))

    def _register(self, messages: Sequence[Message], start: int) -> Results:
        found = []
        for index, call_id, name in iter_tool_results(messages, start):
            if name == TOOL_NAME:
                continue  # its answers are bounded by their limit and never archived again
            message = messages[index]
            digest = self.meter.message_digest(message)
            handle = self.state.handles.get(digest)
            if handle is None:
                handle = self._store(message, call_id, name, digest)
            found.append((index, handle))
        return found

    def _store(self, message: Message, call_id: str, name: str, digest: str) -> str:
        text = text_of(message["content"])
        handle = self.state.new_handle(call_id)
        self.tool_results.put(self.key, handle, text)
        self.append(
            ToolResultEvent(
                handle=handle,
                tool_call_id=call_id,
                tool_name=name,
                digest=digest,
                chars=len(text),
                tokens=self.meter.message_tokens(message),
            )
        )
        return handle

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

        def replace(index: int, handle: str, level: Level) -> Message:
            return self.replacement(handle, level, messages[index])

        part = None
        if condensed is not None:
            part = (condensed.head, condensed.covered, self.condensed_message(condensed))
        return build_view(messages, results, levels, replace, part)

    def replacement(self, handle: str, level: Level, message: Message) -> Message:
        """The tool message that stands for an archived result (the same object each call)."""
        cached = self._replacements.get((handle, level))
        if cached is not None and cached[0] is message:
            return cached[1]
        text = self.archive_text(handle, level, message)
        content = message["content"]
        others = (
            [p for p in content if p.get("type") != "text"] if isinstance(content, list) else []
        )
        new_content: Any = [{"type": "text", "text": text}, *others] if others else text
        replacement = {**message, "content": new_content}
        self._replacements[(handle, level)] = (message, replacement)
        return replacement

    def archive_text(self, handle: str, level: Level, message: Message) -> str:
        """The pointer or placeholder of a result; rendered once."""
        if (handle, level) not in self._texts:
            self._texts[(handle, level)] = self._render_archive(handle, level, message)
        return self._texts[(handle, level)]

    def _render_archive(self, handle: str, level: Level, message: Message) -> str:
        chars = self.state.results[handle].chars
        folder = self.config.templates
        if level == "placeholder":
            return render("placeholder.j2", folder, handle=handle, chars=chars)
        head, tail = _preview(text_of(message["content"]), self.config.preview_chars)
        return render(
            "pointer.j2",
            folder,
            handle=handle,
            chars=chars,
            head=head,
            tail=tail,
            limit=self.config.read_limit_chars,
        )

    def worth(self, handle: str, level: Level, message: Message) -> bool:
        """Whether archiving a result saves clearly more than its replacement costs."""
        chars = self.state.results[handle].chars
        if chars < self.config.min_offload_chars:
            return False
        return chars > 2 * len(self.archive_text(handle, level, message))

    def condensed_message(self, condensed: Condensed) -> Message:
        """The user message that stands for a condensed part (the same object each call)."""
        if self._condensed is None or self._condensed[0] != condensed:
            handles = self.handle_items(condensed.handles)
            folder = self.config.templates
            if condensed.kind == "summary":
                text = render(
                    "summary_message.j2", folder, summary=condensed.summary, handles=handles
                )
            else:
                text = render(
                    "replan.j2",
                    folder,
                    summary=condensed.summary,
                    plan=condensed.plan,
                    handles=handles,
                )
            self._condensed = (condensed, {"role": "user", "content": text})
        return self._condensed[1]

    def handle_items(self, handles: Sequence[str]) -> list[dict[str, Any]]:
        """Handles with the tool and size of their result, for the templates."""
        results = self.state.results
        return [
            {"handle": h, "tool": results[h].tool, "chars": results[h].chars}
            for h in handles
            if h in results
        ]


def _unchanged(seen: _Seen, messages: Sequence[Message]) -> int:
    """How many leading messages are the very dicts, with the very values, seen last time."""
    count = 0
    for old, values, new in zip(seen.messages, seen.values, messages, strict=False):
        if old is not new or tuple(new.values()) != values:
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
