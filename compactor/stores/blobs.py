"""Content-addressed blobs: large payloads and checkpoint messages, stored once by sha256.

A blob lives at ``<folder>/<sha256 hex>``; it is written to a temp file, fsynced, renamed into
place and its folder fsynced, so a name that exists always holds complete bytes. Whatever
refers to a blob keeps a ``BlobRef`` (digest and size), and every read checks both: a missing or
altered blob raises ``BlobError``, it is never returned as empty.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from compactor.errors import BlobError
from compactor.stores._files import make_dirs, write_atomic


class BlobRef(BaseModel):
    """How a log line or a checkpoint file refers to a blob."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Hex sha256 of the blob's bytes; also its file name (so it is checked before use)."""
    size: int = Field(ge=0)
    """Length of the blob in bytes."""


class BlobStore:
    """The blobs of one session, in one folder.

    Args:
        folder: where the blob files live (created on the first put).
        durable: fsync each new blob and its folder before ``put`` returns.
    """

    def __init__(self, folder: Path, *, durable: bool = True) -> None:
        self.folder = folder
        self.durable = durable
        self._known: set[str] = set()
        """Digests this store wrote or found intact: a checkpoint puts the whole history
        again every call, and only its new messages should cost a system call."""

    def put(self, data: bytes) -> BlobRef:
        """Store ``data`` (once: an intact blob with the same digest is kept as it is)."""
        ref = BlobRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        if ref.sha256 in self._known:
            return ref
        path = self.folder / ref.sha256
        try:
            present = path.stat().st_size == ref.size
        except FileNotFoundError:
            present = False
        if not present:
            make_dirs(self.folder, durable=self.durable)
            write_atomic(path, data, durable=self.durable)
        self._known.add(ref.sha256)
        return ref

    def get(self, ref: BlobRef) -> bytes:
        """The bytes of a blob, checked against its reference.

        Raises:
            BlobError: the blob is missing, or its size or digest differs from ``ref``.
        """
        path = self.folder / ref.sha256
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobError(f"blob {ref.sha256} is missing from {self.folder}") from None
        if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
            raise BlobError(
                f"blob {path} does not match its reference "
                f"({len(data)} bytes, expected {ref.size} with sha256 {ref.sha256})"
            )
        return data
