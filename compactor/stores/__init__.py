"""Tool-result stores and session stores, behind two small Protocols."""

from compactor.stores.base import SessionKey, SessionStore, ToolResultStore, check_id
from compactor.stores.disk import DiskToolResultStore
from compactor.stores.jsonl import JsonlSessionStore
from compactor.stores.memory import MemorySessionStore, MemoryToolResultStore

__all__ = [
    "DiskToolResultStore",
    "JsonlSessionStore",
    "MemorySessionStore",
    "MemoryToolResultStore",
    "SessionKey",
    "SessionStore",
    "ToolResultStore",
    "check_id",
]
