"""Tool-result stores and session stores, behind two small Protocols.

The Redis stores are imported on first use, so that ``import compactor`` works (and stays
fast) without the ``redis`` extra.
"""

from typing import TYPE_CHECKING

from compactor.stores.base import (
    MAIN,
    Checkpoint,
    Entry,
    Lease,
    SessionKey,
    SessionStore,
    ToolResultStore,
    check_id,
)
from compactor.stores.disk import DiskToolResultStore
from compactor.stores.jsonl import JsonlSessionStore
from compactor.stores.memory import MemorySessionStore, MemoryToolResultStore

if TYPE_CHECKING:
    from compactor.stores.redis import RedisSessionStore, RedisToolResultStore

__all__ = [
    "MAIN",
    "Checkpoint",
    "DiskToolResultStore",
    "Entry",
    "JsonlSessionStore",
    "Lease",
    "MemorySessionStore",
    "MemoryToolResultStore",
    "RedisSessionStore",
    "RedisToolResultStore",
    "SessionKey",
    "SessionStore",
    "ToolResultStore",
    "check_id",
]


def __getattr__(name: str) -> object:
    if name in ("RedisSessionStore", "RedisToolResultStore"):
        from compactor.stores import redis

        return getattr(redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
