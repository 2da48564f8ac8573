"""kafkalog.records: Kafka's record formats, bytes <-> objects, no I/O.

``validator.py`` (LogValidator, another engineer's module) is deliberately not imported here yet;
import it as ``kafkalog.records.validator`` until it is added to these re-exports.
"""

from kafkalog.records.batch import RecordBatch
from kafkalog.records.compression import compress, decompress
from kafkalog.records.control import EndTransactionMarker, control_record_key, parse_control_record_type
from kafkalog.records.legacy import LegacyMessage
from kafkalog.records.memory import MemoryRecords, MemoryRecordsBuilder, RecordsInfo, iter_batches
from kafkalog.records.types import (
    CURRENT_MAGIC,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    MAX_HEADER_SIZE,
    MIN_RECORD_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    ControlRecordType,
    Header,
    Record,
    RecordColumns,
    SimpleRecord,
    TimestampType,
)

__all__ = [
    "CURRENT_MAGIC",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V0",
    "MAGIC_V1",
    "MAGIC_V2",
    "MAX_HEADER_SIZE",
    "MIN_RECORD_SIZE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "CompressionType",
    "ControlRecordType",
    "EndTransactionMarker",
    "Header",
    "LegacyMessage",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "RecordsInfo",
    "SimpleRecord",
    "TimestampType",
    "compress",
    "control_record_key",
    "decompress",
    "iter_batches",
    "parse_control_record_type",
]
