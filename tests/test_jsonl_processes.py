"""The JSONL store across real processes: writers killed mid-append, writers fencing each other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from compactor.events import ModelCallEvent
from compactor.stores import JsonlSessionStore, SessionKey
from compactor.stores._logfile import checked_body
from tests.store_workers import CRASH_SESSIONS, crash_key

WORKERS = Path(__file__).with_name("store_workers.py")
KEY = SessionKey("shared", "acme")


def markers(root: Path, key: SessionKey = KEY) -> list[str]:
    events = JsonlSessionStore(root).read(key)
    return [e.model for e in events if isinstance(e, ModelCallEvent)]


def log_records(root: Path, key: SessionKey = KEY) -> list[dict[str, Any]]:
    """Every line of a log, each checked on its own: it must be whole, with a valid crc."""
    lines = (root / key.tenant / key.session_id / "log.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    bodies = [checked_body(line) for line in lines[:-1]]
    assert None not in bodies
    return [json.loads(body) for body in bodies if body is not None]


def test_a_writer_killed_at_random_points_never_loses_an_acknowledged_event(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, str(WORKERS), "crash", str(tmp_path), "200", "20250101"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    trials = [json.loads(line) for line in run.stdout.splitlines()]
    # A child that could not open the log (or failed to append) exits instead of being killed.
    assert len(trials) == 200 and all(trial["killed"] for trial in trials), run.stderr
    for session in range(CRASH_SESSIONS):
        key = crash_key(session)
        acked = [m for t in trials[session::CRASH_SESSIONS] for m in t["acked"]]
        found = markers(tmp_path, key)
        assert len(found) == len(set(found))  # present exactly once
        assert set(acked) <= set(found)
        log_records(tmp_path, key)
    assert sum(len(trial["acked"]) for trial in trials) > 1000


def test_writers_with_leases_never_interleave_or_duplicate(tmp_path: Path) -> None:
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "lease", str(tmp_path), f"w{n}", "500", "0.02"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        results.append(json.loads(out))
    acked = [marker for result in results for marker in result["acked"]]
    refused = [marker for result in results for marker in result["refused"]]
    assert len(acked) + len(refused) == 2000
    assert refused  # the stalls made takeovers happen, and stale appends were refused
    assert sorted(markers(tmp_path)) == sorted(acked)  # each acked once, no refused one
    entries = log_records(tmp_path)[1:]
    assert [entry["seq"] for entry in entries] == list(range(1, len(acked) + 1))
    tokens = [entry["lease"] for entry in entries]
    assert tokens == sorted(tokens)  # fenced: no write under a token older than one before it
    assert len(set(tokens)) > 4
