"""DiskToolResultStore: tool outputs in a diskcache folder, the embedded default."""

from __future__ import annotations

from pathlib import Path

import diskcache

from compactor.stores.base import SessionKey


class DiskToolResultStore:
    """Tool outputs in a local diskcache folder, shared by the processes of one machine.

    Outputs are stored as text (diskcache keeps ``str`` values as SQLite text or text files,
    never pickles), and eviction is off: a result READ_TOOL_RESULT may still need is never
    dropped to make room.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._cache = diskcache.Cache(str(self.directory), eviction_policy="none")

    def put(self, key: SessionKey, handle: str, text: str) -> None:
        """Store the full output under ``handle``."""
        self._cache.set(_key(key, handle), text)

    def read(self, key: SessionKey, handle: str, offset: int, limit: int) -> str | None:
        """A slice of a stored output; None if unknown."""
        text = self._cache.get(_key(key, handle))
        return None if text is None else str(text)[offset : offset + limit]

    def size(self, key: SessionKey, handle: str) -> int | None:
        """Length in characters of a stored output; None if unknown."""
        text = self._cache.get(_key(key, handle))
        return None if text is None else len(str(text))

    def close(self) -> None:
        """Close the cache's database connection."""
        self._cache.close()


def _key(key: SessionKey, handle: str) -> str:
    # The unit separator cannot occur in a checked id, so keys of two sessions never collide.
    return f"{key.tenant}\x1f{key.session_id}\x1f{handle}"
