"""The view of a history that is sent: archived results replaced, condensed turns summarised."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compactor.events import Level
from compactor.messages import Message


def build_view(
    messages: Sequence[Message],
    results: Sequence[tuple[int, str]],
    archive: dict[str, Level],
    replace: Callable[[int, str, Level], Message],
    condensed: tuple[int, int, Message] | None = None,
) -> list[Message]:
    """A new list of what to send; the caller's list and messages are left untouched.

    Args:
        messages: the caller's full history.
        results: ``(index, handle)`` of its tool results, oldest first.
        archive: how each archived handle is shown.
        replace: the replacement message of the result at ``index`` with ``handle``.
        condensed: ``(head, covered, message)``: messages ``head`` to ``covered`` are replaced
            by ``message`` (a summary or a replan).
    """
    start = 0
    view: list[Message] = []
    if condensed is not None:
        head, start, summary = condensed
        view = [*messages[:head], summary]
    offset = len(view) - start
    view.extend(messages[start:])
    for index, handle in results:
        level = archive.get(handle)
        if level is not None and index >= start:
            view[index + offset] = replace(index, handle, level)
    return view
