"""Rules every session store backend applies the same way, so behaviour cannot drift.

Who may reach a session (its tenant, its user), what a checkpoint must look like to be stored,
and which checkpoints ``keep_last`` drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from compactor.errors import AccessDeniedError
from compactor.stores.base import Checkpoint, SessionKey, check_id

T = TypeVar("T")


def check_access(key: SessionKey, tenant: str, user: str | None) -> None:
    """Refuse a key that acts for another tenant, or another user, than the session's.

    A user is compared only when both the session and the key name one: a session created
    without a user stays open to every user of its tenant.

    Raises:
        AccessDeniedError: the key may not reach this session.
    """
    if key.tenant != tenant:
        raise AccessDeniedError(f"session {key.session_id!r} belongs to another tenant")
    if key.user is not None and user is not None and key.user != user:
        raise AccessDeniedError(f"session {key.session_id!r} belongs to another user")


def check_checkpoint(key: SessionKey, checkpoint: Checkpoint, keep_last: int) -> None:
    """Raise ValueError (or InvalidSessionIdError) for a checkpoint that cannot be stored."""
    if checkpoint.session_id != key.session_id:
        raise ValueError(
            f"checkpoint of session {checkpoint.session_id!r} put into {key.session_id!r}"
        )
    check_id(checkpoint.branch_id, "branch id")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError(f"keep_last must be an integer >= 1, not {keep_last!r}")


def to_prune(kept: Sequence[tuple[T, str | None]], run_id: str | None, keep_last: int) -> list[T]:
    """Which checkpoints to drop: all but the ``keep_last`` newest of the run.

    Args:
        kept: ``(checkpoint, run_id)`` of a branch, oldest first, the new one included.
        run_id: the run of the checkpoint just stored (other runs are left alone).
        keep_last: how many of the run to keep.
    """
    same = [item for item, run in kept if run == run_id]
    return same[: max(len(same) - keep_last, 0)]
