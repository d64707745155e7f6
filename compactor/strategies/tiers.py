"""Which tier a usage calls for, and the order tiers escalate in."""

from __future__ import annotations

from compactor.config import CompactorConfig
from compactor.events import Tier

TIERS: tuple[Tier, ...] = ("none", "offload", "placeholder", "summary", "replan")


def rank(tier: Tier) -> int:
    """Position of a tier in the escalation order."""
    return TIERS.index(tier)


def higher(tier: Tier) -> Tier:
    """The next tier up; ``replan`` is the last."""
    return TIERS[min(rank(tier) + 1, len(TIERS) - 1)]


def band(usage: float, config: CompactorConfig) -> Tier:
    """The tier a usage (estimated input tokens / window) falls in."""
    if usage >= config.summary_at:
        return "summary"
    if usage >= config.placeholder_at:
        return "placeholder"
    if usage >= config.offload_at:
        return "offload"
    return "none"


def start_tier(usage: float, floor: Tier, config: CompactorConfig) -> Tier:
    """The first tier to run for a call.

    Above the summary line the cheap placeholder tier still runs first: an LLM summary is
    only worth its cost when archiving tool results does not bring usage under the line.
    """
    tier = max(band(usage, config), floor, key=rank)
    return "placeholder" if rank(tier) > rank("placeholder") else tier
