"""File primitives the JSONL store is built on: durable creates and renames, and a session lock.

A file is durable only once its bytes are fsynced, and a new or renamed name only once its
directory is fsynced too; every helper here that creates a name does both (``durable=False``
skips them, for the ``fsync="never"`` policy and for tests).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4


def canonical_json(value: Any) -> bytes:
    """The one byte form checksums and digests are taken over: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fsync_dir(folder: Path) -> None:
    """Make the names in ``folder`` (new files, renames, removals) survive a power loss."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def make_dirs(folder: Path, *, durable: bool = True) -> None:
    """``mkdir -p``, fsyncing the parent of every folder it creates."""
    if folder.is_dir():
        return
    make_dirs(folder.parent, durable=durable)
    try:
        folder.mkdir()
    except FileExistsError:
        return  # another writer made it first
    if durable:
        fsync_dir(folder.parent)


def _write_temp(folder: Path, name: str, data: bytes, *, durable: bool) -> Path:
    """A new file beside its final name, fully written (and fsynced when durable)."""
    temp = folder / f".{name}.{uuid4().hex}.tmp"
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        if durable:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return temp


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data``: readers see the old bytes or the new, never a mix."""
    temp = _write_temp(path.parent, path.name, data, durable=durable)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def create_exclusive(path: Path, data: bytes, *, durable: bool = True) -> bool:
    """Create ``path`` holding ``data`` unless it exists; whether this call created it.

    ``O_EXCL`` alone would let a reader (or a crash) see the file before its bytes; linking a
    complete temp file into place is just as exclusive and never shows an empty file.
    """
    temp = _write_temp(path.parent, path.name, data, durable=durable)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        temp.unlink()
    if durable:
        fsync_dir(path.parent)
    return True


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if needed) for the block.

    Each call opens its own descriptor: flock locks belong to an open file description, so two
    threads of one process exclude each other exactly like two processes do.
    """
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def sync_file(path: Path) -> None:
    """Fsync a file by name (the bytes written through any descriptor of it)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
