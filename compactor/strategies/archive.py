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
    worth: frozenset[Level]
    """Levels whose replacement text is clearly smaller than the result."""


def archive(slots: Sequence[Slot], *, keep: int, level: Level) -> dict[str, Level]:
    """Handles to archive at ``level``: every result but the ``keep`` most recent.

    Results already archived at this level or beyond stay as they are, and a result is only
    archived where its replacement is clearly smaller than itself.

    Args:
        slots: the tool results in the context, oldest first.
        keep: how many of the most recent results stay as they are.
        level: ``pointer`` (offload tier) or ``placeholder`` (placeholder tier).
    """
    older = slots[: max(len(slots) - keep, 0)]
    return {
        slot.handle: level
        for slot in older
        if _LEVELS.index(slot.level) < _LEVELS.index(level) and level in slot.worth
    }


def kept(slots: Sequence[Slot], changes: dict[str, Level]) -> list[str]:
    """Handles of the results left in full after ``changes``."""
    return [slot.handle for slot in slots if slot.level is None and slot.handle not in changes]
