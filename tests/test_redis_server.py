"""The Redis stores against their server: start-up checks, a crash and restart, outages."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from compactor.errors import ConfigError, PersistenceWarning, StoreError
from compactor.events import ModelCallEvent
from compactor.stores import SessionKey
from compactor.stores.redis import RedisSessionStore, RedisToolResultStore, connect
from tests.redis_server import RedisServer

KEY = SessionKey("s-1", "acme")
Make = Callable[[str], object]
STORES: dict[str, Make] = {
    "tool results": lambda url: RedisToolResultStore(url),
    "sessions": lambda url: RedisSessionStore(url),
}


@pytest.fixture
def policy(redis_server: RedisServer) -> Iterator[Callable[[str], None]]:
    """Sets the shared server's maxmemory-policy for one test."""
    with redis_server.client() as client:
        yield lambda value: client.config_set("maxmemory-policy", value)
        client.config_set("maxmemory-policy", "noeviction")


@pytest.mark.parametrize("make", STORES.values(), ids=STORES.keys())
def test_a_server_that_may_evict_any_key_is_refused(
    redis_server: RedisServer, policy: Callable[[str], None], make: Make
) -> None:
    policy("allkeys-lru")
    with pytest.raises(ConfigError, match="CONFIG SET maxmemory-policy noeviction"):
        make(redis_server.url)


def test_volatile_policies_are_refused_only_where_keys_expire(
    redis_server: RedisServer, policy: Callable[[str], None]
) -> None:
    policy("volatile-lru")
    with pytest.raises(ConfigError, match="evicts keys with a TTL"):
        RedisToolResultStore(redis_server.url, ttl=3600)
    RedisToolResultStore(redis_server.url)  # no TTL: volatile-* never evicts these keys
    RedisSessionStore(redis_server.url)


def test_a_server_that_keeps_nothing_on_disk_warns(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, appendonly="no").start()
    try:
        for make in STORES.values():
            with pytest.warns(PersistenceWarning, match="CONFIG SET appendonly yes"):
                make(server.url)
        with server.client() as client:
            client.config_set("save", "3600 1")
        RedisSessionStore(server.url)  # RDB save points are persistence too: no warning
    finally:
        server.stop()


def test_bad_clients_are_refused(redis_server: RedisServer) -> None:
    decoding = redis.Redis(port=redis_server.port, decode_responses=True)
    with pytest.raises(ConfigError, match="decode_responses=False"):
        RedisSessionStore(decoding)
    with pytest.raises(TypeError, match="URL"):
        RedisSessionStore(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inline_payload_max_bytes"):
        RedisSessionStore(redis_server.url, inline_payload_max_bytes=-1)


def markers(store: RedisSessionStore) -> list[str]:
    return [e.model for e in store.read(KEY) if isinstance(e, ModelCallEvent)]


class Writer(threading.Thread):
    """Appends under one lease until stopped; an append that raised StoreError is not acked."""

    def __init__(self, store: RedisSessionStore) -> None:
        super().__init__()
        self.store, self.lease = store, store.acquire(KEY, ttl=120)
        self.acked: list[str] = []
        self.failed = 0
        self.halt = threading.Event()

    def run(self) -> None:
        number = 0
        while not self.halt.is_set():
            marker, number = f"m{number}", number + 1
            try:
                self.store.append(KEY, ModelCallEvent(model=marker), lease=self.lease)
                self.acked.append(marker)
            except StoreError:
                self.failed += 1
                time.sleep(0.01)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 20
        while len(self.acked) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.acked) >= count


def fails_fast(call: Callable[[], object], within: float) -> None:
    started = time.monotonic()
    with pytest.raises(StoreError, match="Redis did not answer"):
        call()
    assert time.monotonic() - started < within


def test_acknowledged_appends_survive_a_crash_and_calls_fail_fast_meanwhile(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path, appendfsync="always").start()
    try:
        client = connect(server.url)
        store = RedisSessionStore(client, prefix="crash")
        results = RedisToolResultStore(client)
        results.put(KEY, "t1", "é" * 5000)
        writer = Writer(store)
        writer.start()
        writer.wait_for(300)
        server.stop(signal.SIGKILL)  # a crash, mid-run
        before = len(writer.acked)
        fails_fast(lambda: store.read(KEY), within=2)
        fails_fast(lambda: store.append(KEY, ModelCallEvent(model="x")), within=2)
        fails_fast(lambda: results.read(KEY, "t1", 10, 100), within=2)
        fails_fast(lambda: store.acquire(SessionKey("other", "acme")), within=2)
        server.start()  # same port and folder: the AOF is replayed
        writer.wait_for(before + 300)  # the writer carries on under the same lease
        writer.halt.set()
        writer.join()
        found = markers(store)
        assert writer.failed > 0 and len(found) == len(set(found))
        assert set(writer.acked) <= set(found)  # plus at most the few that failed in flight
        assert len(found) - len(writer.acked) <= writer.failed
        assert results.read(KEY, "t1", 10, 100) == "é" * 100
    finally:
        server.stop()


def test_a_hung_server_fails_calls_within_the_read_timeout(redis_server: RedisServer) -> None:
    assert redis_server.process is not None
    store = RedisSessionStore(redis_server.url, prefix="hung")
    store.append(KEY, ModelCallEvent(model="a"))
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        fails_fast(lambda: store.read(KEY), within=3)
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
    assert markers(store) == ["a"]
