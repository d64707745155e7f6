"""CompactorConfig: every knob of compaction, validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CompactorConfig(BaseModel):
    """How and when compactor makes room in the context window.

    Usage is the estimated input tokens of a call divided by the window (the model's input limit
    less the output tokens the request reserves). The bands follow ``offload_at`` <
    ``placeholder_at`` < ``summary_at``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    context_window: int | None = Field(default=None, gt=0)
    """Input tokens the model accepts. None: the model's input limit from litellm's model map."""

    offload_at: float = Field(default=0.5, gt=0, le=1)
    """From this usage on, older tool results become a pointer and a preview."""

    placeholder_at: float = Field(default=0.8, gt=0, le=1)
    """From this usage on, older tool results become a one-line placeholder."""

    summary_at: float = Field(default=0.95, gt=0, le=1)
    """From this usage on, an LLM summarises the history."""

    keep_offload: int = Field(default=3, ge=0)
    """Most recent tool results left in full by the offload tier."""

    keep_placeholder: int = Field(default=1, ge=0)
    """Most recent tool results left in full by the placeholder tier."""

    preview_chars: int = Field(default=80, ge=0)
    """Characters of a result shown in its pointer (head and tail)."""

    min_offload_chars: int = Field(default=200, ge=0)
    """Results shorter than this are never offloaded."""

    cache_horizon: int = Field(default=10, ge=1)
    """Calls a rewrite of the context is expected to pay back over; below the summary line a
    tier rewrites only when its savings over this many cached calls beat the cache it breaks."""

    read_limit_chars: int = Field(default=12_000, ge=256)
    """The most characters one READ_TOOL_RESULT answer may hold (the page cap)."""

    add_read_tool: bool = True
    """Wrapped calls that pass ``tools`` get READ_TOOL_RESULT appended once the session has
    archived something (before that it would only cost tokens)."""

    summary_model: str | None = None
    """Model that writes summaries and replans. None: the compacted model itself."""

    max_summary_attempts: int = Field(default=2, ge=0)
    """Summary attempts per run before a replan."""

    max_replans: int = Field(default=1, ge=0)
    """Replans per run before the run fails with ContextExhaustedError."""

    summary_timeout: float = Field(default=120.0, gt=0)
    """Seconds one summary or replan call may take before the attempt counts as failed."""

    summary_max_tokens: int = Field(default=2000, gt=0)
    """Output tokens a summary or replan may use."""

    lease_ttl: float = Field(default=60.0, gt=0)
    """Seconds a session's write lease lasts unrenewed; then another writer may take it over."""

    checkpoint_keep: int = Field(default=3, ge=0)
    """Checkpoints kept per run, written after each model call (0: none)."""

    templates: Path | None = None
    """A folder of jinja2 templates that override the built-in ones by file name."""

    @model_validator(mode="after")
    def _check_bands(self) -> Self:
        if not self.offload_at < self.placeholder_at < self.summary_at:
            raise ValueError(
                "expected offload_at < placeholder_at < summary_at, got "
                f"{self.offload_at} / {self.placeholder_at} / {self.summary_at}"
            )
        if self.keep_placeholder > self.keep_offload:
            raise ValueError(
                f"keep_placeholder ({self.keep_placeholder}) must not exceed "
                f"keep_offload ({self.keep_offload})"
            )
        return self
