"""The store Protocols and the key every store call is made with.

Two small extension points: a ``ToolResultStore`` keeps full tool outputs for READ_TOOL_RESULT,
a ``SessionStore`` keeps each session's append-only event log. Every call names the tenant and
session it acts for through a ``SessionKey``, whose ids are validated before they reach a path
or a key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from compactor.errors import InvalidSessionIdError
from compactor.events import Event

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")


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


@runtime_checkable
class SessionStore(Protocol):
    """An append-only event log per session."""

    def append(self, key: SessionKey, event: Event) -> None:
        """Append one event; it is durable (per the store's policy) when this returns."""
        ...

    def read(self, key: SessionKey) -> Sequence[Event]:
        """The session's events, oldest first (empty for a new session)."""
        ...

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        ...
