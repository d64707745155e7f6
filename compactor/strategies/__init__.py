"""Compaction strategies, one module per idea; pure functions of (messages, state, budget).

None of them does I/O: the summary tier, which needs an LLM, returns the request to make and
takes the answer, so that ``compact()`` and ``acompact()`` drive the same code.
"""

from compactor.strategies.archive import Slot, archive, below, kept
from compactor.strategies.tiers import TIERS, band, higher, rank, start_tier
from compactor.strategies.view import build_view

__all__ = [
    "TIERS",
    "Slot",
    "archive",
    "band",
    "below",
    "build_view",
    "higher",
    "kept",
    "rank",
    "start_tier",
]
