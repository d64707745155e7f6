"""Figures per policy, the terminal table, the JSON of every figure, and the chart."""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from compactor.bench.runner import SessionResult, median_or_none


@dataclass(frozen=True)
class PolicyFigures:
    """Every figure of one policy on one workload."""

    policy: str
    config: str
    sessions: int
    calls: int
    failed_sessions: int
    calls_over_window: int
    input_tokens: int
    peak_tokens: int
    cached_tokens: int
    prefix_reuse: float
    cost_usd: float
    info_kept: float
    compactions: int
    overhead_ms: float | None
    overhead_ratio: float | None
    input_vs_none: float | None = None
    cost_vs_none: float | None = None


def figures(results: Sequence[SessionResult], configs: dict[str, str]) -> list[PolicyFigures]:
    """One row per policy, in the order the policies ran."""
    names = list(dict.fromkeys(r.policy for r in results))
    rows = [
        _figures(name, [r for r in results if r.policy == name], configs[name]) for name in names
    ]
    base = next((row for row in rows if row.policy == "none"), None)
    if base is None:
        return rows
    return [_versus(row, base) for row in rows]


def _figures(name: str, sessions: list[SessionResult], config: str) -> PolicyFigures:
    calls = [call for session in sessions for call in session.calls]
    tokens = sum(c.tokens for c in calls)
    cached = sum(c.cached for c in calls)
    timed = [c for c in calls if c.recount_ms]
    return PolicyFigures(
        policy=name,
        config=config,
        sessions=len(sessions),
        calls=len(calls),
        failed_sessions=sum(s.failed for s in sessions),
        calls_over_window=sum(s.over for s in sessions),
        input_tokens=tokens,
        peak_tokens=max((c.tokens for c in calls), default=0),
        cached_tokens=cached,
        prefix_reuse=cached / tokens if tokens else 0.0,
        cost_usd=sum(c.cost for c in calls),
        info_kept=sum(c.kept_chars for c in calls) / max(sum(c.tool_chars for c in calls), 1),
        compactions=sum(c.compactions for c in calls),
        overhead_ms=median_or_none([c.overhead_ms for c in calls]),
        overhead_ratio=median_or_none(
            [c.overhead_ms / c.recount_ms for c in timed if c.recount_ms]
        ),
    )


def _versus(row: PolicyFigures, base: PolicyFigures) -> PolicyFigures:
    values = asdict(row)
    values["input_vs_none"] = (
        row.input_tokens / base.input_tokens - 1 if base.input_tokens else None
    )
    values["cost_vs_none"] = row.cost_usd / base.cost_usd - 1 if base.cost_usd else None
    return PolicyFigures(**values)


def table(rows: Sequence[PolicyFigures], missing: dict[str, str]) -> str:
    """The terminal table."""
    header = (
        "policy",
        "input vs none",
        "peak",
        "over window",
        "failed",
        "prefix reuse",
        "cost USD",
        "cost vs none",
        "info kept",
        "compactions",
        "overhead",
    )
    lines = [header]
    for row in rows:
        lines.append(
            (
                row.policy,
                _pct(row.input_vs_none),
                f"{row.peak_tokens:,}",
                f"{row.calls_over_window:,}",
                f"{row.failed_sessions}/{row.sessions}",
                f"{row.prefix_reuse:.1%}",
                f"{row.cost_usd:.4f}",
                _pct(row.cost_vs_none),
                f"{row.info_kept:.1%}",
                f"{row.compactions:,}",
                _overhead(row),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    ]
    text += [f"missing peer {peer}: {why}" for peer, why in missing.items()]
    return "\n".join(text)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _overhead(row: PolicyFigures) -> str:
    if row.overhead_ms is None:
        return "-"
    ratio = "" if row.overhead_ratio is None else f" ({row.overhead_ratio:.1%} of a recount)"
    return f"{row.overhead_ms:.2f} ms{ratio}"


def representative(results: Sequence[SessionResult]) -> str:
    """The trajectory shown in the chart: the one with the most calls."""
    return max(results, key=lambda r: (len(r.calls), r.trajectory)).trajectory


def write(
    out: Path,
    stem: str,
    rows: Sequence[PolicyFigures],
    results: Sequence[SessionResult],
    meta: dict[str, Any],
) -> tuple[Path, Path | None]:
    """Write ``<stem>.json`` (every figure) and ``<stem>.png`` (the chart) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shown = representative(results)
    per_call = {r.policy: [c.tokens for c in r.calls] for r in results if r.trajectory == shown}
    sessions = [
        {
            "policy": r.policy,
            "trajectory": r.trajectory,
            "calls": len(r.calls),
            "over_window": r.over,
            "gave_up": r.gave_up,
            "input_tokens": sum(c.tokens for c in r.calls),
            "cost_usd": sum(c.cost for c in r.calls),
        }
        for r in results
    ]
    picture = chart(out / f"{stem}.png", rows, per_call, shown, meta)
    document = {
        "meta": {**meta, **environment(), "chart": picture.name if picture else None},
        "policies": [asdict(r) for r in rows],
        "representative": {"trajectory": shown, "input_tokens_per_call": per_call},
        "sessions": sessions,
    }
    data = out / f"{stem}.json"
    data.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return data, picture


def chart(
    path: Path,
    rows: Sequence[PolicyFigures],
    per_call: dict[str, list[int]],
    shown: str,
    meta: dict[str, Any],
) -> Path | None:
    """Input tokens per call on one session, and cost per policy; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5))
    for policy, tokens in per_call.items():
        left.plot(range(1, len(tokens) + 1), tokens, label=policy, linewidth=1.4)
    left.axhline(meta["window"], color="black", linestyle="--", linewidth=1, label="window")
    # Without compaction a session grows far past the window; the policies live below it.
    left.set_ylim(0, 1.6 * meta["window"])
    left.set(title=f"Input tokens per call: {shown}", xlabel="model call", ylabel="input tokens")
    left.legend(fontsize=8)
    right.barh([r.policy for r in rows], [r.cost_usd for r in rows], color="tab:blue")
    right.invert_yaxis()
    right.set(title=f"Cost with prompt caching ({meta['model']}, {meta['workload']})", xlabel="USD")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def environment() -> dict[str, Any]:
    """The versions and the machine the figures were measured on."""
    packages: dict[str, str | None] = {}
    for name in (
        "compactor",
        "litellm",
        "tiktoken",
        "langchain",
        "langchain-core",
        "pydantic-ai-harness",
        "pydantic-ai-slim",
    ):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "packages": packages,
    }
