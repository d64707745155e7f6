"""Middleware overhead: compact() per call against one full tiktoken recount of the history.

An agent with a 100K-token history (standard-library modules read as tool results) makes 60
more calls, each adding one tool turn. For every call, the time of ``compact()`` (with its
stores, its event log and its token cache) is set against the time of counting every message
of the same history from scratch with tiktoken, measured side by side in the same run; the
figure is the median ratio. Runs once where nothing needs compacting (a 1M window) and once
in the offload band (a 160K window).

    .venv/bin/python benchmarks/overhead.py

Writes ``benchmarks/results/overhead.json``.
"""

from __future__ import annotations

import json
import platform
import statistics
import sysconfig
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from compactor import Compactor, CompactorConfig
from compactor.tokens import text_counter

HERE = Path(__file__).resolve().parent
TARGET_TOKENS = 100_000


def stdlib_sources() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [
        p.read_text(encoding="utf-8")
        for p in sorted(root.glob("*.py"))
        if 4_000 < p.stat().st_size < 20_000
    ]


def turn(number: int, output: str) -> list[dict[str, Any]]:
    call_id = f"call_{number}"
    return [
        {
            "role": "assistant",
            "content": f"Reading file {number}.",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": json.dumps({"command": f"cat {number}"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def build_history(sources: list[str]) -> tuple[list[dict[str, Any]], int]:
    count = text_counter("o200k_base")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Study the stdlib."},
    ]
    tokens, number = 0, 0
    while tokens < TARGET_TOKENS:
        output = sources[number % len(sources)]
        messages += turn(number, output)
        tokens += count(output)
        number += 1
    return messages, number


def full_recount(messages: list[dict[str, Any]]) -> int:
    count = text_counter("o200k_base")
    total = 0
    for message in messages:
        total += count(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            total += count(call["function"]["arguments"])
    return total


def measure(window: int, sources: list[str], home: Path) -> dict[str, Any]:
    messages, number = build_history(sources)
    compactor = Compactor("gpt-4o", config=CompactorConfig(context_window=window), home=home)
    compactor.compact(messages, session_id="bench")  # the first call stores every result
    ratios, compact_ms, recount_ms, tiers = [], [], [], []
    for step in range(60):
        messages = messages + turn(number + step, f"ok {step}\n" * 20)
        started = time.perf_counter()
        result = compactor.compact(messages, session_id="bench")
        middle = time.perf_counter()
        full_recount(messages)
        ended = time.perf_counter()
        compact_ms.append((middle - started) * 1000)
        recount_ms.append((ended - middle) * 1000)
        ratios.append((middle - started) / (ended - middle))
        tiers.append(result.tier)
    return {
        "window": window,
        "history_tokens": result.input_tokens_before,
        "median_compact_ms": statistics.median(compact_ms),
        "median_recount_ms": statistics.median(recount_ms),
        "median_ratio": statistics.median(ratios),
        "calls_that_compacted": sum(t != "none" for t in tiers),
    }


def main() -> None:
    sources = stdlib_sources()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, window in (("steady", 1_000_000), ("offload band", 160_000)):
            results[name] = figures = measure(window, sources, Path(scratch) / name)
            print(
                f"{name:13} history {figures['history_tokens']:,} tokens: compact() "
                f"{figures['median_compact_ms']:.2f} ms, full recount "
                f"{figures['median_recount_ms']:.2f} ms, ratio {figures['median_ratio']:.1%}"
                f" ({figures['calls_that_compacted']} of 60 calls compacted)"
            )
    results["_meta"] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "compactor": version("compactor"),
        "tiktoken": version("tiktoken"),
    }
    out = HERE / "results" / "overhead.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
