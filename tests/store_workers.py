"""Writer processes for the JSONL crash and concurrency tests (run as a script, not collected).

python tests/store_workers.py crash <root> <trials> <seed>
    For each trial, fork a child that appends to a session until it is SIGKILLed after
    a random delay; print one JSON line per trial: how the child ended, what it acked.
    Forking here, not in the test process, keeps pytest's own process single-threaded
    and each trial cheap (no interpreter start, no imports).

python tests/store_workers.py lease <root> <owner> <appends> <ttl>
    Make ``appends`` attempts to append under a short lease, pausing past the ttl now and
    then so other workers take it over; print the acked and the refused markers as JSON.

python tests/store_workers.py pause <root> <ttl>
    Take the lease once and append under it, printing "acked <marker>" as each append
    returns, until appends are refused (the test stops this process past its lease, takes the
    lease over, and lets it run again); make 20 more attempts, then print the acked and the
    refused markers as JSON.

A <root> of the form ``redis://host:port/db#prefix`` names a RedisSessionStore (the prefix
after the ``#``); any other root is a JsonlSessionStore folder.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sys
import time
import traceback
from typing import NoReturn

from compactor.errors import LeaseHeldError, LeaseLostError
from compactor.events import ModelCallEvent
from compactor.stores import JsonlSessionStore, Lease, SessionKey, SessionStore
from compactor.stores.jsonl import FsyncPolicy

KEY = SessionKey("shared", "acme")
CRASH_SESSIONS = 10
"""Crash trials take turns on this many sessions, so each log is reopened after many kills."""
POLICIES: list[FsyncPolicy] = ["always", "batch", "never"]
# Mostly small lines; some big enough for a blob (or, inlined up to 1 MiB, a long write()).
SIZES = [10, 10, 10, 100, 1000, 5000, 20_000]


def crash(root: str, trials: int, seed: int) -> None:
    rng = random.Random(seed)
    for trial in range(trials):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _append_until_killed(root, trial, write_end, rng)
        os.close(write_end)
        time.sleep(rng.uniform(0.002, 0.04))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            acked = pipe.read().decode().split()
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print(json.dumps({"trial": trial, "killed": killed, "acked": acked}), flush=True)


def crash_key(trial: int) -> SessionKey:
    """The session a crash trial writes to."""
    return SessionKey(f"crash-{trial % CRASH_SESSIONS}", "acme")


def _append_until_killed(root: str, trial: int, pipe: int, rng: random.Random) -> NoReturn:
    try:
        store = JsonlSessionStore(
            root,
            fsync=POLICIES[trial % len(POLICIES)],
            inline_payload_max_bytes=rng.choice([16384, 1 << 20]),
        )
        for number in itertools.count():
            marker = f"{trial}-{number}"
            event = ModelCallEvent(model=marker, finish_reason="é" * rng.choice(SIZES))
            store.append(crash_key(trial), event)
            os.write(pipe, f"{marker}\n".encode())  # acknowledged: append() returned
    except BaseException:
        traceback.print_exc()
    os._exit(1)  # only reached on an error: a healthy child is killed mid-loop


def open_store(root: str) -> SessionStore:
    """The store a worker's <root> names."""
    if root.startswith("redis://"):
        from compactor.stores.redis import RedisSessionStore  # only the Redis tests need redis

        url, _, prefix = root.partition("#")
        return RedisSessionStore(url, prefix=prefix)
    return JsonlSessionStore(root)


def lease(root: str, owner: str, appends: int, ttl: float) -> None:
    store = open_store(root)
    held: Lease | None = None
    acked: list[str] = []
    refused: list[str] = []
    for number in range(appends):
        while held is None:
            try:
                held = store.acquire(KEY, ttl=ttl, owner=owner)
            except LeaseHeldError:
                time.sleep(0.001)
        if number % 40 == 39:
            time.sleep(ttl * 1.5)  # stall past the ttl: another worker may take over
        marker = f"{owner}-{number}"
        try:
            store.append(KEY, ModelCallEvent(model=marker), lease=held)
            acked.append(marker)
        except LeaseLostError:
            refused.append(marker)
            held = None
    print(json.dumps({"acked": acked, "refused": refused}))


def pause(root: str, ttl: float) -> None:
    store = open_store(root)
    held = store.acquire(KEY, ttl=ttl, owner=f"paused-{os.getpid()}")
    acked: list[str] = []
    refused: list[str] = []
    for number in itertools.count():
        marker = f"p-{number}"
        try:
            store.append(KEY, ModelCallEvent(model=marker), lease=held)
            acked.append(marker)
            print(f"acked {marker}", flush=True)
        except LeaseLostError:
            refused.append(marker)
            if len(refused) > 20:
                break
    print(json.dumps({"acked": acked, "refused": refused}), flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "crash":
        crash(args[0], int(args[1]), int(args[2]))
    elif command == "pause":
        pause(args[0], float(args[1]))
    else:
        lease(args[0], args[1], int(args[2]), float(args[3]))
