"""In-memory stores: for tests, and for agents that need nothing to outlive the process."""

from __future__ import annotations

from collections.abc import Sequence

from compactor.events import Event
from compactor.stores.base import SessionKey


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


class MemorySessionStore:
    """Event logs in a dict of the process."""

    def __init__(self) -> None:
        self._logs: dict[tuple[str, str], list[Event]] = {}

    def append(self, key: SessionKey, event: Event) -> None:
        """Append one event."""
        self._logs.setdefault((key.tenant, key.session_id), []).append(event)

    def read(self, key: SessionKey) -> Sequence[Event]:
        """The session's events, oldest first."""
        return list(self._logs.get((key.tenant, key.session_id), ()))

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        return sorted(session for owner, session in self._logs if owner == tenant)
