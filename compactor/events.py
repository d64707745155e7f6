"""Session events: what happened in a session, as a discriminated union on ``kind``.

Events are the session's source of truth: the middleware state of a session (handles, what is
archived, the token anchor, the run's counters) is a fold over its events, so another process
that reads the log continues where the last one stopped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Tier = Literal["none", "offload", "placeholder", "summary", "replan"]
Trigger = Literal["pre_call", "context_error", "finish_length"]
Level = Literal["pointer", "placeholder"]


def _now() -> datetime:
    return datetime.now(UTC)


class EventBase(BaseModel):
    """What every event has: when it happened and the run it belongs to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: datetime = Field(default_factory=_now)
    """When the event happened (UTC)."""
    run_id: str | None = None
    """The run the event belongs to."""


class RunStartedEvent(EventBase):
    """A new run began: a new user message, or a new ``run_id``. Run counters restart."""

    kind: Literal["run_started"] = "run_started"


class ModelCallEvent(EventBase):
    """One call to the model, with what was estimated and what the provider reported."""

    kind: Literal["model_call"] = "model_call"
    model: str
    estimated_input_tokens: int | None = None
    """The estimate compactor made before the call; None if the call was not compacted here."""
    local_input_tokens: int | None = None
    """The offline tokenizer's count of what was sent."""
    reported_input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    latency_ms: float | None = None
    sent_digest: str | None = None
    """Digest of the tools and messages sent, to recognise the next request as an extension."""
    sent_count: int | None = None
    raise_tier: bool = False
    """A ``length`` finish at high usage: the session's next call starts one tier higher."""


class ToolResultEvent(EventBase):
    """A new tool result was stored in full under ``handle``."""

    kind: Literal["tool_result"] = "tool_result"
    handle: str
    """The id READ_TOOL_RESULT takes; unique in the session even when providers reuse ids."""
    tool_call_id: str
    tool_name: str
    digest: str
    """Digest of the tool message, to recognise it in later calls."""
    chars: int
    tokens: int


class CompactionEvent(EventBase):
    """One tier applied to the context of a call."""

    kind: Literal["compaction"] = "compaction"
    tier: Literal["offload", "placeholder", "summary"]
    trigger: Trigger
    tokens_before: int
    tokens_after: int
    window: int
    messages_before: int
    messages_after: int
    archived: list[str]
    """Handles archived by this step (for the summary tier: every archived handle)."""
    kept: list[str]
    """Handles of tool results still in full after this step."""
    duration_ms: float
    summary: str | None = None
    """The summary text (summary tier)."""
    attempt: int | None = None
    """The summary attempt of this run (summary tier)."""
    summary_usage: dict[str, float] = Field(default_factory=dict)
    """The summariser's own input/output tokens and cost in USD (summary tier)."""
    covered: int | None = None
    """How many leading messages of the caller's history the summary stands for."""
    covered_digest: str | None = None
    """Digest of the last covered message, to recognise the same history later."""
    head: int | None = None
    """How many leading messages (system prompt, task) stay before the summary."""


class SummaryFailedEvent(EventBase):
    """A summary attempt that did not work; it still counts against the run's attempts."""

    kind: Literal["summary_failed"] = "summary_failed"
    attempt: int
    reason: str
    tokens_before: int
    window: int
    summary_usage: dict[str, float] = Field(default_factory=dict)


class ReplanEvent(EventBase):
    """The context was rebuilt from the system prompt, the task and a replan message."""

    kind: Literal["replan"] = "replan"
    trigger: Trigger
    reason: str
    summary: str
    plan: str
    tokens_before: int
    tokens_after: int
    window: int
    messages_before: int
    messages_after: int
    archived: list[str]
    duration_ms: float
    summary_usage: dict[str, float] = Field(default_factory=dict)
    covered: int
    covered_digest: str
    head: int


class FailedEvent(EventBase):
    """The run could not be kept inside the window: ContextExhaustedError was raised."""

    kind: Literal["failed"] = "failed"
    reason: str
    tokens: int
    window: int
    attempts: int


Event = Annotated[
    RunStartedEvent
    | ModelCallEvent
    | ToolResultEvent
    | CompactionEvent
    | SummaryFailedEvent
    | ReplanEvent
    | FailedEvent,
    Field(discriminator="kind"),
]
"""Any session event."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """An event from its JSON form (a dict, or a JSON text)."""
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    return EVENT_ADAPTER.validate_json(data)


def dump_event(event: Event) -> dict[str, Any]:
    """The JSON form of an event."""
    return event.model_dump(mode="json")


def tier_of(event: CompactionEvent | ReplanEvent) -> Tier:
    """The tier a compaction or replan event applied."""
    return event.tier if isinstance(event, CompactionEvent) else "replan"


def describe(event: Event) -> str:
    """One line saying what an event records, for people reading a log."""
    if isinstance(event, ModelCallEvent):
        return (
            f"{event.model}: estimated {event.estimated_input_tokens}, reported "
            f"{event.reported_input_tokens} in / {event.output_tokens} out, "
            f"cached {event.cached_tokens}, {event.finish_reason}"
        )
    if isinstance(event, ToolResultEvent):
        return f"{event.handle} = {event.tool_name} {event.tool_call_id}: {event.chars:,} chars"
    if isinstance(event, CompactionEvent | ReplanEvent):
        tier = tier_of(event)
        return (
            f"{tier} ({event.trigger}): {event.tokens_before:,} -> {event.tokens_after:,} "
            f"of {event.window:,} tokens, {len(event.archived)} archived"
        )
    if isinstance(event, SummaryFailedEvent):
        return f"attempt {event.attempt}: {event.reason}"
    if isinstance(event, FailedEvent):
        return f"{event.reason} ({event.tokens:,} of {event.window:,} tokens)"
    return ""
