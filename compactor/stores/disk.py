"""DiskToolResultStore: tool outputs in a diskcache folder, the embedded default."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import diskcache

from compactor.errors import StoreError
from compactor.stores.base import SessionKey


class DiskToolResultStore:
    """Tool outputs in a local diskcache folder, shared by the processes of one machine.

    Outputs are stored as UTF-8 bytes in SQLite, never pickled (lone surrogates, which some
    tools print, round-trip). A put survives a crash of the process when it returns (SQLite's
    write-ahead log); ``sync`` makes every put so far survive a power loss too, and the
    session calls it before it logs anything that points to an output. Eviction is off: a
    result READ_TOOL_RESULT may still need is never dropped.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._cache = diskcache.Cache(
            str(self.directory),
            eviction_policy="none",
            disk_min_file_size=_IN_SQLITE,  # diskcache's own files are never fsynced
        )

    def put(self, key: SessionKey, handle: str, text: str) -> None:
        """Store the full output under ``handle``; durable when this returns.

        Raises:
            StoreError: the cache could not write it.
        """
        with self._translated():
            self._cache.set(_key(key, handle), text.encode("utf-8", "surrogatepass"))

    def read(self, key: SessionKey, handle: str, offset: int, limit: int) -> str | None:
        """A slice of a stored output; None if unknown."""
        text = self._text(key, handle)
        return None if text is None else text[offset : offset + limit]

    def size(self, key: SessionKey, handle: str) -> int | None:
        """Length in characters of a stored output; None if unknown."""
        text = self._text(key, handle)
        return None if text is None else len(text)

    def _text(self, key: SessionKey, handle: str) -> str | None:
        with self._translated():
            data = self._cache.get(_key(key, handle))
        if data is None:
            return None
        return bytes(data).decode("utf-8", "surrogatepass")

    def sync(self) -> None:
        """Make every put so far durable: a checkpoint of SQLite's write-ahead log syncs it.

        Raises:
            StoreError: the database could not be synced.
        """
        with self._translated(), sqlite3.connect(self.directory / "cache.db") as connection:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"tool-result store at {self.directory}: {exc}") from exc

    def close(self) -> None:
        """Close the cache's database connection."""
        self._cache.close()


_IN_SQLITE = 2**30
"""Outputs below this many bytes (all of them, in practice) are kept inside SQLite."""


def _key(key: SessionKey, handle: str) -> str:
    # The unit separator cannot occur in a checked id, so keys of two sessions never collide.
    return f"{key.tenant}\x1f{key.session_id}\x1f{handle}"
