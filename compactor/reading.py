"""Answering READ_TOOL_RESULT: find the result an id names, check the page, read it.

Mistakes of the model are answered as text saying what is valid; a store that lost a result
it should hold is the developer's problem, and raises.
"""

from __future__ import annotations

from compactor.config import CompactorConfig
from compactor.errors import StoreError
from compactor.session import Session
from compactor.state import ResultInfo
from compactor.tool import ReadArgs, answer_error, answer_page, minimum_limit


def answer(session: Session, args: ReadArgs | str, config: CompactorConfig) -> str:
    """The tool text answering a READ_TOOL_RESULT call of a session.

    Args:
        session: the session the agent runs in (bound by the middleware, never the model).
        args: the call's arguments, or the problem found in them.
        config: the page cap and the templates.

    Raises:
        StoreError: the result is known but its store lost it.
    """
    folder = config.templates
    if isinstance(args, str):
        return answer_error(args, newest(session), folder)
    info = _find(session, args.tool_call_id)
    if not isinstance(info, ResultInfo):
        return answer_error(_unknown(args.tool_call_id, info), info or newest(session), folder)
    if args.offset > info.chars:
        problem = (
            f"offset {args.offset} is past the end of {info.handle!r}, which has "
            f"{info.chars} chars; use an offset from 0 to {info.chars}"
        )
        return answer_error(problem, [], folder)
    limit = min(args.limit or config.read_limit_chars, config.read_limit_chars)
    smallest = minimum_limit(info.handle, info.chars, folder)
    if limit < smallest:
        return answer_error(f"limit {limit} is too small; use at least {smallest}", [], folder)

    def read(offset: int, count: int) -> str:
        text = session.tool_results.read(session.key, info.handle, offset, count)
        if text is None:
            raise StoreError(
                f"tool result {info.handle!r} of session "
                f"{session.key.session_id!r} is missing from its store"
            )
        return text

    return answer_page(info.handle, info.chars, args.offset, limit, read, folder)


def _find(session: Session, name: str) -> ResultInfo | list[str] | None:
    found = session.state.find(name)
    if found is None:
        session.reload()  # another process of this session may have stored it
        found = session.state.find(name)
    return found


def _unknown(name: str, candidates: list[str] | None) -> str:
    if candidates:
        return f"tool_call_id {name!r} was used by several calls; pass one of their handles instead"
    return f"no tool result with tool_call_id {name!r} in this session"


def newest(session: Session) -> list[str]:
    """The session's newest handles, to tell the model what it can read."""
    return list(reversed(session.state.results))[:20]
