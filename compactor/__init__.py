"""compactor: keeps LLM agents inside their context window without losing anything.

Wrap a completion function (or call ``compact()`` before each call); as the window fills, old
tool results are offloaded in tiers, an LLM summarises at the very top, and every full output
stays readable through the ``READ_TOOL_RESULT`` tool.
"""

import os as _os
from typing import TYPE_CHECKING

# litellm must read its bundled model map, never fetch one: these machines may be offline.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from compactor.adapters.litellm import LiteLLMSummarizer
from compactor.checkpoints import reply_message
from compactor.compaction import CompactResult
from compactor.compactor import Compactor
from compactor.config import CompactorConfig
from compactor.errors import (
    CompactorError,
    ConfigError,
    ContextExhaustedError,
    InvalidMessagesError,
    InvalidSessionIdError,
    PersistenceWarning,
    StoreError,
    SummarizerError,
)
from compactor.events import (
    CompactionEvent,
    Event,
    FailedEvent,
    ModelCallEvent,
    ReplanEvent,
    RunStartedEvent,
    SummaryFailedEvent,
    ToolResultEvent,
)
from compactor.stores import (
    DiskToolResultStore,
    JsonlSessionStore,
    MemorySessionStore,
    MemoryToolResultStore,
    SessionKey,
    SessionStore,
    ToolResultStore,
)
from compactor.summarizer import Summarizer, SummaryReply, SummaryRequest
from compactor.tokens import TokenMeter
from compactor.tool import TOOL_NAME

if TYPE_CHECKING:
    from compactor.stores.redis import RedisSessionStore, RedisToolResultStore

__all__ = [
    "TOOL_NAME",
    "CompactResult",
    "CompactionEvent",
    "Compactor",
    "CompactorConfig",
    "CompactorError",
    "ConfigError",
    "ContextExhaustedError",
    "DiskToolResultStore",
    "Event",
    "FailedEvent",
    "InvalidMessagesError",
    "InvalidSessionIdError",
    "JsonlSessionStore",
    "LiteLLMSummarizer",
    "MemorySessionStore",
    "MemoryToolResultStore",
    "ModelCallEvent",
    "PersistenceWarning",
    "RedisSessionStore",
    "RedisToolResultStore",
    "ReplanEvent",
    "RunStartedEvent",
    "SessionKey",
    "SessionStore",
    "StoreError",
    "Summarizer",
    "SummarizerError",
    "SummaryFailedEvent",
    "SummaryReply",
    "SummaryRequest",
    "TokenMeter",
    "ToolResultEvent",
    "ToolResultStore",
    "reply_message",
]


def __getattr__(name: str) -> object:
    # The Redis stores need the ``redis`` extra: imported on first use, never by ``import
    # compactor``.
    if name in ("RedisSessionStore", "RedisToolResultStore"):
        from compactor.stores import redis

        return getattr(redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
