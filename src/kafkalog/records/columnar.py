"""Records of many batches accumulated as Arrow-layout column buffers, for bulk readers.

A bulk reader (the Spark source) wants every key and value of millions of records as Arrow
columns. Building Python lists first and converting them costs more than everything else of the
read, so ``ColumnAccumulator`` writes the columns directly in Arrow's memory layout — int64
offsets and timestamps, int32 timestamp types, binary columns as validity bitmap + int32 end
offsets + data — and hands out plain buffers (``ColumnChunk``). The C walker does this without
creating one Python object per record; without it a pure-Python accumulator produces the same
buffers from decoded columns. This module imports no Arrow: ``pyarrow.Array.from_buffers`` turns
a chunk into arrays without copying (``kafkalog.spark.arrow``).

Layout details (Arrow's columnar format): bitmaps are LSB-first, one bit per row, set for a
non-null value; an offsets buffer holds rows + 1 int32s starting at 0; numbers are in the
machine's byte order. ``headers`` is ``list<struct<key: string, value: binary>>`` with a null
list for a record without headers, as Spark's Kafka source reports them.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Protocol

from kafkalog.errors import InvalidRecordError
from kafkalog.records import default_batch
from kafkalog.records.batch import RecordBatch
from kafkalog.records.native import native
from kafkalog.records.types import MAGIC_V2, Header, RecordColumns, TimestampType

__all__ = ["BinaryColumn", "ColumnAccumulator", "ColumnChunk", "HeadersColumn"]

BytesLike = bytes | bytearray | memoryview

# Offsets of one chunk are int32: take() well before this many bytes of keys or values.
MAX_CHUNK_DATA = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BinaryColumn:
    """A nullable binary (or UTF-8 string) column in Arrow's layout."""

    validity: BytesLike
    null_count: int
    offsets: BytesLike
    data: BytesLike


@dataclass(frozen=True, slots=True)
class HeadersColumn:
    """``list<struct<key: string, value: binary>>``: list validity and offsets over the items."""

    validity: BytesLike
    null_count: int
    offsets: BytesLike
    keys: BinaryColumn
    values: BinaryColumn


@dataclass(frozen=True, slots=True)
class ColumnChunk:
    """``rows`` records of one topic-partition as column buffers (see the module docstring)."""

    rows: int
    offsets: BytesLike
    timestamps: BytesLike
    timestamp_types: BytesLike
    keys: BinaryColumn
    values: BinaryColumn
    headers: HeadersColumn | None


class _Impl(Protocol):
    def add_v2(self, data: BytesLike, pos: int, count: int, base_offset: int, base_timestamp: int,
               timestamp_type: int, log_append_time: int | None, start: int, end: int) -> int: ...

    def add_rows(self, offsets: list[int], timestamps: list[int], timestamp_types: list[int],
                 keys: list[bytes | None], values: list[bytes | None],
                 headers: list[tuple[Header, ...]]) -> None: ...

    def take(self) -> tuple[Any, ...]: ...

    def __len__(self) -> int: ...

    @property
    def nbytes(self) -> int: ...


class ColumnAccumulator:
    """Accumulates the records of record batches (of one partition) as column buffers.

    ``add(batch, start, end)`` appends the records whose offset is in [start, end) — checking the
    whole batch, as a decode would — and ``take()`` returns everything accumulated as a
    ``ColumnChunk`` and starts over. A batch that fails to decode leaves nothing behind.
    """

    __slots__ = ("_impl", "include_headers")

    def __init__(self, include_headers: bool = False, *, use_native: bool | None = None) -> None:
        if use_native is None:
            use_native = native is not None
        elif use_native and native is None:
            raise RuntimeError("the C record walker (kafkalog.records._native) is not available")
        self.include_headers = include_headers
        self._impl: _Impl
        if use_native:
            assert native is not None  # checked above
            self._impl = native.ColumnAccumulator(include_headers)
        else:
            self._impl = _PyAccumulator(include_headers)

    def __len__(self) -> int:
        return len(self._impl)

    @property
    def nbytes(self) -> int:
        """Bytes of keys, values and fixed-width columns accumulated so far."""
        return self._impl.nbytes

    def add(self, batch: RecordBatch, start: int | None = None, end: int | None = None) -> int:
        """Append the records of ``batch`` with ``start <= offset < end``; returns how many."""
        if batch.magic >= MAGIC_V2:
            count = batch.record_count
            if count <= 0:
                default_batch.check_record_count(count, default_batch.batch_where(batch.position,
                                                                                  batch.base_offset))
                return 0
            lo = -(2**63) if start is None else start
            hi = 2**63 - 1 if end is None else end
            entry = batch.buffer
            attributes = batch.attributes
            ts_type = batch.timestamp_type
            where = default_batch.batch_where(batch.position, batch.base_offset)
            data, pos = default_batch.records_area(entry, attributes, where)
            try:
                return self._impl.add_v2(
                    data, pos, count, batch.base_offset, batch.base_timestamp, int(ts_type),
                    batch.max_timestamp if ts_type is TimestampType.LOG_APPEND_TIME else None, lo, hi)
            except ValueError as e:
                raise default_batch.native_error(e, where) from None
        return self.add_columns(batch.decode_columns(), start, end)

    def add_columns(self, cols: RecordColumns, start: int | None = None, end: int | None = None) -> int:
        """Append already decoded records (the path of legacy messages); returns how many."""
        lo = -(2**63) if start is None else start
        hi = 2**63 - 1 if end is None else end
        offsets = cols.offsets
        i = bisect_left(offsets, lo) if offsets and offsets[0] < lo else 0
        j = bisect_left(offsets, hi) if offsets and offsets[-1] >= hi else len(offsets)
        if i >= j:
            return 0
        if cols.timestamp_types is not None:
            types = [int(t) for t in cols.timestamp_types[i:j]]
        else:
            types = [int(cols.timestamp_type)] * (j - i)
        self._impl.add_rows(offsets[i:j], cols.timestamps[i:j], types, cols.keys[i:j], cols.values[i:j],
                            cols.headers[i:j])
        return j - i

    def take(self) -> ColumnChunk:
        """Everything accumulated (possibly zero rows), leaving the accumulator empty."""
        rows, offsets, timestamps, types, keys, values, headers = self._impl.take()
        header_column = None
        if headers is not None:
            validity, nulls, list_offsets, hkeys, hvalues = headers
            header_column = HeadersColumn(validity, nulls, list_offsets, BinaryColumn(*hkeys),
                                          BinaryColumn(*hvalues))
        return ColumnChunk(rows, offsets, timestamps, types, BinaryColumn(*keys), BinaryColumn(*values),
                           header_column)


# --- the pure-Python accumulator -----------------------------------------------------------------


def _bytes_view(numbers: array[int]) -> memoryview:
    return memoryview(numbers).cast("B")


def _truncate_rows(validity: bytearray, offsets: array[int], rows: int) -> int:
    """Cut a column's validity bitmap and offsets back to ``rows`` rows; returns how many of the
    dropped rows were null."""
    dropped_nulls = sum(not validity[i >> 3] >> (i & 7) & 1 for i in range(rows, len(offsets) - 1))
    del offsets[rows + 1:]
    del validity[(rows + 7) >> 3:]
    if rows & 7:
        validity[rows >> 3] &= (1 << (rows & 7)) - 1
    return dropped_nulls


class _PyBinary:
    __slots__ = ("data", "nulls", "offsets", "validity")

    def __init__(self) -> None:
        self.validity = bytearray()
        self.nulls = 0
        self.offsets = array("i", [0])
        self.data = bytearray()

    def extend(self, items: list[bytes | None]) -> None:
        validity, offsets, data = self.validity, self.offsets, self.data
        row = len(offsets) - 1
        for item in items:
            if row & 7 == 0:
                validity.append(0)
            if item is None:
                self.nulls += 1
            else:
                if len(data) + len(item) > MAX_CHUNK_DATA:
                    raise OverflowError("more than 2 GiB of keys or values in one column chunk")
                data += item
                validity[row >> 3] |= 1 << (row & 7)
            offsets.append(len(data))
            row += 1

    def truncate(self, rows: int) -> None:
        """Forget every row from ``rows`` on (undo of a failed extend)."""
        if len(self.offsets) - 1 > rows:
            del self.data[self.offsets[rows]:]
            self.nulls -= _truncate_rows(self.validity, self.offsets, rows)

    def take(self) -> tuple[bytearray, int, memoryview, bytearray]:
        return (self.validity, self.nulls, _bytes_view(self.offsets), self.data)


class _PyHeaders:
    __slots__ = ("keys", "nulls", "offsets", "validity", "values")

    def __init__(self) -> None:
        self.validity = bytearray()
        self.nulls = 0
        self.offsets = array("i", [0])
        self.keys = _PyBinary()
        self.values = _PyBinary()

    def extend(self, headers: list[tuple[Header, ...]]) -> None:
        validity, offsets = self.validity, self.offsets
        row = len(offsets) - 1
        for hs in headers:
            if row & 7 == 0:
                validity.append(0)
            if hs:
                validity[row >> 3] |= 1 << (row & 7)
                self.keys.extend([h.key.encode() for h in hs])
                self.values.extend([h.value for h in hs])
            else:
                self.nulls += 1
            offsets.append(len(self.keys.offsets) - 1)
            row += 1

    def truncate(self, rows: int) -> None:
        if len(self.offsets) - 1 > rows:
            items = self.offsets[rows]
            self.keys.truncate(items)
            self.values.truncate(items)
            self.nulls -= _truncate_rows(self.validity, self.offsets, rows)

    def take(self) -> tuple[Any, ...]:
        return (self.validity, self.nulls, _bytes_view(self.offsets), self.keys.take(), self.values.take())


class _PyAccumulator:
    """The same buffers as the C ``ColumnAccumulator``, from decoded Python lists."""

    __slots__ = ("_headers", "_include_headers", "_keys", "_offsets", "_rows", "_timestamps", "_types",
                 "_values")

    def __init__(self, include_headers: bool) -> None:
        self._include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self._rows = 0
        self._offsets = array("q")
        self._timestamps = array("q")
        self._types = array("i")
        self._keys = _PyBinary()
        self._values = _PyBinary()
        self._headers = _PyHeaders()

    def __len__(self) -> int:
        return self._rows

    @property
    def nbytes(self) -> int:
        return (len(self._keys.data) + len(self._values.data) + len(self._headers.keys.data)
                + len(self._headers.values.data) + 28 * self._rows)

    def add_v2(self, data: BytesLike, pos: int, count: int, base_offset: int, base_timestamp: int,
               timestamp_type: int, log_append_time: int | None, start: int, end: int) -> int:
        try:
            offsets, timestamps, keys, values, headers, _ = default_batch.decode_records_area(
                # "{where}" left for ColumnAccumulator.add to fill in, as in the C walk's messages
                bytes(data), pos, count, base_offset, base_timestamp, log_append_time, "{where}")
        except InvalidRecordError as e:
            raise ValueError(str(e), -1) from None
        keep = [i for i, o in enumerate(offsets) if start <= o < end]
        if len(keep) != len(offsets):
            offsets = [offsets[i] for i in keep]
            timestamps = [timestamps[i] for i in keep]
            keys = [keys[i] for i in keep]
            values = [values[i] for i in keep]
            headers = [headers[i] for i in keep]
        self.add_rows(offsets, timestamps, [timestamp_type] * len(offsets), keys, values, headers)
        return len(offsets)

    def add_rows(self, offsets: list[int], timestamps: list[int], timestamp_types: list[int],
                 keys: list[bytes | None], values: list[bytes | None],
                 headers: list[tuple[Header, ...]]) -> None:
        n = len(offsets)
        if not (len(timestamps) == len(timestamp_types) == len(keys) == len(values) == len(headers) == n):
            raise ValueError("add_rows: the sequences differ in length")
        rows = self._rows
        try:
            self._offsets.extend(offsets)
            self._timestamps.extend(timestamps)
            self._types.extend(timestamp_types)
            self._keys.extend(keys)
            self._values.extend(values)
            if self._include_headers:
                self._headers.extend(headers)
        except BaseException:
            # Leave nothing of a failed add behind.
            del self._offsets[rows:], self._timestamps[rows:], self._types[rows:]
            self._keys.truncate(rows)
            self._values.truncate(rows)
            self._headers.truncate(rows)
            raise
        self._rows += n

    def take(self) -> tuple[Any, ...]:
        headers = self._headers.take() if self._include_headers else None
        # Writable byte views, like the C accumulator's bytearrays (readers may convert in place).
        out = (self._rows, _bytes_view(self._offsets), _bytes_view(self._timestamps),
               _bytes_view(self._types), self._keys.take(), self._values.take(), headers)
        self._reset()
        return out
