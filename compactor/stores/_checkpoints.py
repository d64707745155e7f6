"""Checkpoint files of the JSONL store: one small file of blob refs per checkpoint.

A checkpoint lives at ``checkpoints/<branch_id>/<number>-<run tag>.json`` inside its session
folder: ``number`` (12 digits) orders the checkpoints of a branch, oldest first, and the run tag
(16 hex digits of sha256 of the run id, or ``none``) lets ``keep_last`` find a run's checkpoints
from their names alone. The file holds every field but the messages, and a ``BlobRef`` per
message: each message is a content-addressed blob, stored once, so consecutive checkpoints of
a growing history write only the new messages. Files are written atomically (temp, fsync,
rename, directory fsync); blobs are never deleted (other checkpoints may share them).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from compactor.errors import StoreError
from compactor.stores._files import canonical_json, fsync_dir, make_dirs, write_atomic
from compactor.stores._rules import to_prune
from compactor.stores.base import Checkpoint
from compactor.stores.blobs import BlobRef, BlobStore

_NAME = re.compile(r"(\d{12})-([0-9a-f]{16}|none)\.json")


class _StoredCheckpoint(BaseModel):
    """A checkpoint file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fields: dict[str, Any]
    """Every field of the checkpoint except ``messages``, as JSON."""
    messages: list[BlobRef]
    """The messages, in order, as blobs of their canonical JSON."""


def _run_tag(run_id: str | None) -> str:
    """The run id as a file-name part (run ids are free text, never used in a path)."""
    return "none" if run_id is None else hashlib.sha256(run_id.encode()).hexdigest()[:16]


class CheckpointFiles:
    """The checkpoints of one session.

    Args:
        folder: the session's ``checkpoints`` folder.
        blobs: where message blobs go.
    """

    def __init__(self, folder: Path, blobs: BlobStore) -> None:
        self.folder = folder
        self.blobs = blobs

    def put(self, checkpoint: Checkpoint, keep_last: int) -> None:
        """Store a checkpoint, then drop its run's checkpoints beyond the ``keep_last`` newest."""
        data = checkpoint.model_dump(mode="json")
        refs = [self.blobs.put(canonical_json(message)) for message in data.pop("messages")]
        folder = self.folder / checkpoint.branch_id
        make_dirs(folder)
        files = self._files(folder)
        number = files[-1][0] + 1 if files else 1
        tag = _run_tag(checkpoint.run_id)
        path = folder / f"{number:012d}-{tag}.json"
        write_atomic(path, _StoredCheckpoint(fields=data, messages=refs).model_dump_json().encode())
        kept = [(old, old_tag) for _, old_tag, old in files] + [(path, tag)]
        dropped = to_prune(kept, tag, keep_last)
        for old in dropped:
            old.unlink()
        if dropped:
            fsync_dir(folder)

    def load(self, branch: str) -> list[Checkpoint]:
        """The checkpoints of a branch, oldest first, messages and all.

        Raises:
            BlobError: a message blob is missing or altered.
            StoreError: a checkpoint file is not one.
        """
        return [self._load(path) for _, _, path in self._files(self.folder / branch)]

    def _load(self, path: Path) -> Checkpoint:
        try:
            stored = _StoredCheckpoint.model_validate_json(path.read_bytes())
            messages = [json.loads(self.blobs.get(ref)) for ref in stored.messages]
            return Checkpoint.model_validate({**stored.fields, "messages": messages})
        except ValidationError as exc:
            raise StoreError(f"{path} is not a checkpoint: {exc}") from exc

    @staticmethod
    def _files(folder: Path) -> list[tuple[int, str, Path]]:
        """``(number, run tag, path)`` of a branch's checkpoint files, oldest first."""
        if not folder.is_dir():
            return []
        found = []
        for path in folder.iterdir():
            match = _NAME.fullmatch(path.name)
            if match:  # temp files of an interrupted write do not match
                found.append((int(match[1]), match[2], path))
        return sorted(found)
