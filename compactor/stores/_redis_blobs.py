"""Content-addressed blobs of one session in Redis: large payloads and checkpoint messages.

A blob is the key ``P:s:{<session>}:blob:<sha256>``, written once and never changed or
deleted (other events or checkpoints may share it). Whatever refers to a blob keeps a
``BlobRef``, and every read checks size and digest: a missing or altered blob raises
``BlobError``, it is never returned as empty.
"""

from __future__ import annotations

import hashlib

import redis

from compactor.errors import BlobError
from compactor.stores._redis import SessionKeys, translated
from compactor.stores.blobs import BlobRef


class RedisBlobs:
    """The blobs of one session."""

    def __init__(self, client: redis.Redis, keys: SessionKeys) -> None:
        self._client = client
        self._keys = keys

    def get(self, refs: list[BlobRef]) -> list[bytes]:
        """The bytes of blobs, in one round trip, each checked against its reference.

        Raises:
            BlobError: a blob is missing, or its size or digest differs from its reference.
        """
        if not refs:
            return []
        names = [self._keys.blob(ref.sha256) for ref in refs]
        with translated():
            found = self._client.mget(names)
        return [_checked(*row) for row in zip(names, refs, found, strict=True)]

    def put(self, blobs: list[bytes]) -> None:
        """Store the blobs not stored yet: one round trip asks which exist, so a checkpoint
        of a growing history sends only its new messages."""
        if not blobs:
            return
        names = [self._keys.blob(hashlib.sha256(blob).hexdigest()) for blob in blobs]
        with translated():
            pipe = self._client.pipeline(transaction=False)
            for name in names:
                pipe.exists(name)
            present = pipe.execute()
            for name, blob, found in zip(names, blobs, present, strict=True):
                if not found:
                    pipe.set(name, blob, nx=True)
            pipe.execute()


def _checked(name: str, ref: BlobRef, data: bytes | str | None) -> bytes:
    if data is None:
        raise BlobError(f"blob {name} is missing")
    if isinstance(data, str):  # only with decode_responses=True, which connect() refuses
        data = data.encode()
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise BlobError(
            f"blob {name} does not match its reference ({len(data)} bytes, expected "
            f"{ref.size} with sha256 {ref.sha256})"
        )
    return data
