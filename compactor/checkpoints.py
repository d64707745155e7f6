"""Checkpoints: what another process needs to continue a session, and when it may not.

A checkpoint is taken after each model call: the caller's history (with the model's reply
when there is one), the middleware state, and digests of the config and of the toolset. A
process resumes only under the same schema, config and tools; anything else would compact
the same history differently and break the prompt prefix, so it is refused, never reset.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from compactor.adapters.calls import field
from compactor.config import CompactorConfig
from compactor.messages import Message
from compactor.session import Session
from compactor.stores import MAIN, Checkpoint
from compactor.tool import TOOL_NAME

CHECKPOINT_SCHEMA = 1
"""Version of what a checkpoint holds; a checkpoint of another version is not resumed."""


def config_digest(model: str, config: CompactorConfig) -> str:
    """A digest of everything that decides how a history is compacted."""
    return _digest({"model": model, "config": config.model_dump(mode="json")})


def toolset_digest(tools: Sequence[dict[str, Any]] | None) -> str:
    """A digest of the agent's tool schemas (READ_TOOL_RESULT, which compactor adds, aside)."""
    own = [t for t in tools or () if field(field(t, "function"), "name") != TOOL_NAME]
    return _digest(own)


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def reply_message(response: object) -> Message | None:
    """The assistant message of a response, as a plain chat dict to append to a history.

    Works for litellm's ``ModelResponse``, the OpenAI SDK's ``ChatCompletion`` and dicts;
    None when the response has no message (a stream).
    """
    choices = field(response, "choices") or ()
    message = field(choices[0], "message") if choices else None
    if message is None:
        return None
    reply: Message = {"role": "assistant", "content": field(message, "content")}
    calls = [
        {
            "id": field(call, "id"),
            "type": "function",
            "function": {
                "name": field(field(call, "function"), "name"),
                "arguments": field(field(call, "function"), "arguments"),
            },
        }
        for call in field(message, "tool_calls") or ()
    ]
    if calls:
        reply["tool_calls"] = calls
    return reply


def take(session: Session, digest: str, reply: Message | None) -> Checkpoint | None:
    """A checkpoint of the session as it is now; None before its first compaction."""
    history = session.history
    if history is None:
        return None
    state = session.state
    # Built from values compactor made itself: skip re-validating a whole history each call.
    return Checkpoint.model_construct(
        schema_version=CHECKPOINT_SCHEMA,
        checkpoint_id=uuid4().hex,
        session_id=session.key.session_id,
        branch_id=MAIN,
        run_id=state.run_id,
        turn=state.calls,
        messages=[*history, reply] if reply is not None else history,
        state=session.saved(),
        config_digest=digest,
        toolset_digest=toolset_digest(session.tools),
        created=datetime.now(UTC),
    )


def changes(checkpoint: Checkpoint, config: str, toolset: str) -> list[str]:
    """What differs between a checkpoint and the process that wants to resume it."""
    found = []
    if checkpoint.schema_version != CHECKPOINT_SCHEMA:
        found.append("schema")
    if checkpoint.config_digest != config:
        found.append("config")
    if checkpoint.toolset_digest != toolset:
        found.append("toolset")
    return found
