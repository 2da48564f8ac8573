"""Value types and constants shared by every record format (Kafka's RecordBatch/Records constants)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from kafkalog.errors import UnknownCompressionTypeError, UnsupportedCompressionTypeError

# Every .log entry starts with offset i64 + size i32 (Records.LOG_OVERHEAD).
LOG_OVERHEAD = 12
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
# The magic byte sits at the same place in every format, so 17 bytes are enough to dispatch.
MAGIC_OFFSET = 16
HEADER_SIZE_UP_TO_MAGIC = 17
# Smallest legal `size` field: a v0 message with null key and value (LegacyRecord.RECORD_OVERHEAD_V0).
MIN_RECORD_SIZE = 14
RECORD_BATCH_OVERHEAD = 61  # v2 batch header

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2
CURRENT_MAGIC = MAGIC_V2

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class CompressionType(IntEnum):
    """Codec ids as stored in attribute bits 0-2; ``str()`` gives Kafka's config name."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def for_id(cls, codec_id: int) -> CompressionType:
        try:
            return cls(codec_id)
        except ValueError:
            raise UnknownCompressionTypeError(f"Unknown compression type id: {codec_id}") from None

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        key = name.strip().lower()
        if key in ("none", "uncompressed"):
            return cls.NONE
        try:
            return cls[key.upper()]
        except KeyError:
            raise UnsupportedCompressionTypeError(f"Unknown compression name: {name!r}") from None


class TimestampType(IntEnum):
    """Kafka's TimestampType; ``str()`` gives the name Kafka prints (``CreateTime`` ...)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    def __str__(self) -> str:
        return _TS_NAMES[self]

    @classmethod
    def for_name(cls, name: str) -> TimestampType:
        for member, text in _TS_NAMES.items():
            if text == name:
                return member
        raise ValueError(f"Unknown timestamp type {name!r}")


_TS_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class ControlRecordType(IntEnum):
    """Type field of a control record's key."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: the key is a UTF-8 string, the value bytes or None."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it, with its absolute offset and effective timestamp.

    ``timestamp``/``timestamp_type`` are already resolved the way Kafka reports them
    (LogAppendTime batches report the batch max timestamp for every record).
    """

    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE
    # Legacy messages carry their own CRC-32; v2 records have none (the batch has one).
    checksum: int | None = None


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to be written: what a producer supplies, before offsets are assigned."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[Header, ...] = ()


# --- v2 record batch header layout (DefaultRecordBatch), offsets from the start of the entry ------
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # CRC-32C covers attributes .. end of batch
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = RECORD_BATCH_OVERHEAD

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# A v2 record's fixed cost without key/value/headers: length 5 + attributes 1 + ts delta 10 + offset delta 5.
MAX_RECORD_OVERHEAD = 21

# --- legacy (magic 0/1) message layout, offsets from the start of the entry ------------------------
LEGACY_CRC_OFFSET = 12
LEGACY_ATTRIBUTES_OFFSET = 17
LEGACY_TIMESTAMP_OFFSET = 18  # v1 only
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
RECORD_OVERHEAD_V1 = 22  # v0 + timestamp 8
LEGACY_HEADER_SIZE_V0 = 6  # crc + magic + attributes
LEGACY_HEADER_SIZE_V1 = 14

MAX_INT32 = 0x7FFFFFFF

# How many leading bytes of an entry hold every header field of any format: a reader that only wants
# shallow fields (offsets, timestamps, producer state) needs to fetch no more than this.
MAX_HEADER_SIZE = RECORD_BATCH_OVERHEAD


def legacy_record_overhead(magic: int) -> int:
    """Size of a legacy message without key and value bytes (``LegacyRecord.recordOverhead``)."""
    return RECORD_OVERHEAD_V0 if magic == MAGIC_V0 else RECORD_OVERHEAD_V1


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap to 0 after Int.MAX."""
    if sequence > MAX_INT32 - increment:
        return increment - (MAX_INT32 - sequence) - 1
    return sequence + increment


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Every record of one batch as parallel lists (the columnar deep-decode result).

    ``timestamps`` are already resolved like ``Record.timestamp`` (LogAppendTime batches report the
    batch max timestamp); ``timestamp_type`` applies to every record of the batch unless
    ``timestamp_types`` is set (only for a legacy wrapper whose inner messages mix magic 0 and 1).
    ``headers[i]`` is a tuple of ``Header`` (the same empty tuple object when a record has none).
    ``checksums`` is only filled for legacy messages (empty list for v2).
    """

    offsets: list[int]
    timestamps: list[int]
    timestamp_type: TimestampType
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[Header, ...]]
    sequences: list[int]
    checksums: list[int]
    timestamp_types: list[TimestampType] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def to_records(self) -> list[Record]:
        """The same data as ``Record`` objects."""
        n = len(self.offsets)
        checksums: list[int] | list[None] = self.checksums or [None] * n
        ts_types = self.timestamp_types or [self.timestamp_type] * n
        # Filling the slots directly is 2-3x faster than the frozen dataclass __init__ (which goes
        # through object.__setattr__ per field); the result is an ordinary, equal Record.
        new = object.__new__
        cls = Record
        set_o, set_t, set_tt, set_k, set_v, set_h, set_s, set_c = _RECORD_SLOT_SETTERS
        out: list[Record] = []
        add = out.append
        for o, t, tt, k, v, h, sq, c in zip(
            self.offsets, self.timestamps, ts_types, self.keys, self.values, self.headers, self.sequences,
            checksums, strict=True,
        ):
            r = new(cls)
            set_o(r, o)
            set_t(r, t)
            set_tt(r, tt)
            set_k(r, k)
            set_v(r, v)
            set_h(r, h)
            set_s(r, sq)
            set_c(r, c)
            add(r)
        return out


_RECORD_SLOT_SETTERS = tuple(
    getattr(Record, name).__set__
    for name in ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "sequence", "checksum")
)
assert len(_RECORD_SLOT_SETTERS) == len(Record.__slots__)
