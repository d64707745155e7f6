"""READ_TOOL_RESULT: the tool an agent uses to page an archived tool result back.

The session is bound by the middleware, never taken from the model's arguments, so a model can
only read its own session. Mistakes of the model (an unknown id, an offset past the end) are
answered as tool text saying what is valid; failures of a store are raised to the developer.
An answer, header included, is never longer than its ``limit``, so reading back can never
overflow the context the way the original result did.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor.prompts import render

TOOL_NAME = "READ_TOOL_RESULT"


class ReadArgs(BaseModel):
    """The arguments of a READ_TOOL_RESULT call, as the model sent them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_call_id: str = Field(min_length=1)
    """The handle shown in a pointer or placeholder."""
    offset: int = Field(default=0, ge=0)
    """First character to read."""
    limit: int | None = Field(default=None, ge=1)
    """Most characters in the answer, header included; capped by the configuration."""


def schema(limit_cap: int) -> dict[str, Any]:
    """The OpenAI tool definition of READ_TOOL_RESULT."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": (
                "Read an archived tool result, a page at a time, by the id its placeholder "
                "shows. Each answer names its characters and the next offset."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "tool_call_id": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": limit_cap},
                },
                "required": ["tool_call_id"],
            },
        },
    }


def parse_arguments(arguments: object) -> ReadArgs | str:
    """The call's arguments, or the problem to tell the model (as text)."""
    try:
        data = json.loads(arguments) if isinstance(arguments, str | bytes) else arguments
        return ReadArgs.model_validate(data)
    except (ValueError, ValidationError) as exc:
        return f"the arguments are not valid: {_first_error(exc)}"


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        return f"{where}: {error['msg']}"
    return str(exc)


def answer_page(
    handle: str,
    total: int,
    offset: int,
    limit: int,
    read: Callable[[int, int], str],
    templates: Path | None = None,
) -> str:
    """The answer to a valid read: a header naming the slice, then the slice itself.

    The header's length depends on the numbers in it, so the slice size is settled in two
    passes: the answer as a whole stays within ``limit``.

    Args:
        handle: the result's handle.
        total: the result's length in characters.
        offset: first character to read, at most ``total``.
        limit: most characters in the answer.
        read: reads ``(offset, count)`` characters of the result from its store.
        templates: the user's template folder, if any.
    """
    end = min(total, offset + limit)
    while True:
        header = _header(handle, offset, end, total, templates)
        fits = min(total, offset + max(0, limit - len(header) - 1))
        if fits >= end:
            return f"{header}\n{read(offset, end - offset)}"
        end = fits  # only ever shrinks, so this ends


def minimum_limit(handle: str, total: int, templates: Path | None = None) -> int:
    """The smallest limit that leaves room for at least one character after the header."""
    longest = max(
        len(_header(handle, total, end, total, templates)) for end in (max(total - 1, 0), total)
    )
    return longest + 2


def _header(handle: str, start: int, end: int, total: int, templates: Path | None) -> str:
    return render("read_header.j2", templates, handle=handle, start=start, end=end, total=total)


def answer_error(problem: str, handles: Sequence[str], templates: Path | None = None) -> str:
    """Tool text telling the model what went wrong and which ids it can read."""
    return render("read_error.j2", templates, problem=problem, handles=list(handles))
