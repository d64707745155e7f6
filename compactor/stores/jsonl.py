"""JsonlSessionStore: one checksummed JSON-lines log per session on local disk, the default.

Layout under the store's directory (``<home>/sessions`` for a Compactor)::

    _claims/<session_id>              the tenant that created the session id (never changes)
    <tenant>/<session_id>/log.jsonl   the log: a header line, then one record per line
    <tenant>/<session_id>/log.jsonl.torn-<UTC time>   torn tails moved out of the log
    <tenant>/<session_id>/.lock       flock'd around every operation on the session (empty)
    <tenant>/<session_id>/lease.json  {"owner", "token", "expires_at"}: the current lease
    <tenant>/<session_id>/blobs/<sha256>                      large payloads, message blobs
    <tenant>/<session_id>/checkpoints/<branch>/<n>-<run>.json checkpoints (see _checkpoints)

Lines (see ``_logfile``) are ``{"crc":"<crc32 hex>",...}``: the header (``type``,
``schema_version``, ``session_id``, ``tenant``, ``user``, ``agent``, ``created``); entries
(``seq``, ``entry_id``, ``parent_id``, ``branch_id``, ``at``, ``kind``, ``lease`` token, and
``payload`` or, past ``inline_payload_max_bytes`` of canonical JSON, ``payload_blob``
``{"sha256", "size"}``); and forks (``branch_id``, ``at_entry_id``, ``at``, ``lease``).

Every append is one ``write()`` of a whole line on an ``O_APPEND`` descriptor, made under the
session's ``flock`` after the lease check, so lines of concurrent writers never interleave.
Durability (``fsync=``): ``"always"`` fsyncs every line before the append returns;
``"batch"`` fsyncs once 64 appends, or 50 ms since the first unsynced one, have piled up on a
log (checked at each append), and on ``close()`` or when the store is collected; ``"never"``
leaves it to the OS. The header, blobs, leases, claims, checkpoints and repairs are always
fsynced, and so is the directory whenever a file is created or renamed (but the empty lock).

Recovery. Whenever a store instance reads a log (on first use, and to catch up with lines
other writers added) it checks every new line. The tail rule: the bytes after the last newline,
together with the last newline-terminated line when that line fails its checksum, are a torn
tail (a crash mid-append, a half-written or zero-filled block, a cut inside a UTF-8 character,
a missing newline); they are appended to ``log.jsonl.torn-<time>`` and the log is cut back to
its valid prefix, so the next append starts on a clean line. Only that tail is repaired: any
other line that fails its checksum, any line whose checksum holds but whose content is not a
valid record (a header that is not first, a seq out of order, a parent other than its branch's
head), and a log whose header is damaged raise ``SessionCorruptedError`` with the byte offset
of the first bad line, and the file is left byte-for-byte untouched.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from compactor.errors import AccessDeniedError, LeaseLostError, SessionCorruptedError, StoreError
from compactor.events import Event, dump_event
from compactor.stores._checkpoints import CheckpointFiles
from compactor.stores._files import (
    canonical_json,
    create_exclusive,
    locked,
    make_dirs,
    write_atomic,
)
from compactor.stores._logfile import (
    SCHEMA_VERSION,
    EntryLine,
    ForkLine,
    Header,
    encode,
)
from compactor.stores._rules import check_access, check_checkpoint
from compactor.stores._sessionlog import BatchSync, SessionLog, Sync, fsync_now, no_fsync, refresh
from compactor.stores._tree import Tree, new_branch_id, new_entry_id
from compactor.stores.base import MAIN, Checkpoint, Entry, Lease, SessionKey, check_id
from compactor.stores.blobs import BlobRef
from compactor.stores.lease import (
    as_lease,
    check_owner,
    check_ttl,
    check_writer,
    grant,
    new_owner,
    read_record,
    released,
    renewed,
    write_record,
)

FsyncPolicy = Literal["always", "batch", "never"]
LOG = "log.jsonl"
_LOCK = ".lock"
_LEASE = "lease.json"
_CLAIMS = "_claims"


class JsonlSessionStore:
    """Session logs as checksummed JSON-lines files, safe across threads and processes.

    Args:
        directory: the store's root folder (created on the first write).
        fsync: the durability of appends: ``"always"`` (default), ``"batch"`` or ``"never"``.
        inline_payload_max_bytes: events whose canonical JSON is larger go to a blob.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        fsync: FsyncPolicy = "always",
        inline_payload_max_bytes: int = 16384,
    ) -> None:
        if fsync not in ("always", "batch", "never"):
            raise ValueError(f"fsync must be 'always', 'batch' or 'never', not {fsync!r}")
        limit = inline_payload_max_bytes
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"inline_payload_max_bytes must be an integer >= 0, not {limit!r}")
        self.directory = Path(directory)
        self.fsync: FsyncPolicy = fsync
        self.inline_payload_max_bytes = inline_payload_max_bytes
        self.owner = new_owner()
        """The lease owner ``acquire`` uses when it is given none."""
        self._logs: dict[tuple[str, str], SessionLog] = {}
        self._claims: dict[str, str] = {}
        self._batch = BatchSync()
        policies: dict[str, Sync] = {"always": fsync_now, "batch": self._batch, "never": no_fsync}
        self._sync = policies[fsync]
        # "batch" owes an fsync for its last appends even if close() is never called.
        self._finalizer = weakref.finalize(self, self._batch.flush)

    # -- the log ----------------------------------------------------------------------------

    def append(
        self, key: SessionKey, event: Event, *, branch: str = MAIN, lease: Lease | None = None
    ) -> Entry:
        """Append one event to a branch; durable per the fsync policy when this returns.

        Raises:
            LeaseLostError: ``lease`` is not the session's current lease, or (without a lease)
                another owner holds a live one; nothing was written.
            AccessDeniedError: the session belongs to another tenant or user.
            ValueError: the branch does not exist.
        """
        return self.append_many(key, [event], branch=branch, lease=lease)[0]

    def append_many(
        self,
        key: SessionKey,
        events: Sequence[Event],
        *,
        branch: str = MAIN,
        lease: Lease | None = None,
    ) -> list[Entry]:
        """Append events in order with one ``write()`` and one sync; raises like ``append``."""
        check_id(branch, "branch id")
        payloads = [dump_event(event) for event in events]
        with self._created(key) as log:
            self._check_writer(log, key, lease)
            records = self._records(log, branch, lease, events, payloads)
            lines = [encode(record) for record in records]
            offset = log.write(b"".join(lines), self._sync)
            for record, line in zip(records, lines, strict=True):
                log.tree.add(record.seq, record.entry_id, record.parent_id, branch)
                log.rows[record.entry_id] = (offset, len(line))
                offset += len(line)
        return [
            Entry(r.seq, r.entry_id, r.parent_id, branch, r.at, event)
            for r, event in zip(records, events, strict=True)
        ]

    def _records(
        self,
        log: SessionLog,
        branch: str,
        lease: Lease | None,
        events: Sequence[Event],
        payloads: list[dict[str, Any]],
    ) -> list[EntryLine]:
        """The entry lines of events appended after the branch's head, chained in order."""
        seq, parent = log.tree.count, log.tree.head(branch)
        records = []
        for event, payload in zip(events, payloads, strict=True):
            seq += 1
            inline, blob = self._payload(log, payload)
            record = EntryLine(
                seq=seq,
                entry_id=new_entry_id(),
                parent_id=parent,
                branch_id=branch,
                at=datetime.now(UTC),
                kind=event.kind,
                lease=None if lease is None else lease.token,
                payload=inline,
                payload_blob=blob,
            )
            records.append(record)
            parent = record.entry_id
        return records

    def read(self, key: SessionKey, *, branch: str = MAIN) -> list[Event]:
        """The events on a branch's path from the root, oldest first (empty when new)."""
        return [entry.event for entry in self.entries(key, branch=branch)]

    def entries(self, key: SessionKey, *, branch: str = MAIN) -> list[Entry]:
        """Like ``read``, with each event's envelope.

        Raises:
            SessionCorruptedError: the log is damaged before its tail (or changed under us).
            BlobError: a payload blob is missing or altered.
            AccessDeniedError: the session belongs to another tenant or user.
        """
        check_id(branch, "branch id")
        with self._existing(key) as log:
            if log is None:
                Tree().check_branch(branch)  # a session not yet written has only main
                return []
            return log.entries(log.tree.path(branch))

    def fork(self, key: SessionKey, at_entry_id: str, *, lease: Lease | None = None) -> str:
        """A new branch whose path runs from the root to ``at_entry_id``; its id.

        Raises:
            ValueError: no entry of the session has that id (InvalidSessionIdError when it is
                not even a well-formed id).
            LeaseLostError, AccessDeniedError: as for ``append``.
        """
        check_id(at_entry_id, "entry id")
        with self._existing(key) as log:
            if log is None:
                raise ValueError(f"cannot fork at unknown entry {at_entry_id!r}")
            self._check_writer(log, key, lease)
            branch = new_branch_id()
            log.tree.check_fork(branch, at_entry_id)
            token = None if lease is None else lease.token
            record = ForkLine(
                branch_id=branch, at_entry_id=at_entry_id, at=datetime.now(UTC), lease=token
            )
            log.write(encode(record), self._sync)
            log.tree.fork(branch, at_entry_id)
        return branch

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        folder = self.directory / check_id(tenant, "tenant")
        if not folder.is_dir():
            return []
        return sorted(path.parent.name for path in folder.glob(f"*/{LOG}"))

    # -- leases -----------------------------------------------------------------------------

    def acquire(self, key: SessionKey, *, ttl: float = 30.0, owner: str | None = None) -> Lease:
        """Take the session's lease, with a new fencing token (also when ``owner`` held it).

        Raises:
            LeaseHeldError: another owner holds a lease that has not expired.
        """
        ttl = check_ttl(ttl)
        owner = self.owner if owner is None else check_owner(owner)
        with self._created(key) as log:
            path = log.path.parent / _LEASE
            record = grant(read_record(path), owner, ttl, time.time())
            write_record(path, record)
        return as_lease(key, owner, record)

    def renew(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease this writer still holds to ``ttl`` seconds from now.

        Raises:
            LeaseLostError: the lease was taken over or released.
        """
        ttl = check_ttl(ttl)
        with self._existing(lease.key) as log:
            if log is None:
                raise LeaseLostError(f"session {lease.key.session_id!r} has no lease")
            path = log.path.parent / _LEASE
            record = renewed(lease.key, read_record(path), lease, ttl, time.time())
            write_record(path, record)
        return as_lease(lease.key, lease.owner, record)

    def release(self, lease: Lease) -> None:
        """Give the lease up, if it is still this writer's (otherwise do nothing)."""
        with self._existing(lease.key) as log:
            if log is None:
                return
            path = log.path.parent / _LEASE
            record = released(read_record(path), lease)
            if record is not None:
                write_record(path, record)

    # -- checkpoints ------------------------------------------------------------------------

    def put_checkpoint(
        self,
        key: SessionKey,
        checkpoint: Checkpoint,
        *,
        keep_last: int = 3,
        lease: Lease | None = None,
    ) -> None:
        """Store a checkpoint; only the ``keep_last`` newest of its run (and branch) are kept.

        Raises:
            ValueError: the checkpoint is of another session, names an unknown branch, or
                ``keep_last`` is below 1.
            LeaseLostError, AccessDeniedError: as for ``append``.
        """
        check_checkpoint(key, checkpoint, keep_last)
        with self._created(key) as log:
            self._check_writer(log, key, lease)
            log.tree.check_branch(checkpoint.branch_id)
            self._checkpoint_files(log).put(checkpoint, keep_last)

    def checkpoints(self, key: SessionKey, *, branch: str = MAIN) -> list[Checkpoint]:
        """The kept checkpoints of a branch, oldest first, fully rebuilt.

        Raises:
            BlobError: a message blob is missing or altered.
        """
        check_id(branch, "branch id")
        with self._existing(key) as log:
            if log is None:
                Tree().check_branch(branch)
                return []
            log.tree.check_branch(branch)
            return self._checkpoint_files(log).load(branch)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Fsync what the ``"batch"`` policy has not synced yet. The store stays usable."""
        self._batch.flush()

    def __enter__(self) -> JsonlSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- opening a session ------------------------------------------------------------------

    @contextmanager
    def _existing(self, key: SessionKey) -> Iterator[SessionLog | None]:
        """The session's verified log under its lock; None if the session was never written."""
        folder = self.directory / key.tenant / key.session_id
        with _translated(folder):
            if not self._claimed(key, create=False) or not (folder / LOG).is_file():
                yield None
                return
            with locked(folder / _LOCK):
                yield self._open(key, folder)

    @contextmanager
    def _created(self, key: SessionKey) -> Iterator[SessionLog]:
        """The session's verified log under its lock, creating the session if needed."""
        folder = self.directory / key.tenant / key.session_id
        fresh = (key.tenant, key.session_id) not in self._logs  # else claimed and created
        with _translated(folder):
            if fresh:
                self._claimed(key, create=True)
                make_dirs(folder)
            with locked(folder / _LOCK):
                if fresh and not (folder / LOG).is_file():
                    write_atomic(folder / LOG, encode(_new_header(key)))
                yield self._open(key, folder)

    def _claimed(self, key: SessionKey, *, create: bool) -> bool:
        """Whether the session id is claimed (claiming it for ``key`` when ``create``).

        Raises:
            AccessDeniedError: another tenant claimed the session id first.
        """
        tenant = self._claims.get(key.session_id)
        path = self.directory / _CLAIMS / key.session_id
        if tenant is None:
            tenant = _read_claim(path)
        if tenant is None and create:
            make_dirs(path.parent)
            created = create_exclusive(path, key.tenant.encode())
            tenant = key.tenant if created else _read_claim(path)
        if tenant is None:
            return False
        self._claims[key.session_id] = tenant
        if tenant != key.tenant:
            raise AccessDeniedError(f"session {key.session_id!r} belongs to another tenant")
        return True

    def _open(self, key: SessionKey, folder: Path) -> SessionLog:
        """The log verified up to its current end (the caller holds the session lock)."""
        ident = (key.tenant, key.session_id)
        # Dropped while it is being extended: if verification raises, the next call starts
        # over from the first byte instead of trusting a half-updated index.
        log = refresh(self._logs.pop(ident, None), folder / LOG)
        self._logs[ident] = log
        if (log.header.tenant, log.header.session_id) != ident:
            raise SessionCorruptedError(
                f"{log.path}: the header names another session", path=str(log.path), offset=0
            )
        check_access(key, log.header.tenant, log.header.user)
        return log

    # -- writing and reading lines ----------------------------------------------------------

    def _check_writer(self, log: SessionLog, key: SessionKey, lease: Lease | None) -> None:
        check_writer(key, read_record(log.path.parent / _LEASE), lease, time.time())

    def _payload(
        self, log: SessionLog, payload: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, BlobRef | None]:
        """The event inline, or (past the inline limit) a blob of its canonical JSON."""
        data = canonical_json(payload)
        if len(data) <= self.inline_payload_max_bytes:
            return payload, None
        return None, log.blobs.put(data)

    @staticmethod
    def _checkpoint_files(log: SessionLog) -> CheckpointFiles:
        return CheckpointFiles(log.path.parent / "checkpoints", log.blobs)


@contextmanager
def _translated(folder: Path) -> Iterator[None]:
    """The file system's errors, as the store's: callers catch StoreError, not OSError."""
    try:
        yield
    except OSError as exc:
        raise StoreError(f"session store at {folder}: {exc}") from exc


def _read_claim(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _new_header(key: SessionKey) -> Header:
    return Header(
        schema_version=SCHEMA_VERSION,
        session_id=key.session_id,
        tenant=key.tenant,
        user=key.user,
        agent=None,  # no SessionKey field names the agent yet
        created=datetime.now(UTC),
    )
