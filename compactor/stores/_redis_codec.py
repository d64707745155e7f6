"""How the Redis session store's records look on the server, and what a script's refusal means.

A log record is a stream entry whose fields are those of the JSONL store's ``EntryLine`` or
``ForkLine``, each value JSON-encoded (``"main"``, ``3``, ``null``, ``{...}``): read back, the
fields are validated by the very models the JSONL store uses. A checkpoint is one list element:
canonical JSON of ``{"id", "fields", "messages"}``, every field of the checkpoint but its
messages, which are blobs (``BlobRef``s), as in the JSONL store's checkpoint files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NoReturn
from uuid import uuid4

from pydantic import TypeAdapter

from compactor.errors import LeaseLostError, SessionCorruptedError, StoreError
from compactor.events import Event, dump_event, parse_event
from compactor.stores._files import canonical_json
from compactor.stores._logfile import EntryLine, ForkLine, Record
from compactor.stores._tree import Tree
from compactor.stores.base import Checkpoint, Lease, SessionKey
from compactor.stores.blobs import BlobRef
from compactor.stores.lease import LeaseRecord, check_writer

_RECORD: TypeAdapter[Record] = TypeAdapter(Record)
FetchBlobs = Callable[[list[BlobRef]], list[bytes]]


def text(value: bytes | str | int) -> str:
    """A reply value as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


# -- log records -----------------------------------------------------------------------------


def fields(record: Mapping[str, Any]) -> list[str]:
    """A record's stream fields, flattened to ``[name, JSON value, ...]``."""
    flat = []
    for name, value in record.items():
        flat += [name, canonical_json(value).decode()]
    return flat


def entry_fields(
    entry_id: str, branch: str, at: datetime, event: Event, lease: Lease | None, limit: int
) -> tuple[list[str], bytes | None]:
    """An entry's stream fields but ``seq`` and ``parent_id`` (the script adds those, as only
    it knows them), and the blob of a payload whose JSON is over ``limit`` bytes."""
    payload = dump_event(event)
    data = canonical_json(payload)
    blob = len(data) > limit
    record = EntryLine(
        seq=0,
        entry_id=entry_id,
        parent_id=None,
        branch_id=branch,
        at=at,
        kind=event.kind,
        lease=None if lease is None else lease.token,
        payload=None if blob else payload,
        payload_blob=BlobRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        if blob
        else None,
    )
    envelope = record.model_dump(mode="json", exclude={"seq", "parent_id"})
    return fields(envelope), data if blob else None


def index(
    name: str, records: list[tuple[bytes, dict[bytes, bytes]]]
) -> tuple[Tree, dict[str, EntryLine]]:
    """The entry tree of a stream, and its entries by id, every record checked.

    Raises:
        SessionCorruptedError: a record is not a log record or does not continue the tree;
            ``offset`` is its position in the stream.
    """
    tree, lines = Tree(), {}
    for position, (_, raw) in enumerate(records):
        try:
            record = _RECORD.validate_python({text(k): json.loads(v) for k, v in raw.items()})
            if isinstance(record, EntryLine):
                tree.add(record.seq, record.entry_id, record.parent_id, record.branch_id)
                lines[record.entry_id] = record
            elif isinstance(record, ForkLine):
                tree.fork(record.branch_id, record.at_entry_id)
            else:
                raise ValueError("a header inside the log")
        except ValueError as exc:  # bad JSON, bad UTF-8 and failed validation included
            raise SessionCorruptedError(
                f"{name}: record {position} is not a valid log record: {exc}",
                path=name,
                offset=position,
            ) from exc
    return tree, lines


def events(name: str, lines: list[EntryLine], fetch: FetchBlobs) -> list[Event]:
    """The events of entries, their blobs fetched in one call.

    Raises:
        BlobError: a payload blob is missing or altered.
        SessionCorruptedError: an entry holds no valid event.
    """
    refs = [line.payload_blob for line in lines if line.payload_blob is not None]
    blobs = {ref.sha256: data for ref, data in zip(refs, fetch(refs), strict=True)}
    found = []
    for line in lines:
        ref = line.payload_blob
        source = line.payload if ref is None else blobs[ref.sha256]
        try:
            if source is None:
                raise ValueError("neither a payload nor a payload blob")
            found.append(parse_event(source))
        except ValueError as exc:
            raise SessionCorruptedError(
                f"{name}: entry {line.entry_id} holds no valid event: {exc}",
                path=name,
                offset=line.seq,
            ) from exc
    return found


# -- checkpoints -----------------------------------------------------------------------------


def dump_checkpoint(checkpoint: Checkpoint) -> tuple[bytes, list[bytes]]:
    """A checkpoint's list element, and the blobs of its messages.

    The element carries a fresh id, so a put sent twice (a retry) is recognised, and two puts
    of equal checkpoints are still two elements.
    """
    data = checkpoint.model_dump(mode="json")
    blobs = [canonical_json(message) for message in data.pop("messages")]
    refs = [{"sha256": hashlib.sha256(blob).hexdigest(), "size": len(blob)} for blob in blobs]
    element = canonical_json({"id": uuid4().hex, "fields": data, "messages": refs})
    return element, blobs


def run_of(element: bytes) -> str | None:
    """The run id of a checkpoint element."""
    run: str | None = json.loads(element)["fields"]["run_id"]
    return run


def load_checkpoint(name: str, element: bytes, fetch: FetchBlobs) -> Checkpoint:
    """A checkpoint rebuilt from its element and its message blobs.

    Raises:
        BlobError: a message blob is missing or altered.
        StoreError: the element is not a checkpoint.
    """
    try:
        stored = json.loads(element)
        refs = [BlobRef.model_validate(ref) for ref in stored["messages"]]
        messages = [json.loads(blob) for blob in fetch(refs)]
        return Checkpoint.model_validate({**stored["fields"], "messages": messages})
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{name} holds an element that is not a checkpoint: {exc}") from exc


# -- refusals --------------------------------------------------------------------------------


def lease_record(reply: list[Any], now: float) -> LeaseRecord:
    """The lease state a script reported with a refusal.

    ``["held", owner, token, ms left]``: a live lease; ``["lost", owner or "", token]``: the
    current holder (none once released) and the newest token.
    """
    owner = text(reply[1]) or None
    left = max(int(reply[3]), 1) / 1000 if text(reply[0]) == "held" else 0.0
    return LeaseRecord(owner=owner, token=int(reply[2]), expires_at=now + left if left else 0.0)


def refuse(key: SessionKey, lease: Lease | None, reply: list[Any], now: float) -> NoReturn:
    """Raise what a fenced script's refusal means.

    For a lease refusal, ``lease.check_writer`` itself raises, given the state the script saw:
    the message is the one every backend gives.
    """
    status = text(reply[0])
    if status == "gone":
        raise StoreError(
            f"session {key.session_id!r} vanished from Redis while in use (flushed, or "
            "restarted without persistence)"
        )
    check_writer(key, lease_record(reply, now), lease, now)
    raise LeaseLostError(f"the lease of session {key.session_id!r} refused the write ({status})")
