"""``OffsetMap``: key -> latest offset in fixed, preallocated memory (Kafka's ``SkimpyOffsetMap``).

The map is what bounds the cleaner's memory (``log.cleaner.dedupe.buffer.size``): ``slots`` fixed
entries allocated once, never a Python object per key. An entry is a 128-bit hash of the key and
the offset -- 24 bytes, as in Kafka (which stores the key's MD5 digest) -- kept as three 64-bit
words side by side in one preallocated ``array`` (so that a probe touches one cache line, not
three), which lets the probing loop compare machine integers instead of byte slices. The hash is
keyed by a random secret per map (:class:`KeyHash`: why not MD5 is said there). A key's first
slot is the high 64 bits of ``first word * slots``; collisions probe the next slot, wrapping. Two
distinct keys with the same 128-bit hash would be taken for one key, the risk Kafka accepts too.
An entry whose words are both zero is empty.

A full map is not an error: the cleaner stops adding keys when ``size`` reaches the load factor and
cleans up to the last offset it mapped; the next round continues from there.

The cleaner works a batch at a time (:meth:`OffsetMap.put_batch`, :meth:`OffsetMap.retain_batch`)
or, where the C module ``records/_compact.c`` is built, a buffer of whole batches at a time
(:meth:`OffsetMap.put_batches`, :meth:`OffsetMap.filter_batches`): C hashes each key in place and
probes these same arrays, with no Python object per record; without it (or for legacy batches)
the records are decoded and the Python loops below do the same. ``retain_batch`` holds the
cleaner's per-record rule (Kafka's ``shouldRetainRecord``), in both forms. Once the map pass is
done, :meth:`OffsetMap.end_map_pass` lets ``filter_batches`` answer that rule from one bit per
mapped offset instead of hashing every key a second time.
"""

from __future__ import annotations

import importlib
import mmap
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import ModuleType
from typing import Final

from kafkalog.errors import IllegalArgumentError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.default_batch import batch_where, native_error, records_area
from kafkalog.records.native import compact_native
from kafkalog.records.types import MAGIC_V2, Header, TimestampType
from kafkalog.storage.cleaner.batch_directory import ENTRY_SIZE
from kafkalog.storage.cleaner.key_hash import KeyHash


def _load_map_pass() -> ModuleType | None:
    """The map pass's reader on two threads in C (``_map_pass.c``), which borrows the C walks."""
    if compact_native is None:
        return None
    try:
        return importlib.import_module("kafkalog.storage.cleaner._map_pass")
    except ImportError:
        return None


map_pass: ModuleType | None = _load_map_pass()

__all__ = ["BYTES_PER_ENTRY", "HASH_SIZE", "BatchWalk", "FilteredChunk", "HashedChunk", "OffsetMap",
           "RetainedRecord", "Retention", "SkippedRun", "WalkStop"]

HASH_SIZE: Final = 16
BYTES_PER_ENTRY: Final = HASH_SIZE + 8
_WORD: Final = 2**64 - 1
_ZERO_STEP: Final = 1 << 20  # the Python path zeroes the table this many bytes at a time
_SIGN: Final = 2**63
_NOT_MAPPED: Final = 2**63 - 1  # no map pass declared done: filter_batches checks every CRC
_NO_BITS: Final = bytearray()  # put_windows in offset order: no bits kept
# end_map_pass builds the latest-offset bits once the pass put this many records per slot (reading
# the whole table costs about what probing a sixteenth as many keys does).
LATEST_BITS_MIN_PUTS_PER_SLOT = 1 / 16
_WRAP: Final = 2**64


# (offset, timestamp, key, value, headers) of a record the cleaner keeps.
RetainedRecord = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]
_NO_HEADERS: tuple[Header, ...] = ()


class WalkStop(IntEnum):
    """Why a walk over a buffer of whole batches stopped (``records/_compact.c``)."""

    END = 0      # no whole batch left in the buffer
    BUDGET = 1   # the next batch would overflow the cleaner's chunk
    PYTHON = 2   # the batch at ``consumed`` needs the Python path
    FULL = 3     # the map filled within the batch at ``consumed``


@dataclass(frozen=True, slots=True)
class BatchWalk:
    """What :meth:`OffsetMap.put_batches` did: bytes of whole batches mapped, why it stopped, and
    the records it read (including those of a batch the map filled in)."""

    consumed: int
    stop: WalkStop
    records_read: int
    batches: bytes = b""  # the batch directory's entries of the batches done (see BatchDirectory)


@dataclass(frozen=True, slots=True)
class SkippedRun:
    """What :meth:`OffsetMap.skip_superseded` passed over: bytes of batches none of whose records
    stay, why it stopped (``END`` or ``BUDGET``), and the records dropped and why."""

    consumed: int
    stop: WalkStop
    records: int
    superseded: int
    keyless: int
    chunk_bytes: int  # of the chunk the run ends in


@dataclass(frozen=True, slots=True)
class HashedChunk:
    """What :meth:`OffsetMap.hash_batches` found in whole plain batches: bytes of them, why it
    stopped (``END`` or ``PYTHON``), and their keys' hashes for :meth:`OffsetMap.put_hashes`."""

    consumed: int
    stop: WalkStop
    hashed: bytes
    batches: bytes


@dataclass(frozen=True, slots=True)
class FilteredChunk:
    """What :meth:`OffsetMap.filter_batches` did over whole batches: their cleaned bytes, what a
    segment append of them needs (``max_offset`` etc. are -1 when ``data`` is empty), and counts."""

    consumed: int
    stop: WalkStop
    data: bytes
    max_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    messages_read: int
    messages_written: int
    bytes_written: int
    superseded: int
    tombstones: int
    keyless: int


@dataclass(frozen=True, slots=True)
class Retention:
    """What the cleaner's record rule decided for one batch: the records kept (None: all of them),
    how many went and why, and whether a kept record is a tombstone."""

    kept: list[RetainedRecord] | None
    superseded: int
    tombstones: int
    keyless: int
    kept_tombstone: bool


def _allocate(size: int) -> tuple[memoryview, mmap.mmap | None]:
    """``size`` zeroed bytes for the table, as 64-bit words: an anonymous map on huge pages where the
    kernel offers them, else an ``array``. A big table is far beyond what 4 KiB pages let the TLB
    cover, and with them most probes of a big map waited for a page walk (measured: the C walks are
    ~15 % faster on 2 MiB pages). The pages are committed here, as Java's allocation of Kafka's
    buffer commits them: see :meth:`OffsetMap.clear`."""
    try:
        region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (AttributeError, OSError, ValueError):  # no anonymous maps here (Windows)
        return memoryview(array("Q", bytes(size))), None
    huge = getattr(mmap, "MADV_HUGEPAGE", None)
    if huge is not None:
        try:
            region.madvise(huge)
        except OSError:  # a kernel without transparent huge pages: 4 KiB pages it is
            pass
    table = memoryview(region).cast("Q")
    _zero(table)  # writing every page faults it in
    return table, region


def _zero(table: memoryview) -> None:
    if compact_native is not None:
        compact_native.offset_map_zero(table)
        return
    view = table.cast("B")
    zeros = bytes(min(len(view), _ZERO_STEP))
    for start in range(0, len(view), _ZERO_STEP):
        end = min(start + _ZERO_STEP, len(view))
        view[start:end] = zeros[:end - start]


class OffsetMap:
    """A fixed-capacity map from a key's keyed 128-bit hash to the latest offset put for it."""

    __slots__ = ("_entries", "_hash", "_k0", "_k1", "_key_hash", "_latest_bits", "_latest_offset", "_lookups",
                 "_mapped_from", "_probes", "_region", "_slots", "_table")

    def __init__(self, memory: int, *, key_hash: KeyHash | None = None) -> None:
        slots = memory // BYTES_PER_ENTRY
        if slots < 2:
            raise IllegalArgumentError(
                f"An offset map needs at least {2 * BYTES_PER_ENTRY} bytes, got {memory}")
        self._slots = slots
        # `slots` entries of three words (hash first half, second half, offset), zero-filled (empty).
        self._table, self._region = _allocate(BYTES_PER_ENTRY * slots)
        self._entries = 0
        self._latest_offset = -1
        self._lookups = 0
        self._probes = 0
        self._key_hash = KeyHash.create() if key_hash is None else key_hash
        self._hash = self._key_hash.function()
        self._k0, self._k1 = self._key_hash.words
        self._mapped_from = _NOT_MAPPED
        self._latest_bits: bytes | bytearray = b""

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
    def puts(self) -> int:
        """Keys put since the last :meth:`clear` (the same key twice counts twice)."""
        return self._lookups

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
    def walks_batches(self) -> bool:
        """Whether :meth:`put_batches` and :meth:`filter_batches` may be used (the C module)."""
        return compact_native is not None and self._key_hash.siphash

    @property
    def maps_newest_first(self) -> bool:
        """Whether :meth:`begin_newest_first` may be used (the C map pass)."""
        return map_pass is not None and self.walks_batches

    @property
    def latest_offset(self) -> int:
        """The last offset put or set by :meth:`update_latest_offset` (-1 after :meth:`clear`)."""
        return self._latest_offset

    def update_latest_offset(self, offset: int) -> None:
        self._forget_pass()
        self._latest_offset = offset

    def clear(self) -> None:
        """Empty the map. The table is zeroed in place (as Kafka's ``clear`` fills its buffer), and
        only if anything was put since it was last zeroed. Its pages are not handed back to the
        kernel: every round would fault them in again -- on a virtual machine, measured, from memory
        the host had yet to back, when a clean's first map-pass call took 22-41 ms instead of ~4 in
        six runs of eight."""
        if self._lookups or self._entries:
            _zero(self._table)
        self._entries = 0
        self._latest_offset = -1
        self._lookups = 0
        self._probes = 0
        self._forget_pass()

    def _walked(self, entries: int, latest: int, lookups: int, probes: int) -> None:
        """What a C walk that put keys hands back: the keys held, the latest offset, its counts."""
        self._entries, self._latest_offset = entries, latest
        self._lookups += lookups
        self._probes += probes

    def _forget_pass(self) -> None:
        self._mapped_from = _NOT_MAPPED
        self._latest_bits = b""

    def end_map_pass(self, start_offset: int) -> None:
        """The map pass is done: every batch holding offsets in [``start_offset``, :attr:`latest_offset`]
        was read whole, checked, and each of its keyed records put (unless its transaction aborted).

        :meth:`filter_batches` then trusts those batches' CRCs (the segments are sealed and were
        checked moments ago) and, where the C module is built and the range is small enough, answers
        the record rule from one bit per offset of the range: set where an entry holds that offset.
        Within the range every key was put, so a record is its key's latest exactly when its offset is
        an entry's (a hash collision keeps the later offset, as a probe would find) -- no key is hashed
        twice. The bits are built only where they pay: for at most ``memory`` offsets (an eighth of
        the map's memory) and once the pass has put at least a sixteenth as many records as there are
        slots, since building them reads the whole table."""
        self._forget_pass()
        if not self.walks_batches or self._latest_offset < start_offset:
            return
        self._mapped_from = start_offset
        count = self._latest_offset - start_offset + 1
        if count <= self.memory and self._lookups >= self._slots * LATEST_BITS_MIN_PUTS_PER_SLOT:
            assert compact_native is not None
            bits = bytearray((count + 7) // 8)
            compact_native.offset_map_index_latest(self._table, start_offset, bits)
            self._latest_bits = bits

    def begin_newest_first(self, start_offset: int, end_offset: int) -> bool:
        """Prepare a cleared map for a round mapped newest segment first (``Cleaner``'s overlapped
        round, with :meth:`put_windows` ``newest=True``): it will cover [``start_offset``,
        ``end_offset``), and the latest-offset bits of :meth:`end_map_pass` are kept as the entries
        change, so that a segment can be cleaned as soon as it and every later one are mapped.
        False (nothing changed) where that cannot be: no C map pass, or more offsets than the bits'
        budget (an eighth of the map's memory, as :meth:`end_map_pass` allows)."""
        count = end_offset - start_offset
        if not self.maps_newest_first or count <= 0 or count > self.memory:
            return False
        self._mapped_from = start_offset
        self._latest_offset = end_offset - 1
        self._latest_bits = bytearray((count + 7) // 8)
        return True

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
        self._forget_pass()
        table = self._table
        slots = self._slots
        entries = self._entries
        max_entries = min(max_entries, slots - 1)  # one slot stays empty so that probing ends
        lookups = probes = 0
        consumed = len(keys)
        latest = self._latest_offset
        hash_of = self._hash
        for i, key in enumerate(keys):
            offset = offsets[i]
            if key is None or offset < start_offset:
                continue
            if entries >= max_entries:
                consumed = i
                break
            h, low = hash_of(key)
            slot = (h * slots) >> 64
            lookups += 1
            while True:
                probes += 1
                at = 3 * slot
                found = table[at]
                if found == h and table[at + 1] == low:
                    break
                if found == 0 and table[at + 1] == 0:
                    table[at] = h
                    table[at + 1] = low
                    entries += 1
                    break
                slot += 1
                if slot == slots:
                    slot = 0
            table[at + 2] = offset & _WORD  # two's complement, as C stores an int64
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
        table = self._table
        slots = self._slots
        result: list[int] = []
        append = result.append
        hash_of = self._hash
        for key in keys:
            if key is None:
                append(-1)
                continue
            h, low = hash_of(key)
            slot = (h * slots) >> 64
            while True:
                at = 3 * slot
                found = table[at]
                if found == h and table[at + 1] == low:
                    offset = table[at + 2]
                    append(offset if offset < _SIGN else offset - _WRAP)
                    break
                if found == 0 and table[at + 1] == 0:
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
        if self.walks_batches and batch.magic == MAGIC_V2:
            assert compact_native is not None
            count = batch.record_count
            if count <= 0:
                return 0
            self._forget_pass()
            where = batch_where(batch.position, batch.base_offset)
            data, pos = records_area(batch.buffer, batch.attributes, where)
            try:
                consumed, entries, latest, lookups, probes = compact_native.offset_map_put_v2(
                    data, pos, count, batch.base_offset, self._table, self._k0, self._k1,
                    start_offset, max_entries, self._entries, self._latest_offset)
            except ValueError as e:
                raise native_error(e, where) from None
            self._walked(entries, latest, lookups, probes)
            return int(consumed)
        columns = batch.decode_columns()
        return self.put_many(columns.keys, columns.offsets, start_offset, max_entries)

    def retain_batch(self, batch: RecordBatch, retain_deletes: bool) -> Retention:
        """The cleaner's rule for each record of a data batch (Kafka's ``shouldRetainRecord``): a
        record past the mapped range stays; otherwise it needs a key (keyless records go), must be
        the latest of its key, and is kept if it has a value or deletes are still retained."""
        latest = self._latest_offset
        if self.walks_batches and batch.magic == MAGIC_V2 and batch.record_count > 0:
            assert compact_native is not None
            where = batch_where(batch.position, batch.base_offset)
            data, pos = records_area(batch.buffer, batch.attributes, where)
            log_append_time = (batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME
                               else None)
            try:
                kept, superseded, tombstones, keyless, kept_tombstone = compact_native.offset_map_retain_v2(
                    data, pos, batch.record_count, batch.base_offset, batch.base_timestamp, log_append_time,
                    self._table, self._k0, self._k1, latest, retain_deletes)
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

    # --- a buffer of whole batches at a time (the C module only) --------------------------------------

    def put_batches(self, data: bytes | memoryview, start_offset: int, max_entries: int,
                    position: int = 0) -> BatchWalk:
        """:meth:`put_batch` over the plain batches (magic 2, uncompressed, neither transactional nor
        control, CRC checked) at the start of ``data`` (read from file position ``position``), then
        :meth:`update_latest_offset` to each one's last offset if >= ``start_offset``; stops at the
        first batch that is not whole, not plain or does not fit the map."""
        assert compact_native is not None and self.walks_batches
        self._forget_pass()
        consumed, stop, entries, latest, records, lookups, probes, batches = (
            compact_native.offset_map_put_batches(data, position, self._table, self._k0, self._k1,
                                                  start_offset, max_entries, self._entries,
                                                  self._latest_offset))
        self._walked(entries, latest, lookups, probes)
        return BatchWalk(consumed, WalkStop(stop), records, batches)

    def put_windows(self, fd: int, base: int, cuts: array[int], buffer: bytearray | memoryview | mmap.mmap,
                    room: int, start_offset: int, max_entries: int, *, newest: bool = False) -> BatchWalk:
        """:meth:`put_batches` over a segment file's windows [``cuts[j]``, ``cuts[j+1]``), read and
        hashed on two threads in C (``_map_pass.put_windows``: ``fd``'s position 0 is at file offset
        ``base``; ``buffer`` is cut into windows' buffers of ``room`` bytes). The same map, and the
        same answer, as :meth:`put_batches` over those bytes.

        ``newest``: in a round begun with :meth:`begin_newest_first`, where every later segment is
        mapped already: an entry keeps a later offset it holds, and the latest-offset bits follow
        the entries (the map pass's state, latest offset included, stays as that round set it)."""
        assert map_pass is not None and self.walks_batches
        if newest:
            assert self._mapped_from == start_offset and self._latest_bits, "begin_newest_first first"
        else:
            self._forget_pass()
        consumed, stop, entries, latest, records, lookups, probes, batches = map_pass.put_windows(
            fd, base, cuts, buffer, room, self._table, self._k0, self._k1, start_offset, max_entries,
            self._entries, self._latest_offset, self._latest_bits if newest else _NO_BITS)
        self._walked(entries, self._latest_offset if newest else latest, lookups, probes)
        return BatchWalk(consumed, WalkStop(stop), records, batches)

    def hash_batches(self, data: bytes | memoryview, start_offset: int, position: int = 0) -> HashedChunk:
        """The hashing half of :meth:`put_batches`, which never touches the table (so it may run on
        another thread while this one puts): the hashes of the keyed records with offset >=
        ``start_offset`` in the plain batches at the start of ``data``."""
        assert compact_native is not None and self.walks_batches
        consumed, stop, hashed, batches = compact_native.offset_map_hash_batches(
            data, position, self._k0, self._k1, start_offset)
        return HashedChunk(consumed, WalkStop(stop), hashed, batches)

    def put_hashes(self, chunk: HashedChunk, start_offset: int, max_entries: int) -> BatchWalk:
        """Put what :meth:`hash_batches` gave: the same map, and the same answer, as
        :meth:`put_batches` over the same bytes."""
        assert compact_native is not None and self.walks_batches
        self._forget_pass()
        consumed, full, entries, latest, records, lookups, probes, done = (
            compact_native.offset_map_put_hashes(chunk.hashed, chunk.batches, self._table, start_offset,
                                                 max_entries, self._entries, self._latest_offset))
        self._walked(entries, latest, lookups, probes)
        stop = WalkStop.FULL if full else chunk.stop if consumed == chunk.consumed else WalkStop.END
        return BatchWalk(consumed, stop, records, chunk.batches[:done * ENTRY_SIZE])

    def filter_batches(self, data: bytes | memoryview, current_time: int, delete_retention_ms: int,
                       protected_offsets: array[int], chunk_bytes: int, chunk_size: int,
                       directory: bytes | bytearray = b"", position: int = 0) -> FilteredChunk:
        """The cleaning pass (``Cleaner._filter_batch``) over the plain batches at the start of
        ``data``, except those whose last offset is in ``protected_offsets`` (sorted: the last data
        batches of active producers and the round's last batch, whose rules the Python path holds);
        stops before a batch that would take a chunk of ``chunk_bytes`` past ``chunk_size``. See
        :meth:`end_map_pass` for what it skips after one. Batches that ``directory`` (the segment's
        :class:`BatchDirectory` entries; ``data`` starting at file position ``position``) shows
        keeping nothing are dropped as :meth:`skip_superseded` drops them, whatever their codec."""
        assert compact_native is not None and self.walks_batches
        consumed, stop, out, max_offset, max_ts, shallow, counts = compact_native.offset_map_filter_batches(
            data, self._table, self._k0, self._k1, self._latest_offset, current_time,
            delete_retention_ms, protected_offsets, chunk_bytes, chunk_size, self._mapped_from,
            self._latest_bits, directory, position)
        return FilteredChunk(consumed, WalkStop(stop), out, max_offset, max_ts, shallow, *counts)

    def skip_superseded(self, directory: bytes | bytearray, position: int, protected_offsets: array[int],
                        chunk_bytes: int, chunk_size: int, chunk_empty: bool) -> SkippedRun:
        """Pass over the batches from file position ``position`` that the map pass recorded in
        ``directory`` (a segment's :class:`BatchDirectory` entries) and that keep no record: no key's
        latest offset among theirs (by the bits of :meth:`end_map_pass`; without them, nothing is
        skipped) and not a batch whose header must stay (``protected_offsets``). Their records are
        dropped, as :meth:`filter_batches` would drop them, without being read; it stops before a
        batch that would take a chunk of ``chunk_bytes`` past ``chunk_size`` -- unless the chunk
        holds no cleaned bytes (``chunk_empty``): then a new chunk starts there."""
        assert compact_native is not None and self.walks_batches
        consumed, stop, records, superseded, keyless, in_chunk = compact_native.offset_map_skip_superseded(
            directory, position, self._mapped_from, self._latest_offset, self._latest_bits,
            protected_offsets, chunk_bytes, chunk_size, chunk_empty)
        return SkippedRun(consumed, WalkStop(stop), records, superseded, keyless, in_chunk)

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self._slots}, size={self._entries}, latest_offset={self._latest_offset})"
