"""The source's schema and the column-wise construction of its Arrow record batches.

Spark accepts a yielded ``pyarrow.RecordBatch`` only if its schema *equals*
``to_arrow_schema(schema, timezone="UTC")``: same names, types and nullability (``int32``,
``int64``, ``binary``, ``string``, ``timestamp[us, tz=UTC]``, a list item called ``element``).
``arrow_schema`` spells that out without importing pyspark; a test checks the two agree.

Rows are never materialised as Python tuples: ``ColumnBuilder`` appends the parallel lists of
each decoded record batch (``RecordColumns``) and turns them into Arrow arrays in one call per
column, with numpy doing the per-row arithmetic (ms -> us).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from kafkalog.errors import InvalidRecordError
from kafkalog.records.types import Header, RecordColumns

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
    """Accumulates decoded record batches of ONE topic-partition and emits Arrow record batches."""

    __slots__ = ("_headers", "_include_headers", "_keys", "_offsets", "_partition", "_timestamps",
                 "_topic", "_ts_type_runs", "_values")

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self._topic = topic
        self._partition = partition
        self._include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._headers: list[tuple[Header, ...]] = []
        # (count, timestampType) runs: one run per batch, so no per-row list is needed.
        self._ts_type_runs: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, cols: RecordColumns, start_offset: int | None = None, end_offset: int | None = None) -> int:
        """Append the records of ``cols`` whose offset is in [start_offset, end_offset); returns how many."""
        offsets = cols.offsets
        lo = 0 if start_offset is None or not offsets or offsets[0] >= start_offset else bisect_left(
            offsets, start_offset)
        hi = len(offsets) if end_offset is None or not offsets or offsets[-1] < end_offset else bisect_left(
            offsets, end_offset)
        n = hi - lo
        if n <= 0:
            return 0
        whole = lo == 0 and hi == len(offsets)

        def part(seq: list) -> list:
            return seq if whole else seq[lo:hi]

        self._offsets.extend(part(offsets))
        self._timestamps.extend(part(cols.timestamps))
        self._keys.extend(part(cols.keys))
        self._values.extend(part(cols.values))
        if self._include_headers:
            self._headers.extend(part(cols.headers))
        if cols.timestamp_types is None:
            self._ts_type_runs.append((n, int(cols.timestamp_type)))
        else:
            # Only a legacy wrapper mixing v0 and v1 inner messages has per-record types.
            self._ts_type_runs.extend((1, int(t)) for t in part(cols.timestamp_types))
        return n

    def build(self) -> pa.RecordBatch | None:
        """The accumulated rows as one Arrow record batch (None when empty); the builder is emptied."""
        n = len(self._offsets)
        if n == 0:
            return None
        ts_ms = np.fromiter(self._timestamps, dtype=np.int64, count=n)
        if n and (int(ts_ms.max()) > _MAX_MS or int(ts_ms.min()) < -_MAX_MS):
            bad = int(ts_ms.max()) if int(ts_ms.max()) > _MAX_MS else int(ts_ms.min())
            raise InvalidRecordError(
                f"Record timestamp {bad} ms in {self._topic}-{self._partition} cannot be represented as a "
                "Spark timestamp"
            )
        counts, types = zip(*self._ts_type_runs, strict=True)
        ts_types = np.repeat(np.asarray(types, dtype=np.int32), np.asarray(counts, dtype=np.int64))
        columns = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            pa.repeat(pa.scalar(self._topic, pa.string()), n),
            pa.repeat(pa.scalar(self._partition, pa.int32()), n),
            pa.array(self._offsets, pa.int64()),
            pa.array(ts_ms * 1000, _TS_TYPE),
            pa.array(ts_types, pa.int32()),
        ]
        if self._include_headers:
            columns.append(headers_array(self._headers))
        batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema(self._include_headers))
        self._reset()
        return batch


def headers_array(headers: Sequence[tuple[Header, ...]]) -> pa.Array:
    """``array<struct<key,value>>`` with a null entry for every record without headers (as Spark's
    Kafka source reports them)."""
    n = len(headers)
    if not any(headers):
        return pa.nulls(n, HEADERS_TYPE)
    list_offsets = np.empty(n + 1, dtype=np.int32)
    list_offsets[0] = 0
    lengths = np.fromiter(map(len, headers), dtype=np.int32, count=n)
    np.cumsum(lengths, out=list_offsets[1:])
    flat = [h for hs in headers for h in hs]
    keys = pa.array([h.key for h in flat], pa.string())
    values = pa.array([h.value for h in flat], pa.binary())
    items = pa.StructArray.from_arrays([keys, values], fields=list(_HEADER_STRUCT))
    mask = pa.array(lengths == 0)
    return pa.ListArray.from_arrays(pa.array(list_offsets), items, type=HEADERS_TYPE, mask=mask)
