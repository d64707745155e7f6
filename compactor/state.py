"""The middleware state of a session, as a fold over its events.

Nothing here is stored on its own: the state is rebuilt from the session's log by applying each
event in order, so the log stays the one source of truth, and a new process (or a new
``Compactor`` on the same home) continues exactly where the last one stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter

from compactor.events import (
    CompactionEvent,
    Event,
    Level,
    ModelCallEvent,
    ReplanEvent,
    RunStartedEvent,
    SummaryFailedEvent,
    ToolResultEvent,
)
from compactor.tokens import Anchor

INPUT = ".in"
"""Suffix of the handle under which a call's long arguments are stored."""


@dataclass(frozen=True)
class ResultInfo:
    """A tool result kept in full in the tool-result store."""

    handle: str
    tool_call_id: str
    chars: int


@dataclass(frozen=True)
class Condensed:
    """A summary or replan standing for the caller's messages ``head`` to ``covered``."""

    kind: Literal["summary", "replan"]
    head: int
    covered: int
    covered_digest: str
    summary: str
    plan: str
    handles: tuple[str, ...]


@dataclass
class SessionState:
    """What compactor remembers about one session."""

    handles: dict[str, str] = field(default_factory=dict)
    """Digest of a tool message -> its handle."""
    results: dict[str, ResultInfo] = field(default_factory=dict)
    """Handle -> the stored result, oldest first."""
    numbered: int = 0
    """Results stored so far (their inputs aside): the number of the last handle."""
    by_call: dict[str, list[str]] = field(default_factory=dict)
    """Provider tool_call_id -> the handles of its results (several when a provider reuses ids)."""
    archive: dict[str, Level] = field(default_factory=dict)
    """Handle -> how it is shown when archived. Archived stays archived: the prefix is stable."""
    anchor: Anchor | None = None
    raise_tier: bool = False
    run_id: str | None = None
    attempts: int = 0
    """Summary attempts made in the current run."""
    replans: int = 0
    """Replans made in the current run."""
    condensed: Condensed | None = None
    calls: int = 0
    """Model calls recorded in the session."""

    def apply(self, event: Event) -> None:
        """Fold one event into the state."""
        if isinstance(event, ToolResultEvent):
            self._apply_result(event)
        elif isinstance(event, ModelCallEvent):
            self._apply_call(event)
        elif isinstance(event, CompactionEvent):
            self._apply_compaction(event)
        elif isinstance(event, SummaryFailedEvent):
            self.attempts += 1
        elif isinstance(event, ReplanEvent):
            self._apply_replan(event)
        elif isinstance(event, RunStartedEvent):
            self.run_id, self.attempts, self.replans = event.run_id, 0, 0

    def new_handle(self) -> str:
        """A handle for a new result: short, and unique in the session whatever the provider's
        ids (some reuse ``call_0`` across turns). Pointers, placeholders and summaries show it
        many times over, so its few tokens matter."""
        return f"t{self.numbered + 1}"

    def find(self, name: str) -> ResultInfo | list[str] | None:
        """The result a READ_TOOL_RESULT id names: a handle, or a provider tool_call_id.

        Returns the result, the handles to choose from when a provider reused the id, or None.
        """
        if name in self.results:
            return self.results[name]
        handles = self.by_call.get(name, [])
        if len(handles) == 1:
            return self.results[handles[0]]
        return handles or None

    def _apply_result(self, event: ToolResultEvent) -> None:
        self.handles[event.digest] = event.handle
        self.results[event.handle] = ResultInfo(event.handle, event.tool_call_id, event.chars)
        if event.handle.endswith(INPUT):
            return  # a call's arguments: reached through its result's handle
        self.numbered += 1
        self.by_call.setdefault(event.tool_call_id, []).append(event.handle)

    def _apply_call(self, event: ModelCallEvent) -> None:
        self.calls += 1
        self.raise_tier = event.raise_tier
        if (
            event.reported_input_tokens
            and event.local_input_tokens
            and event.sent_digest is not None
            and event.sent_count is not None
        ):
            self.anchor = Anchor(
                event.reported_input_tokens,
                event.local_input_tokens,
                event.sent_digest,
                event.sent_count,
                event.output_tokens,
            )

    def _apply_compaction(self, event: CompactionEvent) -> None:
        self.raise_tier = False
        if event.tier == "summary":
            self.attempts += 1
            assert event.covered is not None and event.covered_digest is not None
            assert event.head is not None and event.summary is not None
            self.condensed = Condensed(
                "summary",
                event.head,
                event.covered,
                event.covered_digest,
                event.summary,
                "",
                tuple(event.archived),
            )
            return
        level: Level = "pointer" if event.tier == "offload" else "placeholder"
        for handle in event.archived:
            self.archive[handle] = level

    def _apply_replan(self, event: ReplanEvent) -> None:
        self.raise_tier = False
        self.replans += 1
        self.condensed = Condensed(
            "replan",
            event.head,
            event.covered,
            event.covered_digest,
            event.summary,
            event.plan,
            tuple(event.archived),
        )


_STATE = TypeAdapter(SessionState)


def dump_state(state: SessionState) -> dict[str, Any]:
    """The JSON form of a state, for checkpoints."""
    data: dict[str, Any] = _STATE.dump_python(state, mode="json")
    return data


def load_state(data: dict[str, Any]) -> SessionState:
    """A state from its JSON form."""
    return _STATE.validate_python(data)
