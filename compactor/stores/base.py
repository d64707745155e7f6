"""The store Protocols and the values that cross them.

Two small extension points: a ``ToolResultStore`` keeps full tool outputs for READ_TOOL_RESULT,
a ``SessionStore`` keeps each session's append-only event log (with branches, leases and
checkpoints). Every call names the tenant and session it acts for through a ``SessionKey``,
whose ids are validated before they reach a path or a key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from compactor.errors import InvalidSessionIdError
from compactor.events import Event

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")

MAIN = "main"
"""The branch every session starts on."""


def check_id(value: object, what: str = "session id") -> str:
    """Return ``value`` if it is a safe id, else raise InvalidSessionIdError.

    Safe ids are 1-128 ASCII letters, digits and ``. _ : @ + = -``, starting with a letter or
    digit, and never ``..``: nothing that could name a path outside a store or look like another
    id in a different script.
    """
    if not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value:
        raise InvalidSessionIdError(
            f"invalid {what} {value!r}: use 1-128 ASCII letters, digits and . _ : @ + = -, "
            "starting with a letter or digit, without '..'"
        )
    return value


@dataclass(frozen=True)
class SessionKey:
    """Which session a store call acts on, and for whom."""

    session_id: str
    tenant: str = "default"
    user: str | None = None

    def __post_init__(self) -> None:
        check_id(self.session_id)
        check_id(self.tenant, "tenant")
        if self.user is not None:
            check_id(self.user, "user")


@dataclass(frozen=True)
class Entry:
    """One event of a session log, in its envelope."""

    seq: int
    """Position in the session's log, from 1, over all branches."""
    entry_id: str
    parent_id: str | None
    """The entry before this one on its branch's path (None for the first)."""
    branch_id: str
    at: datetime
    event: Event


@dataclass(frozen=True)
class Lease:
    """The right to write a session, until ``expires_at`` or until another writer takes it."""

    key: SessionKey
    owner: str
    token: int
    """Fencing token: strictly increasing per session, so a stale writer can be told apart."""
    expires_at: float
    """Unix time after which another writer may take the lease over."""


class Checkpoint(BaseModel):
    """What another process needs to resume a session exactly where it stopped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    checkpoint_id: str
    session_id: str
    branch_id: str
    run_id: str | None
    turn: int
    """Model calls made in the session when the checkpoint was taken."""
    messages: list[dict[str, Any]]
    """The caller's history (canonical, tool-call pairs intact)."""
    state: dict[str, Any]
    """The middleware state: handles, archived results, counters, token anchor."""
    config_digest: str
    toolset_digest: str
    created: datetime


@runtime_checkable
class ToolResultStore(Protocol):
    """Keeps every full tool output of a session, as text."""

    def put(self, key: SessionKey, handle: str, text: str) -> None:
        """Store the full output under ``handle`` (overwriting the same text is harmless)."""
        ...

    def read(self, key: SessionKey, handle: str, offset: int, limit: int) -> str | None:
        """Characters ``offset`` to ``offset + limit`` of a stored output; None if unknown."""
        ...

    def size(self, key: SessionKey, handle: str) -> int | None:
        """Length in characters of a stored output; None if unknown."""
        ...

    def sync(self) -> None:
        """Make every put so far durable (nothing to do where each put already is)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """An append-only event log per session, with branches, leases and checkpoints."""

    def append(
        self, key: SessionKey, event: Event, *, branch: str = MAIN, lease: Lease | None = None
    ) -> Entry:
        """Append one event to a branch; durable (per the store's policy) when this returns.

        Raises:
            LeaseLostError: ``lease`` is no longer the session's current lease.
            AccessDeniedError: the session belongs to another tenant or user.
        """
        ...

    def append_many(
        self,
        key: SessionKey,
        events: Sequence[Event],
        *,
        branch: str = MAIN,
        lease: Lease | None = None,
    ) -> Sequence[Entry]:
        """Append events in order; where the backend can, with one write and one sync."""
        ...

    def read(self, key: SessionKey, *, branch: str = MAIN) -> Sequence[Event]:
        """The events on a branch's path from the root, oldest first (empty when new)."""
        ...

    def entries(self, key: SessionKey, *, branch: str = MAIN) -> Sequence[Entry]:
        """Like ``read``, with each event's envelope."""
        ...

    def fork(self, key: SessionKey, at_entry_id: str, *, lease: Lease | None = None) -> str:
        """A new branch whose path runs from the root to ``at_entry_id``; its id."""
        ...

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        ...

    def acquire(self, key: SessionKey, *, ttl: float = 30.0, owner: str | None = None) -> Lease:
        """Take the session's lease, with a new fencing token.

        Raises:
            LeaseHeldError: another owner holds a lease that has not expired.
        """
        ...

    def renew(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease this writer still holds.

        Raises:
            LeaseLostError: the lease was taken over.
        """
        ...

    def release(self, lease: Lease) -> None:
        """Give the lease up, if it is still this writer's."""
        ...

    def put_checkpoint(
        self,
        key: SessionKey,
        checkpoint: Checkpoint,
        *,
        keep_last: int = 3,
        lease: Lease | None = None,
    ) -> None:
        """Store a checkpoint; only the ``keep_last`` newest of its run are kept."""
        ...

    def checkpoints(self, key: SessionKey, *, branch: str = MAIN) -> list[Checkpoint]:
        """The kept checkpoints of a branch, oldest first."""
        ...
