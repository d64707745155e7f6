"""The Redis stores against the embedded ones, side by side in one run.

* page latency: ``Compactor.read_tool_result`` of a 4 KiB page (at random offsets) of a
  stored tool output of 1 KiB or 1 MiB, ASCII or not, on a Compactor built with
  ``Compactor.from_url`` (RedisToolResultStore) and on one with the default stores
  (DiskToolResultStore, diskcache): median and 95th percentile, and the ratio of medians.
* put throughput: ``put`` of 1 KiB and 1 MiB tool outputs, Redis against diskcache.
* append throughput: session-log appends of events whose JSON is 1 KiB or 1 MiB (the latter
  goes to a blob in both stores), RedisSessionStore against JsonlSessionStore, at matching
  durability: ``appendfsync always`` against ``fsync="always"`` (every append on disk before
  it returns), and ``appendfsync everysec`` against ``fsync="batch"``.

Ratios are Redis / embedded: for latency (below 1: Redis faster) and for throughput (above
1: Redis faster); throughputs are the median of 3 runs per side, alternated. The script
starts its own redis-server (``appendonly yes``) on a free loopback port, with its data, like
the embedded stores', in a temporary folder on ``$TMPDIR``:

    .venv/bin/python benchmarks/redis_store.py

Writes ``benchmarks/results/redis_store.json``. Needs ``redis-server`` on the PATH.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import redis

from compactor import Compactor, CompactorConfig
from compactor.events import ModelCallEvent, dump_event
from compactor.stores import (
    DiskToolResultStore,
    JsonlSessionStore,
    SessionKey,
    SessionStore,
    ToolResultStore,
)
from compactor.stores._files import canonical_json
from compactor.stores.jsonl import FsyncPolicy
from compactor.stores.redis import RedisSessionStore, RedisToolResultStore, connect
from compactor.testing import ScriptedSummarizer

HERE = Path(__file__).resolve().parent
KEY = SessionKey("bench", "acme")
KIB, MIB = 1024, 1 << 20
PAGE = 4096
ROUNDS = 3
READS = 2000
PUTS = {KIB: 5000, MIB: 50}
APPENDS = {KIB: 3000, MIB: 30}
DURABILITY: dict[str, tuple[str, FsyncPolicy]] = {"always": ("always", "always")}
DURABILITY["relaxed"] = ("everysec", "batch")


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """A redis-server with AOF on, for the length of the block; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install -y redis-server)")
    folder.mkdir()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
    server = subprocess.Popen(
        [*command, "--save", "", "--appendonly", "yes"],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        client = connect(url)
        for _ in range(500):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if server.poll() is not None:
                    raise SystemExit(f"redis-server exited: {command}") from None
                time.sleep(0.01)
        yield url
    finally:
        server.terminate()
        server.wait()


def output(size: int, ascii_only: bool) -> str:
    """A tool output of ``size`` characters: log lines, or the same with accents and CJK."""
    line = "2025-01-01 12:00:00 INFO worker-3 processed batch 1234 in 56 ms\n"
    if not ascii_only:
        line = "2025-01-01 12:00:00 INFO 作業者-3 a traité le lot 1234 en 56 ms ✓\n"
    return (line * (size // len(line) + 1))[:size]


def history(text: str) -> list[dict[str, Any]]:
    call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return [
        {"role": "system", "content": "agent"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": text},
    ]


def page_latencies(compactor: Compactor, session: str, text: str) -> list[float]:
    """Seconds per ``read_tool_result`` of a 4 KiB page, at seeded random offsets."""
    compactor.compact(history(text), session_id=session)
    rng = random.Random(7)
    offsets = [rng.randrange(max(len(text) - PAGE, 0) + 1) for _ in range(READS)]
    compactor.read_tool_result(session, "call_0", 0, PAGE)  # warm: state, connections
    seconds = []
    for offset in offsets:
        started = time.perf_counter()
        compactor.read_tool_result(session, "call_0", offset, PAGE)
        seconds.append(time.perf_counter() - started)
    return seconds


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "median_us": round(statistics.median(ordered) * 1e6, 1),
        "p95_us": round(ordered[int(len(ordered) * 0.95)] * 1e6, 1),
    }


def pages(url: str, scratch: Path) -> dict[str, Any]:
    config = CompactorConfig(context_window=2_000_000, read_limit_chars=PAGE)
    summarizer = ScriptedSummarizer()
    embedded = Compactor("gpt-4o", config=config, home=scratch / "home", summarizer=summarizer)
    shared = Compactor.from_url(url, "gpt-4o", prefix="bench", config=config)
    figures: dict[str, Any] = {}
    for size, name in ((KIB, "1 KiB"), (MIB, "1 MiB")):
        for ascii_only in (True, False):
            text = output(size, ascii_only)
            session = f"{size}-{ascii_only}"
            disk = summary(page_latencies(embedded, session, text))
            remote = summary(page_latencies(shared, session, text))
            label = f"{name} {'ascii' if ascii_only else 'non-ascii'}"
            figures[label] = {
                "output_bytes": len(text.encode()),
                "diskcache": disk,
                "redis": remote,
                "ratio_redis_to_diskcache_median": round(
                    remote["median_us"] / disk["median_us"], 2
                ),
            }
    return figures


def rate(count: int, work: Callable[[int], object]) -> float:
    """Calls per second of ``work(n)`` for n in range(count)."""
    started = time.perf_counter()
    for number in range(count):
        work(number)
    return count / (time.perf_counter() - started)


def side_by_side(first: Callable[[], float], second: Callable[[], float]) -> tuple[float, float]:
    """The median of ``ROUNDS`` alternating runs of each: fsync times drift during a run, and
    alternating lets both sides see the same disk."""
    runs = [(first(), second()) for _ in range(ROUNDS)]
    return statistics.median(a for a, _ in runs), statistics.median(b for _, b in runs)


def put_rate(store: ToolResultStore, size: int) -> float:
    text = output(size, True)
    return rate(PUTS[size], lambda n: store.put(KEY, f"{size}-{n}", text))


def puts(url: str, scratch: Path) -> dict[str, Any]:
    disk = DiskToolResultStore(scratch / "puts")
    remote = RedisToolResultStore(url, prefix="bench-puts")
    figures: dict[str, Any] = {}
    for size, name in ((KIB, "1 KiB"), (MIB, "1 MiB")):
        disk_rate, redis_rate = side_by_side(
            lambda: put_rate(disk, size),  # noqa: B023 (called before the loop moves on)
            lambda: put_rate(remote, size),  # noqa: B023
        )
        figures[name] = {
            "puts": PUTS[size],
            "diskcache_per_s": round(disk_rate, 1),
            "redis_per_s": round(redis_rate, 1),
            "ratio_redis_to_diskcache": round(redis_rate / disk_rate, 2),
        }
    disk.close()
    return figures


def event_of(size: int, number: int) -> ModelCallEvent:
    """A model_call event whose JSON is ``size`` bytes."""
    event = ModelCallEvent(model=f"bench-{number:08d}", finish_reason="")
    pad = size - len(canonical_json(dump_event(event)))
    return event.model_copy(update={"finish_reason": "x" * pad})


def append_rate(store: SessionStore, key: SessionKey, size: int) -> float:
    count = APPENDS[size]
    events = [event_of(size, n) for n in range(count + 1)]
    store.append(key, events[0])  # create (or open) the session outside the timing
    return rate(count, lambda n: store.append(key, events[n + 1]))


def appends(url: str, scratch: Path) -> dict[str, Any]:
    client = connect(url)
    figures: dict[str, Any] = {}
    for label, (appendfsync, fsync) in DURABILITY.items():
        client.config_set("appendfsync", appendfsync)
        jsonl = JsonlSessionStore(scratch / f"jsonl-{label}", fsync=fsync)
        remote = RedisSessionStore(client, prefix=f"bench-{label}")
        for size, name in ((KIB, "1 KiB"), (MIB, "1 MiB")):
            key = SessionKey(f"s-{size}", "acme")
            jsonl_rate, redis_rate = side_by_side(
                lambda: append_rate(jsonl, key, size),  # noqa: B023 (called at once)
                lambda: append_rate(remote, key, size),  # noqa: B023
            )
            figures[f"{name} event, redis appendfsync={appendfsync} vs jsonl fsync={fsync}"] = {
                "appends": APPENDS[size],
                "jsonl_per_s": round(jsonl_rate, 1),
                "redis_per_s": round(redis_rate, 1),
                "ratio_redis_to_jsonl": round(redis_rate / jsonl_rate, 2),
            }
        jsonl.close()
    return figures


def meta(url: str) -> dict[str, Any]:
    server = connect(url).info("server")
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "cpus": os.cpu_count(),
        "redis_server": server["redis_version"],
        "redis_py": version("redis"),
        "diskcache": version("diskcache"),
        "compactor": version("compactor"),
        "page_chars": PAGE,
        "reads_per_case": READS,
        "throughput": f"median of {ROUNDS} alternating runs per side",
    }


def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder, redis_server(Path(folder) / "redis") as url:
        scratch = Path(folder)
        results["read_tool_result page"] = figures = pages(url, scratch)
        for label, row in figures.items():
            print(
                f"page of {label:17} redis {row['redis']['median_us']:>7} us, diskcache "
                f"{row['diskcache']['median_us']:>7} us: x{row['ratio_redis_to_diskcache_median']}"
            )
        results["tool result put"] = figures = puts(url, scratch)
        for label, row in figures.items():
            print(
                f"put {label}: redis {row['redis_per_s']}/s, diskcache "
                f"{row['diskcache_per_s']}/s: x{row['ratio_redis_to_diskcache']}"
            )
        results["session append"] = figures = appends(url, scratch)
        for label, row in figures.items():
            print(
                f"append {label}: redis {row['redis_per_s']}/s, jsonl {row['jsonl_per_s']}/s: "
                f"x{row['ratio_redis_to_jsonl']}"
            )
        results["_meta"] = meta(url)
    out = HERE / "results" / "redis_store.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
