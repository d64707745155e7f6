"""What the contract suite cannot see of RedisSessionStore: damage on the server, retries,
leases left by dead processes, and checkpoints that send only their new messages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from compactor.errors import BlobError, SessionCorruptedError, StoreError
from compactor.events import CompactionEvent, ModelCallEvent
from compactor.stores import MAIN, Checkpoint, SessionKey
from compactor.stores.redis import RedisSessionStore, connect
from tests.redis_server import RedisServer

KEY = SessionKey("s-1", "acme")


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    with connect(redis_server.url) as made:
        yield made


@pytest.fixture
def store(client: redis.Redis, redis_prefix: str) -> RedisSessionStore:
    return RedisSessionStore(client, prefix=redis_prefix, inline_payload_max_bytes=100)


def compaction(summary: str) -> CompactionEvent:
    return CompactionEvent(
        tier="summary",
        trigger="pre_call",
        tokens_before=1,
        tokens_after=1,
        window=1,
        messages_before=1,
        messages_after=1,
        archived=[],
        kept=[],
        duration_ms=1.0,
        summary=summary,
    )


def checkpoint(turn: int) -> Checkpoint:
    return Checkpoint(
        schema_version=1,
        checkpoint_id=f"cp-{turn}",
        session_id=KEY.session_id,
        branch_id=MAIN,
        run_id="run-1",
        turn=turn,
        messages=[{"role": "user", "content": f"message {n} " * 50} for n in range(turn)],
        state={},
        config_digest="cfg",
        toolset_digest="tools",
        created=datetime(2025, 1, 1, tzinfo=UTC),
    )


def blob_keys(client: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(client.scan_iter(match=f"{prefix}:s:{{{KEY.session_id}}}:blob:*"))


def test_an_altered_or_missing_blob_is_an_error_never_a_silent_gap(
    store: RedisSessionStore, client: redis.Redis, redis_prefix: str
) -> None:
    store.append(KEY, compaction("long summary " * 20))  # over the 100-byte inline limit
    [name] = blob_keys(client, redis_prefix)
    client.setrange(name, 5, b"X")
    with pytest.raises(BlobError, match="does not match"):
        store.read(KEY)
    client.delete(name)
    with pytest.raises(BlobError, match="missing"):
        store.read(KEY)


def test_a_checkpoint_with_an_altered_message_blob_is_refused(
    store: RedisSessionStore, client: redis.Redis, redis_prefix: str
) -> None:
    store.put_checkpoint(KEY, checkpoint(2))
    client.setrange(blob_keys(client, redis_prefix)[0], 3, b"?")
    with pytest.raises(BlobError):
        store.checkpoints(KEY)


def test_a_checkpoint_sends_only_the_messages_not_stored_yet(
    store: RedisSessionStore, client: redis.Redis, redis_prefix: str
) -> None:
    store.put_checkpoint(KEY, checkpoint(3))
    client.config_resetstat()
    store.put_checkpoint(KEY, checkpoint(5))
    assert client.info("commandstats")["cmdstat_set"]["calls"] == 2  # messages 3 and 4
    assert len(blob_keys(client, redis_prefix)) == 5
    assert [c.turn for c in store.checkpoints(KEY)] == [3, 5]


def test_a_record_that_is_not_one_is_damage(
    store: RedisSessionStore, client: redis.Redis, redis_prefix: str
) -> None:
    store.append(KEY, ModelCallEvent(model="a"))
    log = f"{redis_prefix}:s:{{{KEY.session_id}}}:log"
    client.xadd(log, {"type": '"entry"', "seq": "7"})
    with pytest.raises(SessionCorruptedError, match="record 1") as caught:
        store.read(KEY)
    assert caught.value.path == log and caught.value.offset == 1


def test_an_append_sent_twice_lands_once(
    store: RedisSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a retry after a lost answer does: the same entry id again.
    monkeypatch.setattr("compactor.stores._redis_log.new_entry_id", lambda: "e1")
    first = store.append(KEY, ModelCallEvent(model="a"))
    again = store.append(KEY, ModelCallEvent(model="a"))
    assert (again.seq, again.entry_id, again.parent_id) == (first.seq, "e1", None)
    assert len(store.read(KEY)) == 1


def test_a_session_flushed_under_a_writer_is_a_clear_error(
    store: RedisSessionStore, client: redis.Redis, redis_prefix: str
) -> None:
    store.append(KEY, ModelCallEvent(model="a"))
    for name in client.scan_iter(match=f"{redis_prefix}:*"):
        client.delete(name)
    with pytest.raises(StoreError, match="vanished"):
        store.append(KEY, ModelCallEvent(model="b"))
    store.append(KEY, ModelCallEvent(model="c"))  # claimed again, from scratch
    assert [e.model for e in store.read(KEY) if isinstance(e, ModelCallEvent)] == ["c"]


def test_a_lease_left_by_a_dead_process_of_this_machine_is_taken_over_at_once(
    redis_server: RedisServer, store: RedisSessionStore, redis_prefix: str
) -> None:
    code = textwrap.dedent(f"""
        from compactor.stores import SessionKey
        from compactor.stores.redis import RedisSessionStore
        store = RedisSessionStore({redis_server.url!r}, prefix={redis_prefix!r})
        store.acquire(SessionKey({KEY.session_id!r}, {KEY.tenant!r}), ttl=3600)
    """)
    subprocess.run([sys.executable, "-c", code], check=True)  # exits holding the lease
    store.append(KEY, ModelCallEvent(model="unfenced"))  # the dead lease is not live
    lease = store.acquire(KEY, owner="next")
    assert lease.token == 2
    store.append(KEY, ModelCallEvent(model="fenced"), lease=lease)
    assert len(store.read(KEY)) == 2
