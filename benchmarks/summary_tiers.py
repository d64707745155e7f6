"""How often the summary tier, replan and FAILED happen on real runs at a small window.

Replays ``../shared/traces/swe`` (99 SWE-bench runs of mini-swe-agent with DeepSeek) through
compactor at a 16K-token window, with ``compactor.testing``'s scripted summariser (summaries
of a fixed 300 words) and each call's real provider usage fed back as the anchor. Counts the
runs that reach the summary tier, replan and FAILED, and the input tokens sent against no
compaction (provider tokens: local counts scaled by each call's reported/local ratio).

    .venv/bin/python benchmarks/summary_tiers.py [--traces ../shared/traces] [--window 16000]

Writes ``benchmarks/results/summary_tiers-<window>.json``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from compactor import (
    CompactionEvent,
    Compactor,
    CompactorConfig,
    ContextExhaustedError,
    MemorySessionStore,
    MemoryToolResultStore,
    ReplanEvent,
    SummaryFailedEvent,
)
from compactor.bench.metrics import Sizer
from compactor.bench.report import environment
from compactor.bench.trajectory import Trajectory, load_traces
from compactor.testing import ScriptedSummarizer

HERE = Path(__file__).resolve().parent
MODEL = "deepseek/deepseek-chat"


def replay(trajectory: Trajectory, window: int, sizer: Sizer) -> dict[str, Any]:
    """One run through compactor: what it reached and the tokens it sent."""
    compactor = Compactor(
        MODEL,
        config=CompactorConfig(context_window=window),
        tool_results=MemoryToolResultStore(),
        sessions=MemorySessionStore(),
        summarizer=ScriptedSummarizer(words=300),
    )
    tools = [*trajectory.tools, compactor.tool_schema]
    sent = raw = 0
    failed = False
    for k, cut in enumerate(trajectory.cuts()):
        prefix = trajectory.messages[:cut]
        usage = (trajectory.usage or [])[k] if k < len(trajectory.usage or []) else None
        scale = usage["prompt_tokens"] / sizer.size(prefix, trajectory.tools).total if usage else 1
        raw += round(sizer.size(prefix, trajectory.tools).total * scale)
        try:
            result = compactor.compact(prefix, session_id="run", tools=tools)
        except ContextExhaustedError:
            failed = True
            break
        tokens = round(sizer.size(result.messages, tools).total * scale)
        sent += tokens
        output = usage["completion_tokens"] if usage else 100
        compactor.record_usage(
            "run", {"usage": {"prompt_tokens": tokens, "completion_tokens": output}}
        )
    kinds = Counter(_kind(e) for e in compactor.events("run"))
    return {
        "summaries": kinds["summary"],
        "failed_attempts": kinds["summary_failed"],
        "replans": kinds["replan"],
        "failed": failed,
        "sent": sent,
        "none": raw,
    }


def _kind(event: object) -> str:
    if isinstance(event, CompactionEvent):
        return event.tier
    if isinstance(event, SummaryFailedEvent):
        return "summary_failed"
    return "replan" if isinstance(event, ReplanEvent) else "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=HERE.parent.parent / "shared" / "traces")
    parser.add_argument("--window", type=int, default=16_000)
    args = parser.parse_args()
    trajectories = load_traces(args.traces / "swe", args.traces / "swe-usage")
    sizer = Sizer(MODEL)
    runs = {t.name: replay(t, args.window, sizer) for t in trajectories}
    figures = {
        "runs": len(runs),
        "runs_with_a_summary": sum(r["summaries"] > 0 for r in runs.values()),
        "summaries": sum(r["summaries"] for r in runs.values()),
        "failed_summary_attempts": sum(r["failed_attempts"] for r in runs.values()),
        "runs_replanned": sum(r["replans"] > 0 for r in runs.values()),
        "runs_failed": sum(r["failed"] for r in runs.values()),
        "input_tokens_vs_none": sum(r["sent"] for r in runs.values())
        / sum(r["none"] for r in runs.values())
        - 1,
    }
    print(json.dumps(figures, indent=1))
    out = HERE / "results" / f"summary_tiers-{args.window}.json"
    out.write_text(
        json.dumps(
            {
                "figures": figures,
                "runs": runs,
                "meta": {"window": args.window, "model": MODEL, **environment()},
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
