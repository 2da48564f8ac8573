"""``RecordBatch``: a lazy, shallow view over one log entry of any magic (spec §2, §3).

One class serves both formats so that storage code never branches on the magic:

* magic 2 (``DefaultRecordBatch``): every header field is read once from the 61-byte header.
* magic 0/1 (a legacy message, possibly a compressed wrapper): the wrapper *is* the batch, as in
  Kafka's ``AbstractLegacyRecordBatch``. ``last_offset`` is the log-overhead offset;
  ``base_offset`` of a compressed wrapper needs its first inner message, so it decompresses on
  first use (and caches the result).

Constructing a view reads only the header; records are decoded (and decompressed) only by
``records()``, ``decode_columns()`` and, for legacy wrappers, ``base_offset``/``record_count``.

``RecordBatch(buffer, position)`` wants the whole entry in ``buffer`` (``buffer`` may be longer; the
view is trimmed to the entry). A reader that has only fetched the header — at least
``min(MAX_HEADER_SIZE, entry size)`` bytes — passes ``loader=``, a callable returning the whole
entry's bytes, which is called once, the first time anything beyond the header is needed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator

from crc32c import crc32c

from kafkalog.errors import CorruptRecordError, InvalidRecordError, KafkaLogError
from kafkalog.records import default_batch, legacy
from kafkalog.records.types import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CRC_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    MAX_HEADER_SIZE,
    MAX_TIMESTAMP_OFFSET,
    MIN_RECORD_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    CompressionType,
    Record,
    RecordColumns,
    TimestampType,
    increment_sequence,
    legacy_record_overhead,
)

__all__ = ["BytesLike", "RecordBatch"]

BytesLike = bytes | bytearray | memoryview

_PREFIX = struct.Struct(">qi")  # offset, size
# v2 header after the 12-byte log overhead: epoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount.
_V2_HEADER = struct.Struct(">ibIhiqqqhii")
_LEGACY_HEADER = struct.Struct(">Ibb")  # crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")

_TS_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)


def _as_byte_view(buffer: BytesLike) -> memoryview:
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class RecordBatch:
    """A shallow view over one log entry (v2 batch or legacy message) — see the module docstring."""

    __slots__ = (
        "_attrs",
        "_base_ts",
        "_buf",
        "_count",
        "_crc",
        "_epoch",
        "_inner",
        "_last_delta",
        "_loader",
        "_magic",
        "_max_ts",
        "_offset",
        "_pid",
        "_pos",
        "_producer_epoch",
        "_seq",
        "_size",
    )
    # The header fields, as unpacked from the entry (declared for the type checker; slots hold them).
    _attrs: int
    _base_ts: int
    _buf: memoryview
    _count: int | None  # None: a v2 entry too short to hold a header
    _crc: int
    _epoch: int
    _inner: tuple[int, int] | None
    _last_delta: int
    _loader: Callable[[], BytesLike] | None
    _magic: int
    _max_ts: int
    _offset: int
    _pid: int
    _pos: int
    _producer_epoch: int
    _seq: int
    _size: int

    def __init__(
        self,
        buffer: BytesLike,
        position: int = 0,
        *,
        loader: Callable[[], BytesLike] | None = None,
    ) -> None:
        view = _as_byte_view(buffer)
        have = len(view)
        self._pos = position
        if have < HEADER_SIZE_UP_TO_MAGIC:
            raise CorruptRecordError(
                f"Log entry at position {position} is truncated: {have} bytes, "
                f"{HEADER_SIZE_UP_TO_MAGIC} needed to read its header"
            )
        offset, size = _PREFIX.unpack_from(view, 0)
        if size < MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record size {size} at position {position} (offset {offset}) is less than the "
                f"minimum record overhead ({MIN_RECORD_SIZE})"
            )
        total = LOG_OVERHEAD + size
        if have < total:
            if loader is None:
                raise CorruptRecordError(
                    f"Log entry at position {position} (offset {offset}) is truncated: "
                    f"{have} of {total} bytes present"
                )
        elif have > total:
            view = view[:total]
        self._buf = view
        self._loader = loader if have < total else None
        self._offset = offset
        self._size = total
        magic = view[MAGIC_OFFSET]
        if magic > 127:
            magic -= 256
        self._magic = magic
        # (base offset, record count) of a legacy compressed wrapper, once decompressed
        self._inner = None
        if magic >= MAGIC_V2:
            if total < RECORD_BATCH_OVERHEAD or len(view) < RECORD_BATCH_OVERHEAD:
                if total >= RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(
                        f"Record batch at position {position} (offset {offset}): only {len(view)} header "
                        f"bytes supplied, {RECORD_BATCH_OVERHEAD} needed"
                    )
                # Kafka still iterates over such an entry; it is rejected by is_valid/ensure_valid and
                # by any attempt to read a header field.
                self._count = None
                return
            (
                self._epoch,
                _,
                self._crc,
                self._attrs,
                self._last_delta,
                self._base_ts,
                self._max_ts,
                self._pid,
                self._producer_epoch,
                self._seq,
                self._count,
            ) = _V2_HEADER.unpack_from(view, PARTITION_LEADER_EPOCH_OFFSET)
        else:
            if len(view) < min(total, MAX_HEADER_SIZE):
                raise CorruptRecordError(
                    f"Log entry at position {position} (offset {offset}): only {len(view)} header bytes "
                    f"supplied, at least {min(total, MAX_HEADER_SIZE)} needed"
                )
            self._crc, _, self._attrs = _LEGACY_HEADER.unpack_from(view, LEGACY_CRC_OFFSET)
            if magic == MAGIC_V1:
                # size >= 14 guarantees 26 bytes, enough for the timestamp even when the message
                # is too short to be a valid v1 message (is_valid then says so).
                self._max_ts = _I64.unpack_from(view, LEGACY_TIMESTAMP_OFFSET)[0]
            else:
                self._max_ts = NO_TIMESTAMP
            self._count = 1

    # --- construction helpers -------------------------------------------------------------------

    def _full(self) -> memoryview:
        """The whole entry, loading it through the loader if only the header was given."""
        if self._loader is not None:
            data = _as_byte_view(self._loader())
            if len(data) < self._size:
                raise CorruptRecordError(
                    f"Log entry at position {self._pos} (offset {self._offset}) is truncated: "
                    f"{len(data)} of {self._size} bytes could be read"
                )
            self._buf = data[: self._size]
            self._loader = None
        return self._buf

    def _v2(self) -> int:
        """The record count of a v2 batch whose header could be read; CorruptRecordError otherwise."""
        count = self._count
        if count is None:
            raise CorruptRecordError(
                f"Record batch at position {self._pos} (offset {self._offset}) is corrupt: its size "
                f"{self._size} is smaller than the minimum allowed overhead {RECORD_BATCH_OVERHEAD}"
            )
        return count

    # --- basic shape ------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Where the entry starts in its buffer or file."""
        return self._pos

    @property
    def size_in_bytes(self) -> int:
        """Entry size including the 12-byte log overhead."""
        return self._size

    @property
    def magic(self) -> int:
        return self._magic

    @property
    def offset(self) -> int:
        """The raw offset of the log overhead (v2: base offset; legacy: last offset)."""
        return self._offset

    @property
    def buffer(self) -> memoryview:
        """Exactly the entry's bytes (no copy)."""
        return self._full()

    def __len__(self) -> int:
        return self._size

    # --- offsets ----------------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        if self._magic >= MAGIC_V2:
            return self._offset
        if self._attrs & COMPRESSION_CODEC_MASK == 0:
            return self._offset
        return self._legacy_inner()[0]

    @property
    def last_offset(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._offset + self._last_delta
        return self._offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_offset_delta(self) -> int:
        """v2 only: last offset minus base offset."""
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._last_delta
        return self._offset - self.base_offset

    # --- attributes -------------------------------------------------------------------------------

    @property
    def attributes(self) -> int:
        """The attributes field as stored (v2: i16; legacy: i8)."""
        if self._magic >= MAGIC_V2:
            self._v2()
        return self._attrs

    @property
    def compression_type(self) -> CompressionType:
        return CompressionType.for_id(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def is_compressed(self) -> bool:
        return self.attributes & COMPRESSION_CODEC_MASK != 0

    @property
    def timestamp_type(self) -> TimestampType:
        if self._magic == MAGIC_V0 or self._magic < 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return _TS_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def is_transactional(self) -> bool:
        return self._magic >= MAGIC_V2 and bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return self._magic >= MAGIC_V2 and bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return self._magic >= MAGIC_V2 and bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    # --- timestamps -------------------------------------------------------------------------------

    @property
    def base_timestamp(self) -> int:
        """v2: the baseTimestamp field (first record's timestamp, or the delete horizon); legacy: the
        message timestamp."""
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._base_ts
        return self._max_ts

    @property
    def delete_horizon_ms(self) -> int:
        return self._base_ts if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def max_timestamp(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
        return self._max_ts

    # --- producer state ---------------------------------------------------------------------------

    @property
    def partition_leader_epoch(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._epoch
        return NO_PARTITION_LEADER_EPOCH

    @property
    def producer_id(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._pid
        return NO_PRODUCER_ID

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._producer_epoch
        return NO_PRODUCER_EPOCH

    @property
    def base_sequence(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._seq
        return NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        if self._magic >= MAGIC_V2:
            self._v2()
            if self._seq == NO_SEQUENCE:
                return NO_SEQUENCE
            return increment_sequence(self._seq, self._last_delta)
        return NO_SEQUENCE

    # --- counts and checksums ---------------------------------------------------------------------

    @property
    def count_or_none(self) -> int | None:
        """Kafka's ``countOrNull``: the v2 recordsCount, 1 for a plain legacy message, None for a
        legacy compressed wrapper (unknown without decompressing)."""
        if self._magic >= MAGIC_V2:
            self._v2()
            return self._count
        return None if self._attrs & COMPRESSION_CODEC_MASK else 1

    @property
    def record_count(self) -> int:
        """Number of records; decompresses a legacy compressed wrapper to count its messages."""
        n = self.count_or_none
        if n is None:
            return self._legacy_inner()[1]
        return n

    @property
    def checksum(self) -> int:
        """The stored CRC (CRC-32C for v2, CRC-32 for legacy), unsigned."""
        if self._magic >= MAGIC_V2:
            self._v2()
        return self._crc

    def compute_checksum(self) -> int:
        buf = self._full()
        if self._magic >= MAGIC_V2:
            self._v2()
            return crc32c(buf[ATTRIBUTES_OFFSET:])
        return zlib.crc32(buf[MAGIC_OFFSET:])

    def is_valid(self) -> bool:
        try:
            self.ensure_valid()
        except CorruptRecordError:
            return False
        return True

    def ensure_valid(self) -> None:
        """Raise ``CorruptRecordError`` unless the size is plausible and the stored CRC matches."""
        magic = self._magic
        where = f"at position {self._pos} (offset {self._offset})"
        if magic >= MAGIC_V2:
            if self._size < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"Record batch {where} is corrupt (the size {self._size} is smaller than the minimum "
                    f"allowed overhead {RECORD_BATCH_OVERHEAD})"
                )
            if magic > MAGIC_V2:
                raise CorruptRecordError(f"Record batch {where} has unknown magic {magic}")
        elif magic < 0:
            raise CorruptRecordError(f"Record {where} has invalid magic {magic}")
        elif self._size - LOG_OVERHEAD < legacy_record_overhead(magic):
            raise CorruptRecordError(
                f"Record {where} is corrupt (size {self._size - LOG_OVERHEAD} is less than the v{magic} "
                f"record overhead {legacy_record_overhead(magic)})"
            )
        computed = self.compute_checksum()
        if computed != self._crc:
            raise CorruptRecordError(
                f"Record {'batch ' if magic >= MAGIC_V2 else ''}{where} is corrupt "
                f"(stored crc = {self._crc}, computed crc = {computed})"
            )

    # --- deep access ------------------------------------------------------------------------------

    def _legacy_inner(self) -> tuple[int, int]:
        inner = self._inner
        if inner is None:
            columns = legacy.decode_entry(self._full(), self._pos)
            inner = self._inner = (columns.offsets[0], len(columns))
        return inner

    def decode_columns(self) -> RecordColumns:
        """Every record of the batch as parallel lists (fast path for bulk readers)."""
        magic = self._magic
        if magic == MAGIC_V2:
            count = self._v2()
            return default_batch.decode_columns(
                self._full(),
                self._pos,
                base_offset=self._offset,
                attributes=self._attrs,
                base_timestamp=self._base_ts,
                max_timestamp=self._max_ts,
                base_sequence=self._seq,
                count=count,
            )
        if magic in (MAGIC_V0, MAGIC_V1):
            if self._size - LOG_OVERHEAD < legacy_record_overhead(magic):
                raise CorruptRecordError(
                    f"Record at position {self._pos} (offset {self._offset}) is shorter "
                    f"({self._size - LOG_OVERHEAD} bytes) than the v{magic} record overhead"
                )
            columns = legacy.decode_entry(self._full(), self._pos)
            if self._inner is None:
                self._inner = (columns.offsets[0], len(columns))
            return columns
        raise CorruptRecordError(
            f"Log entry at position {self._pos} (offset {self._offset}) has unsupported magic {magic}"
        )

    def summarize(self) -> default_batch.RecordsSummary:
        """Walk and check every record of a v2 batch, keeping only what LogValidator needs
        (timestamp range, null keys, offset deltas); no object per record with the C walker."""
        if self._magic != MAGIC_V2:
            raise InvalidRecordError(f"summarize() needs a magic v2 batch, not magic {self._magic}")
        count = self._v2()
        return default_batch.summarize_records(
            self._full(),
            self._pos,
            base_offset=self._offset,
            attributes=self._attrs,
            base_timestamp=self._base_ts,
            count=count,
        )

    def records(self) -> Iterator[Record]:
        """Deep iteration. Nothing is decoded until the first record is requested."""
        yield from self.decode_columns().to_records()

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def legacy_messages(self) -> list[legacy.LegacyMessage]:
        """Legacy only: the messages as stored (the message itself, or a wrapper's inner messages
        with their own CRC, magic and attributes), for validation. Offsets are absolute."""
        if self._magic >= MAGIC_V2 or self._magic < 0:
            raise InvalidRecordError(f"Entry at position {self._pos} is not a legacy message set")
        return legacy.entry_messages(self._full(), self._pos)

    # --- in-place header updates (for the log validator; need a writable buffer) ------------------

    def _writable(self) -> memoryview:
        buf = self._full()
        if buf.readonly:
            raise KafkaLogError("RecordBatch buffer is read-only; build it over a bytearray to modify it")
        return buf

    def set_last_offset(self, offset: int) -> None:
        """Kafka's ``setLastOffset``: v2 rewrites the base offset (CRC unaffected), legacy the offset."""
        buf = self._writable()
        if self._magic >= MAGIC_V2:
            self._v2()
            base = offset - self._last_delta
            _I64.pack_into(buf, 0, base)
            self._offset = base
        else:
            _I64.pack_into(buf, 0, offset)
            self._offset = offset
            self._inner = None

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """v2 only (outside CRC coverage); ignored for legacy entries, which have no epoch."""
        if self._magic >= MAGIC_V2:
            self._v2()
            buf = self._writable()
            _I32.pack_into(buf, PARTITION_LEADER_EPOCH_OFFSET, epoch)
            self._epoch = epoch

    def set_max_timestamp(self, timestamp_type: TimestampType, max_timestamp: int) -> None:
        """Kafka's ``setMaxTimestamp``: rewrite the timestamp type bit and max timestamp and the CRC
        (skipped for v2 when nothing changes). For legacy v1 the message timestamp is rewritten; for
        v0 nothing happens."""
        if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise InvalidRecordError("Timestamp type must be CreateTime or LogAppendTime")
        if self._magic >= MAGIC_V2:
            self._v2()
            if self.timestamp_type is timestamp_type and self._max_ts == max_timestamp:
                return
            buf = self._writable()
            attrs = self._attrs & ~TIMESTAMP_TYPE_MASK
            if timestamp_type is TimestampType.LOG_APPEND_TIME:
                attrs |= TIMESTAMP_TYPE_MASK
            _I16.pack_into(buf, ATTRIBUTES_OFFSET, attrs)
            _I64.pack_into(buf, MAX_TIMESTAMP_OFFSET, max_timestamp)
            self._crc = crc32c(buf[ATTRIBUTES_OFFSET:])
            _U32.pack_into(buf, CRC_OFFSET, self._crc)
            self._attrs = attrs
            self._max_ts = max_timestamp
        elif self._magic == MAGIC_V1:
            if self._size - LOG_OVERHEAD < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(f"Record at position {self._pos} is too short for magic v1")
            if self.timestamp_type is timestamp_type and self._max_ts == max_timestamp:
                return
            buf = self._writable()
            attrs = self._attrs & ~TIMESTAMP_TYPE_MASK
            if timestamp_type is TimestampType.LOG_APPEND_TIME:
                attrs |= TIMESTAMP_TYPE_MASK
            struct.pack_into(">b", buf, LEGACY_ATTRIBUTES_OFFSET, attrs)
            _I64.pack_into(buf, LEGACY_TIMESTAMP_OFFSET, max_timestamp)
            self._crc = zlib.crc32(buf[MAGIC_OFFSET:])
            _U32.pack_into(buf, LEGACY_CRC_OFFSET, self._crc)
            self._attrs = attrs
            self._max_ts = max_timestamp
            self._inner = None

    # --- misc -------------------------------------------------------------------------------------

    def __repr__(self) -> str:
        if self._magic >= MAGIC_V2 and self._count is not None:
            return (
                f"RecordBatch(magic={self._magic}, "
                f"offsets=[{self._offset}, {self._offset + self._last_delta}], "
                f"position={self._pos}, size={self._size}, attributes={self._attrs:#x}, "
                f"count={self._count}, crc={self._crc})"
            )
        return (
            f"RecordBatch(magic={self._magic}, offset={self._offset}, position={self._pos}, "
            f"size={self._size})"
        )
