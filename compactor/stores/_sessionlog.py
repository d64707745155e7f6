"""One session log as a store instance knows it: its verified prefix, indexed.

``refresh`` verifies the bytes a log gained since it was last seen (all of them the first
time), applies the tail rule of ``_logfile.scan`` and repairs a torn tail; ``SessionLog``
appends whole lines and reads entries back, checking each line again as it is read. Callers
hold the session's lock around all of it.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compactor.errors import SessionCorruptedError, StoreError
from compactor.events import parse_event
from compactor.stores._files import sync_file
from compactor.stores._logfile import (
    SCHEMA_VERSION,
    EntryLine,
    ForkLine,
    Header,
    Record,
    Scan,
    checked_body,
    decode,
    quarantine_tail,
    scan,
)
from compactor.stores._tree import Tree
from compactor.stores.base import Entry
from compactor.stores.blobs import BlobStore

BATCH_APPENDS = 64
BATCH_SECONDS = 0.05

Sync = Callable[[Path, int], None]
"""What to do after a line is written: ``(path, descriptor)``; fsync, or not yet, or not."""


@dataclass
class SessionLog:
    """The verified prefix of one session log, indexed."""

    path: Path
    header: Header
    size: int = 0
    """Bytes of the verified prefix: the log ends here."""
    tree: Tree = field(default_factory=Tree)
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)
    """``entry_id -> (offset, length)`` of every entry line."""

    @functools.cached_property
    def blobs(self) -> BlobStore:
        """The session's blobs (payloads too large to inline, checkpoint messages)."""
        return BlobStore(self.path.parent / "blobs")

    def write(self, lines: bytes, sync: Sync) -> int:
        """Append whole lines with a single ``write()``; the offset of the first.

        A write that is short or fails to sync is cut off again and raised: an append the
        caller sees fail must not be found in the log afterwards.
        """
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            written = os.write(descriptor, lines)
            if written != len(lines):
                raise StoreError(f"{self.path}: short write ({written} of {len(lines)} bytes)")
            sync(self.path, descriptor)
        except BaseException as exc:
            os.ftruncate(descriptor, self.size)  # never leave a failed append behind us
            if isinstance(exc, OSError):
                raise StoreError(f"{self.path}: append failed: {exc}") from exc
            raise
        finally:
            os.close(descriptor)
        offset, self.size = self.size, self.size + len(lines)
        return offset

    def entries(self, ids: Sequence[str]) -> list[Entry]:
        """The entries with these ids, read from the file and checked again."""
        rows = [self.rows[entry_id] for entry_id in ids]
        if not rows:
            return []
        start = rows[0][0]
        with self.path.open("rb") as file:
            file.seek(start)
            data = file.read(self.size - start)
        return [
            self._entry(data[offset - start : offset - start + length - 1], offset)
            for offset, length in rows
        ]

    def _entry(self, line: bytes, offset: int) -> Entry:
        body = checked_body(line)
        record = None if body is None else decode(body, str(self.path), offset)
        if not isinstance(record, EntryLine):
            raise _corrupted(self.path, offset, "changed after it was verified")
        source: dict[str, Any] | bytes | None = record.payload
        if record.payload_blob is not None:
            source = self.blobs.get(record.payload_blob)
        try:
            if source is None:
                raise ValueError("neither a payload nor a payload blob")
            event = parse_event(source)
        except ValueError as exc:
            raise _corrupted(self.path, offset, f"holds no valid event: {exc}") from exc
        return Entry(
            record.seq, record.entry_id, record.parent_id, record.branch_id, record.at, event
        )


def refresh(cached: SessionLog | None, path: Path) -> SessionLog:
    """The log verified to its end: ``cached`` extended, or (None) verified from byte 0.

    Raises:
        SessionCorruptedError: damage before the tail; the file was not changed.
    """
    if cached is not None and os.stat(path).st_size == cached.size:
        return cached  # the common case, one stat: nobody else wrote since
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        if cached is not None and size < cached.size:
            cached = None  # cut behind our back: trust nothing, verify from the start
        base = 0 if cached is None else cached.size
        file.seek(base)
        found = scan(file.read(), base, str(path))
    log = SessionLog(path, _header(found, path)) if cached is None else cached
    _index(log, found.records if cached else found.records[1:])
    # Repaired only once every line before the tail proved good: damage leaves the file as is.
    if found.torn:
        quarantine_tail(path, found.end, found.torn)
    log.size = found.end
    return log


def _index(log: SessionLog, records: Sequence[tuple[int, int, Record]]) -> None:
    for offset, length, record in records:
        try:
            if isinstance(record, EntryLine):
                log.tree.add(record.seq, record.entry_id, record.parent_id, record.branch_id)
                log.rows[record.entry_id] = (offset, length)
            elif isinstance(record, ForkLine):
                log.tree.fork(record.branch_id, record.at_entry_id)
            else:
                raise ValueError("a second header")
        except ValueError as exc:
            raise _corrupted(log.path, offset, f"does not continue the log: {exc}") from exc


def _header(found: Scan, path: Path) -> Header:
    """The header a log must start with.

    Raises:
        SessionCorruptedError: at offset 0. The header is written atomically with the file, so
            a missing or torn one is damage, never a torn tail to cut away.
    """
    if not found.records or not isinstance(found.records[0][2], Header):
        raise _corrupted(path, 0, "is not a valid header")
    header = found.records[0][2]
    if header.schema_version != SCHEMA_VERSION:
        raise StoreError(
            f"{path}: log schema {header.schema_version}; this compactor reads {SCHEMA_VERSION}"
        )
    return header


def _corrupted(path: Path, offset: int, why: str) -> SessionCorruptedError:
    return SessionCorruptedError(
        f"{path}: the line at byte {offset} {why}", path=str(path), offset=offset
    )


class BatchSync:
    """The ``"batch"`` policy: fsync a log once 64 appends, or 50 ms since the first of them,
    are waiting; ``flush`` syncs whatever still waits."""

    def __init__(self) -> None:
        self._pending: dict[Path, tuple[int, float]] = {}

    def __call__(self, path: Path, descriptor: int) -> None:
        count, since = self._pending.get(path, (0, time.monotonic()))
        if count + 1 >= BATCH_APPENDS or time.monotonic() - since >= BATCH_SECONDS:
            os.fsync(descriptor)
            self._pending.pop(path, None)
        else:
            self._pending[path] = (count + 1, since)

    def flush(self) -> None:
        """Fsync every log with appends still waiting."""
        for path in list(self._pending):
            self._pending.pop(path, None)
            with suppress(FileNotFoundError):  # a log removed since has nothing left to save
                sync_file(path)


def fsync_now(path: Path, descriptor: int) -> None:
    """The ``"always"`` policy."""
    os.fsync(descriptor)


def no_fsync(path: Path, descriptor: int) -> None:
    """The ``"never"`` policy: the OS writes the page cache back when it likes."""
