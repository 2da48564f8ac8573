"""``OffsetMap``: key -> latest offset in fixed, preallocated memory (Kafka's ``SkimpyOffsetMap``).

The map is what bounds the cleaner's memory (``log.cleaner.dedupe.buffer.size``): ``slots`` fixed
entries allocated once, never a Python object per key. An entry is the key's 16-byte MD5 digest
(Kafka's default ``log.cleaner.hash.algorithm``) and the offset as an int64 — 24 bytes, as in Kafka —
kept column-wise in three preallocated ``array`` s (digest high and low halves, offset), which lets
the probing loop compare machine integers instead of byte slices. Collisions between slots are
resolved by linear probing. Two distinct keys with the same 128-bit digest would be taken for one
key, the risk Kafka accepts with MD5. An entry whose digest is all zeros is empty (a real key
hashing to zero is not a concern, as in Kafka, which tests for zero bytes the same way).

A full map is not an error: the cleaner stops adding keys when ``size`` reaches the load factor and
cleans up to the last offset it mapped; the next round continues from there.

The cleaner works a batch at a time (:meth:`OffsetMap.put_batch`, :meth:`OffsetMap.retain_batch`):
for v2 batches the C record walker (``records/_native.c``) hashes each key in place and probes
these same arrays, with no Python object per record; without it (or for legacy batches) the
records are decoded and the Python loops below do the same. ``retain_batch`` holds the cleaner's
per-record rule (Kafka's ``shouldRetainRecord``), in both forms.
"""

from __future__ import annotations

import hashlib
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kafkalog.errors import IllegalArgumentError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.default_batch import batch_where, native_error, records_area
from kafkalog.records.native import native
from kafkalog.records.types import MAGIC_V2, Header, TimestampType

__all__ = ["BYTES_PER_ENTRY", "HASH_SIZE", "OffsetMap", "RetainedRecord", "Retention"]

HASH_SIZE: Final = 16
BYTES_PER_ENTRY: Final = HASH_SIZE + 8
_HALVES = struct.Struct(">QQ").unpack
_md5 = hashlib.md5


# (offset, timestamp, key, value, headers) of a record the cleaner keeps.
RetainedRecord = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]
_NO_HEADERS: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class Retention:
    """What the cleaner's record rule decided for one batch: the records kept (None: all of them),
    how many went and why, and whether a kept record is a tombstone."""

    kept: list[RetainedRecord] | None
    superseded: int
    tombstones: int
    keyless: int
    kept_tombstone: bool


class OffsetMap:
    """A fixed-capacity map from a key's MD5 digest to the latest offset put for it."""

    __slots__ = ("_entries", "_hi", "_latest_offset", "_lo", "_lookups", "_offsets", "_probes", "_slots")

    def __init__(self, memory: int) -> None:
        slots = memory // BYTES_PER_ENTRY
        if slots < 2:
            raise IllegalArgumentError(
                f"An offset map needs at least {2 * BYTES_PER_ENTRY} bytes, got {memory}")
        self._slots = slots
        # Three columns of `slots` fixed-size entries, zero-filled (empty) up front.
        self._hi = array("Q", bytes(8 * slots))
        self._lo = array("Q", bytes(8 * slots))
        self._offsets = array("q", bytes(8 * slots))
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
        """Bytes of the entries (the bound on this map's memory)."""
        return self._slots * BYTES_PER_ENTRY

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
        zeros = bytes(8 * self._slots)  # one column's worth, reused: the peak is the map + 1/3
        for column in (self._hi, self._lo, self._offsets):
            memoryview(column).cast("B")[:] = zeros
        self._entries = 0
        self._latest_offset = -1
        self._lookups = 0
        self._probes = 0

    # --- the map --------------------------------------------------------------------------------

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset`` (which becomes the latest offset). A new key in a full map raises."""
        if self.put_many([key], [offset], -(2**63), self._slots - 1) == 0:
            raise IllegalArgumentError("Attempt to add a new entry to a full offset map")

    def put_many(self, keys: Sequence[bytes | None], offsets: Sequence[int], start_offset: int,
                 max_entries: int) -> int:
        """Put each keyed record with offset >= ``start_offset`` in order, stopping (as Kafka does) at
        the first such record met once the map holds ``max_entries`` keys. Returns how many records
        were consumed: all of them unless the map filled. Other records are skipped (and consumed)."""
        hi, lo, offs = self._hi, self._lo, self._offsets
        slots = self._slots
        entries = self._entries
        max_entries = min(max_entries, slots - 1)  # one slot stays empty so that probing ends
        lookups = probes = 0
        consumed = len(keys)
        latest = self._latest_offset
        for i, key in enumerate(keys):
            offset = offsets[i]
            if key is None or offset < start_offset:
                continue
            if entries >= max_entries:
                consumed = i
                break
            h, low = _HALVES(_md5(key).digest())
            slot = h % slots
            lookups += 1
            while True:
                probes += 1
                found = hi[slot]
                if found == h and lo[slot] == low:
                    break
                if found == 0 and lo[slot] == 0:
                    hi[slot] = h
                    lo[slot] = low
                    entries += 1
                    break
                slot += 1
                if slot == slots:
                    slot = 0
            offs[slot] = offset
            latest = offset
        self._entries = entries
        self._latest_offset = latest
        self._lookups += lookups
        self._probes += probes
        return consumed

    def get(self, key: bytes) -> int:
        """The offset last put for ``key``, or -1."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[bytes | None]) -> list[int]:
        """:meth:`get` for each key (-1 for None or an unknown key)."""
        hi, lo, offs = self._hi, self._lo, self._offsets
        slots = self._slots
        result: list[int] = []
        append = result.append
        for key in keys:
            if key is None:
                append(-1)
                continue
            h, low = _HALVES(_md5(key).digest())
            slot = h % slots
            while True:
                found = hi[slot]
                if found == h and lo[slot] == low:
                    append(offs[slot])
                    break
                if found == 0 and lo[slot] == 0:
                    append(-1)
                    break
                slot += 1
                if slot == slots:
                    slot = 0
        return result

    # --- a batch at a time (what the cleaner calls) -------------------------------------------------

    def put_batch(self, batch: RecordBatch, start_offset: int, max_entries: int) -> int:
        """:meth:`put_many` over the records of ``batch``; returns how many were consumed (fewer
        than ``batch.record_count`` when the map filled)."""
        if native is not None and batch.magic == MAGIC_V2:
            count = batch.record_count
            if count <= 0:
                return 0
            where = batch_where(batch.position, batch.base_offset)
            data, pos = records_area(batch.buffer, batch.attributes, where)
            try:
                consumed, entries, latest, lookups, probes = native.offset_map_put_v2(
                    data, pos, count, batch.base_offset, self._hi, self._lo, self._offsets, start_offset,
                    max_entries, self._entries, self._latest_offset)
            except ValueError as e:
                raise native_error(e, where) from None
            self._entries, self._latest_offset = entries, latest
            self._lookups += lookups
            self._probes += probes
            return int(consumed)
        columns = batch.decode_columns()
        return self.put_many(columns.keys, columns.offsets, start_offset, max_entries)

    def retain_batch(self, batch: RecordBatch, retain_deletes: bool) -> Retention:
        """The cleaner's rule for each record of a data batch (Kafka's ``shouldRetainRecord``): a
        record past the mapped range stays; otherwise it needs a key (keyless records go), must be
        the latest of its key, and is kept if it has a value or deletes are still retained."""
        latest = self._latest_offset
        if native is not None and batch.magic == MAGIC_V2 and batch.record_count > 0:
            where = batch_where(batch.position, batch.base_offset)
            data, pos = records_area(batch.buffer, batch.attributes, where)
            log_append_time = (batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME
                               else None)
            try:
                kept, superseded, tombstones, keyless, kept_tombstone = native.offset_map_retain_v2(
                    data, pos, batch.record_count, batch.base_offset, batch.base_timestamp, log_append_time,
                    self._hi, self._lo, self._offsets, latest, retain_deletes)
            except ValueError as e:
                raise native_error(e, where) from None
            if kept is not None:
                kept = [(o, t, k, v, tuple([Header(hk, hv) for hk, hv in h]) if h else _NO_HEADERS)
                        for o, t, k, v, h in kept]
            return Retention(kept, superseded, tombstones, keyless, kept_tombstone)
        columns = batch.decode_columns()
        offsets, keys, values = columns.offsets, columns.keys, columns.values
        found = self.get_many(keys)
        retained: list[RetainedRecord] = []
        superseded = tombstones = keyless = 0
        for i, offset in enumerate(offsets):
            if offset > latest:
                pass
            elif keys[i] is None:
                keyless += 1
                continue
            elif offset < found[i]:
                superseded += 1
                continue
            elif values[i] is None and not retain_deletes:
                tombstones += 1
                continue
            retained.append((offset, columns.timestamps[i], keys[i], values[i], columns.headers[i]))
        kept_tombstone = any(r[3] is None for r in retained)
        every = bool(retained) and len(retained) == len(offsets)
        return Retention(None if every else retained, superseded, tombstones, keyless, kept_tombstone)

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self._slots}, size={self._entries}, latest_offset={self._latest_offset})"
