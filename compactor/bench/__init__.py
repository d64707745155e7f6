"""The token-savings benchmark behind ``compactor bench``.

Replays agent sessions (the built-in stdlib workload, or OpenAI-format trajectories) through
several context policies side by side, in one run, and measures input tokens, calls over the
window, prompt-cache reuse, cost with prompt caching, information kept and overhead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compactor.bench import peers
from compactor.bench.policies import CompactorPolicy, NoCompaction, ObservationMasking, Policy
from compactor.bench.report import PolicyFigures, figures, table, write
from compactor.bench.runner import run
from compactor.bench.trajectory import Trajectory, load_traces
from compactor.bench.workload import builtin_workload
from compactor.tokens import model_window

__all__ = ["BenchOptions", "PolicyFigures", "all_policies", "bench"]


@dataclass(frozen=True)
class BenchOptions:
    """What ``compactor bench`` runs."""

    traces: Path | None = None
    usage: Path | None = None
    window: int | None = None
    model: str = "deepseek/deepseek-chat"
    policies: tuple[str, ...] = ()
    out: Path = Path("benchmarks/results")
    sessions: int = 10
    max_calls: int | None = None


def all_policies() -> list[Policy]:
    """compactor, its baselines, and every installed peer."""
    return [NoCompaction(), CompactorPolicy(), ObservationMasking(10), *peers.policies()]


def bench(options: BenchOptions) -> list[PolicyFigures]:
    """Run the benchmark, print the table, write the JSON and the chart."""
    window = options.window or model_window(options.model)
    chosen = _choose(all_policies(), options.policies)
    trajectories = _trajectories(options)
    workload = options.traces.name if options.traces else "builtin"
    results = run(
        trajectories,
        chosen,
        window,
        options.model,
        progress=_Progress(len(trajectories) * len(chosen)),
    )
    configs = {policy.name: policy.describe(window) for policy in chosen}
    rows = figures(results, configs)
    missing = peers.missing()
    print(
        f"\n{workload}: {len(trajectories)} sessions, {rows[0].calls:,} calls, window "
        f"{window:,} tokens, {options.model} prices"
    )
    print(table(rows, missing))
    meta = {
        "workload": workload,
        "window": window,
        "model": options.model,
        "sessions": len(trajectories),
        "missing_peers": missing,
        "policies": configs,
        "traces": str(options.traces) if options.traces else None,
    }
    stem = f"{workload}-{options.model.rsplit('/', 1)[-1]}-{window}"
    data, picture = write(options.out, stem, rows, results, meta)
    print(f"\nwrote {data}" + (f" and {picture}" if picture else " (no chart: no matplotlib)"))
    return rows


def _choose(available: Sequence[Policy], names: Sequence[str]) -> list[Policy]:
    if not names:
        return list(available)
    known = {policy.name: policy for policy in available}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown or unavailable policies {unknown}; available: {list(known)}")
    return [known[name] for name in names]


def _trajectories(options: BenchOptions) -> list[Trajectory]:
    found = (
        load_traces(options.traces, options.usage)
        if options.traces
        else builtin_workload(options.sessions)
    )
    if options.max_calls is None:
        return found
    return [_truncate(t, options.max_calls) for t in found]


def _truncate(trajectory: Trajectory, calls: int) -> Trajectory:
    cuts = trajectory.cuts()
    if len(cuts) <= calls:
        return trajectory
    end = cuts[calls - 1] + 1  # through the assistant message of call number ``calls``
    usage = trajectory.usage[:calls] if trajectory.usage else None
    return Trajectory(trajectory.name, trajectory.messages[:end], usage, trajectory.tools)


class _Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0

    def __call__(self, label: str) -> None:
        self.done += 1
        filled = int(30 * self.done / self.total)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {label[:50]:<50}"
        )
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()
