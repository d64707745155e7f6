"""One compaction: a history, a window, and the tiers it takes to fit.

The tiers escalate within the call while usage stays at or above the summary line: offload,
placeholder, then up to ``max_summary_attempts`` summaries per run, one replan, and FAILED.
``Compaction.run`` is a generator: the summary and replan tiers yield ``SummaryRequest``s and
take ``SummaryReply``s, so the same code serves ``compact()`` and ``acompact()``.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from compactor.config import CompactorConfig
from compactor.errors import ContextExhaustedError, SummarizerError
from compactor.events import (
    CompactionEvent,
    Event,
    FailedEvent,
    Level,
    ReplanEvent,
    SummaryFailedEvent,
    Tier,
    Trigger,
    tier_of,
)
from compactor.messages import Message, text_of
from compactor.session import Results, Sent, Session
from compactor.state import Condensed
from compactor.strategies import Slot, archive, band, below, higher, kept, rank, start_tier
from compactor.strategies.summary import (
    Target,
    entries,
    head_end,
    turn_start,
    write_plan,
    write_summary,
)
from compactor.summarizer import SummaryReply, SummaryRequest
from compactor.tokens import Measure

Steps = Generator[SummaryRequest, SummaryReply, Any]


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
    """The last compaction or replan event of this call, or None."""
    events: tuple[Event, ...] = ()
    """Every compaction, failed summary and replan event of this call, in order."""


class Compaction:
    """Fits one history into a window, escalating through the tiers."""

    def __init__(
        self,
        session: Session,
        messages: Sequence[Message],
        results: Results,
        *,
        tools: list[dict[str, Any]] | None,
        window: int,
        trigger: Trigger,
        scale: float,
        config: CompactorConfig,
        target: Target,
        payback: float = 0.0,
    ) -> None:
        self.session = session
        self.messages = messages
        self.results = results
        self.tools = tools
        self.window = window
        self.trigger = trigger
        self.scale = scale
        self.config = config
        self.target = target
        self.payback = payback
        self.floor: Tier = "none"
        self.view: list[Message] = []
        self.current = Measure(0, 0, "")
        self.condensed = session.condensed_for(messages)
        self.events: list[Event] = []
        self.head = head_end(messages)

    def run(self, floor: Tier = "none") -> Generator[SummaryRequest, SummaryReply, CompactResult]:
        """Compact until usage is under the summary line (or the tier ``floor`` is reached)."""
        self.view = self._view(self.session.state.archive, self.condensed)
        self.current = self._measure(self.view)
        before = self.current.tokens
        if self.session.state.raise_tier and self.trigger == "pre_call":
            # The last call stopped at its length limit while the context was full.
            floor = max(floor, higher(band(before / self.window, self.config)), key=rank)
            self.trigger = "finish_length"
        tier = start_tier(before / self.window, floor, self.config)
        self.floor = floor
        while tier != "none":
            yield from self._apply(tier, self.current.tokens)
            if rank(tier) >= rank(floor) and self.current.tokens < self._line:
                break
            tier = self._next_tier(tier, self.current.tokens)
        measure = self.current
        self.session.sent = Sent(
            measure.tokens, measure.local, measure.digest, len(self.view), self.window
        )
        return self._result(self.view, measure.tokens, before)

    def _adopt(self, view: list[Message], measure: Measure) -> None:
        """A step changed the context: this is what is sent now (measured once)."""
        self.view, self.current = view, measure

    @property
    def _line(self) -> float:
        return self.config.summary_at * self.window

    def _result(self, view: list[Message], tokens: int, before: int) -> CompactResult:
        applied = [e for e in self.events if isinstance(e, CompactionEvent | ReplanEvent)]
        tier: Tier = max((tier_of(e) for e in applied), key=rank, default="none")
        last = applied[-1] if applied else None
        return CompactResult(view, tier, tokens, before, self.window, last, tuple(self.events))

    def _apply(self, tier: Tier, tokens: int) -> Steps:
        if tier == "summary":
            return (yield from self._summary(tokens))
        if tier == "replan":
            return (yield from self._replan(tokens))
        return self._archive(tier, tokens)

    def _next_tier(self, tier: Tier, tokens: int) -> Tier:
        """The tier to try next while usage stays at or above the summary line."""
        if rank(tier) < rank("placeholder"):
            return higher(tier)
        state = self.session.state
        if state.attempts < self.config.max_summary_attempts:
            return "summary"
        if state.replans < self.config.max_replans:
            return "replan"
        if tokens <= self.window:
            return "none"  # it fits: sent as it is, and nothing over the window ever is
        self._fail(
            tokens,
            "the run's summary attempts and replans are spent and the context "
            "still does not fit the window",
        )
        return "none"

    # -- offload and placeholder ------------------------------------------------------------

    def _archive(self, tier: Tier, tokens: int) -> bool:
        started = time.perf_counter()
        level: Level = "pointer" if tier == "offload" else "placeholder"
        keep = self.config.keep_offload if tier == "offload" else self.config.keep_placeholder
        slots = self._slots(level)
        changes = archive(slots, keep=keep, level=level)
        if not changes:
            return False
        before = self.view
        after = self._view({**self.session.state.archive, **changes}, self.condensed)
        forced = rank(tier) <= rank(self.floor) or tokens >= self._line
        if not forced and not self._pays(before, after):
            return False
        after_measure = self._measure(after)
        self._record(
            CompactionEvent(
                tier="offload" if tier == "offload" else "placeholder",
                trigger=self.trigger,
                tokens_before=tokens,
                tokens_after=after_measure.tokens,
                window=self.window,
                messages_before=len(before),
                messages_after=len(after),
                archived=list(changes),
                kept=kept(slots, changes),
                duration_ms=_since(started),
            )
        )
        self._adopt(after, after_measure)
        return True

    def _pays(self, before: list[Message], after: list[Message]) -> bool:
        """Whether a rewrite saves more than it costs once prompt caching is counted.

        Rewriting a message makes everything after it uncached for one call; the tokens saved
        are saved on every later call, at the cached price. So small rewrites near the end of
        the context wait until enough has piled up to pay for the break: rewrite rarely, in
        batches. ``payback`` holds the model's prices and the horizon of calls.
        """
        first = next(
            (i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b),
            len(after),
        )
        count = self.session.meter.message_tokens
        tail = sum(count(m) for m in after[first:])
        saved = sum(count(m) for m in before[first:]) - tail
        return saved >= self.payback * tail

    def _slots(self, level: Level) -> list[Slot]:
        """The visible tool results, with whether archiving each (and its input) pays."""
        session, slots = self.session, []
        for placed in self._visible_results():
            current = session.state.archive.get(placed.handle)
            text = text_of(self.messages[placed.index]["content"])
            worth = below(current, level) and session.worth(placed.handle, level, text)
            slot = Slot(placed.index, placed.handle, current, worth)
            if placed.input is not None:
                input_level = session.state.archive.get(placed.input)
                input_worth = below(input_level, level) and session.worth(
                    placed.input, level, placed.arguments
                )
                slot = replace(
                    slot, input=placed.input, input_level=input_level, input_worth=input_worth
                )
            slots.append(slot)
        return slots

    def _visible_results(self) -> Results:
        start = self.condensed.covered if self.condensed else 0
        return [placed for placed in self.results if placed.index >= start]

    # -- summary ------------------------------------------------------------------------------

    def _summary(self, tokens: int) -> Steps:
        started = time.perf_counter()
        state, attempt = self.session.state, self.session.state.attempts + 1
        start = self.condensed.covered if self.condensed else self.head
        boundary = turn_start(self.messages, start)
        if boundary <= start:
            return self._attempt_failed(attempt, "there is nothing new to summarise", tokens, {})
        words = max(50, self.config.summary_max_tokens // 2 // attempt)
        transcript = entries(self._summarised_part(start, boundary), self.config.templates)
        previous = self._previous_summary()
        try:
            written = yield from write_summary(
                self.target, self._task(), transcript, previous, words
            )
        except SummarizerError as exc:
            return self._attempt_failed(attempt, f"the summary call failed: {exc}", tokens, {})
        if not written.text:
            return self._attempt_failed(
                attempt, "the summary call returned no text", tokens, written.usage()
            )
        condensed = Condensed(
            "summary",
            self.head,
            boundary,
            self._digest(boundary),
            written.text,
            "",
            tuple(self._archived_after(boundary)),
        )
        before = self.view
        after = self._view(state.archive, condensed)
        after_measure = self._measure(after)
        tokens_after = after_measure.tokens
        if tokens_after >= self._line:
            reason = f"the summary leaves usage at {tokens_after / self.window:.0%}"
            return self._attempt_failed(attempt, reason, tokens, written.usage())
        self.condensed = condensed
        self._record(
            CompactionEvent(
                tier="summary",
                trigger=self.trigger,
                tokens_before=tokens,
                tokens_after=tokens_after,
                window=self.window,
                messages_before=len(before),
                messages_after=len(after),
                archived=list(condensed.handles),
                kept=self._kept_after(boundary),
                duration_ms=_since(started),
                summary=written.text,
                attempt=attempt,
                summary_usage=written.usage(),
                covered=boundary,
                covered_digest=condensed.covered_digest,
                head=self.head,
            )
        )
        self._adopt(after, after_measure)
        return True

    def _attempt_failed(
        self, attempt: int, reason: str, tokens: int, usage: dict[str, float]
    ) -> bool:
        self._record(
            SummaryFailedEvent(
                attempt=attempt,
                reason=reason,
                tokens_before=tokens,
                window=self.window,
                summary_usage=usage,
            )
        )
        return False

    def _summarised_part(self, start: int, end: int) -> list[Message]:
        """Messages ``start`` to ``end`` as the summariser sees them: tool results as
        placeholders, so its input stays bounded whatever the results weigh."""
        placeholders: dict[str, Level] = {}
        for placed in self.results:
            placeholders[placed.handle] = "placeholder"
            if placed.input is not None:
                placeholders[placed.input] = "placeholder"
        return self.session.view(self.messages, self.results, placeholders, None)[start:end]

    def _previous_summary(self) -> str:
        if self.condensed is None:
            return ""
        if self.condensed.kind == "replan":
            return f"{self.condensed.summary}\n\n{self.condensed.plan}".strip()
        return self.condensed.summary

    # -- replan -------------------------------------------------------------------------------

    def _replan(self, tokens: int) -> Steps:
        started = time.perf_counter()
        start = self.condensed.covered if self.condensed else self.head
        end = len(self.messages)
        transcript = entries(self._summarised_part(start, end), self.config.templates)
        summary = self._previous_summary()
        words = max(50, self.config.summary_max_tokens // 2)
        try:
            written = yield from write_plan(self.target, self._task(), transcript, summary, words)
        except SummarizerError as exc:
            self._fail(tokens, f"the replan call failed: {exc}", exc)
        if not written.text:
            self._fail(tokens, "the replan call returned no plan")
        handles = tuple(p.handle for p in self.results)
        condensed = Condensed(
            "replan", self.head, end, self._digest(end), summary, written.text, handles
        )
        before = self.view
        after = self._view(self.session.state.archive, condensed)
        after_measure = self._measure(after)
        tokens_after = after_measure.tokens
        if tokens_after > self.window:
            self._fail(tokens_after, "the replanned context still does not fit the window")
        self.condensed = condensed
        self._record(
            ReplanEvent(
                trigger=self.trigger,
                reason="the run's summary attempts are spent",
                summary=summary,
                plan=written.text,
                tokens_before=tokens,
                tokens_after=tokens_after,
                window=self.window,
                messages_before=len(before),
                messages_after=len(after),
                archived=list(handles),
                duration_ms=_since(started),
                summary_usage=written.usage(),
                covered=end,
                covered_digest=condensed.covered_digest,
                head=self.head,
            )
        )
        self._adopt(after, after_measure)
        return True

    def _fail(self, tokens: int, reason: str, cause: BaseException | None = None) -> NoReturn:
        state = self.session.state
        attempts = state.attempts + state.replans
        self._record(
            FailedEvent(reason=reason, tokens=tokens, window=self.window, attempts=attempts)
        )
        raise ContextExhaustedError(
            f"session {self.session.key.session_id!r}: {reason} ({tokens:,} tokens for a "
            f"window of {self.window:,})",
            session_id=self.session.key.session_id,
            run_id=state.run_id,
            tokens=tokens,
            window=self.window,
            attempts=attempts,
        ) from cause

    # -- helpers ------------------------------------------------------------------------------

    def _view(self, levels: dict[str, Level], condensed: Condensed | None) -> list[Message]:
        return self.session.view(self.messages, self.results, levels, condensed)

    def _measure(self, view: Sequence[Message]) -> Measure:
        measure = self.session.meter.measure(view, self.tools, self.session.state.anchor)
        if self.scale == 1.0:
            return measure
        return Measure(round(measure.tokens * self.scale), measure.local, measure.digest)

    def _record(self, event: Event) -> None:
        self.events.append(self.session.append(event))

    def _task(self) -> str:
        task = self.messages[self.head - 1] if self.head else None
        return text_of(task.get("content")) if task and task["role"] == "user" else ""

    def _digest(self, covered: int) -> str:
        return self.session.meter.message_digest(self.messages[covered - 1])

    def _archived_after(self, boundary: int) -> list[str]:
        """Handles not in full once messages before ``boundary`` are summarised."""
        archive = self.session.state.archive
        return [p.handle for p in self.results if p.index < boundary or p.handle in archive]

    def _kept_after(self, boundary: int) -> list[str]:
        archive = self.session.state.archive
        return [p.handle for p in self.results if p.index >= boundary and p.handle not in archive]


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
