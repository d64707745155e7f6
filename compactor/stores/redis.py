"""Redis stores, for deployments that outgrow one machine (the ``redis`` extra: redis-py).

``RedisToolResultStore`` keeps full tool outputs, ``RedisSessionStore`` session logs with
branches, fenced leases and checkpoints; both follow the same Protocols and rules as the
embedded stores. ``Compactor.from_url("redis://...", model)`` builds both on one client.

Key layout (``P`` is the prefix, ``compactor`` by default; ids are checked ids, which never
hold ``{``, ``}`` or ``/``, so the braces delimit them whatever ``:`` they hold)::

    P:tr:{<tenant>/<session>}:t:<handle>  a tool output, UTF-8 (GETRANGE pages it)
    P:tr:{<tenant>/<session>}:i:<handle>  its character index, only for non-ASCII text
    P:t:{<tenant>}:sessions               set: the tenant's session ids
    P:s:{<session>}:meta     hash: tenant, user, created, schema_version, count (last seq)
    P:s:{<session>}:log      stream: the log's records (entries and forks), fields as JSON
    P:s:{<session>}:heads    hash: branch id -> its newest entry id ("" for an empty main)
    P:s:{<session>}:entries  hash: entry id -> "<seq> <parent id>" (fork points, retries)
    P:s:{<session>}:lease    string: the lease owner, with PX = the lease's ttl (liveness)
    P:s:{<session>}:holder   hash: owner, token of the current lease (deleted on release)
    P:s:{<session>}:fence    counter: INCR gives every new lease a higher token
    P:s:{<session>}:blob:<sha256>  a large payload or a checkpoint message, checked on read
    P:s:{<session>}:cp:<branch>    list: the branch's kept checkpoints, oldest first

Every write to a session is one Lua script that checks the writer's fencing token (or, for a
write without a lease, that no live lease exists) and writes in the same atomic step: a
writer paused past its lease and taken over lands nothing. The server must not evict keys
(``maxmemory-policy noeviction``, checked at start-up) and should persist them
(``appendonly yes``; ``appendfsync always`` for acknowledged appends to survive a crash).
Both stores expect a single server (with or without replicas), not a Redis Cluster.
"""

from __future__ import annotations

from compactor.errors import PersistenceWarning
from compactor.stores._redis import check_server, connect
from compactor.stores._redis_log import RedisSessionStore
from compactor.stores._redis_text import INDEX_EVERY, RedisToolResultStore

__all__ = [
    "INDEX_EVERY",
    "PersistenceWarning",
    "RedisSessionStore",
    "RedisToolResultStore",
    "check_server",
    "connect",
]
