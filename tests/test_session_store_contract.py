"""The SessionStore contract, run unchanged on every backend so that behaviour cannot drift.

A backend is one entry in ``BACKENDS``: a function of the test's request and a fresh folder
that returns a way to open store handles on the same storage (a new handle for the JSONL and
Redis stores, so these tests also show that what one handle wrote another reads; the same
object for the memory store). Redis runs on the session's real server, under a fresh prefix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from compactor.errors import (
    AccessDeniedError,
    InvalidSessionIdError,
    LeaseHeldError,
    LeaseLostError,
)
from compactor.events import CompactionEvent, ModelCallEvent
from compactor.stores import (
    MAIN,
    Checkpoint,
    JsonlSessionStore,
    MemorySessionStore,
    SessionKey,
    SessionStore,
)
from compactor.stores.redis import RedisSessionStore, connect
from tests.redis_server import RedisServer

Opener = Callable[[], SessionStore]


def _memory(request: pytest.FixtureRequest, folder: Path) -> Opener:
    store = MemorySessionStore()
    return lambda: store


def _jsonl(request: pytest.FixtureRequest, folder: Path) -> Opener:
    return lambda: JsonlSessionStore(folder / "sessions")


def _redis(request: pytest.FixtureRequest, folder: Path) -> Opener:
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix: str = request.getfixturevalue("redis_prefix")
    client = connect(server.url)
    return lambda: RedisSessionStore(client, prefix=prefix)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Opener]] = {
    "memory": _memory,
    "jsonl": _jsonl,
    "redis": _redis,
}

KEY = SessionKey("s-1", "acme", "alice")


@pytest.fixture(params=sorted(BACKENDS))
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens handles on one fresh storage of the backend under test."""
    return BACKENDS[request.param](request, tmp_path)


@pytest.fixture
def store(opener: Opener) -> SessionStore:
    return opener()


def call(model: str) -> ModelCallEvent:
    return ModelCallEvent(model=model)


def models(store: SessionStore, key: SessionKey = KEY, branch: str = MAIN) -> list[str]:
    return [e.model for e in store.read(key, branch=branch) if isinstance(e, ModelCallEvent)]


def checkpoint(turn: int, run_id: str | None = "run-1", **changes: Any) -> Checkpoint:
    fields: dict[str, Any] = {
        "schema_version": 1,
        "checkpoint_id": f"cp-{turn}",
        "session_id": KEY.session_id,
        "branch_id": MAIN,
        "run_id": run_id,
        "turn": turn,
        "messages": [{"role": "user", "content": f"message {n} ✓"} for n in range(turn + 1)],
        "state": {"handles": {"d": "call_1"}, "tokens": turn * 100},
        "config_digest": "cfg",
        "toolset_digest": "tools",
        "created": datetime(2025, 1, 1, tzinfo=UTC),
    }
    return Checkpoint(**{**fields, **changes})


# -- the log ----------------------------------------------------------------------------------


def test_a_new_session_reads_empty(store: SessionStore) -> None:
    assert store.read(KEY) == []
    assert store.entries(KEY) == []
    assert store.checkpoints(KEY) == []
    assert store.sessions("acme") == []


def test_events_read_back_in_append_order_from_another_handle(opener: Opener) -> None:
    writer = opener()
    events = [call(f"m{n}") for n in range(5)]
    for event in events:
        writer.append(KEY, event)
    assert list(opener().read(KEY)) == events


def test_entries_carry_seq_and_a_parent_chain(opener: Opener) -> None:
    store = opener()
    appended = [store.append(KEY, call(f"m{n}")) for n in range(4)]
    entries = list(opener().entries(KEY))
    assert entries == appended
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert [e.parent_id for e in entries] == [None] + [e.entry_id for e in entries[:-1]]
    assert {e.branch_id for e in entries} == {MAIN}
    assert len({e.entry_id for e in entries}) == 4


def test_a_payload_over_16_kib_round_trips(opener: Opener) -> None:
    summary = "résumé ✓ " * 4000  # about 44 KiB of UTF-8
    event = CompactionEvent(
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
    opener().append(KEY, event)
    assert list(opener().read(KEY)) == [event]


# -- branches ---------------------------------------------------------------------------------


def test_a_branch_reads_the_path_up_to_its_fork_point_then_its_own(opener: Opener) -> None:
    store = opener()
    first, second, _ = (store.append(KEY, call(m)) for m in ("a", "b", "c"))
    branch = store.fork(KEY, second.entry_id)
    own = store.append(KEY, call("x"), branch=branch)
    assert models(opener(), branch=branch) == ["a", "b", "x"]
    assert own.parent_id == second.entry_id and own.branch_id == branch
    assert own.seq == 4  # seq counts the whole log, over all branches
    assert first.entry_id in [e.entry_id for e in opener().entries(KEY, branch=branch)]


def test_writing_to_a_branch_never_changes_another(opener: Opener) -> None:
    store = opener()
    store.append(KEY, call("a"))
    fork_point = store.append(KEY, call("b"))
    left = store.fork(KEY, fork_point.entry_id)
    right = store.fork(KEY, fork_point.entry_id)
    store.append(KEY, call("main-1"))
    store.append(KEY, call("left-1"), branch=left)
    store.append(KEY, call("right-1"), branch=right)
    store.append(KEY, call("main-2"))
    reader = opener()
    assert models(reader) == ["a", "b", "main-1", "main-2"]
    assert models(reader, branch=left) == ["a", "b", "left-1"]
    assert models(reader, branch=right) == ["a", "b", "right-1"]


def test_a_fork_of_a_fork_keeps_the_whole_path(store: SessionStore) -> None:
    store.append(KEY, call("a"))
    first = store.fork(KEY, store.append(KEY, call("b")).entry_id)
    deeper = store.fork(KEY, store.append(KEY, call("c"), branch=first).entry_id)
    store.append(KEY, call("d"), branch=deeper)
    store.append(KEY, call("e"), branch=first)
    assert models(store, branch=deeper) == ["a", "b", "c", "d"]
    assert models(store, branch=first) == ["a", "b", "c", "e"]


def test_forking_at_an_unknown_entry_is_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="unknown entry"):
        store.fork(KEY, "0123abcd")  # a session with no entries at all
    store.append(KEY, call("a"))
    with pytest.raises(ValueError, match="unknown entry"):
        store.fork(KEY, "0123abcd")
    with pytest.raises(InvalidSessionIdError):
        store.fork(KEY, "../../etc/passwd")
    assert models(store) == ["a"]


def test_an_unknown_branch_is_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="unknown branch"):
        store.read(KEY, branch="b-nope")
    store.append(KEY, call("a"))
    with pytest.raises(ValueError, match="unknown branch"):
        store.append(KEY, call("b"), branch="b-nope")
    with pytest.raises(ValueError, match="unknown branch"):
        store.entries(KEY, branch="b-nope")
    with pytest.raises(InvalidSessionIdError):
        store.read(KEY, branch="../main")
    assert models(store) == ["a"]


# -- leases -----------------------------------------------------------------------------------


def test_fencing_tokens_only_increase(opener: Opener) -> None:
    store = opener()
    first = store.acquire(KEY, owner="w1")
    again = store.acquire(KEY, owner="w1")
    store.release(again)
    other = opener().acquire(KEY, owner="w2")
    assert first.token < again.token < other.token
    assert other.owner == "w2" and other.key == KEY


def test_a_live_lease_of_another_owner_cannot_be_taken(opener: Opener) -> None:
    opener().acquire(KEY, ttl=30, owner="w1")
    with pytest.raises(LeaseHeldError):
        opener().acquire(KEY, owner="w2")


def test_an_expired_lease_is_taken_over_and_its_writer_fenced_off(opener: Opener) -> None:
    store = opener()
    old = store.acquire(KEY, ttl=0.05, owner="w1")
    store.append(KEY, call("by w1"), lease=old)
    time.sleep(0.1)
    new = opener().acquire(KEY, ttl=30, owner="w2")
    assert new.token > old.token
    with pytest.raises(LeaseLostError):
        store.append(KEY, call("stale"), lease=old)
    with pytest.raises(LeaseLostError):
        store.fork(KEY, store.entries(KEY)[0].entry_id, lease=old)
    with pytest.raises(LeaseLostError):
        store.put_checkpoint(KEY, checkpoint(1), lease=old)
    assert models(opener()) == ["by w1"]  # the stale writer wrote nothing
    assert opener().checkpoints(KEY) == []
    opener().append(KEY, call("by w2"), lease=new)
    assert models(opener()) == ["by w1", "by w2"]


def test_an_expired_lease_nobody_took_still_writes(store: SessionStore) -> None:
    lease = store.acquire(KEY, ttl=0.05, owner="w1")
    time.sleep(0.1)
    store.append(KEY, call("late"), lease=lease)  # the token, not the clock, fences
    assert models(store) == ["late"]


def test_unfenced_appends_wait_for_no_live_lease(opener: Opener) -> None:
    store = opener()
    store.append(KEY, call("free"))
    lease = opener().acquire(KEY, owner="w1")
    with pytest.raises(LeaseLostError):
        store.append(KEY, call("refused"))
    opener().release(lease)
    store.append(KEY, call("free again"))
    assert models(store) == ["free", "free again"]


def test_renew_extends_and_keeps_the_token(store: SessionStore) -> None:
    lease = store.acquire(KEY, ttl=0.2, owner="w1")
    renewed = store.renew(lease, ttl=60)
    assert renewed.token == lease.token and renewed.expires_at > lease.expires_at
    time.sleep(0.3)
    with pytest.raises(LeaseHeldError):  # live through the renewal, not the first ttl
        store.acquire(KEY, owner="w2")
    store.append(KEY, call("a"), lease=lease)  # the same token still writes


def test_a_lease_taken_over_cannot_be_renewed_or_released(opener: Opener) -> None:
    store = opener()
    old = store.acquire(KEY, ttl=0.05, owner="w1")
    time.sleep(0.1)
    new = opener().acquire(KEY, ttl=30, owner="w2")
    with pytest.raises(LeaseLostError):
        store.renew(old)
    store.release(old)  # not the current lease: nothing happens
    with pytest.raises(LeaseHeldError):
        store.acquire(KEY, owner="w3")
    opener().release(new)
    assert store.acquire(KEY, owner="w3").token > new.token


def test_a_lease_of_another_session_does_not_write(store: SessionStore) -> None:
    lease = store.acquire(SessionKey("other", "acme"), owner="w1")
    with pytest.raises(LeaseLostError):
        store.append(KEY, call("a"), lease=lease)
    assert store.read(KEY) == []


def test_bad_lease_arguments_are_refused(store: SessionStore) -> None:
    for ttl in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="ttl"):
            store.acquire(KEY, ttl=ttl)
    with pytest.raises(ValueError, match="owner"):
        store.acquire(KEY, owner="")


# -- tenants ----------------------------------------------------------------------------------


def test_a_session_id_belongs_to_the_first_tenant(opener: Opener) -> None:
    opener().append(KEY, call("a"))
    intruder = SessionKey(KEY.session_id, "globex", "alice")
    store = opener()
    with pytest.raises(AccessDeniedError):
        store.read(intruder)
    with pytest.raises(AccessDeniedError):
        store.entries(intruder)
    with pytest.raises(AccessDeniedError):
        store.append(intruder, call("b"))
    with pytest.raises(AccessDeniedError):
        store.fork(intruder, opener().entries(KEY)[0].entry_id)
    with pytest.raises(AccessDeniedError):
        store.acquire(intruder)
    with pytest.raises(AccessDeniedError):
        store.put_checkpoint(intruder, checkpoint(1))
    with pytest.raises(AccessDeniedError):
        store.checkpoints(intruder)
    assert models(opener()) == ["a"]


def test_sessions_lists_only_the_tenants_own(store: SessionStore) -> None:
    store.append(SessionKey("s-a", "acme"), call("a"))
    store.append(SessionKey("s-b", "acme"), call("b"))
    store.append(SessionKey("s-c", "globex"), call("c"))
    assert store.sessions("acme") == ["s-a", "s-b"]
    assert store.sessions("globex") == ["s-c"]
    assert store.sessions("initech") == []
    with pytest.raises(InvalidSessionIdError):
        store.sessions("../acme")


def test_another_user_of_the_tenant_is_refused(opener: Opener) -> None:
    opener().append(KEY, call("a"))
    with pytest.raises(AccessDeniedError):
        opener().read(SessionKey(KEY.session_id, KEY.tenant, "mallory"))
    with pytest.raises(AccessDeniedError):
        opener().append(SessionKey(KEY.session_id, KEY.tenant, "mallory"), call("b"))
    # A key that names no user is not compared (the tenant already matches).
    assert models(opener(), SessionKey(KEY.session_id, KEY.tenant)) == ["a"]


# -- checkpoints ------------------------------------------------------------------------------


def test_a_checkpoint_round_trips_equal(opener: Opener) -> None:
    original = checkpoint(3)
    opener().put_checkpoint(KEY, original)
    assert opener().checkpoints(KEY) == [original]


def test_keep_last_applies_per_run(opener: Opener) -> None:
    store = opener()
    for turn in range(5):
        store.put_checkpoint(KEY, checkpoint(turn, "run-1"), keep_last=3)
        store.put_checkpoint(KEY, checkpoint(turn + 10, "run-2"), keep_last=3)
    store.put_checkpoint(KEY, checkpoint(20, None), keep_last=1)
    kept = [(c.run_id, c.turn) for c in opener().checkpoints(KEY)]
    assert kept == [
        ("run-1", 2),
        ("run-2", 12),
        ("run-1", 3),
        ("run-2", 13),
        ("run-1", 4),
        ("run-2", 14),
        (None, 20),
    ]
    store.put_checkpoint(KEY, checkpoint(5, "run-1"), keep_last=1)
    assert [c.turn for c in opener().checkpoints(KEY) if c.run_id == "run-1"] == [5]


def test_checkpoints_stay_on_their_branch(store: SessionStore) -> None:
    branch = store.fork(KEY, store.append(KEY, call("a")).entry_id)
    store.put_checkpoint(KEY, checkpoint(1))
    store.put_checkpoint(KEY, checkpoint(2, branch_id=branch), keep_last=1)
    store.put_checkpoint(KEY, checkpoint(3, branch_id=branch), keep_last=1)
    assert [c.turn for c in store.checkpoints(KEY)] == [1]
    assert [c.turn for c in store.checkpoints(KEY, branch=branch)] == [3]


def test_a_stored_checkpoint_does_not_change_with_the_callers_dicts(store: SessionStore) -> None:
    original = checkpoint(1)
    store.put_checkpoint(KEY, original)
    original.messages[0]["content"] = "changed afterwards"
    assert store.checkpoints(KEY)[0].messages[0]["content"] == "message 0 ✓"


def test_bad_checkpoints_are_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="session"):
        store.put_checkpoint(KEY, checkpoint(1, session_id="s-2"))
    with pytest.raises(ValueError, match="keep_last"):
        store.put_checkpoint(KEY, checkpoint(1), keep_last=0)
    with pytest.raises(ValueError, match="unknown branch"):
        store.put_checkpoint(KEY, checkpoint(1, branch_id="b-nope"))
    with pytest.raises(InvalidSessionIdError):
        store.put_checkpoint(KEY, checkpoint(1, branch_id="../../x"))
    assert store.checkpoints(KEY) == []


def test_append_many_lands_every_event_in_order(opener: Opener) -> None:
    store = opener()
    store.append(KEY, call("first"))
    entries = store.append_many(KEY, [call("a"), call("b"), call("c")])
    assert [e.seq for e in entries] == [2, 3, 4]
    assert [e.parent_id for e in entries[1:]] == [e.entry_id for e in entries[:-1]]
    assert models(opener()) == ["first", "a", "b", "c"]


def test_append_many_with_a_lost_lease_lands_nothing(opener: Opener) -> None:
    store = opener()
    stale = store.acquire(KEY, ttl=0.05, owner="w1")
    time.sleep(0.1)
    store.acquire(KEY, ttl=30, owner="w2")
    with pytest.raises(LeaseLostError):
        store.append_many(KEY, [call("x"), call("y")], lease=stale)
    assert models(opener()) == []


def test_a_lease_of_a_process_in_another_pid_namespace_is_never_judged_dead() -> None:
    import os
    import socket

    from compactor.stores.lease import abandoned, new_owner

    here = new_owner()
    host, namespace, pid, nonce = here.split(":")
    assert (host, pid) == (socket.gethostname(), str(os.getpid())) and not abandoned(here)
    gone = 2**22 + 17  # no such process
    assert abandoned(f"{host}:{namespace}:{gone}:{nonce}")
    assert not abandoned(f"{host}:other-namespace:{gone}:{nonce}")  # a container's pid 17
    assert not abandoned(f"another-host:{namespace}:{gone}:{nonce}")
