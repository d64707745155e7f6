"""The entry tree of a session, written once for every backend.

Entries form a tree through ``parent_id``. A branch is a pointer to its newest entry (its head):
``main`` starts empty, a fork starts at the entry it was forked at, and an append to a branch
hangs the new entry under the branch's head. Reading a branch walks from its head to the root,
so it sees everything recorded before its fork point and nothing written to other branches.
"""

from __future__ import annotations

from uuid import uuid4

from compactor.stores.base import MAIN


def new_entry_id() -> str:
    """A fresh entry id (unique without coordination: entries are created under a lock anyway)."""
    return uuid4().hex


def new_branch_id() -> str:
    """A fresh branch id."""
    return f"b-{uuid4().hex[:16]}"


class Tree:
    """Which entry follows which, and where each branch's head is."""

    def __init__(self) -> None:
        self.count = 0
        """Entries so far, over all branches: the last ``seq``."""
        self._parents: dict[str, str | None] = {}
        self._heads: dict[str, str | None] = {MAIN: None}

    def head(self, branch: str) -> str | None:
        """The newest entry on a branch's path (None for an empty ``main``).

        Raises:
            ValueError: the branch does not exist in this session.
        """
        try:
            return self._heads[branch]
        except KeyError:
            raise ValueError(f"unknown branch {branch!r}") from None

    def check_branch(self, branch: str) -> None:
        """Raise ValueError unless the branch exists in this session."""
        self.head(branch)

    def add(self, seq: int, entry_id: str, parent_id: str | None, branch: str) -> None:
        """Record an entry appended to ``branch``.

        Raises:
            ValueError: the entry does not continue the tree (wrong seq, reused id, a parent
                other than the branch's head, an unknown branch).
        """
        if seq != self.count + 1:
            raise ValueError(f"entry seq {seq} does not follow seq {self.count}")
        if entry_id in self._parents:
            raise ValueError(f"entry id {entry_id!r} is used twice")
        if parent_id != self.head(branch):
            raise ValueError(f"entry {entry_id!r} does not continue branch {branch!r}")
        self._parents[entry_id] = parent_id
        self._heads[branch] = entry_id
        self.count = seq

    def check_fork(self, branch: str, at_entry_id: str) -> None:
        """Raise ValueError unless ``branch`` may be forked at ``at_entry_id``."""
        if at_entry_id not in self._parents:
            raise ValueError(f"cannot fork at unknown entry {at_entry_id!r}")
        if branch in self._heads:
            raise ValueError(f"branch {branch!r} already exists")

    def fork(self, branch: str, at_entry_id: str) -> None:
        """Record a new branch whose head is ``at_entry_id``."""
        self.check_fork(branch, at_entry_id)
        self._heads[branch] = at_entry_id

    def path(self, branch: str) -> list[str]:
        """The entry ids on a branch's path from the root, oldest first."""
        ids: list[str] = []
        current = self.head(branch)
        while current is not None:
            ids.append(current)
            current = self._parents[current]
        ids.reverse()
        return ids
