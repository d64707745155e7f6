"""What the two Redis stores share: the client, the server checks, errors and key names.

Every id that goes into a key (tenant, session) is a checked id, which can never hold ``{``,
``}`` or ``/``: so ``{<ids>}`` delimits the ids of a key unambiguously, whatever ``:`` they
hold. (It is also a Redis Cluster hash tag, which keeps a session's keys on one slot; the
stores still expect a single server, with or without replicas, not a Cluster.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.retry import Retry

from compactor.errors import ConfigError, PersistenceWarning, StoreError

CONNECT_TIMEOUT = 1.0
"""Seconds to wait for a connection, on clients made from a URL."""
READ_TIMEOUT = 2.0
"""Seconds to wait for an answer, on clients made from a URL: a hung server fails fast."""


def connect(client_or_url: redis.Redis | str) -> redis.Redis:
    """A client for a URL (with short timeouts), or the given client once checked.

    A client made here retries only a refused or dropped connection, a few times within a
    quarter of a second, never a timeout: during an outage a call fails within seconds
    instead of hanging. (Retried appends are safe: every write script is idempotent.)

    Raises:
        ConfigError: the client decodes responses (the stores need the raw bytes).
    """
    if isinstance(client_or_url, str):
        retry = Retry(ExponentialBackoff(cap=0.1, base=0.02), 3, (RedisConnectionError,))
        client = redis.Redis.from_url(
            client_or_url,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=READ_TIMEOUT,
            retry=retry,
        )
    elif isinstance(client_or_url, redis.Redis):
        client = client_or_url
    else:
        raise TypeError(f"expected a redis.Redis client or a URL, not {client_or_url!r}")
    if client.get_connection_kwargs().get("decode_responses"):
        raise ConfigError(
            "the Redis client decodes responses; pass one made with decode_responses=False"
        )
    return client


@contextmanager
def translated() -> Iterator[None]:
    """Turn redis-py's errors into StoreError, naming what went wrong."""
    try:
        yield
    except (RedisConnectionError, redis.TimeoutError) as exc:
        raise StoreError(
            f"Redis did not answer ({type(exc).__name__}: {exc}); a write may or may not have "
            "taken effect"
        ) from exc
    except RedisError as exc:
        raise StoreError(f"Redis refused the call ({type(exc).__name__}: {exc})") from exc


def check_server(client: redis.Redis, *, expiring: bool = False) -> None:
    """Refuse a server that may evict the stores' keys; warn when it keeps nothing on disk.

    Args:
        client: the server to check.
        expiring: whether keys are written with a TTL (tool results with ``ttl=``), which
            ``volatile-*`` policies may evict before they expire.

    Raises:
        ConfigError: ``maxmemory-policy`` may evict keys, with the command that fixes it.
        StoreError: the server does not answer.

    Warns:
        PersistenceWarning: neither AOF nor RDB save points are on: a restart loses
            everything.
    """
    with translated():
        policy = str(client.info("memory").get("maxmemory_policy", "noeviction"))
        persistent = bool(client.info("persistence").get("aof_enabled")) or _save_points(client)
    if policy.startswith("allkeys-") or (expiring and policy.startswith("volatile-")):
        which = "any key" if policy.startswith("allkeys-") else "keys with a TTL"
        raise ConfigError(
            f"Redis runs with maxmemory-policy {policy}, which evicts {which} when memory "
            "runs short: stored tool results and session logs would silently vanish. Run "
            "`CONFIG SET maxmemory-policy noeviction` (and set it in redis.conf)"
        )
    if not persistent:
        warnings.warn(
            "Redis keeps nothing on disk (no AOF, no RDB save points): a restart loses every "
            "session. Run `CONFIG SET appendonly yes` (and set it in redis.conf)",
            PersistenceWarning,
            stacklevel=3,
        )


def _save_points(client: redis.Redis) -> bool:
    try:
        return bool(client.config_get("save").get("save"))
    except ResponseError:
        return True  # CONFIG is disabled (managed services): trust the provider's setup


def milliseconds(seconds: float, what: str) -> int:
    """A positive, finite number of seconds as whole milliseconds (at least 1).

    Raises:
        ValueError: not a positive, finite number.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"{what} must be a positive number of seconds, not {seconds!r}")
    if not 0 < seconds < math.inf:
        raise ValueError(f"{what} must be a positive number of seconds, not {seconds!r}")
    return max(1, math.ceil(seconds * 1000))


def check_prefix(prefix: object) -> str:
    """Return ``prefix`` if it can start a key without colliding with ids, else ValueError."""
    if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "{}"):
        raise ValueError(f"prefix must be a non-empty string without braces, not {prefix!r}")
    return prefix


@dataclass(frozen=True)
class SessionKeys:
    """The keys of one session (see ``compactor.stores.redis`` for what each holds)."""

    prefix: str
    session_id: str

    def _key(self, part: str) -> str:
        return f"{self.prefix}:s:{{{self.session_id}}}:{part}"

    @property
    def meta(self) -> str:
        return self._key("meta")

    @property
    def log(self) -> str:
        return self._key("log")

    @property
    def heads(self) -> str:
        return self._key("heads")

    @property
    def entries(self) -> str:
        return self._key("entries")

    @property
    def lease(self) -> str:
        return self._key("lease")

    @property
    def holder(self) -> str:
        return self._key("holder")

    @property
    def fence(self) -> str:
        return self._key("fence")

    def checkpoints(self, branch: str) -> str:
        """The list of a branch's checkpoints."""
        return self._key(f"cp:{branch}")

    def blob(self, sha256: str) -> str:
        """A content-addressed blob."""
        return self._key(f"blob:{sha256}")


def tenant_sessions(prefix: str, tenant: str) -> str:
    """The set of a tenant's session ids."""
    return f"{prefix}:t:{{{tenant}}}:sessions"
