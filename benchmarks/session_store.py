"""JsonlSessionStore cost: appends per second per fsync policy, and opening a 100,000-event log.

Each figure is set against plain ``file.write`` of the very same bytes in the same run:

* appends: 1 KiB events (the event's JSON) appended one by one with ``fsync="always"``,
  ``"batch"`` and ``"never"``; then the lines the store wrote are written again with
  ``file.write`` + ``flush`` one by one, fsynced on the same cadence (every line, every 64
  lines, never), and once more with no fsync at all. The ratio is store time / plain time.
* open and verify: a 100,000-event log (written with ``fsync="never"``) is opened by a fresh
  store, which checks every line's crc and the entry tree before its first append; and read
  back whole (every event parsed). Both are set against writing the log's bytes with one
  plain ``file.write``, and, for reference, reading them and ``json.loads``-ing every line.

    .venv/bin/python benchmarks/session_store.py

Writes ``benchmarks/results/session_store.json``. The logs go to a temporary folder (on
``$TMPDIR``), so the fsync figures are those of that file system.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from compactor.events import ModelCallEvent, dump_event
from compactor.stores import JsonlSessionStore, SessionKey
from compactor.stores._files import canonical_json
from compactor.stores.jsonl import FsyncPolicy

HERE = Path(__file__).resolve().parent
KEY = SessionKey("bench", "acme")
APPENDS: dict[FsyncPolicy, int] = {"always": 1_000, "batch": 20_000, "never": 20_000}
EVERY: dict[FsyncPolicy, int] = {"always": 1, "batch": 64, "never": 0}
OPEN_EVENTS = 100_000


def event_of_1_kib(number: int) -> ModelCallEvent:
    """A model_call event whose JSON is 1,024 bytes."""
    event = ModelCallEvent(model=f"bench-{number:08d}", finish_reason="")
    pad = 1024 - len(canonical_json(dump_event(event)))
    return event.model_copy(update={"finish_reason": "x" * pad})


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def plain_write(path: Path, lines: list[bytes], every: int) -> float:
    """Seconds to write ``lines`` one by one with file.write, fsyncing every ``every`` lines."""

    def work() -> None:
        with path.open("wb") as file:
            for number, line in enumerate(lines, 1):
                file.write(line)
                file.flush()
                if every and number % every == 0:
                    os.fsync(file.fileno())

    return timed(work)


def log_lines(root: Path) -> list[bytes]:
    data = (root / KEY.tenant / KEY.session_id / "log.jsonl").read_bytes()
    return data.splitlines(keepends=True)[1:]  # the entries, without the header


def appends(policy: FsyncPolicy, scratch: Path) -> dict[str, Any]:
    count = APPENDS[policy]
    events = [event_of_1_kib(n) for n in range(count)]
    store = JsonlSessionStore(scratch / policy, fsync=policy)
    store.append(KEY, events[0])  # create the session outside the timing

    def work() -> None:
        for event in events[1:]:
            store.append(KEY, event)
        store.close()

    seconds = timed(work)
    lines = log_lines(scratch / policy)[1:]
    plain = plain_write(scratch / f"{policy}.plain", lines, EVERY[policy])
    unsynced = plain_write(scratch / f"{policy}.unsynced", lines, 0)
    return {
        "appends": len(lines),
        "line_bytes": round(sum(map(len, lines)) / len(lines)),
        "store_appends_per_s": round(len(lines) / seconds),
        "plain_write_same_fsync_per_s": round(len(lines) / plain),
        "plain_write_no_fsync_per_s": round(len(lines) / unsynced),
        "ratio_to_plain_same_fsync": round(seconds / plain, 2),
        "ratio_to_plain_no_fsync": round(seconds / unsynced, 2),
    }


def opening(scratch: Path) -> dict[str, Any]:
    root = scratch / "open"
    writer = JsonlSessionStore(root, fsync="never")
    for number in range(OPEN_EVENTS):
        writer.append(KEY, event_of_1_kib(number))
    del writer  # its index would otherwise weigh on the garbage collector while we time
    gc.collect()
    path = root / KEY.tenant / KEY.session_id / "log.jsonl"
    data = path.read_bytes()
    extra = event_of_1_kib(OPEN_EVENTS)
    open_s = timed(lambda: JsonlSessionStore(root, fsync="never").append(KEY, extra))
    read_s = timed(lambda: JsonlSessionStore(root).read(KEY))
    copy = scratch / "open.plain"
    write_s = timed(lambda: copy.write_bytes(data))
    parse_s = timed(lambda: [json.loads(line) for line in copy.read_bytes().splitlines()])
    return {
        "events": OPEN_EVENTS,
        "log_bytes": len(data),
        "open_and_verify_s": round(open_s, 3),
        "open_verify_and_read_all_s": round(read_s, 3),
        "plain_write_s": round(write_s, 3),
        "plain_read_and_json_loads_s": round(parse_s, 3),
        "open_and_verify_ratio_to_plain_write": round(open_s / write_s, 2),
        "read_all_ratio_to_plain_write": round(read_s / write_s, 2),
        "open_and_verify_ratio_to_plain_read_and_parse": round(open_s / parse_s, 2),
    }


def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for policy in APPENDS:
            results[f"append fsync={policy}"] = figures = appends(policy, scratch)
            print(
                f"fsync={policy:6} {figures['store_appends_per_s']:>7,}/s store, "
                f"{figures['plain_write_same_fsync_per_s']:>9,}/s plain write (same fsync): "
                f"x{figures['ratio_to_plain_same_fsync']}; "
                f"x{figures['ratio_to_plain_no_fsync']} vs plain write without fsync"
            )
        results["open 100k events"] = figures = opening(scratch)
        print(
            f"open+verify {figures['events']:,} events ({figures['log_bytes']:,} bytes): "
            f"{figures['open_and_verify_s']} s, x{figures['open_and_verify_ratio_to_plain_write']}"
            f" plain write; read all {figures['open_verify_and_read_all_s']} s"
        )
    results["_meta"] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "cpus": os.cpu_count(),
        "compactor": version("compactor"),
        "pydantic": version("pydantic"),
    }
    out = HERE / "results" / "session_store.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
