"""OpenAI-format chat messages: validation, tool-call groups and content digests.

Messages stay the provider's plain dicts; this module only reads them. Tool-call pairing is the
invariant everything else leans on: an assistant message with ``tool_calls`` is answered by
exactly one tool message per call, right after it, before any other message. Providers reject a
history that breaks it with a 400, so it is checked before anything is sent or stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from compactor.errors import InvalidMessagesError

Message = dict[str, Any]
"""One OpenAI chat message, kept as the caller's own dict."""

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@dataclass(frozen=True)
class ToolGroup:
    """An assistant message with tool calls and the tool messages answering them."""

    call_index: int
    result_indices: tuple[int, ...]


def text_of(content: object) -> str:
    """The text of a message content: a string, None, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    return "".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    )


def digest(message: Message) -> str:
    """A stable digest of a whole message, the same in every process."""
    canonical = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


def text_digest(text: str) -> str:
    """A stable digest of a text."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def tool_groups(messages: Sequence[Message]) -> list[ToolGroup]:
    """The tool-call groups of a valid history, oldest first."""
    groups = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            count = len(message["tool_calls"])
            groups.append(ToolGroup(index, tuple(range(index + 1, index + 1 + count))))
    return groups


def validate(messages: object, start: int = 0) -> None:
    """Check that ``messages`` is a valid OpenAI chat history.

    Args:
        messages: the history.
        start: messages before this index are known to be valid and to leave no tool call
            unanswered (see ``group_boundary``); checking starts here.

    Raises:
        InvalidMessagesError: naming the index and the problem of the first bad message.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise InvalidMessagesError(0, f"messages must be a list of dicts, got {type(messages)}")
    pending: list[str] = []
    for index in range(start, len(messages)):
        message = messages[index]
        _check_shape(index, message)
        if message["role"] == "tool":
            _check_answer(index, message, pending)
            continue
        if pending:
            raise InvalidMessagesError(index, f"tool call(s) {pending} left without a result")
        pending = _calls_of(index, message)
    if pending:
        raise InvalidMessagesError(len(messages), f"tool call(s) {pending} left without a result")


def _check_shape(index: int, message: object) -> None:
    if not isinstance(message, dict):
        raise InvalidMessagesError(index, f"expected a dict, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise InvalidMessagesError(index, f"unknown role {role!r}; expected one of {sorted(ROLES)}")
    content = message.get("content")
    if content is None:
        if role != "assistant":
            raise InvalidMessagesError(index, f"a {role} message needs content")
        return
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise InvalidMessagesError(index, "content parts must be dicts with a 'type'")
        return
    if not isinstance(content, str):
        raise InvalidMessagesError(
            index,
            f"content must be a string, a list of parts or None, not {type(content).__name__}",
        )


def _calls_of(index: int, message: Message) -> list[str]:
    calls = message.get("tool_calls")
    if not calls:
        return []
    if message["role"] != "assistant" or not isinstance(calls, list):
        raise InvalidMessagesError(
            index, "only an assistant message may carry a list of tool_calls"
        )
    ids = []
    for call in calls:
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessagesError(index, "a tool call has no id")
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidMessagesError(index, f"tool call {call_id!r} has no function name")
        if call_id in ids:
            raise InvalidMessagesError(index, f"tool call id {call_id!r} appears twice")
        ids.append(call_id)
    return ids


def _check_answer(index: int, message: Message, pending: list[str]) -> None:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessagesError(index, "a tool message has no tool_call_id")
    if call_id not in pending:
        expected = f"a result of {pending}" if pending else "no tool message here"
        raise InvalidMessagesError(
            index, f"tool message for {call_id!r} has no matching call; expected {expected}"
        )
    pending.remove(call_id)


def group_boundary(messages: Sequence[Message], end: int) -> int:
    """The last index at or before ``end`` that does not fall inside a tool-call group.

    In a valid history, every tool call before such an index is answered before it.
    """
    while 0 < end < len(messages) + 1:
        before, after = messages[end - 1], messages[end] if end < len(messages) else None
        inside = before.get("tool_calls") or (after is not None and after.get("role") == "tool")
        if not inside:
            break
        end -= 1
    return end


@dataclass(frozen=True, slots=True)
class ToolResultAt:
    """A tool message of a history, and the call it answers."""

    index: int
    """Position of the tool message."""
    call_id: str
    name: str
    """The called function's name."""
    call_index: int
    """Position of the assistant message that made the call."""
    arguments: str


def iter_tool_results(messages: Sequence[Message], start: int = 0) -> Iterator[ToolResultAt]:
    """The tool messages of a valid history, with the calls they answer.

    Args:
        messages: the history.
        start: a group boundary (see ``group_boundary``) to start from.
    """
    calls: dict[str, tuple[int, dict[str, Any]]] = {}
    for index in range(start, len(messages)):
        message = messages[index]
        for call in message.get("tool_calls") or ():
            calls[call["id"]] = (index, call["function"])
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            call_index, function = calls[call_id]
            arguments = function.get("arguments")
            yield ToolResultAt(
                index,
                call_id,
                function["name"],
                call_index,
                arguments if isinstance(arguments, str) else "",
            )
