"""The bytes of a session log: line records, their checksum, and the scan that finds a torn tail.

Every line is ``{"crc":"<8 hex>",<fields>}\\n``: ``<fields>`` are the record's other fields as
canonical JSON (sorted keys, no spaces, UTF-8), and the crc is the CRC32 (zlib, lowercase hex)
of exactly that canonical object, i.e. of the line without its newline and without the leading
``"crc":"…",`` member. Checking a line therefore needs no JSON parsing and no re-encoding.

A CRC32 catches torn writes, zero-filled blocks and flipped bits; it is not a defence against
someone who edits the file on purpose (they could recompute it).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from compactor.errors import SessionCorruptedError
from compactor.stores._files import canonical_json, fsync_dir
from compactor.stores.blobs import BlobRef

SCHEMA_VERSION = 2
"""Version of the log format (1 was the unchecked ``events.jsonl`` of compactor 0.1)."""

_PREFIX = b'{"crc":"'
_BODY = len(_PREFIX) + 10  # prefix, 8 hex digits, then '",'


class _Line(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Header(_Line):
    """The first line of every log: whose session it is."""

    type: Literal["header"] = "header"
    schema_version: int
    """Version of the log format."""
    session_id: str
    tenant: str
    user: str | None
    """The user who created the session; others are refused when both sides name one."""
    agent: str | None
    created: datetime


class EntryLine(_Line):
    """One event on a branch, in its envelope."""

    type: Literal["entry"] = "entry"
    seq: int
    """Position among the log's entries, from 1, over all branches."""
    entry_id: str
    parent_id: str | None
    branch_id: str
    at: datetime
    """When the event was appended."""
    kind: str
    """The event's kind, repeated from the payload so the envelope reads without it."""
    lease: int | None
    """Fencing token of the lease the append was made under (None: an unfenced append)."""
    payload: dict[str, Any] | None = None
    """The event itself, when its JSON fits ``inline_payload_max_bytes``."""
    payload_blob: BlobRef | None = None
    """Otherwise where it went: a blob of the event's canonical JSON."""


class ForkLine(_Line):
    """A new branch whose path runs from the root to ``at_entry_id``."""

    type: Literal["fork"] = "fork"
    branch_id: str
    at_entry_id: str
    at: datetime
    lease: int | None


Record = Annotated[Header | EntryLine | ForkLine, Field(discriminator="type")]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


def encode(record: Header | EntryLine | ForkLine) -> bytes:
    """A record as one checksummed line, newline included."""
    body = canonical_json(record.model_dump(mode="json"))
    return b'%s%08x",%s\n' % (_PREFIX, zlib.crc32(body), body[1:])


def checked_body(line: bytes) -> bytes | None:
    """The canonical JSON of a line (without its newline), or None if its frame or crc is bad."""
    if len(line) <= _BODY or not line.startswith(_PREFIX) or line[_BODY - 2 : _BODY] != b'",':
        return None
    body = b"{" + line[_BODY:]
    if line[len(_PREFIX) : _BODY - 2] != b"%08x" % zlib.crc32(body):
        return None
    return body


def decode(body: bytes, path: str, offset: int) -> Record:
    """The record of a checked line.

    Raises:
        SessionCorruptedError: the crc holds but the content is not a record: the writer did
            not write this, so it is damage, wherever it sits.
    """
    try:
        return _RECORD.validate_json(body)
    except ValidationError as exc:
        raise SessionCorruptedError(
            f"{path}: the line at byte {offset} is not a log record: {exc}",
            path=path,
            offset=offset,
        ) from exc


@dataclass(frozen=True)
class Scan:
    """What a scan of a log's bytes found."""

    records: list[tuple[int, int, Record]]
    """``(offset, length, record)`` of every good line, in order."""
    end: int
    """Offset just past the last good line: where the log should end."""
    torn: bytes
    """The torn tail after ``end`` (empty when there is none)."""


def scan(data: bytes, base: int, path: str) -> Scan:
    """Check the lines of ``data``, which starts at byte ``base`` of the log.

    The tail rule: the bytes after the last newline, together with the last newline-terminated
    line when that line fails its frame or crc, are a torn tail to repair. Any other line that
    fails is damage before the tail, and nothing is skipped.

    Raises:
        SessionCorruptedError: with the offset of the first damaged line.
    """
    records: list[tuple[int, int, Record]] = []
    start = 0
    while (newline := data.find(b"\n", start)) >= 0:
        body = checked_body(data[start:newline])
        if body is None:
            if data.find(b"\n", newline + 1) >= 0:
                raise _damaged(path, base + start, "fails its checksum")
            break
        records.append((base + start, newline + 1 - start, decode(body, path, base + start)))
        start = newline + 1
    return Scan(records, base + start, data[start:])


def _damaged(path: str, offset: int, why: str) -> SessionCorruptedError:
    return SessionCorruptedError(
        f"{path}: the line at byte {offset} {why}, and complete lines follow it: the log is "
        "damaged before its tail and was left untouched",
        path=path,
        offset=offset,
    )


def quarantine_tail(path: Path, end: int, torn: bytes) -> Path:
    """Move a torn tail out of the log: append it to a quarantine file, then cut the log.

    The quarantine is written and fsynced before the log is cut, so a crash in between leaves
    the torn bytes in both places and the next open repeats the repair: nothing is lost.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.torn-{stamp}")
    with target.open("ab") as file:  # append: never overwrite an earlier quarantine
        file.write(torn)
        file.flush()
        os.fsync(file.fileno())
    fsync_dir(path.parent)
    descriptor = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(descriptor, end)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return target
