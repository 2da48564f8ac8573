"""``BatchDirectory``: where the map pass found each v2 data batch, for the cleaning pass to skip
the ones that keep nothing.

The map pass reads every batch of the dirty range anyway; the C walks hand back, per plain batch,
its file positions, offsets, record count and keyed-record count (``BatchEntry`` in
``records/_compact.c``: six native 64-bit words), and the Python path adds the same for the v2 data
batches it maps (compressed ones: those are then not even decompressed again). Once the map is
done, a batch whose offsets hold no key's latest record keeps none of its records, so the cleaning
pass drops it from its entry alone (:meth:`OffsetMap.skip_superseded`) and reads only the batches
around the keys' latest records -- on a log whose keys are updated often, a small part of it.

The directory is an optimisation, never needed for a correct clean: entries are kept per segment
in file order, only up to a byte budget (a share of the dedupe buffer, so the cleaner's memory
stays bounded by it), and a batch without an entry is read and walked as before.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from kafkalog.records.types import MAGIC_V2

if TYPE_CHECKING:
    from kafkalog.records.batch import RecordBatch

__all__ = ["ENTRY_SIZE", "BatchDirectory"]

_ENTRY: Final = struct.Struct("=6q")  # start, end, base offset, last offset, record count, keyed records
ENTRY_SIZE: Final = _ENTRY.size


class BatchDirectory:
    """Per segment (by base offset), the map pass's batch entries in file order, within ``budget``
    bytes in all."""

    __slots__ = ("_budget", "_full", "_segments", "_used")

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._segments: dict[int, bytearray] = {}
        self._used = 0
        self._full = False

    @property
    def used(self) -> int:
        return self._used

    def clear(self) -> None:
        self._segments.clear()
        self._used = 0
        self._full = False

    def add(self, segment_base: int, entries: bytes) -> None:
        """Record the entries of batches the map pass just walked in the segment, after those
        recorded before (in file order). Past the budget, nothing more is recorded."""
        if self._full or not entries:
            return
        if self._used + len(entries) > self._budget:
            self._full = True  # the batches from here are read as if there were no directory
            return
        self._segments.setdefault(segment_base, bytearray()).extend(entries)
        self._used += len(entries)

    def add_batch(self, segment_base: int, position: int, batch: RecordBatch, keyed: int, start: int) -> None:
        """Record a batch the Python path mapped whole (a compressed one, say) from file position
        ``position``, ``keyed`` of its records put: v2 data batches outside transactions only, all of
        whose records were at or past the map's ``start`` (so that every keyed record was put)."""
        if (batch.magic == MAGIC_V2 and not batch.is_transactional and not batch.is_control
                and batch.base_offset >= start and 0 <= keyed <= batch.record_count):
            self.add(segment_base, _ENTRY.pack(position, position + batch.size_in_bytes, batch.base_offset,
                                               batch.last_offset, batch.record_count, keyed))

    def entries(self, segment_base: int) -> bytearray | None:
        """The segment's entries, or None if the map pass recorded none."""
        return self._segments.get(segment_base)
