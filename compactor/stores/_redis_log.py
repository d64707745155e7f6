"""RedisSessionStore: each session's log as a Redis Stream, fenced by Lua scripts.

What each key holds is listed in ``compactor.stores.redis``. The rules are those of the other
backends, written once: the lease rules of ``lease.py`` (a script reports the lease state it
saw, and ``lease.py`` turns it into the error), tenant and user claims and ``keep_last`` of
``_rules.py``, and the entry tree of ``_tree.py``, rebuilt from the stream on every read with
every record checked.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import redis

from compactor.errors import LeaseHeldError, LeaseLostError, SessionCorruptedError
from compactor.events import Event
from compactor.stores import _redis_lua as lua
from compactor.stores._logfile import SCHEMA_VERSION, ForkLine
from compactor.stores._redis import (
    SessionKeys,
    check_prefix,
    check_server,
    connect,
    milliseconds,
    tenant_sessions,
    translated,
)
from compactor.stores._redis_blobs import RedisBlobs
from compactor.stores._redis_codec import (
    dump_checkpoint,
    entry_fields,
    events,
    fields,
    index,
    lease_record,
    load_checkpoint,
    refuse,
    run_of,
    text,
)
from compactor.stores._rules import check_access, check_checkpoint, to_prune
from compactor.stores._tree import Tree, new_branch_id, new_entry_id
from compactor.stores.base import MAIN, Checkpoint, Entry, Lease, SessionKey, check_id
from compactor.stores.lease import (
    LeaseRecord,
    abandoned,
    as_lease,
    check_owner,
    check_ttl,
    grant,
    new_owner,
)

Reply = list[Any]
Arg = bytes | str | int | float
_META = ("tenant", "user", "schema_version")
_SCRIPTS = ("APPEND", "FORK", "PUT_CHECKPOINT", "PRUNE", "CLAIM", "ACQUIRE", "RENEW", "RELEASE")


class RedisSessionStore:
    """Session logs in Redis, shared by every process and machine that reaches the server.

    Args:
        client_or_url: a ``redis.Redis`` client (made with ``decode_responses=False``), or a
            URL such as ``redis://localhost:6379/0`` (the client then gets short timeouts).
        prefix: the first part of every key.
        inline_payload_max_bytes: events whose canonical JSON is larger go to a blob.

    Appends are as durable as the server makes them: with ``appendonly yes`` and
    ``appendfsync always``, an acknowledged event survives a crash of the server.

    Raises:
        ConfigError: the server may evict these keys (see ``check_server``).
        StoreError: the server does not answer.
    """

    def __init__(
        self,
        client_or_url: redis.Redis | str,
        *,
        prefix: str = "compactor",
        inline_payload_max_bytes: int = 16384,
    ) -> None:
        limit = inline_payload_max_bytes
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"inline_payload_max_bytes must be an integer >= 0, not {limit!r}")
        self.prefix = check_prefix(prefix)
        self.inline_payload_max_bytes = limit
        self.owner = new_owner()
        """The lease owner ``acquire`` uses when it is given none: random, and naming this
        process, so that a lease it leaves behind when it dies is taken over at once."""
        self._client = connect(client_or_url)
        check_server(self._client)
        self._scripts = {
            name: self._client.register_script(getattr(lua, name)) for name in _SCRIPTS
        }
        self._claims: dict[str, tuple[str, str | None]] = {}

    # -- the log ----------------------------------------------------------------------------

    def append(
        self, key: SessionKey, event: Event, *, branch: str = MAIN, lease: Lease | None = None
    ) -> Entry:
        """Append one event to a branch; durable per the server's AOF policy when this returns.

        Raises:
            LeaseLostError: ``lease`` is not the session's current lease, or (without a lease)
                another owner holds a live one; nothing was written.
            AccessDeniedError: the session belongs to another tenant or user.
            ValueError: the branch does not exist.
            StoreError: the server did not answer (the event may or may not have landed).
        """
        check_id(branch, "branch id")
        keys = self._created(key)
        entry_id, at = new_entry_id(), datetime.now(UTC)
        envelope, blob = entry_fields(
            entry_id, branch, at, event, lease, self.inline_payload_max_bytes
        )
        blob_key = [] if blob is None else [keys.blob(hashlib.sha256(blob).hexdigest())]
        reply = self._fenced(
            "APPEND",
            key,
            lease,
            [keys.heads, keys.entries, keys.log, *blob_key],
            [branch, entry_id, blob or b"", *envelope],
            branch=f"unknown branch {branch!r}",
        )
        seq, _, parent = text(reply[1]).partition(" ")
        return Entry(int(seq), entry_id, parent or None, branch, at, event)

    def append_many(
        self,
        key: SessionKey,
        events: Sequence[Event],
        *,
        branch: str = MAIN,
        lease: Lease | None = None,
    ) -> list[Entry]:
        """Append events in order, each in its own fenced script; raises like ``append``.

        Each append is atomic and durable per the server's AOF policy; a refusal part way
        leaves the earlier events appended, as separate appends would.
        """
        return [self.append(key, event, branch=branch, lease=lease) for event in events]

    def read(self, key: SessionKey, *, branch: str = MAIN) -> list[Event]:
        """The events on a branch's path from the root, oldest first (empty when new)."""
        return [entry.event for entry in self.entries(key, branch=branch)]

    def entries(self, key: SessionKey, *, branch: str = MAIN) -> list[Entry]:
        """Like ``read``, with each event's envelope.

        Raises:
            SessionCorruptedError: a record of the stream is not one, or does not continue
                the entry tree (``path`` is the stream's key, ``offset`` the record's position).
            BlobError: a payload blob is missing or altered.
            AccessDeniedError: the session belongs to another tenant or user.
        """
        check_id(branch, "branch id")
        keys = SessionKeys(self.prefix, key.session_id)
        with translated():
            pipe = self._client.pipeline(transaction=True)
            pipe.hmget(keys.meta, *_META)
            pipe.xrange(keys.log)
            meta, records = pipe.execute()
        if not self._existing(key, keys, meta):
            Tree().check_branch(branch)  # a session not yet written has only main
            return []
        tree, lines = index(keys.log, records)
        blobs = RedisBlobs(self._client, keys)
        path = [lines[entry_id] for entry_id in tree.path(branch)]
        return [
            Entry(line.seq, line.entry_id, line.parent_id, line.branch_id, line.at, event)
            for line, event in zip(path, events(keys.log, path, blobs.get), strict=True)
        ]

    def fork(self, key: SessionKey, at_entry_id: str, *, lease: Lease | None = None) -> str:
        """A new branch whose path runs from the root to ``at_entry_id``; its id.

        Raises:
            ValueError: no entry of the session has that id (InvalidSessionIdError when it is
                not even a well-formed id).
            LeaseLostError, AccessDeniedError: as for ``append``.
        """
        check_id(at_entry_id, "entry id")
        keys = self._existing_keys(key)
        if keys is None:
            raise ValueError(f"cannot fork at unknown entry {at_entry_id!r}")
        branch = new_branch_id()
        token = None if lease is None else lease.token
        record = ForkLine(
            branch_id=branch, at_entry_id=at_entry_id, at=datetime.now(UTC), lease=token
        )
        self._fenced(
            "FORK",
            key,
            lease,
            [keys.heads, keys.entries, keys.log],
            [branch, at_entry_id, *fields(record.model_dump(mode="json"))],
            entry=f"cannot fork at unknown entry {at_entry_id!r}",
            exists=f"branch {branch!r} already exists",
        )
        return branch

    def sessions(self, tenant: str = "default") -> list[str]:
        """The ids of the tenant's sessions."""
        name = tenant_sessions(self.prefix, check_id(tenant, "tenant"))
        with translated():
            members = self._client.smembers(name)
        return sorted(text(member) for member in members)

    # -- leases -----------------------------------------------------------------------------

    def acquire(self, key: SessionKey, *, ttl: float = 30.0, owner: str | None = None) -> Lease:
        """Take the session's lease, with a new fencing token (also when ``owner`` held it).

        A lease whose owner names a process of this machine that no longer runs is taken
        over at once, as by the other backends.

        Raises:
            LeaseHeldError: another owner holds a lease that has not expired.
        """
        ttl = check_ttl(ttl)
        owner = self.owner if owner is None else check_owner(owner)
        keys = self._created(key)
        gone = ""
        while True:
            now = time.time()
            args: list[Arg] = [owner, milliseconds(ttl, "ttl"), gone]
            reply = self._script("ACQUIRE", [keys.lease, keys.holder, keys.fence], args)
            if text(reply[0]) == "ok":
                record = LeaseRecord(owner=owner, token=int(reply[1]), expires_at=now + ttl)
                return as_lease(key, owner, record)
            holder = text(reply[1])
            if gone == holder or not abandoned(holder):
                grant(lease_record(reply, now), owner, ttl, now)  # raises LeaseHeldError
                raise LeaseHeldError(f"the session's lease is held by {holder!r}")
            gone = holder  # its process is gone: take the lease over, if it is still that one

    def renew(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease this writer still holds to ``ttl`` seconds from now.

        Raises:
            LeaseLostError: the lease was taken over or released.
        """
        ttl = check_ttl(ttl)
        keys = self._existing_keys(lease.key)
        if keys is None:
            raise LeaseLostError(f"session {lease.key.session_id!r} has no lease")
        now = time.time()
        args: list[Arg] = [lease.owner, lease.token, milliseconds(ttl, "ttl")]
        reply = self._script("RENEW", [keys.lease, keys.holder, keys.fence], args)
        if text(reply[0]) != "ok":
            refuse(lease.key, lease, reply, now)
        record = LeaseRecord(owner=lease.owner, token=lease.token, expires_at=now + ttl)
        return as_lease(lease.key, lease.owner, record)

    def release(self, lease: Lease) -> None:
        """Give the lease up, if it is still this writer's (otherwise do nothing)."""
        keys = self._existing_keys(lease.key)
        if keys is not None:
            self._script("RELEASE", [keys.lease, keys.holder], [lease.owner, lease.token])

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

        Its messages go to content-addressed blobs, so consecutive checkpoints of a growing
        history send only the new ones.

        Raises:
            ValueError: the checkpoint is of another session, names an unknown branch, or
                ``keep_last`` is below 1.
            LeaseLostError, AccessDeniedError: as for ``append``.
        """
        check_checkpoint(key, checkpoint, keep_last)
        keys = self._created(key)
        element, blobs = dump_checkpoint(checkpoint)
        RedisBlobs(self._client, keys).put(blobs)
        branch = checkpoint.branch_id
        listed = keys.checkpoints(branch)
        reply = self._fenced(
            "PUT_CHECKPOINT",
            key,
            lease,
            [keys.heads, listed],
            [branch, element],
            branch=f"unknown branch {branch!r}",
        )
        kept = [(bytes(item), run_of(bytes(item))) for item in reply[1]]
        dropped = to_prune(kept, checkpoint.run_id, keep_last)
        if dropped:
            # Fenced too: a writer that lost its lease in between drops nothing.
            self._fenced("PRUNE", key, lease, [listed], dropped)

    def checkpoints(self, key: SessionKey, *, branch: str = MAIN) -> list[Checkpoint]:
        """The kept checkpoints of a branch, oldest first, fully rebuilt.

        Raises:
            BlobError: a message blob is missing or altered.
        """
        check_id(branch, "branch id")
        keys = SessionKeys(self.prefix, key.session_id)
        listed = keys.checkpoints(branch)
        with translated():
            pipe = self._client.pipeline(transaction=True)
            pipe.hmget(keys.meta, *_META)
            pipe.hexists(keys.heads, branch)
            pipe.lrange(listed, 0, -1)
            meta, known, elements = pipe.execute()
        if not self._existing(key, keys, meta):
            Tree().check_branch(branch)
            return []
        if not known:
            raise ValueError(f"unknown branch {branch!r}")
        fetch = RedisBlobs(self._client, keys).get
        return [load_checkpoint(listed, bytes(element), fetch) for element in elements]

    # -- sessions ---------------------------------------------------------------------------

    def _created(self, key: SessionKey) -> SessionKeys:
        """The session's keys, creating (claiming) it for ``key``'s tenant if needed.

        Raises:
            AccessDeniedError: the session belongs to another tenant or user.
        """
        keys = SessionKeys(self.prefix, key.session_id)
        claim = self._claims.get(key.session_id)
        if claim is None:
            created = datetime.now(UTC).isoformat()
            args: list[Arg] = [key.tenant, key.user or "", created, SCHEMA_VERSION, key.session_id]
            claimed = [keys.meta, keys.heads, tenant_sessions(self.prefix, key.tenant)]
            claim = self._remember(key, keys, self._script("CLAIM", claimed, args))
        check_access(key, *claim)
        return keys

    def _existing(self, key: SessionKey, keys: SessionKeys, meta: Reply) -> bool:
        """Whether the session exists (from its meta fields); checks ``key`` may reach it."""
        if meta[0] is None:
            return False
        check_access(key, *self._remember(key, keys, meta))
        return True

    def _existing_keys(self, key: SessionKey) -> SessionKeys | None:
        """The keys of an existing session ``key`` may reach; None if there is none."""
        keys = SessionKeys(self.prefix, key.session_id)
        claim = self._claims.get(key.session_id)
        if claim is not None:
            check_access(key, *claim)
            return keys
        with translated():
            meta = self._client.hmget(keys.meta, *_META)
        return keys if self._existing(key, keys, meta) else None

    def _remember(self, key: SessionKey, keys: SessionKeys, meta: Reply) -> tuple[str, str | None]:
        """The session's (tenant, user), kept for later calls: a claim never changes."""
        tenant, user, schema = (None if value is None else text(value) for value in meta)
        if tenant is None or schema is None:
            raise SessionCorruptedError(
                f"{keys.meta} does not describe a session", path=keys.meta, offset=0
            )
        if int(schema) != SCHEMA_VERSION:
            raise SessionCorruptedError(
                f"{keys.meta}: log schema {schema}; this compactor reads {SCHEMA_VERSION}",
                path=keys.meta,
                offset=0,
            )
        self._claims[key.session_id] = (tenant, user)
        return tenant, user

    # -- scripts ----------------------------------------------------------------------------

    def _script(self, name: str, keys: list[str], args: Sequence[Arg]) -> Reply:
        with translated():
            reply = self._scripts[name](keys=keys, args=list(args))
        return list(reply) if isinstance(reply, list) else [reply]

    def _fenced(
        self,
        name: str,
        key: SessionKey,
        lease: Lease | None,
        keys: list[str],
        args: Sequence[Arg],
        **refusals: str,
    ) -> Reply:
        """Run a fenced write script; raise what a refusal means.

        ``refusals`` maps the script's own refusals (an unknown branch, ...) to the message
        of the ValueError they raise. An unfenced write that meets a lease left by a process
        of this machine that no longer runs is sent once more, disregarding that lease (it is
        not live: ``lease.LeaseRecord.live``).
        """
        if lease is not None and (lease.key.tenant, lease.key.session_id) != (
            key.tenant,
            key.session_id,
        ):
            raise LeaseLostError(f"the lease is for session {lease.key.session_id!r}")
        session = SessionKeys(self.prefix, key.session_id)
        fence = [session.meta, session.lease, session.holder, session.fence]
        token, owner = ("", "") if lease is None else (str(lease.token), lease.owner)
        gone = ""
        while True:
            now = time.time()
            reply = self._script(name, fence + keys, [token, owner, gone, *args])
            status = text(reply[0])
            if status == "ok":
                return reply
            if status in refusals:
                raise ValueError(refusals[status])
            if status == "held" and text(reply[1]) != gone and abandoned(text(reply[1])):
                gone = text(reply[1])
                continue
            if status == "gone":
                self._claims.pop(key.session_id, None)
            refuse(key, lease, reply, now)
