"""The source's schema and the column-wise construction of its Arrow record batches.

Spark accepts a yielded ``pyarrow.RecordBatch`` only if its schema *equals*
``to_arrow_schema(schema, timezone="UTC")``: same names, types and nullability (``int32``,
``int64``, ``binary``, ``string``, ``timestamp[us, tz=UTC]``, a list item called ``element``).
``arrow_schema`` spells that out without importing pyspark; a test checks the two agree.

Rows are never materialised as Python tuples: ``ColumnBuilder`` has the records layer write each
record batch's records straight into Arrow-layout buffers (``kafkalog.records.columnar``) and
wraps them as Arrow arrays without a copy, with numpy doing the per-row arithmetic (ms -> us).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kafkalog.errors import InvalidRecordError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.columnar import BinaryColumn, ColumnAccumulator, HeadersColumn
from kafkalog.records.types import RecordColumns

__all__ = [
    "DDL",
    "HEADERS_TYPE",
    "ColumnBuilder",
    "arrow_schema",
    "spark_schema",
]

# The schema of Spark's Kafka source (KafkaRecordToRowConverter), all columns nullable.
DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
    "timestampType int"
)
DDL_WITH_HEADERS = DDL + ", headers array<struct<key: string, value: binary>>"

_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", _HEADER_STRUCT))
_TS_TYPE = pa.timestamp("us", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _TS_TYPE),
    pa.field("timestampType", pa.int32()),
]
_SCHEMA = pa.schema(_BASE_FIELDS)
_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_TYPE)])

# Kafka timestamps are ms; Spark wants us. Beyond this a ms value overflows int64 microseconds.
_MAX_MS = (2**63 - 1) // 1000


def arrow_schema(include_headers: bool) -> pa.Schema:
    return _SCHEMA_WITH_HEADERS if include_headers else _SCHEMA


def spark_schema(include_headers: bool):  # -> pyspark.sql.types.StructType
    """The Spark schema (imported lazily: executors building Arrow need no pyspark types)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class ColumnBuilder:
    """Accumulates the records of record batches of ONE topic-partition and emits Arrow record
    batches.

    The records go straight into Arrow-layout buffers (``kafkalog.records.columnar``; the C record
    walker fills them without a Python object per record) and ``build`` wraps those buffers as
    arrays without copying them. Only the timestamps are touched once more, ms -> us, in place.
    """

    __slots__ = ("_acc", "_constants", "_include_headers", "_partition", "_topic")

    def __init__(self, topic: str, partition: int, include_headers: bool, *,
                 use_native: bool | None = None) -> None:
        self._topic = topic
        self._partition = partition
        self._include_headers = include_headers
        self._acc = ColumnAccumulator(include_headers, use_native=use_native)
        # The topic and partition columns, built once and sliced for each batch: building them
        # afresh cost more than the rest of build() together.
        self._constants: tuple[pa.Array, pa.Array] | None = None

    def _constant_columns(self, n: int) -> tuple[pa.Array, pa.Array]:
        cols = self._constants
        if cols is None or len(cols[0]) < n:
            cols = self._constants = (pa.repeat(pa.scalar(self._topic, pa.string()), n),
                                      pa.repeat(pa.scalar(self._partition, pa.int32()), n))
        if len(cols[0]) == n:
            return cols
        return cols[0].slice(0, n), cols[1].slice(0, n)

    def __len__(self) -> int:
        return len(self._acc)

    @property
    def nbytes(self) -> int:
        return self._acc.nbytes

    def add(self, batch: RecordBatch, start_offset: int | None = None, end_offset: int | None = None) -> int:
        """Append the records of ``batch`` whose offset is in [start_offset, end_offset); returns how many."""
        return self._acc.add(batch, start_offset, end_offset)

    def add_columns(self, cols: RecordColumns, start_offset: int | None = None,
                    end_offset: int | None = None) -> int:
        """The same for records already decoded."""
        return self._acc.add_columns(cols, start_offset, end_offset)

    def build(self) -> pa.RecordBatch | None:
        """The accumulated rows as one Arrow record batch (None when empty); the builder is emptied."""
        chunk = self._acc.take()
        n = chunk.rows
        if n == 0:
            return None
        ts = np.frombuffer(chunk.timestamps, dtype=np.int64)
        hi, lo = int(ts.max()), int(ts.min())
        if hi > _MAX_MS or lo < -_MAX_MS:
            bad = hi if hi > _MAX_MS else lo
            raise InvalidRecordError(
                f"Record timestamp {bad} ms in {self._topic}-{self._partition} cannot be represented as a "
                "Spark timestamp"
            )
        ts *= 1000  # in place: the accumulator's buffer is ours now
        topic, partition = self._constant_columns(n)
        columns = [
            _binary(pa.binary(), n, chunk.keys),
            _binary(pa.binary(), n, chunk.values),
            topic,
            partition,
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(chunk.offsets)]),
            pa.Array.from_buffers(_TS_TYPE, n, [None, pa.py_buffer(chunk.timestamps)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(chunk.timestamp_types)]),
        ]
        if self._include_headers:
            assert chunk.headers is not None
            columns.append(_headers(n, chunk.headers))
        return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(self._include_headers))


def _binary(arrow_type: pa.DataType, n: int, col: BinaryColumn) -> pa.Array:
    validity = pa.py_buffer(col.validity) if col.null_count else None
    return pa.Array.from_buffers(arrow_type, n, [validity, pa.py_buffer(col.offsets), pa.py_buffer(col.data)],
                                 null_count=col.null_count)


def _headers(n: int, col: HeadersColumn) -> pa.Array:
    """``array<struct<key,value>>`` with a null entry for every record without headers (as Spark's
    Kafka source reports them)."""
    if col.null_count == n:
        return pa.nulls(n, HEADERS_TYPE)
    items = len(col.keys.offsets) // 4 - 1
    keys = _binary(pa.string(), items, col.keys)
    values = _binary(pa.binary(), items, col.values)
    structs = pa.StructArray.from_arrays([keys, values], fields=list(_HEADER_STRUCT))
    validity = pa.py_buffer(col.validity) if col.null_count else None
    return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(col.offsets)],
                                 null_count=col.null_count, children=[structs])
