"""JsonlSessionStore: one JSON-lines event log per session on local disk, the embedded default."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from compactor.errors import StoreError
from compactor.events import Event, dump_event, parse_event
from compactor.stores.base import SessionKey

SCHEMA_VERSION = 1
_LOG = "events.jsonl"


class JsonlSessionStore:
    """Session logs as ``<directory>/<tenant>/<session_id>/events.jsonl``.

    The first line is a header (schema version, session, tenant, user, created); each further
    line is one event. Every append is a single write of a whole line followed by fsync, so a
    crash leaves at most a torn last line, which reading ignores and the next append cuts off.
    """

    def __init__(self, directory: str | Path, *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.fsync = fsync

    def append(self, key: SessionKey, event: Event) -> None:
        """Append one event; durable when this returns (with ``fsync=True``)."""
        path = self._path(key)
        if not path.exists():
            self._create(key, path)
        line = json.dumps(dump_event(event), ensure_ascii=False, separators=(",", ":")) + "\n"
        with path.open("r+b") as file:
            _cut_torn_tail(file)
            file.write(line.encode())
            file.flush()
            if self.fsync:
                os.fsync(file.fileno())

    def read(self, key: SessionKey) -> Sequence[Event]:
        """The session's events, oldest first (empty for a new session)."""
        path = self._path(key)
        if not path.exists():
            return []
        lines = path.read_bytes().split(b"\n")
        complete, _torn = lines[:-1], lines[-1]
        return [self._parse(path, number, line) for number, line in enumerate(complete) if number]

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        folder = self.directory / tenant
        if not folder.is_dir():
            return []
        return sorted(path.parent.name for path in folder.glob(f"*/{_LOG}"))

    def _path(self, key: SessionKey) -> Path:
        return self.directory / key.tenant / key.session_id / _LOG

    def _create(self, key: SessionKey, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {
            "schema": SCHEMA_VERSION,
            "session_id": key.session_id,
            "tenant": key.tenant,
            "user": key.user,
            "created": datetime.now(UTC).isoformat(),
        }
        try:
            with path.open("xb") as file:
                file.write((json.dumps(header) + "\n").encode())
                file.flush()
                if self.fsync:
                    os.fsync(file.fileno())
        except FileExistsError:
            return  # another writer created it first; its header is as good as ours
        if self.fsync:
            _fsync_dir(path.parent)

    def _parse(self, path: Path, number: int, line: bytes) -> Event:
        try:
            return parse_event(line)
        except ValueError as exc:
            raise StoreError(f"{path}: line {number + 1} is not a valid event: {exc}") from exc


def _cut_torn_tail(file: BinaryIO) -> None:
    """Drop a torn last line left by a crash, so the next line starts clean."""
    size = file.seek(0, os.SEEK_END)
    if size == 0:
        return
    file.seek(size - 1)
    if file.read(1) == b"\n":
        return
    file.seek(0)
    data = file.read()
    file.truncate(data.rfind(b"\n") + 1)
    file.seek(0, os.SEEK_END)


def _fsync_dir(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
