"""How close compactor's input-token estimates are to what the provider reported.

Replays the SWE-bench trajectories of ``../shared/traces/swe`` (mini-swe-agent with DeepSeek)
through ``Compactor.compact()`` with a window large enough that nothing is compacted, feeding
each call's real usage (``../shared/traces/swe-usage``) back through ``record_usage()``. The
estimate for call k is then compared with the ``prompt_tokens`` DeepSeek reported for call k:
anchored (the real path: call k-1's reported usage anchors call k) and unanchored (local
tokenizer only), for the DeepSeek tokenizer litellm bundles and for o200k.

    .venv/bin/python benchmarks/token_accuracy.py [--traces ../shared/traces]

Writes ``benchmarks/results/token_accuracy.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from importlib.metadata import version
from pathlib import Path
from typing import Any

from compactor import Compactor, CompactorConfig, MemorySessionStore, MemoryToolResultStore
from compactor.bench.trajectory import BASH_TOOL

HERE = Path(__file__).resolve().parent


def replay(trace: Path, usage: list[dict[str, Any]], model: str, anchored: bool) -> list[float]:
    """Relative errors |estimate - reported| / reported of every call of one trajectory."""
    messages = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    compactor = Compactor(
        model,
        config=CompactorConfig(context_window=10_000_000),
        tool_results=MemoryToolResultStore(),
        sessions=MemorySessionStore(),
    )
    calls = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    errors = []
    for k, end in enumerate(calls[: len(usage)]):
        reported = usage[k]["prompt_tokens"]
        result = compactor.compact(messages[:end], session_id="s", tools=[BASH_TOOL])
        errors.append(abs(result.input_tokens - reported) / reported)
        if anchored:
            compactor.record_usage(
                "s",
                {
                    "usage": {
                        "prompt_tokens": reported,
                        "completion_tokens": usage[k]["completion_tokens"],
                    }
                },
            )
    return errors


def summarize(errors: list[float]) -> dict[str, float]:
    ordered = sorted(errors)
    return {
        "calls": len(ordered),
        "median": statistics.median(ordered),
        "p95": ordered[int(0.95 * (len(ordered) - 1))],
        "max": ordered[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=HERE.parent.parent / "shared" / "traces")
    args = parser.parse_args()
    traces = sorted((args.traces / "swe").glob("*.jsonl"))
    results: dict[str, Any] = {}
    for model in ("deepseek/deepseek-chat", "gpt-4o"):
        for anchored in (True, False):
            errors: list[float] = []
            for trace in traces:
                usage = json.loads((args.traces / "swe-usage" / f"{trace.stem}.json").read_text())
                # call 1 has no previous call to anchor on: it is reported unanchored below
                errors += replay(trace, usage, model, anchored)[1 if anchored else 0 :]
            key = f"{model} {'anchored' if anchored else 'unanchored'}"
            results[key] = summarize(errors)
            print(
                f"{key:40} median {results[key]['median']:.3%}  p95 {results[key]['p95']:.3%}"
                f"  max {results[key]['max']:.3%}  ({results[key]['calls']} calls)"
            )
    results["_meta"] = {
        "trajectories": len(traces),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "compactor": version("compactor"),
        "tiktoken": version("tiktoken"),
        "litellm": version("litellm"),
    }
    out = HERE / "results" / "token_accuracy.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
