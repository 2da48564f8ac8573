"""Value types and constants shared by every record format (Kafka's RecordBatch/Records constants)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from kafkalog.errors import UnsupportedCompressionTypeError

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
            raise UnsupportedCompressionTypeError(f"Unknown compression type id: {codec_id}") from None

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
