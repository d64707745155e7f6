"""The offload and placeholder tiers: archive all but the most recent tool results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compactor.events import Level

_LEVELS: tuple[Level | None, ...] = (None, "pointer", "placeholder")


@dataclass(frozen=True)
class Slot:
    """A tool result in the context of a call."""

    index: int
    """Position of the tool message in the caller's list."""
    handle: str
    level: Level | None
    """How it is shown now: None (in full), a pointer or a placeholder."""
    worth: bool
    """Whether the replacement at the level asked for is clearly smaller than the result."""
    input: str | None = None
    """Handle of the call's long arguments, if they are stored."""
    input_level: Level | None = None
    input_worth: bool = False


def below(current: Level | None, level: Level) -> bool:
    """Whether something shown at ``current`` would shrink at ``level`` (never the reverse)."""
    return _LEVELS.index(current) < _LEVELS.index(level)


def archive(slots: Sequence[Slot], *, keep: int, level: Level) -> dict[str, Level]:
    """Handles to archive at ``level``: every result but the ``keep`` most recent.

    A call's long input goes with its result, even when the result itself is too short to
    archive (a file written through a tool answers with nothing). Nothing already archived
    at this level or beyond moves, and nothing is archived unless its replacement is clearly
    smaller than itself.

    Args:
        slots: the tool results in the context, oldest first.
        keep: how many of the most recent results stay as they are.
        level: ``pointer`` (offload tier) or ``placeholder`` (placeholder tier).
    """
    changes: dict[str, Level] = {}
    for slot in slots[: max(len(slots) - keep, 0)]:
        if slot.worth and below(slot.level, level):
            changes[slot.handle] = level
        if slot.input is not None and slot.input_worth and below(slot.input_level, level):
            changes[slot.input] = level
    return changes


def kept(slots: Sequence[Slot], changes: dict[str, Level]) -> list[str]:
    """Handles of the results left in full after ``changes``."""
    return [slot.handle for slot in slots if slot.level is None and slot.handle not in changes]
