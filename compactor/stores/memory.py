"""In-memory stores: for tests, and for agents that need nothing to outlive the process.

``MemorySessionStore`` follows the whole ``SessionStore`` contract with the same rules as the
JSONL store (the entry tree, the lease rules, tenant claims, ``keep_last``), written once in
shared modules, so the contract tests run unchanged on both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from uuid import uuid4

from compactor.errors import LeaseLostError
from compactor.events import Event
from compactor.stores._rules import check_access, check_checkpoint, to_prune
from compactor.stores._tree import Tree, new_branch_id, new_entry_id
from compactor.stores.base import MAIN, Checkpoint, Entry, Lease, SessionKey, check_id
from compactor.stores.lease import (
    LeaseRecord,
    as_lease,
    check_owner,
    check_ttl,
    check_writer,
    grant,
    released,
    renewed,
)


class MemoryToolResultStore:
    """Tool outputs in a dict of the process."""

    def __init__(self) -> None:
        self._texts: dict[tuple[str, str, str], str] = {}

    def put(self, key: SessionKey, handle: str, text: str) -> None:
        """Store the full output under ``handle``."""
        self._texts[(key.tenant, key.session_id, handle)] = text

    def read(self, key: SessionKey, handle: str, offset: int, limit: int) -> str | None:
        """A slice of a stored output; None if unknown."""
        text = self._texts.get((key.tenant, key.session_id, handle))
        return None if text is None else text[offset : offset + limit]

    def size(self, key: SessionKey, handle: str) -> int | None:
        """Length in characters of a stored output; None if unknown."""
        text = self._texts.get((key.tenant, key.session_id, handle))
        return None if text is None else len(text)

    def sync(self) -> None:
        """Nothing outlives the process here: nothing to sync."""


@dataclass
class _Session:
    """One session: who created it, its entries, its lease and its checkpoints."""

    tenant: str
    user: str | None
    tree: Tree = field(default_factory=Tree)
    entries: dict[str, Entry] = field(default_factory=dict)
    lease: LeaseRecord | None = None
    checkpoints: list[tuple[int, Checkpoint]] = field(default_factory=list)
    """``(number, checkpoint)``, oldest first."""
    numbered: int = 0


class MemorySessionStore:
    """Session logs in a dict of the process, safe across its threads."""

    def __init__(self) -> None:
        self.owner = f"memory:{uuid4().hex[:8]}"
        """The lease owner ``acquire`` uses when it is given none."""
        self._sessions: dict[str, _Session] = {}  # by session id: ids are claimed across tenants
        self._lock = threading.Lock()

    # -- the log ----------------------------------------------------------------------------

    def append(
        self, key: SessionKey, event: Event, *, branch: str = MAIN, lease: Lease | None = None
    ) -> Entry:
        """Append one event to a branch.

        Raises:
            LeaseLostError: ``lease`` is not the session's current lease, or (without a lease)
                another owner holds a live one; nothing was written.
            AccessDeniedError: the session belongs to another tenant or user.
            ValueError: the branch does not exist.
        """
        return self.append_many(key, [event], branch=branch, lease=lease)[0]

    def append_many(
        self,
        key: SessionKey,
        events: Sequence[Event],
        *,
        branch: str = MAIN,
        lease: Lease | None = None,
    ) -> list[Entry]:
        """Append events in order, all or none; raises like ``append``."""
        check_id(branch, "branch id")
        entries = []
        with self._created(key) as session:
            check_writer(key, session.lease, lease, time.time())
            for event in events:
                seq, parent = session.tree.count + 1, session.tree.head(branch)
                entry = Entry(seq, new_entry_id(), parent, branch, datetime.now(UTC), event)
                session.tree.add(seq, entry.entry_id, parent, branch)
                session.entries[entry.entry_id] = entry
                entries.append(entry)
        return entries

    def read(self, key: SessionKey, *, branch: str = MAIN) -> list[Event]:
        """The events on a branch's path from the root, oldest first (empty when new)."""
        return [entry.event for entry in self.entries(key, branch=branch)]

    def entries(self, key: SessionKey, *, branch: str = MAIN) -> list[Entry]:
        """Like ``read``, with each event's envelope."""
        check_id(branch, "branch id")
        with self._existing(key) as session:
            if session is None:
                Tree().check_branch(branch)  # a session not yet written has only main
                return []
            return [session.entries[entry_id] for entry_id in session.tree.path(branch)]

    def fork(self, key: SessionKey, at_entry_id: str, *, lease: Lease | None = None) -> str:
        """A new branch whose path runs from the root to ``at_entry_id``; its id.

        Raises:
            ValueError: no entry of the session has that id.
        """
        check_id(at_entry_id, "entry id")
        with self._existing(key) as session:
            if session is None:
                raise ValueError(f"cannot fork at unknown entry {at_entry_id!r}")
            check_writer(key, session.lease, lease, time.time())
            branch = new_branch_id()
            session.tree.fork(branch, at_entry_id)
        return branch

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        check_id(tenant, "tenant")
        with self._lock:
            return sorted(sid for sid, s in self._sessions.items() if s.tenant == tenant)

    # -- leases -----------------------------------------------------------------------------

    def acquire(self, key: SessionKey, *, ttl: float = 30.0, owner: str | None = None) -> Lease:
        """Take the session's lease, with a new fencing token.

        Raises:
            LeaseHeldError: another owner holds a lease that has not expired.
        """
        ttl = check_ttl(ttl)
        owner = self.owner if owner is None else check_owner(owner)
        with self._created(key) as session:
            session.lease = grant(session.lease, owner, ttl, time.time())
            return as_lease(key, owner, session.lease)

    def renew(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease this writer still holds.

        Raises:
            LeaseLostError: the lease was taken over or released.
        """
        ttl = check_ttl(ttl)
        with self._existing(lease.key) as session:
            if session is None:
                raise LeaseLostError(f"session {lease.key.session_id!r} has no lease")
            session.lease = renewed(lease.key, session.lease, lease, ttl, time.time())
            return as_lease(lease.key, lease.owner, session.lease)

    def release(self, lease: Lease) -> None:
        """Give the lease up, if it is still this writer's."""
        with self._existing(lease.key) as session:
            if session is not None:
                session.lease = released(session.lease, lease) or session.lease

    # -- checkpoints ------------------------------------------------------------------------

    def put_checkpoint(
        self,
        key: SessionKey,
        checkpoint: Checkpoint,
        *,
        keep_last: int = 3,
        lease: Lease | None = None,
    ) -> None:
        """Store a checkpoint; only the ``keep_last`` newest of its run (and branch) are kept."""
        check_checkpoint(key, checkpoint, keep_last)
        with self._created(key) as session:
            check_writer(key, session.lease, lease, time.time())
            session.tree.check_branch(checkpoint.branch_id)
            session.numbered += 1
            # A deep copy: the caller's message dicts may change after this returns.
            session.checkpoints.append((session.numbered, checkpoint.model_copy(deep=True)))
            same_branch = [
                (number, c.run_id)
                for number, c in session.checkpoints
                if c.branch_id == checkpoint.branch_id
            ]
            dropped = set(to_prune(same_branch, checkpoint.run_id, keep_last))
            session.checkpoints = [c for c in session.checkpoints if c[0] not in dropped]

    def checkpoints(self, key: SessionKey, *, branch: str = MAIN) -> list[Checkpoint]:
        """The kept checkpoints of a branch, oldest first."""
        check_id(branch, "branch id")
        with self._existing(key) as session:
            if session is None:
                Tree().check_branch(branch)
                return []
            session.tree.check_branch(branch)
            return [
                c.model_copy(deep=True) for _, c in session.checkpoints if c.branch_id == branch
            ]

    # -- sessions ---------------------------------------------------------------------------

    @contextmanager
    def _existing(self, key: SessionKey) -> Iterator[_Session | None]:
        with self._lock:
            session = self._sessions.get(key.session_id)
            if session is not None:
                check_access(key, session.tenant, session.user)
            yield session

    @contextmanager
    def _created(self, key: SessionKey) -> Iterator[_Session]:
        with self._lock:
            session = self._sessions.setdefault(key.session_id, _Session(key.tenant, key.user))
            check_access(key, session.tenant, session.user)
            yield session
