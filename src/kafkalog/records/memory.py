"""Record sets in memory: batch iteration over a buffer, ``MemoryRecords`` and its builder.

``iter_batches`` follows Kafka's file iteration (``FileLogInputStream``, spec §6.1): it stops
silently when 17 or fewer bytes remain or the last entry is incomplete, and raises
``CorruptRecordError`` for a ``size`` below 14. It never allocates by an unchecked length: each
batch is a zero-copy slice of the buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from kafkalog.clock import SYSTEM_TIME
from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkalog.records.batch import BytesLike, RecordBatch, _as_byte_view
from kafkalog.records.compression import compress
from kafkalog.records.control import EndTransactionMarker, control_record_key
from kafkalog.records.default_batch import (
    NULL_VARINT,
    VARINT_BYTES,
    ZERO_VARINT,
    build_batch,
    compute_attributes,
    encode_headers,
    varlong_bytes,
)
from kafkalog.records.legacy import LegacyBatchBuilder
from kafkalog.records.native import native
from kafkalog.records.types import (
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    CompressionType,
    ControlRecordType,
    Header,
    Record,
    SimpleRecord,
    TimestampType,
)

__all__ = ["MemoryRecords", "MemoryRecordsBuilder", "RecordsInfo", "iter_batches"]

_SIZE = struct.Struct(">i")


def iter_batches(
    buf: BytesLike,
    start: int = 0,
    *,
    base_position: int = 0,
    in_memory: bool = False,
) -> Iterator[RecordBatch]:
    """Shallow iteration over the log entries in ``buf`` from byte ``start``.

    Reported positions are ``base_position`` + the index in ``buf``. With ``in_memory=True`` the
    rules are those of Kafka's ``ByteBufferLogInputStream`` instead (fewer than 12 bytes left ends
    iteration; a magic outside 0..2 is a ``CorruptRecordError``).
    """
    view = _as_byte_view(buf)
    if in_memory:
        return _iter_memory_batches(view, start, base_position)
    return _iter_file_batches(view, start, base_position)


def _iter_file_batches(view: memoryview, pos: int, base_position: int) -> Iterator[RecordBatch]:
    """Kafka's file rules: iteration stops at a partial entry or when 17 or fewer bytes remain."""
    end = len(view)
    unpack_size = _SIZE.unpack_from
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        (size,) = unpack_size(view, pos + 8)
        if size < MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record size {size} at position {base_position + pos} is less than the minimum record "
                f"overhead ({MIN_RECORD_SIZE})"
            )
        total = LOG_OVERHEAD + size
        if total > end - pos:
            return
        yield RecordBatch(view[pos : pos + total], base_position + pos)
        pos += total


def _iter_memory_batches(view: memoryview, pos: int = 0, base_position: int = 0) -> Iterator[RecordBatch]:
    """Kafka's in-memory rules (``ByteBufferLogInputStream``). ``MemoryRecords`` calls this
    directly on its flat view: every append iterates its records at least twice."""
    end = len(view)
    unpack_size = _SIZE.unpack_from
    while end - pos >= LOG_OVERHEAD:
        (size,) = unpack_size(view, pos + 8)
        if size < MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record size {size} at position {base_position + pos} is less than the minimum record "
                f"overhead ({MIN_RECORD_SIZE})"
            )
        if end - pos < HEADER_SIZE_UP_TO_MAGIC:
            return
        magic = view[pos + MAGIC_OFFSET]
        if magic > MAGIC_V2:  # bytes are unsigned: a negative magic shows up as > 127
            raise CorruptRecordError(
                f"Invalid magic found in record at position {base_position + pos}: "
                f"{magic - 256 if magic > 127 else magic}"
            )
        total = LOG_OVERHEAD + size
        if total > end - pos:
            return
        # A buffer holding exactly one entry (a typical produce) is handed over without a slice.
        yield RecordBatch(view if total == end and pos == 0 else view[pos : pos + total], base_position + pos)
        pos += total


class MemoryRecords:
    """A record set held in memory (what a produce request or a fetch carries)."""

    __slots__ = ("_buf", "_valid_bytes")

    EMPTY: ClassVar[MemoryRecords]  # no records (set below the class)

    def __init__(self, buffer: BytesLike = b"") -> None:
        self._buf = _as_byte_view(buffer)
        self._valid_bytes = -1

    @classmethod
    def readable_records(cls, buffer: BytesLike) -> MemoryRecords:
        return cls(buffer)

    @property
    def buffer(self) -> memoryview:
        return self._buf

    def to_bytes(self) -> bytes:
        return bytes(self._buf)

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    def __len__(self) -> int:
        return len(self._buf)

    @property
    def valid_bytes(self) -> int:
        """Total size of the complete batches (a partial trailing batch is not counted)."""
        if self._valid_bytes < 0:
            self._valid_bytes = sum(b.size_in_bytes for b in self.batches())
        return self._valid_bytes

    def batches(self) -> Iterator[RecordBatch]:
        return _iter_memory_batches(self._buf)

    def records(self) -> Iterator[Record]:
        for batch in self.batches():
            yield from batch.records()

    def __iter__(self) -> Iterator[RecordBatch]:
        return self.batches()

    def __repr__(self) -> str:
        return f"MemoryRecords(size={len(self._buf)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryRecords) and self._buf == other._buf

    __hash__ = None  # type: ignore[assignment]

    # --- convenience constructors (Kafka's MemoryRecords.withRecords & co) -----------------------

    @classmethod
    def with_records(
        cls,
        magic: int,
        compression: CompressionType | int,
        records: Iterable[SimpleRecord],
        base_offset: int = 0,
        *,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time: int = NO_TIMESTAMP,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        compression_level: int | None = None,
    ) -> MemoryRecords:
        """One batch holding ``records`` at consecutive offsets from ``base_offset``."""
        if timestamp_type is TimestampType.LOG_APPEND_TIME and log_append_time == NO_TIMESTAMP:
            log_append_time = SYSTEM_TIME.milliseconds()
        builder = MemoryRecordsBuilder(
            magic,
            compression,
            timestamp_type,
            base_offset,
            log_append_time,
            producer_id,
            producer_epoch,
            base_sequence,
            is_transactional,
            False,
            partition_leader_epoch,
            compression_level,
        )
        for r in records:
            builder.append(r.timestamp, r.key, r.value, r.headers)
        return builder.build()

    @classmethod
    def with_end_transaction_marker(
        cls,
        initial_offset: int,
        timestamp: int,
        partition_leader_epoch: int,
        producer_id: int,
        producer_epoch: int,
        marker: EndTransactionMarker,
    ) -> MemoryRecords:
        """A transactional control batch with one COMMIT/ABORT record (Kafka's
        ``MemoryRecords.withEndTransactionMarker``)."""
        builder = MemoryRecordsBuilder(
            MAGIC_V2,
            CompressionType.NONE,
            TimestampType.CREATE_TIME,
            initial_offset,
            timestamp,
            producer_id,
            producer_epoch,
            NO_SEQUENCE,
            True,
            True,
            partition_leader_epoch,
        )
        builder.append_end_txn_marker(timestamp, marker)
        return builder.build()


MemoryRecords.EMPTY = MemoryRecords(b"")


@dataclass(frozen=True, slots=True)
class RecordsInfo:
    """Kafka's ``MemoryRecordsBuilder.RecordsInfo``."""

    max_timestamp: int
    shallow_offset_of_max_timestamp: int


class MemoryRecordsBuilder:
    """Builds one batch (v2) or message set (v0/v1) exactly as Kafka's ``MemoryRecordsBuilder``.

    Misuse (offsets not increasing, negative timestamps other than -1, headers or producer state
    with magic < 2, zstd with magic < 2, control records in a data batch) raises a kafkalog error
    before anything is written. ``MemoryRecordsBuilder(2, ...)`` returns an instance of a private
    subclass whose ``append`` is the inlined v2 encoder.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_built",
        "_compression",
        "_compression_level",
        "_delete_horizon_ms",
        "_is_control",
        "_is_transactional",
        "_last_offset",
        "_legacy",
        "_log_append_time",
        "_magic",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_timestamp_type",
    )

    def __new__(cls, magic: int, *args: object, **kwargs: object) -> MemoryRecordsBuilder:
        if cls is MemoryRecordsBuilder and magic == MAGIC_V2:
            return object.__new__(_DefaultMemoryRecordsBuilder)
        return object.__new__(cls)

    def __init__(
        self,
        magic: int,
        compression: CompressionType | int,
        timestamp_type: TimestampType,
        base_offset: int,
        log_append_time: int = NO_TIMESTAMP,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        compression_level: int | None = None,
        delete_horizon_ms: int = NO_TIMESTAMP,
    ) -> None:
        if magic not in (MAGIC_V0, MAGIC_V1, MAGIC_V2):
            raise InvalidRecordError(f"Unsupported magic {magic}")
        codec = CompressionType.for_id(int(compression))
        if codec is CompressionType.ZSTD and magic < MAGIC_V2:
            raise UnsupportedCompressionTypeError(f"zstd compression is not supported for magic {magic}")
        timestamp_type = TimestampType(timestamp_type)
        if magic > MAGIC_V0 and timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise InvalidRecordError("TimestampType must be set for magic >= 1")
        if magic < MAGIC_V2:
            if is_transactional:
                raise UnsupportedForMessageFormatError(
                    f"Transactional records are not supported for magic {magic}"
                )
            if is_control:
                raise UnsupportedForMessageFormatError(f"Control records are not supported for magic {magic}")
            if delete_horizon_ms != NO_TIMESTAMP:
                raise UnsupportedForMessageFormatError(f"A delete horizon is not supported for magic {magic}")
        self._magic = magic
        # KIP-534: a cleaned v2 batch holding tombstones or an empty transaction's marker carries
        # the time they may be removed as its baseTimestamp, flagged by attribute bit 6.
        self._delete_horizon_ms = delete_horizon_ms
        self._compression = codec
        self._compression_level = compression_level
        self._timestamp_type = timestamp_type
        self._base_offset = base_offset
        self._log_append_time = log_append_time
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._is_control = is_control
        self._partition_leader_epoch = partition_leader_epoch
        self._last_offset: int | None = None
        self._built: MemoryRecords | None = None
        self._legacy: LegacyBatchBuilder | None = None
        if magic < MAGIC_V2:
            self._legacy = LegacyBatchBuilder(
                magic, codec, timestamp_type, base_offset, log_append_time, compression_level
            )

    # --- state ----------------------------------------------------------------------------------

    @property
    def magic(self) -> int:
        return self._magic

    @property
    def compression_type(self) -> CompressionType:
        return self._compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self._timestamp_type

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def num_records(self) -> int:
        assert self._legacy is not None
        return self._legacy.count

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    @property
    def max_timestamp(self) -> int:
        """Max record timestamp so far (-1 if none; always -1 for magic 0)."""
        assert self._legacy is not None
        return self._legacy.max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        assert self._legacy is not None
        return self._legacy.offset_of_max_timestamp

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    @property
    def is_control_batch(self) -> bool:
        return self._is_control

    @property
    def uncompressed_records_size_in_bytes(self) -> int:
        assert self._legacy is not None
        return self._legacy.uncompressed_records_size

    def is_closed(self) -> bool:
        return self._built is not None

    def info(self) -> RecordsInfo:
        """Max timestamp and the shallow offset to index it at (Kafka's ``info()``)."""
        last = self.last_offset
        last = -1 if last is None else last
        batch_like = self._compression is not CompressionType.NONE or self._magic >= MAGIC_V2
        if self._timestamp_type is TimestampType.LOG_APPEND_TIME:
            return RecordsInfo(self._log_append_time, last if batch_like else self._base_offset)
        max_ts = self.max_timestamp
        if max_ts == NO_TIMESTAMP:
            return RecordsInfo(NO_TIMESTAMP, last)
        return RecordsInfo(max_ts, last if batch_like else self.offset_of_max_timestamp)

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        if self._built is not None:
            raise InvalidRecordError("Trying to set producer state of an already closed batch")
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional

    def override_last_offset(self, last_offset: int) -> None:
        if self._built is not None:
            raise InvalidRecordError("Cannot override the last offset after the records have been built")
        self._last_offset = last_offset

    # --- appends --------------------------------------------------------------------------------

    def _next_offset(self) -> int:
        last = self.last_offset
        return self._base_offset if last is None else last + 1

    def _check_append(self, offset: int, is_control_record: bool, timestamp: int) -> None:
        if self._built is not None:
            raise InvalidRecordError("Tried to append a record, but MemoryRecordsBuilder is closed")
        if is_control_record != self._is_control:
            raise InvalidRecordError("Control records can only be appended to control batches")
        last = self.last_offset
        if last is not None and offset <= last:
            raise InvalidRecordError(
                f"Illegal offset {offset} following previous offset {last} "
                "(Offsets must increase monotonically)."
            )
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise InvalidRecordError(f"Invalid negative timestamp {timestamp}")
        if offset - self._base_offset > 0x7FFFFFFF:
            raise InvalidRecordError(
                f"Maximum offset delta exceeded, base offset: {self._base_offset}, last offset: {offset}"
            )

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] = (),
    ) -> int | None:
        """Append at the next offset. Returns the message CRC for magic 0/1, None for v2."""
        return self.append_with_offset(self._next_offset(), timestamp, key, value, headers)

    def append_with_offset(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] = (),
    ) -> int | None:
        self._check_append(offset, False, timestamp)
        if headers:
            raise UnsupportedForMessageFormatError(f"Magic v{self._magic} does not support record headers")
        assert self._legacy is not None
        crc = self._legacy.append(offset, timestamp, key, value)
        self._last_offset = offset
        return crc

    def append_record(self, record: SimpleRecord) -> int | None:
        return self.append(record.timestamp, record.key, record.value, record.headers)

    def append_retained(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] = (),
    ) -> None:
        """Kafka's ``append(Record)``: a record copied from another batch at its own offset, a control
        record when this is a control batch (the log cleaner rebuilds batches this way)."""
        self.append_with_offset(offset, timestamp, key, value, headers)

    def append_many(
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        headers: Sequence[Iterable[Header] | None] | None = None,
    ) -> None:
        """Append ``len(timestamps)`` records at the next offsets: record i is
        ``(timestamps[i], keys[i], values[i], headers[i])`` (``headers=None``: none at all).

        Exactly what as many ``append`` calls do: the same bytes, the same builder state, and on a
        bad record the same error with the records before it appended. For magic 2 the records
        are encoded in one call into the C extension when it is built (``records.native``); for
        magic 0/1, and without the extension, this is a loop of ``append``. The sequences must
        have the same length (``ValueError`` otherwise, before anything is appended).
        """
        self._append_loop(0, *_sequences(timestamps, keys, values, headers))

    def _append_loop(
        self,
        start: int,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        headers: Sequence[Iterable[Header] | None] | None,
    ) -> None:
        append = self.append
        if headers is None:
            for i in range(start, len(timestamps)):
                append(timestamps[i], keys[i], values[i])
        else:
            for i in range(start, len(timestamps)):
                append(timestamps[i], keys[i], values[i], headers[i] or ())

    def append_control_record(
        self, timestamp: int, control_type: ControlRecordType, value: bytes | None
    ) -> None:
        raise UnsupportedForMessageFormatError(f"Control records are not supported for magic {self._magic}")

    def append_end_txn_marker(self, timestamp: int, marker: EndTransactionMarker) -> None:
        if self._producer_id == NO_PRODUCER_ID:
            raise InvalidRecordError("End transaction marker requires a valid producerId")
        if not self._is_transactional:
            raise InvalidRecordError(
                "End transaction marker depends on batch transactional flag being enabled"
            )
        self.append_control_record(timestamp, marker.control_type, marker.serialize_value())

    # --- build ----------------------------------------------------------------------------------

    def _validate_producer_state(self) -> None:
        if self._is_transactional and self._producer_id == NO_PRODUCER_ID:
            raise InvalidRecordError("Cannot write transactional messages without a valid producer ID")
        if self._producer_id != NO_PRODUCER_ID:
            if self._producer_epoch == NO_PRODUCER_EPOCH:
                raise InvalidRecordError("Invalid negative producer epoch")
            if self._base_sequence < 0 and not self._is_control:
                raise InvalidRecordError("Invalid negative sequence number used")
            if self._magic < MAGIC_V2:
                raise UnsupportedForMessageFormatError(
                    f"Idempotent messages are not supported for magic {self._magic}"
                )

    def _build_bytes(self) -> bytes:
        assert self._legacy is not None
        return self._legacy.build(self._last_offset)

    def build(self) -> MemoryRecords:
        """The finished record set (empty when nothing was appended). Idempotent."""
        if self._built is not None:
            return self._built
        self._validate_producer_state()
        self._built = MemoryRecords(self._build_bytes() if self.num_records else b"")
        return self._built

    def close(self) -> None:
        self.build()


# append_many's arguments: timestamps, keys, values, headers (per record, or None for none at all).
_Columns = tuple[
    Sequence[int], Sequence[bytes | None], Sequence[bytes | None], Sequence[Iterable[Header] | None] | None
]


def _sequences(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Iterable[Header] | None] | None,
) -> _Columns:
    """``append_many``'s arguments as indexable sequences of one length (iterators are read once)."""
    ts = timestamps if isinstance(timestamps, (list, tuple)) else list(timestamps)
    ks = keys if isinstance(keys, (list, tuple)) else list(keys)
    vs = values if isinstance(values, (list, tuple)) else list(values)
    hs = headers if headers is None or isinstance(headers, (list, tuple)) else list(headers)
    n = len(ts)
    if len(ks) != n or len(vs) != n or (hs is not None and len(hs) != n):
        lengths = ", ".join(str(len(a)) for a in (ts, ks, vs, hs) if a is not None)
        raise ValueError(f"append_many: timestamps, keys, values and headers differ in length ({lengths})")
    return ts, ks, vs, hs


_MAX_DELTA = 0x7FFFFFFF


class _DefaultMemoryRecordsBuilder(MemoryRecordsBuilder):
    """Magic v2: records are encoded straight into a list of byte strings (joined once in build)."""

    __slots__ = ("_count", "_first_ts", "_max_ts", "_next", "_offset_of_max_ts", "_open", "_parts")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._parts: list[bytes] = []
        self._count = 0
        self._next = self._base_offset
        horizon = self._delete_horizon_ms
        self._first_ts: int | None = None if horizon == NO_TIMESTAMP else horizon
        self._max_ts = NO_TIMESTAMP
        self._offset_of_max_ts = -1
        # True while plain data records may be appended (cleared by build; never set for control).
        self._open = not self._is_control

    @property
    def num_records(self) -> int:
        return self._count

    @property
    def last_offset(self) -> int | None:
        if self._last_offset is not None:  # override_last_offset
            return self._last_offset
        return self._next - 1 if self._count else None

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_ts

    @property
    def uncompressed_records_size_in_bytes(self) -> int:
        return sum(map(len, self._parts))

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] = (),
    ) -> None:
        if not self._open:
            self._check_append(self._next, False, timestamp)  # raises the right error
        if timestamp < -1:
            raise InvalidRecordError(f"Invalid negative timestamp {timestamp}")
        offset = self._next
        first_ts = self._first_ts
        if first_ts is None:
            first_ts = self._first_ts = timestamp
        vb = VARINT_BYTES
        d = timestamp - first_ts
        z = (d << 1) ^ (d >> 63)
        ts_b = vb[z] if 0 <= z < 16384 else varlong_bytes(d)
        d = offset - self._base_offset
        z = d << 1
        if 0 <= z < 16384:
            od_b = vb[z]
        else:
            if d > _MAX_DELTA:
                raise InvalidRecordError(
                    f"Maximum offset delta exceeded, base offset: {self._base_offset}, last offset: {offset}"
                )
            od_b = varlong_bytes(d)
        if key is None:
            k_b = NULL_VARINT
            klen = 0
            key = b""
        else:
            klen = len(key)
            z = klen << 1
            k_b = vb[z] if z < 16384 else varlong_bytes(klen)
        if value is None:
            v_b = NULL_VARINT
            vlen = 0
            value = b""
        else:
            vlen = len(value)
            z = vlen << 1
            v_b = vb[z] if z < 16384 else varlong_bytes(vlen)
        h_b = encode_headers(headers) if headers else ZERO_VARINT
        body = 1 + len(ts_b) + len(od_b) + len(k_b) + klen + len(v_b) + vlen + len(h_b)
        z = body << 1
        self._parts += (vb[z] if z < 16384 else varlong_bytes(body), ZERO_VARINT, ts_b, od_b, k_b, key, v_b,
                        value, h_b)
        if timestamp > self._max_ts:
            self._max_ts = timestamp
            self._offset_of_max_ts = offset
        self._next = offset + 1
        self._count += 1

    def append_many(
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        headers: Sequence[Iterable[Header] | None] | None = None,
    ) -> None:
        timestamps, keys, values, headers = _sequences(timestamps, keys, values, headers)
        n = len(timestamps)
        start = 0
        if native is not None and self._open and n:
            try:
                encoded = self._encode(timestamps, keys, values, headers)
            except ValueError as e:
                # The C encoder refuses a record it cannot vouch for (ValueError(message, index)):
                # it encodes the ones before it, the Python append takes that one and the rest.
                if len(e.args) != 2 or not isinstance(e.args[1], int):
                    raise
                start = e.args[1]
            else:
                self._add_encoded(encoded, timestamps, n)
                return
            if start:
                prefix = self._encode(timestamps[:start], keys[:start], values[:start],
                                      None if headers is None else headers[:start])
                self._add_encoded(prefix, timestamps, start)
        self._append_loop(start, timestamps, keys, values, headers)

    def _encode(
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        headers: Sequence[Iterable[Header] | None] | None,
    ) -> tuple[bytes, int, int]:
        assert native is not None
        first_delta = self._next - self._base_offset
        encoded: tuple[bytes, int, int] = native.encode_v2(timestamps, keys, values, headers,
                                                           self._first_ts, first_delta)
        return encoded

    def _add_encoded(self, encoded: tuple[bytes, int, int], timestamps: Sequence[int], count: int) -> None:
        """The builder state after ``count`` appends of the records ``encode_v2`` wrote (the first
        ``count`` of ``timestamps``), as the appends would have left it."""
        data, max_ts, index = encoded
        if self._first_ts is None:
            self._first_ts = timestamps[0]
        self._parts.append(data)
        if index >= 0 and max_ts > self._max_ts:  # append keeps the first record with the max
            self._max_ts = max_ts
            self._offset_of_max_ts = self._next + index
        self._next += count
        self._count += count

    def append_with_offset(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] = (),
    ) -> None:
        self._check_append(offset, False, timestamp)
        self._next = offset
        self.append(timestamp, key, value, headers)

    def append_retained(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[Header] = (),
    ) -> None:
        self._check_append(offset, self._is_control, timestamp)
        was_open = self._open
        self._open = True
        self._next = offset
        try:
            self.append(timestamp, key, value, headers)
        finally:
            self._open = was_open

    def append_control_record(
        self, timestamp: int, control_type: ControlRecordType, value: bytes | None
    ) -> None:
        offset = self._next
        self._check_append(offset, True, timestamp)
        self._open = True
        try:
            self.append(timestamp, control_record_key(control_type), value)
        finally:
            self._open = False

    def _build_bytes(self) -> bytes:
        records = b"".join(self._parts)
        codec = self._compression
        if codec is not CompressionType.NONE:
            records = compress(codec, records, MAGIC_V2, self._compression_level)
        last = self.last_offset
        assert last is not None and self._first_ts is not None
        ts_type = self._timestamp_type
        return build_batch(
            records,
            base_offset=self._base_offset,
            last_offset_delta=last - self._base_offset,
            attributes=compute_attributes(codec, ts_type, self._is_transactional, self._is_control)
            | (DELETE_HORIZON_FLAG_MASK if self._delete_horizon_ms != NO_TIMESTAMP else 0),
            base_timestamp=self._first_ts,
            max_timestamp=self._log_append_time if ts_type is TimestampType.LOG_APPEND_TIME else self._max_ts,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            partition_leader_epoch=self._partition_leader_epoch,
            count=self._count,
        )

    def build(self) -> MemoryRecords:
        self._open = False
        return super().build()
