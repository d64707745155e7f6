"""The benchmark's measures: tokens, prompt-cache reuse and information kept.

Pure functions of what each call sent, so they can be checked on small hand-made sessions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compactor.messages import Message
from compactor.tokens import TokenMeter

CACHE_BLOCK = 128
"""Providers cache whole blocks of a prompt's prefix (OpenAI: 128 tokens)."""
CACHE_MINIMUM = 1024
"""Prompts shorter than this are not cached (OpenAI)."""


@dataclass(frozen=True)
class Sized:
    """A request as the benchmark measures it: its tokens, message by message."""

    tools_tokens: int
    keys: tuple[str, ...]
    """A canonical form of each message, to find the prefix two requests share."""
    tokens: tuple[int, ...]
    """Tokens of each message, its chat-format overhead included."""

    @property
    def total(self) -> int:
        """Tokens of the whole request."""
        return self.tools_tokens + sum(self.tokens) + 3


class Sizer:
    """Counts requests, message by message, with a cache keyed by content.

    Policies build new message dicts on every call, so the cache is keyed on each message's
    canonical JSON rather than on the object.
    """

    def __init__(self, model: str) -> None:
        self.meter = TokenMeter(model)
        self._cache: dict[str, int] = {}

    def size(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> Sized:
        """Measure one request."""
        keys = tuple(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in messages)
        tokens = tuple(
            self._tokens(key, message) for key, message in zip(keys, messages, strict=True)
        )
        return Sized(self.meter.tools_tokens(tools), keys, tokens)

    def _tokens(self, key: str, message: Message) -> int:
        if key not in self._cache:
            self._cache[key] = self.meter.message_tokens(dict(message))
        return self._cache[key]


def cached_tokens(previous: Sized | None, current: Sized) -> int:
    """Tokens of ``current`` a provider's prompt cache would serve from ``previous``.

    The shared prefix is counted in whole messages (tool schemas first, as providers put them),
    rounded down to the cache's block size, and nothing under its minimum is cached.
    """
    if previous is None or previous.tools_tokens != current.tools_tokens:
        return 0
    shared = current.tools_tokens
    for before, now, tokens in zip(previous.keys, current.keys, current.tokens, strict=False):
        if before != now:
            break
        shared += tokens
    if shared < CACHE_MINIMUM:
        return 0
    return shared // CACHE_BLOCK * CACHE_BLOCK


def tool_chars(messages: Sequence[Message]) -> int:
    """Characters of all the tool outputs of a history."""
    return sum(len(_text(m)) for m in messages if m["role"] == "tool")


def kept_in_context(original: Sequence[Message], sent: Sequence[Message]) -> int:
    """Characters of the original tool outputs still verbatim in what was sent."""
    present = {(m["tool_call_id"], _text(m)) for m in sent if m["role"] == "tool"}
    return sum(
        len(_text(m))
        for m in original
        if m["role"] == "tool" and (m["tool_call_id"], _text(m)) in present
    )


def _text(message: Message) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)
