"""Arrow schema and column building (no Spark session needed), with the C record walker and with
the pure-Python one."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from kafkalog.errors import InvalidRecordError
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, Header, RecordColumns, SimpleRecord, TimestampType
from kafkalog.spark.arrow import ColumnBuilder, arrow_schema, spark_schema

T0 = 1_700_000_000_000


@pytest.fixture(params=[True, False], ids=["native", "python"])
def use_native(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_spark_demands(include_headers):
    assert to_arrow_schema(spark_schema(include_headers), timezone="UTC") == arrow_schema(include_headers)


def _batch(offsets, ts_type=TimestampType.CREATE_TIME, headers=None, magic=2,
           codec=CompressionType.NONE):
    offsets = list(offsets)
    records = [
        SimpleRecord(b"v%d" % o, b"k%d" % o if o % 2 else None, T0 + o,
                     headers[i] if headers is not None else ())
        for i, o in enumerate(offsets)
    ]
    built = MemoryRecords.with_records(magic, codec, records, offsets[0], timestamp_type=ts_type,
                                       log_append_time=T0 + 999)
    (batch,) = list(built.batches())
    return batch


def test_builder_trims_to_range_and_emits_columns(use_native):
    b = ColumnBuilder("orders", 2, include_headers=False, use_native=use_native)
    assert b.add(_batch(range(10, 20)), 15, None) == 5
    assert b.add(_batch(range(20, 30), TimestampType.LOG_APPEND_TIME), None, 23) == 3
    assert b.add(_batch(range(30, 40)), 0, 30) == 0
    rb = b.build()
    assert rb.schema == arrow_schema(False)
    rb.validate(full=True)
    assert rb.column("offset").to_pylist() == [15, 16, 17, 18, 19, 20, 21, 22]
    assert rb.column("timestampType").to_pylist() == [0] * 5 + [1] * 3
    assert rb.column("key").to_pylist()[:2] == [b"k15", None]
    assert rb.column("value").to_pylist()[-1] == b"v22"
    assert set(rb.column("topic").to_pylist()) == {"orders"}
    assert set(rb.column("partition").to_pylist()) == {2}
    assert rb.column("timestamp")[0].as_py() == dt.datetime.fromtimestamp(1_700_000_000.015, dt.UTC)
    # LogAppendTime batches report the batch max timestamp for every record
    assert rb.column("timestamp")[-1].as_py() == dt.datetime.fromtimestamp(1_700_000_000.999, dt.UTC)
    assert b.build() is None


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD, CompressionType.LZ4])
def test_headers_null_when_absent_and_list_when_present(use_native, codec):
    hs = [(), (Header("a", b"1"), Header("b", None)), ()]
    b = ColumnBuilder("t", 0, include_headers=True, use_native=use_native)
    b.add(_batch([0, 1, 2], headers=hs, codec=codec))
    rb = b.build()
    rb.validate(full=True)
    both = [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    assert rb.column("headers").to_pylist() == [None, both, None]
    b.add(_batch([3, 4]))
    assert b.build().column("headers").to_pylist() == [None, None]


def test_legacy_batches_and_mixed_timestamp_types(use_native):
    b = ColumnBuilder("t", 0, include_headers=True, use_native=use_native)
    assert b.add(_batch(range(5), magic=0, codec=CompressionType.GZIP), 1, None) == 4
    assert b.add(_batch(range(5, 7), magic=1, ts_type=TimestampType.LOG_APPEND_TIME,
                        codec=CompressionType.SNAPPY)) == 2
    cols = RecordColumns([7, 8, 9], [-1, T0, T0], TimestampType.CREATE_TIME, [None] * 3, [b"x"] * 3,
                         [()] * 3, [-1] * 3, [], [TimestampType.NO_TIMESTAMP_TYPE, TimestampType.CREATE_TIME,
                                                  TimestampType.CREATE_TIME])
    assert b.add_columns(cols, 8, None) == 2
    rb = b.build()
    rb.validate(full=True)
    assert rb.column("offset").to_pylist() == [1, 2, 3, 4, 5, 6, 8, 9]
    assert rb.column("timestampType").to_pylist() == [-1] * 4 + [1, 1, 0, 0]
    assert rb.column("headers").null_count == 8


def test_same_batches_from_both_walkers():
    batches = [_batch(range(i, i + 7), headers=[(Header("h", b"%d" % j),) if j % 3 else () for j in range(7)])
               for i in range(0, 70, 7)]
    out = []
    for native in (True, False):
        b = ColumnBuilder("t", 3, include_headers=True, use_native=native)
        for batch in batches:
            b.add(batch, 3, 66)
        out.append(b.build())
    assert out[0].equals(out[1])
    assert pa.Table.from_batches([out[0]]).num_rows == 63


def test_timestamp_beyond_spark_range_is_one_clear_error(use_native):
    b = ColumnBuilder("t", 0, include_headers=False, use_native=use_native)
    b.add_columns(RecordColumns([0], [2**62], TimestampType.CREATE_TIME, [None], [b"v"], [()], [-1], []))
    with pytest.raises(InvalidRecordError, match="cannot be represented as a Spark timestamp"):
        b.build()


def test_read_range_bounds_arrow_batches_by_decoded_bytes(tmp_path, monkeypatch):
    # zstd batches of zeros are tiny on disk and large decoded: the chunking must follow the
    # decoded size, or one Arrow batch would hold the whole partition
    from kafkalog.spark import reader
    from kafkalog.storage.log_manager import LogManager

    with LogManager(tmp_path) as lm:
        (log,) = lm.create_topic("z", 1)
        for b in range(40):
            records = [SimpleRecord(b"\0" * 10_000, b"k", T0 + b * 10 + i) for i in range(10)]
            log.append_as_leader(MemoryRecords.with_records(2, CompressionType.ZSTD, records))
    assert sum(p.stat().st_size for p in (tmp_path / "z-0").glob("*.log")) < 100_000
    monkeypatch.setattr(reader, "ARROW_BATCH_BYTES", 256 * 1024)
    part = reader.KafkaLogInputPartition(str(tmp_path), "z", 0, 0, 400)
    chunks = list(reader.read_range(part))
    assert sum(c.num_rows for c in chunks) == 400
    # at most one record batch (100 KB decoded) past the bound
    assert max(c.column("value").nbytes for c in chunks) <= 256 * 1024 + 110_000
    assert len(chunks) >= 10


def test_topic_and_partition_columns_fit_every_batch_size(use_native):
    # the constant columns are built once and sliced: a smaller batch after a bigger one, and a
    # bigger one after that, must each get exactly their own length
    b = ColumnBuilder("orders", 7, include_headers=False, use_native=use_native)
    for first, n in [(0, 10), (10, 3), (13, 25)]:
        b.add(_batch(range(first, first + n)))
        rb = b.build()
        rb.validate(full=True)
        assert rb.num_rows == n
        assert rb.column("topic").to_pylist() == ["orders"] * n
        assert rb.column("partition").to_pylist() == [7] * n
        assert rb.column("offset").to_pylist() == list(range(first, first + n))
        # what Spark receives: the batch through Arrow IPC
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rb.schema) as writer:
            writer.write_batch(rb)
        assert pa.ipc.open_stream(sink.getvalue()).read_all().to_batches()[0].equals(rb)
