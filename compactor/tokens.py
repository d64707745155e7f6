"""Input-token measurement: offline tokenizers, a per-message cache, anchoring, model windows.

A local tokenizer is only an approximation of what a provider bills: DeepSeek's own counts run
about 9% above o200k on real traces, and chat templates add their own tokens. So the meter counts
locally, then anchors on the input tokens the provider reported for the previous call of the
session: an append-only history is estimated as the reported count plus the new messages (the
assistant reply at its reported output tokens, the rest scaled by the session's reported/local
ratio); anything else is the local count scaled by that ratio.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compactor.errors import ConfigError
from compactor.messages import Message, digest

# OpenAI's chat format: every message is wrapped in a few tokens, and the reply is primed.
_PER_MESSAGE = 3
_PER_NAME = 1
_REPLY_PRIMING = 3
_PER_TOOL_CALL = 4
_IMAGE_TOKENS = {"low": 85, "high": 765, "auto": 765}
_CACHE_LIMIT = 200_000

_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "chatgpt-4o",
    "gpt-oss",
    "codex",
    "o1",
    "o3",
    "o4",
)


@dataclass(frozen=True)
class Anchor:
    """What the provider reported for the last call of a session, and what that call sent."""

    reported: int
    """Input tokens the provider reported."""
    local: int
    """The local count of the same request."""
    sent_digest: str
    """Digest of the tools and messages that were sent (see ``Measure.digest``)."""
    sent_count: int
    """How many messages were sent."""
    completion: int | None
    """Output tokens of the reply: the exact size of the next assistant message."""


def litellm_dir() -> Path | None:
    """The folder of the installed litellm package, found without importing it."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def use_bundled_encodings() -> None:
    """Point tiktoken at the encodings litellm ships, unless the user chose a folder.

    tiktoken downloads encodings at first use; litellm bundles cl100k, o200k and p50k, so with
    this set, counting works on machines without internet.
    """
    folder = litellm_dir()
    if folder is not None and "TIKTOKEN_CACHE_DIR" not in os.environ:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder / "litellm_core_utils" / "tokenizers")


@functools.cache
def model_map() -> dict[str, dict[str, Any]]:
    """litellm's bundled model map (windows, prices), read without importing litellm."""
    folder = litellm_dir()
    if folder is None:
        return {}
    path = folder / "model_prices_and_context_window_backup.json"
    with path.open(encoding="utf-8") as file:
        data: dict[str, dict[str, Any]] = json.load(file)
    return data


def model_info(model: str) -> dict[str, Any] | None:
    """The model map entry of a litellm model name, with or without its provider prefix."""
    table = model_map()
    for name in (model, model.split("/", 1)[-1]):
        entry = table.get(name)
        if entry is not None and name != "sample_spec":
            return entry
    return None


def model_window(model: str, context_window: int | None = None) -> int:
    """Input tokens a model accepts: ``context_window`` if given, else litellm's model map.

    Raises:
        ConfigError: the model is unknown and no ``context_window`` was given.
    """
    if context_window is not None:
        return context_window
    entry = model_info(model) or {}
    window = entry.get("max_input_tokens") or entry.get("max_tokens")
    if not isinstance(window, int) or window <= 0:
        raise ConfigError(
            f"the context window of model {model!r} is unknown (not in litellm's model map); "
            "set it with CompactorConfig(context_window=...)"
        )
    return window


@dataclass(frozen=True)
class Prices:
    """USD per token of a model, from litellm's model map (0.0 where it has none)."""

    input: float
    cached_input: float
    """Cache reads; the input price where the map has no cache price."""
    output: float

    @classmethod
    def of(cls, model: str) -> Prices:
        """The model's prices."""
        entry = model_info(model) or {}
        uncached = float(entry.get("input_cost_per_token") or 0.0)
        cached = entry.get("cache_read_input_token_cost")
        output = float(entry.get("output_cost_per_token") or 0.0)
        return cls(uncached, uncached if cached is None else float(cached), output)

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """One call's cost, cached input at the cache price."""
        fresh = max(input_tokens - cached_tokens, 0)
        return fresh * self.input + cached_tokens * self.cached_input + output_tokens * self.output


def cost_usd(model: str, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
    """What a call costs at the model's prices in litellm's model map (0.0 if unknown)."""
    return Prices.of(model).cost(input_tokens, cached_tokens, output_tokens)


def payback_ratio(model: str, horizon: int) -> float:
    """Tokens a rewrite must save per token it makes uncached, at the model's prices.

    A rewrite costs its tail once at the uncached price instead of the cached one, and saves
    its tokens at the cached price on each of the next ``horizon`` calls. Without a cache
    discount a rewrite always pays (0.0); with free cache reads it never does (inf).
    """
    prices = Prices.of(model)
    uncached, cached = prices.input, prices.cached_input
    if not uncached or cached >= uncached:
        return 0.0
    if cached <= 0:
        return float("inf")
    return (uncached - cached) / (cached * max(horizon, 1))


def encoding_name(model: str) -> str:
    """The offline tokenizer used for a model: a tiktoken encoding, or ``deepseek``."""
    base = model.rsplit("/", 1)[-1].lower()
    if base.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if "deepseek" in base and _deepseek_path() is not None:
        return "deepseek"
    return "cl100k_base"


def _deepseek_path() -> Path | None:
    folder = litellm_dir()
    if folder is None or importlib.util.find_spec("tokenizers") is None:
        return None
    path = folder / "litellm_core_utils" / "tokenizers" / "deepseek_tokenizer.json"
    return path if path.exists() else None


@functools.cache
def text_counter(name: str) -> Callable[[str], int]:
    """A function counting the tokens of a text with the named tokenizer."""
    if name == "deepseek":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(_deepseek_path()))
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False))
    use_bundled_encodings()
    import tiktoken

    encoding = tiktoken.get_encoding(name)
    return lambda text: len(encoding.encode_ordinary(text))


@dataclass(frozen=True)
class Measure:
    """What a request is expected to cost."""

    tokens: int
    """The estimate: what the provider is expected to count."""
    local: int
    """The offline tokenizer's count."""
    digest: str
    """Digest of the tools and messages, to recognise the request as a prefix later."""


@dataclass(frozen=True)
class _Measured:
    """A message as it was when counted, so that a later call can tell it is unchanged."""

    message: Message
    values: tuple[object, ...]
    tokens: int
    digest: str
    role: object
    key: bytes
    """The digest as bytes, to feed a request's digest without re-encoding."""


class TokenMeter:
    """Counts the input tokens of chat requests for one model, offline.

    Each message is counted once: the cache is keyed on the message and checked by identity of
    its values, so an agent that passes the same history again pays only for new messages.
    Messages are treated as immutable once passed: a value replaced in a dict is seen, a nested
    list edited in place is not.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.encoding = encoding_name(model)
        self._count_text = text_counter(self.encoding)
        self._measured: dict[int, _Measured] = {}
        self._tools: dict[str, int] = {}

    def count_text(self, text: str) -> int:
        """Tokens of a plain text."""
        return self._count_text(text)

    def message_tokens(self, message: Message) -> int:
        """Tokens one message adds to a request, its chat-format overhead included."""
        return self._measure(message).tokens

    def message_digest(self, message: Message) -> str:
        """The stable digest of a message (cached with its count)."""
        return self._measure(message).digest

    def tools_tokens(self, tools: Sequence[dict[str, Any]] | None) -> int:
        """Tokens the tool schemas add to a request."""
        if not tools:
            return 0
        text = json.dumps(list(tools), sort_keys=True, ensure_ascii=False)
        if text not in self._tools:
            self._tools[text] = self.count_text(text)
        return self._tools[text]

    def count(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None) -> int:
        """The local count of a whole request."""
        total = sum(self._measure(message).tokens for message in messages)
        return total + self.tools_tokens(tools) + _REPLY_PRIMING

    def measure(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] | None,
        anchor: Anchor | None,
    ) -> Measure:
        """Estimate, local count and digest of a request, in one pass over its messages."""
        measured = [self._measure(message) for message in messages]
        local = sum(m.tokens for m in measured) + self.tools_tokens(tools) + _REPLY_PRIMING
        hasher = _tools_hasher(tools)
        extends = False
        for position, item in enumerate(measured):
            if anchor is not None and position == anchor.sent_count:
                extends = hasher.hexdigest() == anchor.sent_digest
            hasher.update(item.key)
        digest = hasher.hexdigest()
        if anchor is not None and anchor.sent_count == len(measured):
            extends = digest == anchor.sent_digest
        estimate = self._anchored(measured, local, anchor, extends)
        return Measure(estimate, local, digest)

    def estimate(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] | None,
        anchor: Anchor | None,
    ) -> int:
        """The input tokens the provider will count for this request."""
        return self.measure(messages, tools, anchor).tokens

    def _anchored(
        self, measured: list[_Measured], local: int, anchor: Anchor | None, extends: bool
    ) -> int:
        if anchor is None or anchor.local <= 0:
            return local
        ratio = anchor.reported / anchor.local
        if not extends:
            return round(local * ratio)
        total = float(anchor.reported)
        for position, item in enumerate(measured[anchor.sent_count :]):
            if position == 0 and anchor.completion is not None and item.role == "assistant":
                total += anchor.completion + _PER_MESSAGE
            else:
                total += item.tokens * ratio
        return round(total)

    def _measure(self, message: Message) -> _Measured:
        known = self._measured.get(id(message))
        values = tuple(message.values())
        # Equal values count the same, so == (identity first, in C) is exact and fast.
        if known is not None and known.message is message and known.values == values:
            return known
        if len(self._measured) >= _CACHE_LIMIT:
            self._measured.clear()
        tokens = self._count_message(message)
        text = digest(message)
        measured = _Measured(message, values, tokens, text, message.get("role"), text.encode())
        self._measured[id(message)] = measured
        return measured

    def _count_message(self, message: Message) -> int:
        tokens = _PER_MESSAGE + self._count_content(message.get("content"))
        if message.get("name"):
            tokens += _PER_NAME + self.count_text(str(message["name"]))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            text = f"{function.get('name', '')}{function.get('arguments', '')}"
            tokens += _PER_TOOL_CALL + self.count_text(text)
        return tokens

    def _count_content(self, content: object) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count_text(content)
        if not isinstance(content, list):
            return self.count_text(str(content))
        return sum(self._count_part(part) for part in content)

    def _count_part(self, part: dict[str, Any]) -> int:
        if part.get("type") == "text":
            return self.count_text(str(part.get("text", "")))
        if part.get("type") == "image_url":
            detail = (part.get("image_url") or {}).get("detail", "auto")
            return _IMAGE_TOKENS.get(detail, _IMAGE_TOKENS["auto"])
        return self.count_text(json.dumps(part, sort_keys=True, default=str))


def _tools_hasher(tools: Sequence[dict[str, Any]] | None) -> hashlib.blake2b:
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(json.dumps(list(tools or ()), sort_keys=True).encode())
    return hasher
