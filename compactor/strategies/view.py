"""The view of a history that is sent: archived parts replaced, condensed turns summarised."""

from __future__ import annotations

from collections.abc import Sequence

from compactor.messages import Message


def build_view(
    messages: Sequence[Message],
    changed: dict[int, Message],
    condensed: tuple[int, int, Message] | None = None,
) -> list[Message]:
    """A new list of what to send; the caller's list and messages are left untouched.

    Args:
        messages: the caller's full history.
        changed: replacement messages by position in ``messages`` (archived results and the
            calls whose arguments are archived).
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
    for index, message in changed.items():
        if index >= start:
            view[index + offset] = message
    return view
