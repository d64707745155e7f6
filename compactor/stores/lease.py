"""Leases: one writer per session at a time, told apart by a fencing token.

The rules are written once, as functions from the stored ``LeaseRecord`` to the next one, and
every backend applies them under its own lock (the JSONL store under the session's ``flock``,
with the record in ``lease.json``). Tokens only grow: a release keeps the token, so the next
lease of the session gets a higher one, and a writer holding an older token is refused.

Times are Unix time (``time.time()``): leases are compared across processes.
"""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, ValidationError

from compactor.errors import LeaseHeldError, LeaseLostError, StoreError
from compactor.stores._files import write_atomic
from compactor.stores.base import Lease, SessionKey


class LeaseRecord(BaseModel):
    """A session's lease as stored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    owner: str | None
    """Who holds it; None once released."""
    token: int
    """The fencing token of the newest lease ever granted on the session."""
    expires_at: float
    """Unix time after which another owner may take the lease over."""

    def live(self, now: float) -> bool:
        """Whether an owner holds the lease, it has not expired, and its process still runs."""
        return self.owner is not None and self.expires_at > now and not abandoned(self.owner)


def new_owner() -> str:
    """A lease owner naming this process: ``host:pid-namespace:pid:nonce``."""
    return f"{socket.gethostname()}:{_pid_namespace()}:{os.getpid()}:{uuid4().hex[:12]}"


def abandoned(owner: str) -> bool:
    """Whether ``owner`` names a process of this machine that no longer runs.

    A writer that crashed on this machine leaves a lease that would otherwise block its own
    restart until the lease expires. Only an owner of this host and of this PID namespace
    can be judged: containers may share a host name but not their process ids.
    """
    parts = owner.split(":")
    if len(parts) != 4 or parts[:2] != [socket.gethostname(), _pid_namespace()]:
        return False
    if not parts[2].isdigit():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it runs, under another user
    return False


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "-"


def check_ttl(ttl: float) -> float:
    """Return ``ttl`` if it is a positive, finite number of seconds, else raise ValueError."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf:
        raise ValueError(f"lease ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)


def check_owner(owner: object) -> str:
    """Return ``owner`` if it is a non-empty string, else raise ValueError."""
    if not isinstance(owner, str) or not owner:
        raise ValueError(f"a lease owner must be a non-empty string, not {owner!r}")
    return owner


def grant(current: LeaseRecord | None, owner: str, ttl: float, now: float) -> LeaseRecord:
    """The record after ``owner`` takes the lease, with a new token.

    Raises:
        LeaseHeldError: another owner holds a live lease.
    """
    if current is not None and current.live(now) and current.owner != owner:
        raise LeaseHeldError(
            f"the session's lease is held by {current.owner!r} for another "
            f"{current.expires_at - now:.3f}s (token {current.token})"
        )
    token = 1 if current is None else current.token + 1
    return LeaseRecord(owner=owner, token=token, expires_at=now + ttl)


def check_writer(
    key: SessionKey, current: LeaseRecord | None, lease: Lease | None, now: float
) -> None:
    """Refuse a write that its lease (or the lack of one) does not allow.

    A fenced write is allowed while its lease is the session's current one, even past its
    expiry as long as nobody took it over: the token, not the clock, decides. An unfenced
    write is allowed only while nobody holds a live lease.

    Raises:
        LeaseLostError: the write must not happen.
    """
    if lease is None:
        if current is not None and current.live(now):
            raise LeaseLostError(
                f"{current.owner!r} holds the session's lease (token {current.token}); "
                "an append without that lease is refused"
            )
        return
    if (lease.key.tenant, lease.key.session_id) != (key.tenant, key.session_id):
        raise LeaseLostError(f"the lease is for session {lease.key.session_id!r}")
    if current is None or (current.owner, current.token) != (lease.owner, lease.token):
        held = "nobody" if current is None or current.owner is None else repr(current.owner)
        raise LeaseLostError(
            f"lease token {lease.token} of {lease.owner!r} is no longer current: "
            f"{held} holds token {0 if current is None else current.token}"
        )


def renewed(
    key: SessionKey, current: LeaseRecord | None, lease: Lease, ttl: float, now: float
) -> LeaseRecord:
    """The record after ``lease`` is extended to ``now + ttl``.

    Raises:
        LeaseLostError: the lease is no longer current.
    """
    check_writer(key, current, lease, now)
    return LeaseRecord(owner=lease.owner, token=lease.token, expires_at=now + ttl)


def released(current: LeaseRecord | None, lease: Lease) -> LeaseRecord | None:
    """The record after ``lease`` is given up; None when it was not current (nothing to do)."""
    if current is None or (current.owner, current.token) != (lease.owner, lease.token):
        return None
    return LeaseRecord(owner=None, token=current.token, expires_at=0.0)


def as_lease(key: SessionKey, owner: str, record: LeaseRecord) -> Lease:
    """The caller's view of a record granted to, or renewed for, ``owner``."""
    return Lease(key=key, owner=owner, token=record.token, expires_at=record.expires_at)


def read_record(path: Path) -> LeaseRecord | None:
    """The record in a lease file; None when the session never had a lease.

    Raises:
        StoreError: the file exists but does not hold a record (it is only ever replaced
            atomically, so this is damage).
    """
    try:
        return LeaseRecord.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValidationError as exc:
        raise StoreError(f"{path} is not a lease record: {exc}") from exc


def write_record(path: Path, record: LeaseRecord) -> None:
    """Replace a lease file atomically and durably (a token must never go back after a crash)."""
    write_atomic(path, record.model_dump_json().encode())
