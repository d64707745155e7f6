"""Replays trajectories through policies and measures every call.

A replay is an approximation: each policy sees the same fixed history, while a real agent could
act differently on a compacted context. Provider usage, where a trajectory has it, scales the
local counts of every policy's requests by the call's real reported/local ratio, so the
figures are in the provider's tokens.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from compactor.bench.metrics import (
    Sized,
    Sizer,
    cached_tokens,
    kept_in_context,
    tool_chars,
)
from compactor.bench.policies import Policy, Prepared
from compactor.bench.trajectory import Trajectory
from compactor.messages import Message
from compactor.tokens import Prices

RECOUNT_EVERY = 8
"""The full recount that overhead is compared with is timed on every 8th call."""


@dataclass(frozen=True)
class CallResult:
    """One call of one policy."""

    tokens: int
    cached: int
    output: int
    cost: float
    tool_chars: int
    kept_chars: int
    compactions: int
    overhead_ms: float
    recount_ms: float | None


@dataclass
class SessionResult:
    """One policy on one trajectory."""

    policy: str
    trajectory: str
    window: int
    calls: list[CallResult] = field(default_factory=list)
    gave_up: bool = False
    """The policy raised (compactor: ContextExhaustedError) and could not go on."""

    @property
    def over(self) -> int:
        """Calls sent over the window."""
        return sum(call.tokens > self.window for call in self.calls)

    @property
    def failed(self) -> bool:
        """A session fails when any call is sent over the window, or the policy gives up."""
        return self.gave_up or self.over > 0


@dataclass(frozen=True)
class _Call:
    """What every policy shares about one call of a trajectory."""

    cut: int
    local: int
    """The local count of the whole history before the call (with the agent's tools)."""
    reported: int | None
    """The input tokens the provider reported for it, where the trajectory has usage."""
    slope: float
    """Provider tokens per local token for this trajectory (a least-squares fit)."""
    output: int
    recount_ms: float | None

    def provider_tokens(self, local: int) -> int:
        """What the provider would count for a request of ``local`` local tokens.

        Anchored on the reported count of the full history, and moved by the fitted slope:
        the provider's fixed overhead (templates, tool formatting) stays, where a pure ratio
        would shrink it along with the request and favour the policies that cut the most.
        """
        if self.reported is None:
            return local
        return max(round(self.reported + self.slope * (local - self.local)), 0)


def replay(
    trajectory: Trajectory,
    policy: Policy,
    window: int,
    model: str,
    sizer: Sizer,
    calls: Sequence[_Call],
) -> SessionResult:
    """Replay one trajectory through one policy."""
    replay_ = policy.start(trajectory.tools, window, model)
    prices = Prices.of(model)
    result = SessionResult(policy.name, trajectory.name, window)
    previous: Sized | None = None
    for call in calls:
        prefix = trajectory.messages[: call.cut]
        started = time.perf_counter()
        prepared = replay_.prepare(prefix)
        overhead = (time.perf_counter() - started) * 1000
        if prepared.messages is None:
            result.gave_up = True
            break
        sized = sizer.size(prepared.messages, [*trajectory.tools, *prepared.tools])
        tokens = call.provider_tokens(sized.total)
        cached = round(cached_tokens(previous, sized) * tokens / max(sized.total, 1))
        previous = sized
        started = time.perf_counter()
        replay_.observe(tokens, call.output)
        overhead = (prepared.own_ms if prepared.own_ms is not None else overhead) + (
            time.perf_counter() - started
        ) * 1000
        result.calls.append(_measure(prefix, prepared, prices, tokens, cached, call, overhead))
    return result


def _measure(
    prefix: list[Message],
    prepared: Prepared,
    prices: Prices,
    tokens: int,
    cached: int,
    call: _Call,
    overhead: float,
) -> CallResult:
    assert prepared.messages is not None
    total = tool_chars(prefix)
    kept = kept_in_context(prefix, prepared.messages) + prepared.retrievable_chars
    cost = prices.cost(tokens, cached, call.output)
    cost += prices.cost(prepared.summarizer_input, 0, prepared.summarizer_output)
    return CallResult(
        tokens,
        cached,
        call.output,
        cost,
        total,
        min(kept, total),
        prepared.compactions,
        overhead,
        call.recount_ms,
    )


def shared_calls(trajectory: Trajectory, sizer: Sizer, number: int) -> list[_Call]:
    """Per call: its cut, local and reported sizes, output tokens, and a timed recount."""
    usage = trajectory.usage or []
    cuts = trajectory.cuts()
    locals_ = [sizer.size(trajectory.messages[:cut], trajectory.tools).total for cut in cuts]
    reported = [int(u["prompt_tokens"]) for u in usage[: len(cuts)]]
    slope = _slope(locals_[: len(reported)], reported)
    out = []
    for k, cut in enumerate(cuts):
        output = sizer.meter.message_tokens(trajectory.messages[cut])
        if k < len(usage):
            output = int(usage[k].get("completion_tokens") or output)
        prefix = trajectory.messages[:cut]
        timed = _recount_ms(prefix, sizer) if (number + k) % RECOUNT_EVERY == 0 else None
        out.append(
            _Call(cut, locals_[k], reported[k] if k < len(reported) else None, slope, output, timed)
        )
    return out


def _slope(local: Sequence[int], reported: Sequence[int]) -> float:
    """The least-squares slope of reported over local tokens (their ratio with few points)."""
    if len(local) < 3 or len(set(local)) < 2:
        return sum(reported) / max(sum(local), 1) if local else 1.0
    mean_x, mean_y = statistics.fmean(local), statistics.fmean(reported)
    spread = sum((x - mean_x) ** 2 for x in local)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(local, reported, strict=True)) / spread


def _recount_ms(messages: Sequence[Message], sizer: Sizer) -> float:
    """One full token count of a history from scratch, as a tokenizer would do it."""
    count = sizer.meter.count_text
    started = time.perf_counter()
    for message in messages:
        count(str(message.get("content") or ""))
        for tool_call in message.get("tool_calls") or ():
            count(tool_call["function"]["arguments"])
    return (time.perf_counter() - started) * 1000


def run(
    trajectories: Sequence[Trajectory],
    policies: Sequence[Policy],
    window: int,
    model: str,
    progress: Callable[[str], None] = lambda _: None,
) -> list[SessionResult]:
    """Every policy on every trajectory."""
    sizer = Sizer(model)
    results = []
    for number, trajectory in enumerate(trajectories):
        calls = shared_calls(trajectory, sizer, number)
        for policy in policies:
            progress(f"{trajectory.name} / {policy.name}")
            results.append(replay(trajectory, policy, window, model, sizer, calls))
    return results


def median_or_none(values: Sequence[float]) -> float | None:
    """The median, or None when there is nothing to take it of."""
    return statistics.median(values) if values else None
