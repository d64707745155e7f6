"""RedisToolResultStore: character pages equal to the slice, read with GETRANGE, TTL and prefix."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.stores import SessionKey
from compactor.stores.redis import INDEX_EVERY, RedisToolResultStore, connect
from tests.redis_server import RedisServer

KEY = SessionKey("s-1", "acme")
# Mostly multi-byte characters (2, 3 and 4 bytes in UTF-8), so pages start and end inside
# them; repeated to lengths that span several index entries (hypothesis draws short texts).
PIECES = st.text(
    st.sampled_from(["a", "é", "✓", "中", "😀", "\n"]) | st.characters(codec="utf-8"),
    min_size=1,
    max_size=50,
)
MIXED = st.builds(
    lambda piece, length: (piece * length)[:length],
    PIECES,
    st.integers(0, 4 * INDEX_EVERY + 7),
)


@pytest.fixture(scope="module")
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    with connect(redis_server.url) as made:
        yield made


@pytest.fixture(scope="module")
def store(client: redis.Redis) -> RedisToolResultStore:
    return RedisToolResultStore(client, prefix="test-tool-results")


@settings(max_examples=150, deadline=None)
@given(text=MIXED, data=st.data())
def test_a_page_is_the_slice_of_characters(
    store: RedisToolResultStore, text: str, data: st.DataObject
) -> None:
    store.put(KEY, "t1", text)
    assert store.size(KEY, "t1") == len(text)
    # Any position, but often one next to an index entry, where an off-by-one would hide.
    near = [max(k * INDEX_EVERY + d, 0) for k in range(5) for d in (-1, 0, 1)]
    points = st.integers(0, len(text) + 3) | st.sampled_from(near)
    for _ in range(5):
        offset, end = data.draw(points), data.draw(points)
        limit = end - offset if end >= offset else end
        assert store.read(KEY, "t1", offset, limit) == text[offset : offset + limit]


def test_ascii_needs_no_index_and_other_text_gets_one(
    store: RedisToolResultStore, client: redis.Redis
) -> None:
    index = "test-tool-results:tr:{acme/s-1}:i:t2"
    store.put(KEY, "t2", "plain ascii " * 100)
    assert not client.exists(index)
    store.put(KEY, "t2", "résumé " * 100)
    assert client.strlen(index) == 4 * (1 + -(-700 // INDEX_EVERY))  # length + one per 256
    store.put(KEY, "t2", "plain again")  # replaced: the old index must not outlive its text
    assert not client.exists(index)
    assert store.read(KEY, "t2", 6, 100) == "again"


def test_unknown_results_and_bad_arguments(store: RedisToolResultStore) -> None:
    assert store.read(KEY, "nope", 0, 10) is None
    assert store.size(KEY, "nope") is None
    store.put(KEY, "empty", "")
    assert store.read(KEY, "empty", 0, 10) == "" and store.size(KEY, "empty") == 0
    with pytest.raises(ValueError, match="offset"):
        store.read(KEY, "empty", -1, 10)


def test_lone_surrogates_round_trip(store: RedisToolResultStore) -> None:
    text = "before \ud800 after é" * 50  # what json.loads makes of a stray "\\ud800"
    store.put(KEY, "t3", text)
    assert store.read(KEY, "t3", 5, 300) == text[5:305]
    assert store.size(KEY, "t3") == len(text)


@pytest.mark.parametrize("unit", ["a", "é✓中😀"])
def test_a_page_reads_only_its_bytes_with_getrange(
    store: RedisToolResultStore, client: redis.Redis, unit: str
) -> None:
    text = (unit * (1 << 20))[: 1 << 20]  # a million characters: 1 MiB, or about 2.5 MiB
    store.put(KEY, "big", text)
    client.config_resetstat()
    before = int(client.info("stats")["total_net_output_bytes"])
    page = store.read(KEY, "big", 500_001, 4096)
    sent = int(client.info("stats")["total_net_output_bytes"]) - before
    commands = client.info("commandstats")
    assert page == text[500_001 : 500_001 + 4096]
    assert commands["cmdstat_getrange"]["calls"] >= 1
    assert "cmdstat_get" not in commands  # never the whole value
    # The page (at most 4 bytes a character, plus an index step each side) and the first
    # INFO's own answer; a GET would have sent the whole megabyte.
    assert sent < 4 * (4096 + 2 * INDEX_EVERY) + 8192


def test_results_expire_after_the_ttl(client: redis.Redis) -> None:
    store = RedisToolResultStore(client, prefix="test-ttl", ttl=0.3)
    store.put(KEY, "t1", "é" * 1000)
    assert 0 < client.pttl("test-ttl:tr:{acme/s-1}:t:t1") <= 300
    # The index goes with it, a little later: never first.
    assert 300 < client.pttl("test-ttl:tr:{acme/s-1}:i:t1") <= 1300
    assert store.read(KEY, "t1", 0, 3) == "ééé"
    time.sleep(0.4)
    assert store.read(KEY, "t1", 0, 3) is None and store.size(KEY, "t1") is None
    for ttl in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="ttl"):
            RedisToolResultStore(client, ttl=ttl)


def test_prefixes_and_tenants_keep_results_apart(client: redis.Redis) -> None:
    first = RedisToolResultStore(client, prefix="test-tenant-a")
    second = RedisToolResultStore(client, prefix="test-tenant-b")
    first.put(KEY, "t1", "from a")
    second.put(KEY, "t1", "from b")
    first.put(SessionKey(KEY.session_id, "globex"), "t1", "other tenant")
    assert first.read(KEY, "t1", 0, 100) == "from a"
    assert second.read(KEY, "t1", 0, 100) == "from b"
    assert first.read(SessionKey(KEY.session_id, "globex"), "t1", 0, 100) == "other tenant"
    keys = sorted(client.scan_iter(match="test-tenant-b:*"))
    assert keys == [b"test-tenant-b:tr:{acme/s-1}:t:t1"]
    with pytest.raises(ValueError, match="prefix"):
        RedisToolResultStore(client, prefix="a{b}")
