"""``df.write.format("kafkalog")`` and ``writeStream``: rows to record batches, through the leader path.

Columns are those of Spark's Kafka sink: ``value`` (required, binary or string), ``key`` (binary or
string), ``headers`` (``array<struct<key:string,value:binary>>``), ``topic`` (string; the ``topic``
option overrides it) and ``partition`` (int; else Kafka's default partitioner: murmur2 of the key, a
sticky partition for keyless records) and ``timestamp`` (a timestamp, or a double of seconds: the
records' CreateTime, as Spark's sink takes it since SPARK-50160; without one, or where it is null,
the time of the write). Other columns are ignored, as Spark's Kafka sink ignores them.

Each task groups its rows by topic-partition and appends whole batches with
``Log.append_as_leader`` (so the topic's compression, message format and timestamp type apply,
exactly as for a produce request). Appends to one partition, from any task of any process, are
serialised by the storage layer's append protocol (``kafkalog.storage.appender``: the data
directory's ``.lock`` shared, an exclusive lock per partition, recovery after a crashed appender). A
task's batches are therefore never interleaved with another's.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from kafkalog.clock import SYSTEM_TIME
from kafkalog.errors import (
    InvalidConfigError,
    InvalidRecordError,
    KafkaLogError,
    LogDirLockedError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
)
from kafkalog.records import MAGIC_V0, MAGIC_V2, CompressionType, Header, MemoryRecordsBuilder, TimestampType
from kafkalog.spark.options import CREATE_TOPIC_PARTITIONS, TOPIC, SinkOptions, user_errors
from kafkalog.storage.partition_dirs import list_topic_partitions
from kafkalog.storage.partitioner import StickyPartitioner, partition_for_key

if TYPE_CHECKING:
    from kafkalog.storage.config import LogConfig

__all__ = [
    "KafkaLogCommitMessage",
    "KafkaLogStreamWriter",
    "KafkaLogWriter",
    "WriteSchema",
    "validate_write_schema",
]

log = logging.getLogger(__name__)

# Rows buffered per partition before an append (keeps memory bounded, amortises the open).
FLUSH_BYTES = 8 * 1024 * 1024
# Kafka's producer batch.size: keyless records stick to one partition for this many bytes.
STICKY_BATCH_BYTES = 16384
# Per-record overhead estimate (v2: varints, attributes, deltas) used to keep batches below
# max.message.bytes.
RECORD_OVERHEAD_ESTIMATE = 32
BATCH_OVERHEAD = 61


# --- schema validation (driver) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteSchema:
    """Which sink columns the DataFrame has (names as in the DataFrame)."""

    has_key: bool
    has_headers: bool
    has_topic: bool
    has_partition: bool
    has_timestamp: bool


def validate_write_schema(schema: Any, opts: SinkOptions) -> WriteSchema:
    """Spark's ``KafkaWriter.validateQuery``: the columns checked in its order (topic, key, value,
    headers, partition) with its messages, each naming the column, plus what kafkalog knows."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DoubleType,
        IntegerType,
        StringType,
        StructType,
        TimestampNTZType,
    )
    from pyspark.sql.types import (
        TimestampType as SparkTimestamp,
    )

    # Exact names, as Spark's KafkaWriter finds them (`_.name == "value"`): a column "Value" is not
    # the value (nor "Key" the key), whatever spark.sql.caseSensitive says.
    fields = {f.name: f for f in schema.fields}

    def check(name: str, allowed: tuple, expected: str) -> bool:
        f = fields.get(name)
        if f is None:
            return False
        if not isinstance(f.dataType, allowed):
            raise InvalidConfigError(
                f"kafkalog sink: {name} attribute unsupported type {f.dataType.simpleString()}. "
                f"{name} must be a(n) {expected}"
            )
        return True

    # The topic option wins over the column, whose type is then never looked at (as in Spark).
    has_topic = opts.topic is None and check("topic", (StringType,), "string")
    if opts.topic is None and not has_topic:
        raise InvalidConfigError(
            "kafkalog sink: topic option required when no 'topic' attribute is present. Use the "
            f"{TOPIC} option for setting a topic."
        )
    has_key = check("key", (BinaryType, StringType), "string or binary")
    if not check("value", (BinaryType, StringType), "string or binary"):
        hint = ("; column names are case-sensitive, as in Spark's Kafka sink"
                if any(f.name.lower() == "value" for f in schema.fields) else "")
        raise InvalidConfigError(
            "kafkalog sink: Required attribute 'value' not found (columns: "
            f"{', '.join(f.name for f in schema.fields)}){hint}"
        )
    has_headers = False
    if "headers" in fields:
        dt = fields["headers"].dataType
        ok = (
            isinstance(dt, ArrayType)
            and isinstance(dt.elementType, StructType)
            and [f.name for f in dt.elementType.fields] == ["key", "value"]
            and isinstance(dt.elementType.fields[0].dataType, StringType)
            and isinstance(dt.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise InvalidConfigError(
                f"kafkalog sink: headers attribute unsupported type {dt.simpleString()}. headers must be "
                "a(n) array<struct<key:string,value:binary>>"
            )
        has_headers = True
    has_partition = check("partition", (IntegerType,), "int")
    # The records' CreateTime, as Spark's sink takes it since SPARK-50160 (a timestamp, or a double
    # of seconds; kafkalog also takes timestamp_ntz). Any other column of that name is left alone,
    # as Spark's sink before that ignored it: the records then get the time of the write.
    ts_field = fields.get("timestamp")
    has_timestamp = ts_field is not None and isinstance(
        ts_field.dataType, (SparkTimestamp, TimestampNTZType, DoubleType))
    if ts_field is not None and not has_timestamp:
        log.warning("kafkalog sink: column 'timestamp' of type %s is not a record timestamp (a timestamp or "
                    "a double of seconds is); the records get the time of the write",
                    ts_field.dataType.simpleString())
    return WriteSchema(has_key, has_headers, has_topic, has_partition, has_timestamp)


# --- storage access ------------------------------------------------------------------------------


@dataclass(slots=True)
class _TopicInfo:
    config: LogConfig
    num_partitions: int
    partitioner: StickyPartitioner


def _describe_topic(path: str, topic: str, create_partitions: int | None) -> tuple[LogConfig, int]:
    """The topic's config and partition count; creates the topic if asked to and it is missing."""
    from kafkalog.storage.appender import create_topic_if_missing
    from kafkalog.storage.config import LogConfig, read_topic_configs

    # Directory names and the topic-config file only: opening logs (even read-only) is not needed.
    partitions = list_topic_partitions(path, readable_only=False).get(topic)
    if partitions:
        return LogConfig.from_props(read_topic_configs(path).get(topic, {})), len(partitions)
    if create_partitions is None:
        raise UnknownTopicOrPartitionError(
            f"kafkalog sink: topic '{topic}' does not exist in {path} (create it first, or set the "
            f"'{CREATE_TOPIC_PARTITIONS}' option to create it with that many partitions)"
        )
    return create_topic_if_missing(path, topic, create_partitions, timeout_s=60)


def _append_batches(path: str, topic: str, partition: int, config: LogConfig, batches: list) -> None:
    """Append built MemoryRecords to one partition under the storage layer's append protocol
    (``kafkalog.storage.appender``), through the leader path."""
    from kafkalog.storage.appender import open_log_for_append

    try:
        with open_log_for_append(path, topic, partition, config) as plog:
            for records in batches:
                plog.append_as_leader(records)
    except LogDirLockedError as e:
        raise LogDirLockedError(
            f"kafkalog sink: cannot append to {path} while a LogManager or Kafka broker has it open for "
            f"writing; close it before writing with Spark ({e})"
        ) from None
    except UnknownTopicOrPartitionError as e:
        raise UnknownTopicOrPartitionError(f"kafkalog sink: {e}") from None


def _record_timestamps(col: pa.Array, now: int) -> list[int]:
    """A ``timestamp`` column as record timestamps in ms, as Spark's sink makes them: a double is
    seconds (cast to microseconds, truncated), microseconds become ms truncated toward zero, and a
    null (or NaN, infinity: a null once cast) is the time of the write."""
    if pa.types.is_floating(col.type):
        micros = [None if s is None or not math.isfinite(s) else int(s * 1_000_000) for s in col.to_pylist()]
    else:
        micros = (pc.cast(col, pa.int64()) if not pa.types.is_int64(col.type) else col).to_pylist()
    return [now if us is None else (us // 1000 if us >= 0 else -(-us // 1000)) for us in micros]


# --- the per-task write ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KafkaLogCommitMessage(WriterCommitMessage):
    """What one task wrote: records and batches per topic-partition."""

    records: int = 0
    batches: int = 0
    partitions: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, records)


@dataclass(slots=True)
class _Pending:
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[Header, ...]] = field(default_factory=list)
    size: int = 0


def _binary_list(col: pa.Array | pa.ChunkedArray) -> list[bytes | None]:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.cast(col, pa.binary() if pa.types.is_string(col.type) else pa.large_binary())
    values: list[bytes | None] = col.to_pylist()
    return values


class _WriteTask:
    """Rows of one Spark task, grouped by topic-partition and appended in whole batches."""

    def __init__(self, opts: SinkOptions, layout: WriteSchema) -> None:
        self.opts = opts
        self.layout = layout
        self.topics: dict[str, _TopicInfo] = {}
        self.pending: dict[tuple[str, int], _Pending] = {}
        self.written: dict[tuple[str, int], int] = {}
        self.batches = 0
        self.codec = CompressionType.for_name(opts.compression_type)

    def _topic(self, name: str) -> _TopicInfo:
        info = self.topics.get(name)
        if info is None:
            config, n = _describe_topic(self.opts.path, name, self.opts.create_topic_partitions)
            sticky = StickyPartitioner(n, sticky_batch_size=STICKY_BATCH_BYTES)
            info = self.topics[name] = _TopicInfo(config, n, sticky)
        return info

    def add(self, rb: pa.RecordBatch) -> None:
        n = rb.num_rows
        if n == 0:
            return
        names = {name: i for i, name in enumerate(rb.schema.names)}

        def column(name: str) -> pa.Array:
            # Only columns the layout says are there are asked for.
            i = names.get(name)
            if i is None:
                raise InvalidRecordError(f"kafkalog sink: the rows have no '{name}' column")
            return rb.column(i)

        values = _binary_list(column("value"))
        keys = _binary_list(column("key")) if self.layout.has_key else [None] * n
        if self.opts.topic is not None:
            topics: list[str | None] = [self.opts.topic] * n
        else:
            topics = column("topic").to_pylist()
        partitions = column("partition").to_pylist() if self.layout.has_partition else [None] * n
        now = SYSTEM_TIME.milliseconds()
        timestamps = _record_timestamps(column("timestamp"), now) if self.layout.has_timestamp else [now] * n
        if self.layout.has_headers:
            headers = [
                () if hs is None else tuple(Header(h["key"], h["value"]) for h in hs)
                for hs in column("headers").to_pylist()
            ]
        else:
            headers = [()] * n

        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise InvalidRecordError(
                    "kafkalog sink: null topic present in the data. Use the topic option for setting a topic."
                )
            info = self._topic(topic)
            key, value = keys[i], values[i]
            p = partitions[i]
            if p is None:
                if key is not None:
                    p = partition_for_key(key, info.num_partitions)
                else:
                    p = info.partitioner.partition(None)
                    info.partitioner.record_appended(len(value or b""))
            elif not 0 <= p < info.num_partitions:
                raise InvalidRecordError(
                    f"kafkalog sink: invalid partition {p} for topic '{topic}': it has partitions "
                    f"0..{info.num_partitions - 1}"
                )
            tp = (topic, p)
            pend = self.pending.get(tp)
            if pend is None:
                pend = self.pending[tp] = _Pending()
            pend.timestamps.append(timestamps[i])
            pend.keys.append(key)
            pend.values.append(value)
            pend.headers.append(headers[i])
            pend.size += len(value or b"") + len(key or b"") + RECORD_OVERHEAD_ESTIMATE
            if pend.size >= FLUSH_BYTES:
                self.flush(tp)

    def _build(self, info: _TopicInfo, pend: _Pending) -> list:
        """MemoryRecords batches of the pending rows, each below the topic's max.message.bytes.

        A batch takes rows while the sum of their size estimates stays within the limit (and at
        least one row); each batch's rows are encoded in one ``append_many`` call."""
        config = info.config
        magic = config.target_magic
        codec = self.codec
        if codec is CompressionType.ZSTD and magic < MAGIC_V2:
            codec = CompressionType.NONE  # a producer for an old format cannot use zstd either
        ts_type = TimestampType.NO_TIMESTAMP_TYPE if magic == MAGIC_V0 else TimestampType.CREATE_TIME
        limit = int(config.max_message_bytes * 0.9) - BATCH_OVERHEAD
        keys, values = pend.keys, pend.values
        headers: list[tuple[Header, ...]] | None = pend.headers if any(pend.headers) else None
        n = len(values)
        if headers is not None and magic < MAGIC_V2:
            # The rows before the first one with headers are encoded first: their errors come first.
            n = next(i for i, hs in enumerate(headers) if hs)
        timestamps = pend.timestamps if magic > MAGIC_V0 else [-1] * n
        sizes = [len(v or b"") + len(k or b"") + RECORD_OVERHEAD_ESTIMATE
                 for k, v in zip(keys[:n], values[:n], strict=True)]
        if headers is not None:
            for i, hs in enumerate(headers[:n]):
                if hs:
                    sizes[i] += sum(len(h.key) + len(h.value or b"") + 8 for h in hs)
        ends = list(accumulate(sizes))  # strictly increasing: every estimate is > 0
        out = []
        start, before = 0, 0  # first row of the next batch; the estimates summed before it
        while start < n:
            stop = max(bisect_right(ends, before + limit, start), start + 1)
            builder = MemoryRecordsBuilder(magic, codec, ts_type, 0)
            builder.append_many(timestamps[start:stop], keys[start:stop], values[start:stop],
                                None if headers is None else headers[start:stop])
            out.append(builder.build())
            start, before = stop, ends[stop - 1]
        if n < len(values):
            raise UnsupportedForMessageFormatError(
                f"kafkalog sink: record headers need message format v2, but the topic is written in "
                f"v{magic} "
                f"(message.format.version={config.message_format_version})"
            )
        return out

    def flush(self, tp: tuple[str, int]) -> None:
        pend = self.pending.pop(tp, None)
        if pend is None or not pend.values:
            return
        info = self._topic(tp[0])
        batches = self._build(info, pend)
        _append_batches(self.opts.path, tp[0], tp[1], info.config, batches)
        self.batches += len(batches)
        self.written[tp] = self.written.get(tp, 0) + len(pend.values)

    def finish(self) -> KafkaLogCommitMessage:
        for tp in sorted(self.pending):
            self.flush(tp)
        return KafkaLogCommitMessage(
            records=sum(self.written.values()),
            batches=self.batches,
            partitions=tuple((t, p, n) for (t, p), n in sorted(self.written.items())),
        )


def _write(
    opts: SinkOptions, layout: WriteSchema, iterator: Iterator[pa.RecordBatch]
) -> KafkaLogCommitMessage:
    task = _WriteTask(opts, layout)
    try:
        for rb in iterator:
            task.add(rb)
        return task.finish()
    except KafkaLogError:
        raise
    except (OSError, ValueError) as e:
        raise KafkaLogError(f"kafkalog sink: write to {opts.path} failed: {e}") from e


def prepare_write(opts: SinkOptions, schema: Any) -> WriteSchema:
    """Driver-side checks before any task runs: the schema, and the ``topic`` option's topic."""
    layout = validate_write_schema(schema, opts)
    if opts.topic is not None:
        config, _ = _describe_topic(opts.path, opts.topic, opts.create_topic_partitions)
        if layout.has_headers and config.target_magic < MAGIC_V2:
            raise UnsupportedForMessageFormatError(
                f"kafkalog sink: topic '{opts.topic}' uses message format v{config.target_magic}, which "
                "has no record headers; drop the 'headers' column"
            )
    return layout


class KafkaLogWriter(DataSourceArrowWriter):
    """Batch sink (``df.write.format("kafkalog").mode("append")``). At-least-once, like Kafka's sink:
    a retried task appends its rows again."""

    def __init__(self, opts: SinkOptions, layout: WriteSchema) -> None:
        self.opts = opts
        self.layout = layout

    @user_errors
    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        return _write(self.opts, self.layout, iterator)

    def commit(self, messages: list) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaLogCommitMessage))
        log.info("kafkalog sink: %d records written to %s", total, self.opts.path)

    def abort(self, messages: list) -> None:
        # Appended batches cannot be taken back (Kafka's sink cannot either): at-least-once.
        log.warning("kafkalog sink: write aborted; batches appended by finished tasks remain in the log")


class KafkaLogStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink (``writeStream.format("kafkalog")``), at-least-once per micro-batch."""

    def __init__(self, opts: SinkOptions, layout: WriteSchema) -> None:
        self.opts = opts
        self.layout = layout

    @user_errors
    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        return _write(self.opts, self.layout, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaLogCommitMessage))
        log.info("kafkalog sink: batch %d: %d records written to %s", batchId, total, self.opts.path)

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("kafkalog sink: batch %d aborted; appended batches remain in the log", batchId)
