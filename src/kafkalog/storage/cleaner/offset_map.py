"""``OffsetMap``: key -> latest offset in a fixed, preallocated buffer (Kafka's ``SkimpyOffsetMap``).

The map is what bounds the cleaner's memory (``log.cleaner.dedupe.buffer.size``): one ``bytearray``
of fixed-size slots, allocated once, never a Python object per key. A slot is the key's 16-byte MD5
digest (Kafka's default ``log.cleaner.hash.algorithm``) followed by the offset as a big-endian
int64: 24 bytes, as in Kafka. Collisions between slots are resolved by linear probing; two distinct
keys with the same digest would be taken for one key, the risk Kafka accepts with MD5 (2^-64 for a
billion keys). An all-zero slot is empty (a real digest of sixteen zero bytes is not a concern).

A full map is not an error: the cleaner stops adding keys when ``size`` reaches the load factor and
cleans up to the last offset it mapped; the next round continues from there.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Final

from kafkalog.errors import IllegalArgumentError

__all__ = ["HASH_SIZE", "BYTES_PER_ENTRY", "OffsetMap"]

HASH_SIZE: Final = 16
BYTES_PER_ENTRY: Final = HASH_SIZE + 8
_EMPTY_HASH: Final = bytes(HASH_SIZE)
_OFFSET = struct.Struct(">q")
_md5 = hashlib.md5


class OffsetMap:
    """A fixed-capacity map from a key's MD5 digest to the latest offset put for it."""

    __slots__ = ("_buf", "_entries", "_latest_offset", "_lookups", "_probes", "_slots", "_view")

    def __init__(self, memory: int) -> None:
        slots = memory // BYTES_PER_ENTRY
        if slots < 1:
            raise IllegalArgumentError(f"An offset map needs at least {BYTES_PER_ENTRY} bytes, got {memory}")
        self._slots = slots
        self._buf = bytearray(slots * BYTES_PER_ENTRY)
        self._view = memoryview(self._buf)
        self._entries = 0
        self._latest_offset = -1
        self._lookups = 0
        self._probes = 0

    # --- sizes ----------------------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def size(self) -> int:
        """Distinct keys held."""
        return self._entries

    def __len__(self) -> int:
        return self._entries

    @property
    def memory(self) -> int:
        """Bytes of the slot buffer (the bound on this map's memory)."""
        return len(self._buf)

    @property
    def utilization(self) -> float:
        return self._entries / self._slots

    @property
    def collision_rate(self) -> float:
        """Extra probes per lookup (Kafka's ``collisionRate``)."""
        return (self._probes - self._lookups) / self._lookups if self._lookups else 0.0

    @property
    def latest_offset(self) -> int:
        """The last offset put or set by :meth:`update_latest_offset` (-1 after :meth:`clear`)."""
        return self._latest_offset

    def update_latest_offset(self, offset: int) -> None:
        self._latest_offset = offset

    def clear(self) -> None:
        self._buf[:] = bytes(len(self._buf))
        self._entries = 0
        self._latest_offset = -1
        self._lookups = 0
        self._probes = 0

    # --- the map --------------------------------------------------------------------------------

    def _find(self, digest: bytes) -> int:
        """Byte position of ``digest``'s slot, or of the empty slot where it would go."""
        slots = self._slots
        view = self._view
        slot = int.from_bytes(digest[:8], "big") % slots
        probes = 1
        while True:
            position = slot * BYTES_PER_ENTRY
            found = view[position:position + HASH_SIZE]
            if found in (digest, _EMPTY_HASH):
                self._lookups += 1
                self._probes += probes
                return position
            slot += 1
            probes += 1
            if slot == slots:
                slot = 0

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset`` (which becomes the latest offset). A new key in a full map raises."""
        digest = _md5(key).digest()
        position = self._find(digest)
        if self._view[position:position + HASH_SIZE] == _EMPTY_HASH:
            if self._entries >= self._slots - 1:  # one slot stays empty so that probing ends
                raise IllegalArgumentError("Attempt to add a new entry to a full offset map")
            self._buf[position:position + HASH_SIZE] = digest
            self._entries += 1
        _OFFSET.pack_into(self._buf, position + HASH_SIZE, offset)
        self._latest_offset = offset

    def put_many(self, keys: Sequence[bytes | None], offsets: Sequence[int], start_offset: int,
                 max_entries: int) -> int:
        """Put each keyed record with offset >= ``start_offset`` in order, stopping (as Kafka does) at
        the first such record met once the map holds ``max_entries`` keys. Returns how many records
        were consumed: all of them unless the map filled. Other records are skipped (and consumed)."""
        buf = self._buf
        view = self._view
        slots = self._slots
        pack = _OFFSET.pack_into
        entries = self._entries
        max_entries = min(max_entries, slots - 1)
        lookups = probes = 0
        try:
            for i, key in enumerate(keys):
                offset = offsets[i]
                if key is None or offset < start_offset:
                    continue
                if entries >= max_entries:
                    return i
                digest = _md5(key).digest()
                slot = int.from_bytes(digest[:8], "big") % slots
                lookups += 1
                while True:
                    probes += 1
                    position = slot * BYTES_PER_ENTRY
                    found = view[position:position + HASH_SIZE]
                    if found == digest:
                        break
                    if found == _EMPTY_HASH:
                        buf[position:position + HASH_SIZE] = digest
                        entries += 1
                        break
                    slot += 1
                    if slot == slots:
                        slot = 0
                pack(buf, position + HASH_SIZE, offset)
                self._latest_offset = offset
            return len(keys)
        finally:
            self._entries = entries
            self._lookups += lookups
            self._probes += probes

    def get(self, key: bytes) -> int:
        """The offset last put for ``key``, or -1."""
        position = self._find(_md5(key).digest())
        if self._view[position:position + HASH_SIZE] == _EMPTY_HASH:
            return -1
        value: int = _OFFSET.unpack_from(self._buf, position + HASH_SIZE)[0]
        return value

    def get_many(self, keys: Sequence[bytes | None]) -> list[int]:
        """:meth:`get` for each key (-1 for None or an unknown key)."""
        view = self._view
        buf = self._buf
        slots = self._slots
        unpack = _OFFSET.unpack_from
        result: list[int] = []
        append = result.append
        for key in keys:
            if key is None:
                append(-1)
                continue
            digest = _md5(key).digest()
            slot = int.from_bytes(digest[:8], "big") % slots
            while True:
                position = slot * BYTES_PER_ENTRY
                found = view[position:position + HASH_SIZE]
                if found == digest:
                    append(unpack(buf, position + HASH_SIZE)[0])
                    break
                if found == _EMPTY_HASH:
                    append(-1)
                    break
                slot += 1
                if slot == slots:
                    slot = 0
        return result

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self._slots}, size={self._entries}, latest_offset={self._latest_offset})"
