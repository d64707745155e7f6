"""Tool-result stores and session stores, behind two small Protocols."""

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

__all__ = [
    "MAIN",
    "Checkpoint",
    "DiskToolResultStore",
    "Entry",
    "JsonlSessionStore",
    "Lease",
    "MemorySessionStore",
    "MemoryToolResultStore",
    "SessionKey",
    "SessionStore",
    "ToolResultStore",
    "check_id",
]
