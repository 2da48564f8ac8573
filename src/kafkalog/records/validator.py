"""Kafka's append-time validation: ``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator`` (spec §9).

Two steps run on every leader append:

1. :func:`analyze_and_validate_records` looks at the shallow batches only (headers and CRCs): it
   finds the offsets, the max timestamp, the producer's codec and how many bytes are complete, and
   rejects batches that are too large, corrupt, or (from clients, v2) not based at offset 0.
   :func:`trim_invalid_bytes` then drops a partial trailing batch.
2. :func:`validate_messages_and_assign_offsets` (or :class:`LogValidator`) checks every record and
   assigns offsets from the log end offset. It picks one of Kafka's four paths:

   * uncompressed, already in the topic's magic: offsets, leader epoch and max timestamp are
     patched *in place* into a copy of the input (``assignOffsetsNonCompressed``);
   * uncompressed, other magic: records are rebuilt in the target magic
     (``convertAndAssignOffsetsNonCompressed``);
   * compressed, same codec and magic (and, for v1, inner offsets 0..n-1): only the batch or
     wrapper header is patched; the compressed payload is kept byte for byte;
   * otherwise the records are decompressed and rebuilt with the target codec and magic.

Everything is pure: the caller supplies ``now_ms`` and the offset to start from, and the caller's
buffer is never modified (in-place edits happen on a private copy).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

from crc32c import crc32c

from kafkalog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaLogError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkalog.records import default_batch
from kafkalog.records.batch import BytesLike, RecordBatch
from kafkalog.records.default_batch import RecordsSummary
from kafkalog.records.legacy import LegacyMessage
from kafkalog.records.memory import MemoryRecords, MemoryRecordsBuilder
from kafkalog.records.types import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    CompressionType,
    Header,
    TimestampType,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "UNKNOWN_OFFSET",
    "AppendOrigin",
    "LogAppendInfo",
    "LogValidator",
    "ValidationResult",
    "ValidatorConfig",
    "analyze_and_validate_records",
    "target_compression_from_config",
    "trim_invalid_bytes",
    "validate_lone_v2_batch",
    "validate_messages_and_assign_offsets",
]

LONG_MAX = (1 << 63) - 1
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # max.message.bytes default: 1 MiB + log overhead
# UnifiedLog.UnknownOffset: the first offset of a legacy append is not known without decompressing.
UNKNOWN_OFFSET = -1
# How many offsets an OffsetsOutOfOrderError message lists.
_OFFSETS_SHOWN = 10



def _java_long(value: int) -> int:
    """``value`` as Java's long arithmetic leaves it (wrapped to 64 bits): Kafka prints a timestamp
    bound computed so, e.g. now + Long.MAX_VALUE when message.timestamp.after.max.ms is unset."""
    return ((value + 2**63) % 2**64) - 2**63

class AppendOrigin(Enum):
    """Who is appending (Kafka's ``AppendOrigin``): client checks apply only to CLIENT."""

    REPLICATION = "replication"
    COORDINATOR = "coordinator"
    CLIENT = "client"


def target_compression_from_config(name: str) -> CompressionType | None:
    """Map a topic ``compression.type`` value to :attr:`ValidatorConfig.target_compression`:
    ``producer`` → None (keep the producer's codec), ``uncompressed``/``none`` → NONE, else the codec."""
    if name.strip().lower() == "producer":
        return None
    return CompressionType.for_name(name)


@dataclass(frozen=True, slots=True)
class ValidatorConfig:
    """The topic settings the validator needs (names are Kafka's topic configs).

    ``target_compression`` None means ``compression.type=producer``: the producer's codec is kept,
    at that codec's default level (Kafka ignores ``compression.*.level`` then).
    """

    target_magic: int = MAGIC_V2
    target_compression: CompressionType | None = None
    compression_level: int | None = None
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX
    compacted_topic: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # "<topic>-<partition>" for the record errors' texts, as Kafka's name the partition
    topic_partition: str | None = None

    def __post_init__(self) -> None:
        if self.target_magic not in (MAGIC_V0, MAGIC_V1, MAGIC_V2):
            raise InvalidConfigError(f"Unsupported target magic {self.target_magic}; must be 0, 1 or 2")
        if self.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise InvalidConfigError("message.timestamp.type must be CreateTime or LogAppendTime")


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append learned about its records (Kafka's ``LogAppendInfo``).

    After :func:`analyze_and_validate_records` the offsets are the producer's; the log replaces
    them with the assigned ones through :meth:`with_validation_result`.
    """

    first_offset: int  # UNKNOWN_OFFSET for magic < 2 before offsets are assigned
    last_offset: int
    last_leader_epoch: int | None
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    source_compression: CompressionType
    valid_bytes: int
    last_offset_of_first_batch: int
    shallow_count: int
    offsets_monotonic: bool
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = -1

    @property
    def first_or_last_offset_of_first_batch(self) -> int:
        """The first offset if known, else the last offset of the first batch (legacy appends)."""
        return self.first_offset if self.first_offset >= 0 else self.last_offset_of_first_batch

    @property
    def num_messages(self) -> int:
        """Records covered by [first_offset, last_offset] (0 when the first offset is unknown)."""
        if self.first_offset < 0 or self.last_offset < self.first_offset:
            return 0
        return self.last_offset - self.first_offset + 1

    def with_validation_result(
        self, result: ValidationResult, *, first_offset: int, timestamp_type: TimestampType,
        log_start_offset: int | None = None,
    ) -> LogAppendInfo:
        """The info after offset assignment (what ``UnifiedLog.append`` stores back): offsets from
        ``first_offset`` to ``result.next_offset - 1``, the validator's max timestamp, and the append
        time when the topic uses LogAppendTime (and ``log_start_offset`` if given)."""
        # The constructor, not dataclasses.replace: this runs on every append.
        lat = self.log_append_time
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            lat = result.log_append_time_ms
        return LogAppendInfo(
            first_offset,
            result.next_offset - 1,
            self.last_leader_epoch,
            result.max_timestamp,
            result.shallow_offset_of_max_timestamp,
            self.source_compression,
            self.valid_bytes,
            self.last_offset_of_first_batch,
            self.shallow_count,
            self.offsets_monotonic,
            lat,
            self.log_start_offset if log_start_offset is None else log_start_offset,
        )


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Kafka's ``LogValidator.ValidationResult`` plus the next offset to assign."""

    validated_records: MemoryRecords
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    messages_size_maybe_changed: bool
    log_append_time_ms: int
    next_offset: int


def _records_pass(config: ValidatorConfig, now: int, has_null_key: bool, min_timestamp: int,
                  max_timestamp: int) -> bool:
    """Whether every record of a CreateTime v2 batch passes Kafka's ``validateRecord``, given the
    batch's summary (min/max ignore -1 timestamps; min is -1 when no record has another)."""
    if config.compacted_topic and has_null_key:
        return False
    if config.timestamp_type is TimestampType.CREATE_TIME and min_timestamp != NO_TIMESTAMP:
        return not (now - min_timestamp > config.timestamp_before_max_ms
                    or max_timestamp - now > config.timestamp_after_max_ms)
    return True


# --- step 1: shallow analysis --------------------------------------------------------------------------


def _as_memory_records(records: MemoryRecords | BytesLike) -> MemoryRecords:
    return records if isinstance(records, MemoryRecords) else MemoryRecords(records)


def analyze_and_validate_records(
    records: MemoryRecords | BytesLike,
    origin: AppendOrigin,
    *,
    assign_offsets: bool = True,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ignore_record_size: bool = False,
) -> LogAppendInfo:
    """Shallow pass over an append (``UnifiedLog.analyzeAndValidateRecords``, spec §9.1 steps 1-2).

    Raises ``InvalidRecordError`` for a client v2 batch whose base offset is not 0,
    ``RecordTooLargeError`` for a batch above ``max_message_bytes`` (unless ``ignore_record_size``),
    ``CorruptRecordError`` for a bad CRC, and ``OffsetsOutOfOrderError`` when offsets do not increase
    and are not going to be reassigned (``assign_offsets=False``, the follower path).
    A partial trailing batch is not an error: it is left out of ``valid_bytes``.
    """
    mrecords = _as_memory_records(records)
    valid_bytes = 0
    first_offset = UNKNOWN_OFFSET
    last_offset = -1
    last_leader_epoch = NO_PARTITION_LEADER_EPOCH
    source_compression = CompressionType.NONE
    monotonic = True
    max_timestamp = NO_TIMESTAMP
    shallow_offset_of_max_timestamp = -1
    last_offset_of_first_batch = -1
    last_offsets: list[int] = []
    count = 0

    client = origin is AppendOrigin.CLIENT
    for index, batch in enumerate(mrecords.batches()):
        v2 = batch.magic >= MAGIC_V2
        if v2 and client and batch.base_offset != 0:
            where = _where(index, batch)
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append should be 0, but it is "
                f"{batch.base_offset} ({where})"
            )
        batch_last = batch.last_offset
        if count == 0:
            # Legacy wrappers only carry their last offset; the first needs decompression, so it stays
            # unknown until offsets are assigned (as in Kafka).
            if v2:
                first_offset = batch.base_offset
            last_offset_of_first_batch = batch_last
        if last_offset >= batch_last:
            monotonic = False
        last_offset = batch_last
        last_offsets.append(batch_last)
        last_leader_epoch = batch.partition_leader_epoch

        size = batch.size_in_bytes
        if not ignore_record_size and size > max_message_bytes:
            where = _where(index, batch)
            raise RecordTooLargeError(
                f"The record batch size in the append is {size} bytes which exceeds the maximum "
                f"configured value of {max_message_bytes} ({where}, last offset {batch_last})"
            )
        if not batch.is_valid():
            where = _where(index, batch)
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {batch.checksum}) ({where}, last offset {batch_last})"
            )
        batch_max = batch.max_timestamp
        if batch_max > max_timestamp:
            max_timestamp = batch_max
            shallow_offset_of_max_timestamp = batch_last
        valid_bytes += size
        if batch.is_compressed:
            # Only meaningful on the leader path, where a compressed append is a single batch.
            source_compression = batch.compression_type
        count += 1

    if not assign_offsets and not monotonic:
        shown = ", ".join(str(o) for o in last_offsets[:_OFFSETS_SHOWN])
        more = ", ..." if len(last_offsets) > _OFFSETS_SHOWN else ""
        raise OffsetsOutOfOrderError(
            f"Out of order offsets found in append: batch last offsets [{shown}{more}]"
        )

    return LogAppendInfo(
        first_offset=first_offset,
        last_offset=last_offset,
        last_leader_epoch=None if last_leader_epoch == NO_PARTITION_LEADER_EPOCH else last_leader_epoch,
        max_timestamp=max_timestamp,
        shallow_offset_of_max_timestamp=shallow_offset_of_max_timestamp,
        source_compression=source_compression,
        valid_bytes=valid_bytes,
        last_offset_of_first_batch=last_offset_of_first_batch,
        shallow_count=count,
        offsets_monotonic=monotonic,
    )


def trim_invalid_bytes(records: MemoryRecords | BytesLike, info: LogAppendInfo) -> MemoryRecords:
    """The records cut to ``info.valid_bytes`` (drops a partial trailing batch; no copy)."""
    mrecords = _as_memory_records(records)
    valid = info.valid_bytes
    if valid < 0:
        raise CorruptRecordError(
            f"Cannot append record batch with illegal length {valid}. A possible cause is a corrupted "
            f"produce request."
        )
    if valid == mrecords.size_in_bytes:
        return mrecords
    return MemoryRecords(mrecords.buffer[:valid])


# --- step 2: LogValidator --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _RecordError:
    """One rejected record: Kafka's ``RecordError`` (index within its batch, message) and whether
    it is a timestamp problem (which decides the exception type)."""

    record_index: int
    message: str
    is_timestamp: bool


# A record to rebuild: offset as received, timestamp as Kafka reports it, key, value, headers.
_Row = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]


def _where(index: int, batch: RecordBatch) -> str:
    """How error messages name a batch of an append (built only when an error is raised)."""
    return f"batch {index} at position {batch.position}"


def _in_batch(e: KafkaLogError, index: int, batch: RecordBatch) -> KafkaLogError:
    """``e`` with the batch index and position added (RecordValidationError already has them)."""
    if isinstance(e, RecordValidationError):
        return e
    try:
        return type(e)(f"{e} (batch {index} at position {batch.position})")
    except TypeError:
        return e


@contextmanager
def _batch_context(index: int, batch: RecordBatch) -> Iterator[None]:
    """Add the batch index and position to errors raised by the decoding/building layer."""
    try:
        yield
    except KafkaLogError as e:
        wrapped = _in_batch(e, index, batch)
        if wrapped is e:
            raise
        raise wrapped from e


class _BatchRecords:
    """The records of one batch as parallel columns, plus the legacy messages as stored (for the
    magic and CRC checks that only legacy messages need)."""

    __slots__ = ("headers", "keys", "messages", "offsets", "timestamps", "values")

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[Header, ...]]
    messages: list[LegacyMessage] | None

    def __init__(self, batch: RecordBatch) -> None:
        if batch.magic >= MAGIC_V2:
            cols = batch.decode_columns()
            self.offsets = cols.offsets
            self.timestamps = cols.timestamps
            self.keys = cols.keys
            self.values = cols.values
            self.headers = cols.headers
            self.messages = None
            return
        messages = batch.legacy_messages()
        # Kafka's deep iterator: a v1 inner message of a LogAppendTime wrapper reports the wrapper's
        # timestamp; v0 messages have none (LegacyMessage already says -1 for them).
        wrapper_ts: int | None = None
        if batch.is_compressed and batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
            wrapper_ts = batch.max_timestamp
        self.offsets = [m.offset for m in messages]
        self.timestamps = [
            wrapper_ts if wrapper_ts is not None and m.magic == MAGIC_V1 else m.timestamp for m in messages
        ]
        self.keys = [m.key for m in messages]
        self.values = [m.value for m in messages]
        self.headers = [()] * len(messages)
        self.messages = messages

    def __len__(self) -> int:
        return len(self.offsets)


class LogValidator:
    """One validation of one append (Kafka's ``LogValidator``): construct, then call
    :meth:`validate_messages_and_assign_offsets` once."""

    __slots__ = (
        "_batches",
        "_buffer",
        "_config",
        "_level",
        "_now",
        "_origin",
        "_partition_leader_epoch",
        "_records",
        "_source_compression",
        "_target_compression",
    )

    def __init__(
        self,
        records: MemoryRecords | BytesLike,
        *,
        now_ms: int,
        config: ValidatorConfig,
        partition_leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        source_compression: CompressionType | None = None,
    ) -> None:
        source = _as_memory_records(records)
        # All in-place edits go to this private copy: the caller's buffer is never touched.
        self._buffer = bytearray(source.buffer)
        self._records = MemoryRecords(self._buffer)
        # Iterated once: every step below walks the same batch objects (and edits their headers).
        self._batches = list(self._records.batches())
        self._config = config
        self._now = now_ms
        self._partition_leader_epoch = partition_leader_epoch
        self._origin = origin
        if source_compression is None:
            source_compression = CompressionType.NONE
            for batch in self._batches:
                if batch.is_compressed:
                    source_compression = batch.compression_type
        if not isinstance(source_compression, CompressionType):
            source_compression = CompressionType(source_compression)
        self._source_compression = source_compression
        if config.target_compression is None:
            # compression.type=producer: keep the producer's codec at its default level.
            self._target_compression = self._source_compression
            self._level: int | None = None
        else:
            self._target_compression = config.target_compression
            self._level = config.compression_level

    # --- entry point ------------------------------------------------------------------------------

    def validate_messages_and_assign_offsets(
        self, offset_counter: int, *, ignore_record_size: bool = False
    ) -> ValidationResult:
        """Validate every record and assign offsets from ``offset_counter`` (spec §9.2).

        When the records were rebuilt (``messages_size_maybe_changed``) each resulting batch is
        checked against ``max_message_bytes`` again (``RecordTooLargeError``) unless
        ``ignore_record_size``, as ``UnifiedLog.append`` does.
        """
        target_magic = self._config.target_magic
        none = CompressionType.NONE
        if self._source_compression is none and self._target_compression is none:
            if all(batch.magic == target_magic for batch in self._batches):
                result = self._assign_offsets_non_compressed(offset_counter)
            else:
                result = self._convert_and_assign_offsets_non_compressed(offset_counter)
        else:
            result = self._validate_and_assign_offsets_compressed(offset_counter)
        if result.messages_size_maybe_changed and not ignore_record_size:
            limit = self._config.max_message_bytes
            for index, batch in enumerate(result.validated_records.batches()):
                if batch.size_in_bytes > limit:
                    raise RecordTooLargeError(
                        f"Message batch size is {batch.size_in_bytes} bytes after conversion (batch {index}, "
                        f"offsets up to {batch.last_offset}) which exceeds the maximum configured size of "
                        f"{limit}"
                    )
        return result

    # --- shared checks ----------------------------------------------------------------------------

    def _first_batch(self, single_batch_required: bool) -> RecordBatch:
        """The first batch; with v2 or compressed input it must also be the only one."""
        batches = self._batches
        if not batches:
            raise InvalidRecordError("Record batch has no batches at all (empty record set)")
        first = batches[0]
        if len(batches) > 1 and (first.magic >= MAGIC_V2 or single_batch_required):
            raise InvalidRecordError(
                f"Compressed outer record has more than one batch (second batch at position "
                f"{batches[1].position}; magic {first.magic}, codec {self._source_compression})"
            )
        return first

    def _validate_batch(self, first: RecordBatch, batch: RecordBatch, index: int) -> None:
        """Kafka's ``validateBatch``: batch-level rules; each failure raises at once."""
        magic = batch.magic
        if magic != first.magic:
            raise InvalidRecordError(
                f"Batch magic {magic} is not the same as the first batch's magic byte {first.magic} "
                f"({_where(index, batch)})"
            )
        to_magic = self._config.target_magic
        if self._origin is AppendOrigin.CLIENT:
            if magic >= MAGIC_V2:
                base, last, count = batch.base_offset, batch.last_offset, batch.record_count
                if last - base + 1 <= 0:
                    raise InvalidRecordError(
                        f"Batch has an invalid offset range: [{base}, {last}] ({_where(index, batch)})"
                    )
                if count <= 0:
                    raise InvalidRecordError(
                        f"Invalid reported count for record batch: {count} ({_where(index, batch)})")
                if last - base + 1 != count:
                    raise InvalidRecordError(
                        f"Inconsistent batch offset range [{base}, {last}] and count of records {count} "
                        f"({_where(index, batch)})"
                    )
            if batch.is_control:
                raise InvalidRecordError(
                    f"Clients are not allowed to write control records ({_where(index, batch)})")
            if batch.has_producer_id and batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {batch.base_sequence} in record batch with producerId "
                    f"{batch.producer_id} ({_where(index, batch)})"
                )
        if to_magic < MAGIC_V2:
            if batch.is_transactional:
                raise UnsupportedForMessageFormatError(
                    f"Transactional records cannot be used with magic version {to_magic} "
                    f"({_where(index, batch)})"
                )
            if batch.has_producer_id:
                raise UnsupportedForMessageFormatError(
                    f"Idempotent records cannot be used with magic version {to_magic} "
                    f"({_where(index, batch)}, producerId {batch.producer_id})"
                )
        if magic < MAGIC_V2 and batch.compression_type is CompressionType.ZSTD:
            # Kafka refuses zstd from any client that can still send magic 0/1 (produce request < v7).
            raise UnsupportedCompressionTypeError(
                f"zstd compression is not supported for magic {magic} ({_where(index, batch)})"
            )

    def _summary_all_valid(self, batch: RecordBatch, summary: RecordsSummary) -> bool:
        """Whether every record of a v2 batch passes :meth:`_validate_record`, decided from its
        ``RecordsSummary`` (no decoded records). False means: decode and check record by record."""
        if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
            return False
        return _records_pass(self._config, self._now, summary.has_null_key, summary.min_timestamp,
                             summary.max_timestamp)

    def _validate_record(
        self, batch: RecordBatch, recs: _BatchRecords, i: int, batch_index: int, partial: bool = False
    ) -> _RecordError | None:
        """Kafka's ``validateRecord`` for record ``i``: a bad inner CRC raises at once, the other
        problems are returned so that every bad record of the batch gets reported. ``partial``: the
        records are read as Kafka reads a compressed v2 batch it may keep (``skipKeyValueIterator``),
        which shows in a record's text."""
        messages = recs.messages
        offset = recs.offsets[i]
        if messages is not None:
            message = messages[i]
            if message.magic != batch.magic:
                return _RecordError(
                    i,
                    f"Record {self._record_text(recs, i)}'s magic does not match outer magic {batch.magic}"
                    f"{self._in_partition()}",
                    False,
                )
            # Only inner messages of a legacy wrapper have a CRC of their own to verify; a plain
            # message's CRC is the batch CRC, checked by analyze_and_validate_records.
            if batch.is_compressed and not message.is_valid():
                raise CorruptRecordError(
                    f"Record at offset {offset} (record {i} of batch {batch_index} at position "
                    f"{batch.position}) is corrupt (stored crc = {message.crc}, computed crc = "
                    f"{message.compute_checksum()})"
                )
        if self._config.compacted_topic and recs.keys[i] is None:
            return _RecordError(i, f"Compacted topic cannot accept message without key{self._in_partition()}",
                                False)
        timestamp = recs.timestamps[i]
        config = self._config
        if config.timestamp_type is TimestampType.CREATE_TIME and timestamp != NO_TIMESTAMP:
            diff = self._now - timestamp
            if diff > config.timestamp_before_max_ms or -diff > config.timestamp_after_max_ms:
                return _RecordError(
                    i,
                    f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp "
                    f"should be within [{_java_long(self._now - config.timestamp_before_max_ms)}, "
                    f"{_java_long(self._now + config.timestamp_after_max_ms)}]",
                    True,
                )
        elif batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
            # Kafka's exact rule: a producer's LogAppendTime batch is refused on LogAppendTime topics
            # and, on CreateTime topics, when its timestamp is -1; otherwise it passes the range check.
            return _RecordError(
                i,
                f"Invalid timestamp type in message {self._record_text(recs, i, partial)}. Producer should "
                "not set timestamp type to LogAppendTime.",
                True,
            )
        return None

    def _in_partition(self) -> str:
        tp = self._config.topic_partition
        return "" if tp is None else f" in topic partition {tp}"

    @staticmethod
    def _record_text(recs: _BatchRecords, i: int, partial: bool = False) -> str:
        """A record as Kafka's ``toString`` shows it in a record error (DefaultRecord's form, or
        PartialDefaultRecord's when read without key and value, where a null one is -1 bytes; a
        legacy message's, LegacyRecord's)."""
        key, value = recs.keys[i], recs.values[i]
        absent = -1 if partial else 0
        key_size = absent if key is None else len(key)
        value_size = absent if value is None else len(value)
        sizes = f"key={key_size} bytes, value={value_size} bytes"
        if recs.messages is None:
            kind = "PartialDefaultRecord" if partial else "DefaultRecord"
            return f"{kind}(offset={recs.offsets[i]}, timestamp={recs.timestamps[i]}, {sizes})"
        m = recs.messages[i]
        codec = m.compression_type.name.lower()
        head = f"magic={m.magic}, attributes={m.attributes}, compression={codec}, crc={m.crc}"
        if m.magic > 0:
            head += f", {'LogAppendTime' if m.attributes & 0x08 else 'CreateTime'}={m.timestamp}"
        return f"LegacyRecordBatch(offset={recs.offsets[i]}, Record({head}, {sizes}))"

    @staticmethod
    def _raise_record_errors(errors: list[_RecordError], batch_index: int, batch: RecordBatch) -> None:
        """Kafka's ``processRecordErrors``: any timestamp error makes it an InvalidTimestampError."""
        if not errors:
            return
        pairs = [(e.record_index, e.message) for e in errors]
        where = f"batch {batch_index} at position {batch.position}"
        if any(e.is_timestamp for e in errors):
            client = "One or more records have been rejected due to invalid timestamp"
            raise InvalidTimestampError(f"{client} ({where}): {pairs[:3]}", pairs, client)
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in pairs[:3])
        client = (f"One or more records have been rejected due to {len(pairs)} record errors in total, and "
                  f"only showing the first three errors at most: [{shown}]")
        raise RecordValidationError(f"{client} ({where})", pairs, client)

    # --- path 1: uncompressed, in place -----------------------------------------------------------

    def _assign_offsets_non_compressed(self, offset_counter: int) -> ValidationResult:
        now = self._now
        config = self._config
        max_timestamp = NO_TIMESTAMP
        shallow_offset_of_max_timestamp = -1
        initial_offset = offset_counter
        first = self._first_batch(single_batch_required=False)
        end = 0

        for index, batch in enumerate(self._batches):
            self._validate_batch(first, batch, index)
            summary = None
            if batch.magic >= MAGIC_V2:
                # The hot path: walk the records without decoding them; decode only if some record
                # may be invalid, to say which.
                try:
                    summary = batch.summarize()
                except KafkaLogError as e:
                    raise _in_batch(e, index, batch) from e
            if summary is not None and self._summary_all_valid(batch, summary):
                offset_counter += summary.count
                max_batch_timestamp = summary.largest_timestamp
            else:
                # Legacy messages, or a v2 batch with some record to reject: record by record.
                recs = self._decode(index, batch)
                errors: list[_RecordError] = []
                max_batch_timestamp = NO_TIMESTAMP
                for i in range(len(recs)):
                    error = self._validate_record(batch, recs, i, index)
                    if error is not None:
                        errors.append(error)
                    offset_counter += 1
                    if batch.magic > MAGIC_V0 and recs.timestamps[i] > max_batch_timestamp:
                        max_batch_timestamp = recs.timestamps[i]
                self._raise_record_errors(errors, index, batch)

            if batch.magic > MAGIC_V0 and max_batch_timestamp > max_timestamp:
                max_timestamp = max_batch_timestamp
                shallow_offset_of_max_timestamp = offset_counter - 1

            # Header edits on the private copy; the v2 CRC does not cover offset or epoch, and
            # set_max_timestamp recomputes it only when the attributes or max timestamp change.
            batch.set_last_offset(offset_counter - 1)
            if batch.magic >= MAGIC_V2:
                batch.set_partition_leader_epoch(self._partition_leader_epoch)
            if batch.magic > MAGIC_V0:
                if config.timestamp_type is TimestampType.LOG_APPEND_TIME:
                    batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, now)
                else:
                    batch.set_max_timestamp(config.timestamp_type, max_batch_timestamp)
            end = batch.position + batch.size_in_bytes

        if config.timestamp_type is TimestampType.LOG_APPEND_TIME:
            # Same answers MemoryRecordsBuilder.info() would give for these shapes.
            if config.target_magic == MAGIC_V0:
                max_timestamp, shallow_offset_of_max_timestamp = NO_TIMESTAMP, -1
            elif config.target_magic == MAGIC_V1:
                # Every single-message batch now has the same timestamp: the first one wins.
                max_timestamp, shallow_offset_of_max_timestamp = now, initial_offset
            else:
                max_timestamp, shallow_offset_of_max_timestamp = now, offset_counter - 1

        return ValidationResult(
            validated_records=self._valid_prefix(end),
            max_timestamp=max_timestamp,
            shallow_offset_of_max_timestamp=shallow_offset_of_max_timestamp,
            messages_size_maybe_changed=False,
            log_append_time_ms=now,
            next_offset=offset_counter,
        )

    @staticmethod
    def _decode(index: int, batch: RecordBatch) -> _BatchRecords:
        with _batch_context(index, batch):
            return _BatchRecords(batch)

    def _valid_prefix(self, end: int) -> MemoryRecords:
        """The patched copy, without any partial trailing bytes the caller did not trim."""
        if end == len(self._buffer):
            return self._records
        return MemoryRecords(memoryview(self._buffer)[:end])

    # --- path 2: uncompressed, converted to another magic -----------------------------------------

    def _convert_and_assign_offsets_non_compressed(self, offset_counter: int) -> ValidationResult:
        first = self._first_batch(single_batch_required=False)
        rows: list[_Row] = []
        for index, batch in enumerate(self._batches):
            self._validate_batch(first, batch, index)
            with _batch_context(index, batch):
                recs = _BatchRecords(batch)
            errors: list[_RecordError] = []
            for i in range(len(recs)):
                error = self._validate_record(batch, recs, i, index)
                if error is not None:
                    errors.append(error)
                elif not errors:
                    rows.append(self._row(recs, i))
            self._raise_record_errors(errors, index, batch)
        return self._build(offset_counter, first, rows, CompressionType.NONE, None)

    @staticmethod
    def _row(recs: _BatchRecords, i: int) -> _Row:
        return (recs.offsets[i], recs.timestamps[i], recs.keys[i], recs.values[i], recs.headers[i])

    # --- paths 3 and 4: compressed in place, or rebuilt -------------------------------------------

    def _validate_and_assign_offsets_compressed(self, offset_counter: int) -> ValidationResult:
        config = self._config
        to_magic = config.target_magic
        target = self._target_compression
        if target is CompressionType.ZSTD and to_magic < MAGIC_V2:
            raise UnsupportedCompressionTypeError(
                f"zstd compression is not supported for magic {to_magic} (topic compression.type is "
                f"zstd with a message format below v2)"
            )
        now = self._now
        in_place = self._source_compression is target
        max_timestamp = NO_TIMESTAMP
        expected_inner_offset = 0
        rows: list[_Row] = []
        first = self._first_batch(single_batch_required=self._source_compression is not CompressionType.NONE)
        # Magic conversion, or v0's absolute inner offsets, need a rebuild.
        if first.magic != to_magic or to_magic == MAGIC_V0:
            in_place = False
        # Control batches that arrived uncompressed stay uncompressed.
        if self._source_compression is CompressionType.NONE and first.is_control:
            in_place = True

        record_count = 0
        for index, batch in enumerate(self._batches):
            self._validate_batch(first, batch, index)
            partial = in_place and batch.magic >= MAGIC_V2  # Kafka's skipKeyValueIterator
            if in_place and batch.magic >= MAGIC_V2:
                # Kept as is if every record is valid and its offsets are 0, 1, ...: a walk with no
                # decoded records decides it (the usual compressed produce request).
                try:
                    summary = batch.summarize()
                except KafkaLogError as e:
                    raise _in_batch(e, index, batch) from e
                if (self._summary_all_valid(batch, summary) and summary.sequential_offsets
                        and batch.base_offset == expected_inner_offset):
                    expected_inner_offset += summary.count
                    record_count += summary.count
                    max_timestamp = max(max_timestamp, summary.largest_timestamp)
                    continue
            recs = self._decode(index, batch)
            errors: list[_RecordError] = []
            for i in range(len(recs)):
                expected_offset = expected_inner_offset
                expected_inner_offset += 1
                error = self._validate_record(batch, recs, i, index, partial)
                if error is None and batch.magic > MAGIC_V0 and to_magic > MAGIC_V0:
                    if recs.timestamps[i] > max_timestamp:
                        max_timestamp = recs.timestamps[i]
                    # Old clients wrote v1 inner offsets wrongly; Kafka fixes them by rebuilding.
                    if recs.offsets[i] != expected_offset:
                        in_place = False
                if error is not None:
                    errors.append(error)
                else:
                    rows.append(self._row(recs, i))
            self._raise_record_errors(errors, index, batch)
            record_count += len(recs)

        if not in_place:
            if len(rows) != record_count:
                # A summarised batch turned out to need a rebuild after all: decode it too.
                rows = [self._row(recs, i) for index, batch in enumerate(self._batches)
                        for recs in [self._decode(index, batch)] for i in range(len(recs))]
            return self._build(offset_counter, first, rows, target, self._level)

        # Only the (single) batch header changes; the compressed payload is kept as is.
        offset_counter += record_count
        last_offset = offset_counter - 1
        first.set_last_offset(last_offset)
        if config.timestamp_type is TimestampType.LOG_APPEND_TIME:
            max_timestamp = now
        if to_magic >= MAGIC_V1:
            first.set_max_timestamp(config.timestamp_type, max_timestamp)
        if to_magic >= MAGIC_V2:
            first.set_partition_leader_epoch(self._partition_leader_epoch)
        return ValidationResult(
            validated_records=self._valid_prefix(first.position + first.size_in_bytes),
            max_timestamp=max_timestamp,
            shallow_offset_of_max_timestamp=last_offset,
            messages_size_maybe_changed=False,
            log_append_time_ms=now,
            next_offset=offset_counter,
        )

    # --- rebuilding ---------------------------------------------------------------------------------

    def _build(
        self,
        offset_counter: int,
        first: RecordBatch,
        rows: list[_Row],
        codec: CompressionType,
        level: int | None,
    ) -> ValidationResult:
        """Write ``rows`` with the target magic and ``codec`` at offsets from ``offset_counter``
        (Kafka's ``buildRecordsAndAssignOffsets``; producer fields come from the first batch)."""
        config = self._config
        with _batch_context(0, first):
            builder = MemoryRecordsBuilder(
                config.target_magic,
                codec,
                config.timestamp_type,
                offset_counter,
                self._now,
                first.producer_id,
                first.producer_epoch,
                first.base_sequence,
                first.is_transactional,
                False,
                self._partition_leader_epoch,
                level,
            )
        append = builder.append_with_offset
        counter = itertools.count(offset_counter)
        for row in rows:
            offset = next(counter)
            try:
                append(offset, row[1], row[2], row[3], row[4])
            except RecordValidationError:
                raise
            except KafkaLogError as e:
                try:
                    wrapped = type(e)(f"{e} (record with offset {row[0]}, assigned offset {offset})")
                except TypeError:
                    raise e from None
                raise wrapped from e
        with _batch_context(0, first):
            built = builder.build()
        info = builder.info()
        max_timestamp = info.max_timestamp
        shallow = info.shallow_offset_of_max_timestamp
        if max_timestamp == NO_TIMESTAMP:
            # Kafka's RecordsInfo has no shallow offset when no record carries a timestamp.
            shallow = -1
        return ValidationResult(
            validated_records=built,
            max_timestamp=max_timestamp,
            shallow_offset_of_max_timestamp=shallow,
            messages_size_maybe_changed=True,
            log_append_time_ms=self._now,
            next_offset=offset_counter + len(rows),
        )


# --- the usual produce, in one pass ------------------------------------------------------------------

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # baseOffset .. recordsCount: the whole v2 batch header
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


def validate_lone_v2_batch(
    records: MemoryRecords | BytesLike,
    *,
    offset_counter: int,
    now_ms: int,
    config: ValidatorConfig,
    partition_leader_epoch: int,
    origin: AppendOrigin,
    max_message_bytes: int,
    log_start_offset: int = -1,
) -> tuple[ValidationResult, LogAppendInfo] | None:
    """The whole leader-side check of the usual produce request in one pass, or None.

    The usual request is one uncompressed v2 batch from a client, without producer id or
    transaction, with base offset 0 and a consistent count, for a v2 topic that keeps it
    uncompressed. For it this returns exactly what :func:`analyze_and_validate_records`, then
    :func:`validate_messages_and_assign_offsets` and ``with_validation_result`` return, reading the
    header once and walking the records with the C walker's summary. It only ever *accepts*: for
    anything else — another shape, a bad CRC, a record that fails a rule, no C walker — it returns
    None and the general path does the work and reports the error (tests/records/test_validator_fast.py
    checks both paths agree).
    """
    walker = default_batch.native
    if walker is None or origin is not AppendOrigin.CLIENT or config.target_magic != MAGIC_V2:
        return None
    if config.target_compression is not None and config.target_compression is not CompressionType.NONE:
        return None
    buf = records.buffer if isinstance(records, MemoryRecords) else memoryview(records)
    n = len(buf)
    if n < RECORD_BATCH_OVERHEAD or n > max_message_bytes:
        return None
    (base, size, epoch, magic, crc, attributes, last_delta, base_ts, max_ts, producer_id, _, _,
     count) = _V2_HEADER.unpack_from(buf, 0)
    # attributes 0: no compression, CreateTime, not transactional, not control
    if (size + LOG_OVERHEAD != n or magic != MAGIC_V2 or base != 0 or attributes != 0
            or producer_id != NO_PRODUCER_ID or count <= 0 or last_delta != count - 1
            or crc32c(buf[ATTRIBUTES_OFFSET:]) != crc):
        return None
    try:
        lo, hi, no_timestamp, null_key, _ = walker.summarize_v2(buf, RECORD_BATCH_OVERHEAD, count, base_ts)
    except ValueError:
        return None
    if not _records_pass(config, now_ms, null_key, lo, hi):
        return None
    batch_max = default_batch.largest_timestamp(hi, no_timestamp)

    out = bytearray(buf)  # never edit the caller's buffer
    _I64.pack_into(out, BASE_OFFSET_OFFSET, offset_counter)  # setLastOffset: base = last - lastOffsetDelta
    _I32.pack_into(out, PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    next_offset = offset_counter + count
    log_append = config.timestamp_type is TimestampType.LOG_APPEND_TIME
    if log_append or batch_max != max_ts:
        # setMaxTimestamp rewrites attributes, max timestamp and CRC only when they change
        if log_append:
            _I16.pack_into(out, ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_MASK)
        _I64.pack_into(out, MAX_TIMESTAMP_OFFSET, now_ms if log_append else batch_max)
        _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    if log_append:
        max_timestamp, shallow = now_ms, next_offset - 1
    elif batch_max > NO_TIMESTAMP:
        max_timestamp, shallow = batch_max, next_offset - 1
    else:
        max_timestamp, shallow = NO_TIMESTAMP, -1
    result = ValidationResult(MemoryRecords(out), max_timestamp, shallow, False, now_ms, next_offset)
    info = LogAppendInfo(
        offset_counter, next_offset - 1, None if epoch == NO_PARTITION_LEADER_EPOCH else epoch, max_timestamp,
        shallow, CompressionType.NONE, n, last_delta, 1, True, now_ms if log_append else NO_TIMESTAMP,
        log_start_offset,
    )
    return result, info


def validate_messages_and_assign_offsets(
    records: MemoryRecords | BytesLike,
    *,
    offset_counter: int,
    now_ms: int,
    config: ValidatorConfig,
    partition_leader_epoch: int,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    source_compression: CompressionType | None = None,
    ignore_record_size: bool = False,
) -> ValidationResult:
    """Validate an append and assign offsets from ``offset_counter`` (Kafka's
    ``LogValidator.validateMessagesAndAssignOffsets``, spec §9.2-9.3).

    ``source_compression`` is the producer's codec as found by :func:`analyze_and_validate_records`
    (computed the same way when omitted). The input is never modified; the result's
    ``validated_records`` is a patched copy or newly built records, and ``next_offset`` is the
    offset after the last one assigned.
    """
    validator = LogValidator(
        records,
        now_ms=now_ms,
        config=config,
        partition_leader_epoch=partition_leader_epoch,
        origin=origin,
        source_compression=source_compression,
    )
    return validator.validate_messages_and_assign_offsets(
        offset_counter, ignore_record_size=ignore_record_size
    )
