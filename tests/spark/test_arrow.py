"""Arrow schema and column building (no Spark session needed)."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from kafkalog.records.types import Header, RecordColumns, TimestampType
from kafkalog.spark.arrow import ColumnBuilder, arrow_schema, spark_schema


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_spark_demands(include_headers):
    assert to_arrow_schema(spark_schema(include_headers), timezone="UTC") == arrow_schema(include_headers)


def _cols(offsets, ts_type=TimestampType.CREATE_TIME, headers=None, ts_types=None):
    n = len(offsets)
    return RecordColumns(
        list(offsets), [1_700_000_000_000 + o for o in offsets], ts_type,
        [b"k%d" % o if o % 2 else None for o in offsets], [b"v%d" % o for o in offsets],
        headers if headers is not None else [()] * n, [-1] * n, [], ts_types,
    )


def test_builder_trims_to_range_and_emits_columns():
    b = ColumnBuilder("orders", 2, include_headers=False)
    assert b.add(_cols(range(10, 20)), 15, None) == 5
    assert b.add(_cols(range(20, 30), TimestampType.LOG_APPEND_TIME), None, 23) == 3
    assert b.add(_cols(range(30, 40)), 0, 30) == 0
    rb = b.build()
    assert rb.schema == arrow_schema(False)
    assert rb.column("offset").to_pylist() == [15, 16, 17, 18, 19, 20, 21, 22]
    assert rb.column("timestampType").to_pylist() == [0] * 5 + [1] * 3
    assert rb.column("key").to_pylist()[:2] == [b"k15", None]
    assert set(rb.column("topic").to_pylist()) == {"orders"}
    assert set(rb.column("partition").to_pylist()) == {2}
    assert rb.column("timestamp")[0].as_py() == dt.datetime.fromtimestamp(1_700_000_000.015, dt.UTC)
    assert b.build() is None


def test_headers_null_when_absent_and_list_when_present():
    hs = [(), (Header("a", b"1"), Header("b", None)), ()]
    b = ColumnBuilder("t", 0, include_headers=True)
    b.add(_cols([0, 1, 2], headers=hs))
    col = b.build().column("headers").to_pylist()
    assert col == [None, [{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None]
    b.add(_cols([3, 4]))
    assert b.build().column("headers").to_pylist() == [None, None]


def test_legacy_mixed_timestamp_types():
    b = ColumnBuilder("t", 0, include_headers=False)
    b.add(_cols([0, 1, 2], ts_types=[TimestampType.NO_TIMESTAMP_TYPE, TimestampType.CREATE_TIME,
                                     TimestampType.CREATE_TIME]), 1, None)
    assert b.build().column("timestampType").to_pylist() == [0, 0]
