"""The Redis stores across real processes: fenced writers, a paused writer, two Compactors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from compactor import Compactor, CompactorConfig
from compactor.bench.trajectory import BASH_TOOL
from compactor.events import ModelCallEvent
from compactor.state import dump_state
from compactor.stores import SessionKey
from compactor.stores.redis import RedisSessionStore
from compactor.testing import ScriptedSummarizer
from tests.redis_server import RedisServer

WORKERS = Path(__file__).with_name("store_workers.py")
KEY = SessionKey("shared", "acme")  # the session the workers write


def markers(store: RedisSessionStore, key: SessionKey = KEY) -> list[str]:
    return [e.model for e in store.read(key) if isinstance(e, ModelCallEvent)]


def stream(client: redis.Redis, prefix: str) -> list[dict[str, Any]]:
    """The raw records of the workers' session: every field, JSON-decoded."""
    records = client.xrange(f"{prefix}:s:{{{KEY.session_id}}}:log")
    return [{k.decode(): json.loads(v) for k, v in fields.items()} for _, fields in records]


def test_eight_writers_with_leases_never_lose_duplicate_or_interleave(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    root = f"{redis_server.url}#{redis_prefix}"
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "lease", root, f"w{n}", "500", "0.02"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        results.append(json.loads(out))
    acked = [marker for result in results for marker in result["acked"]]
    refused = [marker for result in results for marker in result["refused"]]
    assert len(acked) + len(refused) == 4000
    assert refused  # the stalls made takeovers happen, and stale appends were refused
    store = RedisSessionStore(redis_server.url, prefix=redis_prefix)
    assert sorted(markers(store)) == sorted(acked)  # each acked once, no refused one
    with redis_server.client() as client:
        entries = stream(client, redis_prefix)
    assert [entry["seq"] for entry in entries] == list(range(1, len(acked) + 1))
    tokens = [entry["lease"] for entry in entries]
    assert tokens == sorted(tokens)  # fenced: no write under a token older than one before it
    assert len(set(tokens)) > 8


def test_a_writer_paused_past_its_lease_lands_nothing_after_the_takeover(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    root = f"{redis_server.url}#{redis_prefix}"
    worker = subprocess.Popen(
        [sys.executable, str(WORKERS), "pause", root, "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    try:
        for _ in range(50):  # appending under its lease
            assert worker.stdout.readline().startswith("acked ")
        os.kill(worker.pid, signal.SIGSTOP)
        time.sleep(0.5)  # past its 0.3 s lease
        store = RedisSessionStore(redis_server.url, prefix=redis_prefix)
        taker = store.acquire(KEY, ttl=60, owner="taker")
        store.append(KEY, ModelCallEvent(model="taker"), lease=taker)
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])
    found = markers(store)
    # Woken up, it went on appending under its stale token: every one refused, none landed.
    assert len(summary["refused"]) == 21
    assert found[-1] == "taker" and not set(summary["refused"]) & set(found)
    assert set(summary["acked"]) == set(found[:-1])  # and nothing was lost before it


AGENT = str(Path(__file__).with_name("scripted_agent.py"))


@pytest.mark.parametrize("ending", ["close", "die"])
def test_a_second_process_pages_the_results_and_resumes_the_session(
    redis_server: RedisServer, redis_prefix: str, ending: str
) -> None:
    run = subprocess.run(
        [sys.executable, AGENT, "redis", redis_server.url, redis_prefix, ending],
        capture_output=True,
        text=True,
        check=True,
    )
    child = json.loads(run.stdout)
    compactor = Compactor.from_url(
        redis_server.url,
        "gpt-4o",
        prefix=redis_prefix,
        config=CompactorConfig(context_window=6000),
        summarizer=ScriptedSummarizer(),
    )
    messages = compactor.resume("job", tools=[BASH_TOOL])
    assert messages == child["messages"]
    assert dump_state(compactor._session("job").state) == child["state"]
    output = next(m["content"] for m in messages if m.get("tool_call_id") == "c1")
    page = compactor.read_tool_result("job", "c1", offset=1001, limit=600)
    assert page.startswith("[READ_TOOL_RESULT t2: chars 1001..")
    _, _, text = page.partition("\n")
    assert text == output[1001 : 1001 + len(text)] and len(text) > 400
    # It carries on where the child stopped: what was archived stays archived, and the lease
    # (released, or left by a dead process) is taken at once.
    result = compactor.compact(messages, session_id="job", tools=[BASH_TOOL, compactor.tool_schema])
    assert result.event is None
    assert any(str(m["content"]).startswith("[archived t1") for m in result.messages)
    compactor.record_usage("job", {"usage": {"prompt_tokens": 900, "completion_tokens": 9}})
    compactor.close()
