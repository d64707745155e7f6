"""RedisToolResultStore: full tool outputs as UTF-8 strings, paged by character with GETRANGE.

READ_TOOL_RESULT offsets count characters, GETRANGE counts bytes. An ASCII text needs nothing
more (a character is a byte). Any other text gets an index key beside it: big-endian uint32s,
first the text's length in characters, then the byte offset of every ``INDEX_EVERY``-th
character (0, 256, 512, ...). A page maps its first and last character to the index entries
around them and reads that byte range with one GETRANGE, at most ``INDEX_EVERY - 1`` characters
wider on each side; the client cuts the exact characters out of it. The index costs 4 bytes
per 256 characters (under 1.6% of the text).
"""

from __future__ import annotations

import struct

import redis

from compactor.stores._redis import check_prefix, check_server, connect, milliseconds, translated
from compactor.stores._redis_lua import READ_PAGE
from compactor.stores.base import SessionKey

INDEX_EVERY = 256
"""Characters between two entries of a text's index."""

# Lone surrogates (from JSON like "\\ud800") are not UTF-8 but may be in a tool's output: they
# round-trip through their 3-byte form instead of failing the put.
_ERRORS = "surrogatepass"


def char_index(text: str) -> bytes | None:
    """The index of a text that is not ASCII; None for ASCII."""
    if text.isascii():
        return None
    offsets = [len(text)]
    position = 0
    for start in range(0, len(text), INDEX_EVERY):
        offsets.append(position)
        position += len(text[start : start + INDEX_EVERY].encode("utf-8", _ERRORS))
    return struct.pack(f">{len(offsets)}I", *offsets)


class RedisToolResultStore:
    """Tool outputs in Redis, shared by every process and machine that reaches the server.

    Args:
        client_or_url: a ``redis.Redis`` client (made with ``decode_responses=False``), or a
            URL such as ``redis://localhost:6379/0`` (the client then gets short timeouts).
        prefix: the first part of every key, e.g. one per tenant or deployment.
        ttl: seconds after which a stored output expires; None keeps it until deleted.

    Raises:
        ConfigError: the server may evict these keys (see ``check_server``).
        StoreError: the server does not answer.
    """

    def __init__(
        self,
        client_or_url: redis.Redis | str,
        *,
        prefix: str = "compactor",
        ttl: float | None = None,
    ) -> None:
        self.prefix = check_prefix(prefix)
        self.ttl = ttl
        self._px = None if ttl is None else milliseconds(ttl, "ttl")
        self._client = connect(client_or_url)
        check_server(self._client, expiring=ttl is not None)
        self._read = self._client.register_script(READ_PAGE)

    def put(self, key: SessionKey, handle: str, text: str) -> None:
        """Store the full output under ``handle`` (text and index replaced together)."""
        name, index_name = self._names(key, handle)
        index = char_index(text)
        with translated():
            pipe = self._client.pipeline(transaction=True)
            pipe.set(name, text.encode("utf-8", _ERRORS), px=self._px)
            if index is None:
                pipe.delete(index_name)
            else:
                # A second longer than its text: an index never expires first, which would
                # make a page of the text read as ASCII.
                px = None if self._px is None else self._px + 1000
                pipe.set(index_name, index, px=px)
            pipe.execute()

    def read(self, key: SessionKey, handle: str, offset: int, limit: int) -> str | None:
        """Characters ``offset`` to ``offset + limit`` of a stored output; None if unknown.

        Only the bytes of the page (rounded out to the index entries around it) leave the
        server.

        Raises:
            ValueError: a negative offset or limit.
        """
        if offset < 0 or limit < 0:
            raise ValueError(f"offset and limit must be >= 0, not {offset} and {limit}")
        with translated():
            found = self._read(keys=self._names(key, handle), args=[offset, limit, INDEX_EVERY])
        if found is None:
            return None
        first, data = found
        text = bytes(data).decode("utf-8", _ERRORS)
        return text[offset - int(first) :][:limit]

    def sync(self) -> None:
        """Each put is as durable as the server's AOF policy makes it: nothing to do here."""

    def size(self, key: SessionKey, handle: str) -> int | None:
        """Length in characters of a stored output; None if unknown."""
        name, index_name = self._names(key, handle)
        with translated():
            pipe = self._client.pipeline(transaction=True)
            pipe.exists(name)
            pipe.strlen(name)
            pipe.getrange(index_name, 0, 3)
            exists, length, header = pipe.execute()
        if not exists:
            return None
        return struct.unpack(">I", header)[0] if header else int(length)

    def _names(self, key: SessionKey, handle: str) -> tuple[str, str]:
        """The text's key and its index's key."""
        # Ids never hold "{", "}" or "/": the braces delimit them, whatever the handle holds.
        base = f"{self.prefix}:tr:{{{key.tenant}/{key.session_id}}}"
        return f"{base}:t:{handle}", f"{base}:i:{handle}"
