"""Filter pushdown: partition/offset filters plan exact ranges; ``timestamp >= X`` starts each range
at the time index's answer, so only the segments that can hold X and later are read.

On PySpark 4.3.0 pushdown is off by default (see test_reuse.py); these tests opt in with
``filterPushdown=true`` and one fresh DataFrame per query, the shape that is correct there."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan

from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.reader import KafkaLogFilteringReader
from kafkalog.storage.log_manager import LogManager

from ._util import T0, build_topic, log_rows, read, spark_rows


def utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pushdown")
    # 2 partitions x 40 batches x 25 records, ~1 KiB segments: many segments per partition.
    build_topic(d, "ts", 2, 80, 25, configs={"segment.bytes": "4096", "index.interval.bytes": "512"},
                headers=False)
    # Out-of-order timestamps: a late batch carries old timestamps.
    with LogManager(d) as lm:
        (log,) = lm.create_topic("ooo", 1, {"segment.bytes": "2048"})
        for b in range(30):
            base = T0 + (5 if b == 20 else b * 100)
            recs = [SimpleRecord(b"v%d-%d" % (b, i), None, base + i) for i in range(10)]
            log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, recs))
    return d


@pytest.fixture(scope="module", autouse=True)
def pushdown_conf(spark):
    from kafkalog.spark.session import FILTER_PUSHDOWN_CONF

    before = spark.conf.get(FILTER_PUSHDOWN_CONF)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    yield
    spark.conf.set(FILTER_PUSHDOWN_CONF, before)


def pushed(spark, data_dir, **options):
    return read(spark, data_dir, filterPushdown="true", **options)


def plan(data_dir, topic, filters):
    opts = parse_source_options({"path": str(data_dir), "subscribe": topic}, streaming=False)
    reader = KafkaLogFilteringReader(opts)
    rest = reader.pushFilters(filters)
    return reader.plan(), rest


def segment_bases(data_dir, topic, partition):
    with LogManager(data_dir, read_only=True) as lm:
        return lm.get_log(topic, partition).segments.base_offsets()


def test_timestamp_lower_bound_reads_only_late_segments(spark, data_dir):
    all_rows = log_rows(data_dir, "ts")
    ts_sorted = sorted(r[3] for r in all_rows)
    x = ts_sorted[int(len(ts_sorted) * 0.9)]  # the last 10 %
    f = GreaterThanOrEqual(("timestamp",), utc(x))
    ranges, rest = plan(data_dir, "ts", [f])
    assert rest == [f]  # Spark re-applies it
    for r in ranges:
        bases = segment_bases(data_dir, "ts", r.partition)
        assert len(bases) > 5
        first_wanted = min(row[2] for row in all_rows if row[1] == r.partition and row[3] >= x)
        assert r.from_offset == first_wanted
        touched = [b for b in bases if b < r.until_offset and (b >= r.from_offset or b == max(
            x for x in bases if x <= r.from_offset))]
        # Only the segment holding the first wanted record and the later ones are read.
        assert len(touched) <= len(bases) // 5 + 1
    # A fresh DataFrame per query: Spark 4.3.0 shares a DataFrame's last pushed-down plan between
    # all its scans (see KafkaLogFilteringReader).
    got = spark_rows(pushed(spark, data_dir, subscribe="ts").where(F.col("timestamp") >= F.lit(utc(x))))
    assert got == [r for r in all_rows if r[3] >= x]
    got = spark_rows(pushed(spark, data_dir, subscribe="ts").where(F.col("timestamp") > F.lit(utc(x))))
    assert got == [r for r in all_rows if r[3] > x]


def test_out_of_order_timestamps_are_never_lost(spark, data_dir):
    all_rows = log_rows(data_dir, "ooo")
    for x in (T0 + 3, T0 + 7, T0 + 150, T0 + 1905, T0 + 2999):
        got = spark_rows(pushed(spark, data_dir, subscribe="ooo").where(F.col("timestamp") >= F.lit(utc(x))))
        assert got == [r for r in all_rows if r[3] >= x], x
        got = spark_rows(pushed(spark, data_dir, subscribe="ooo").where(F.col("timestamp") < F.lit(utc(x))))
        assert got == [r for r in all_rows if r[3] < x], x


def test_partition_and_offset_filters_are_exact(spark, data_dir):
    ranges, rest = plan(data_dir, "ts", [In(("partition",), [1]), GreaterThanOrEqual(("offset",), 90),
                                         LessThan(("offset",), 95), EqualTo(("topic",), "ts")])
    assert rest == []
    assert [(r.partition, r.from_offset, r.until_offset) for r in ranges] == [(1, 90, 95)]
    ranges, _ = plan(data_dir, "ts", [In(("offset",), [3, 4, 5, 700, 2000]), GreaterThan(("partition",), 0)])
    assert [(r.partition, r.from_offset, r.until_offset) for r in ranges] == [(1, 3, 6), (1, 700, 701)]
    all_rows = log_rows(data_dir, "ts")
    q = pushed(spark, data_dir, subscribe="ts").where("partition = 1 AND offset >= 90 AND offset < 95")
    assert q.rdd.getNumPartitions() == 1
    assert spark_rows(q) == [r for r in all_rows if r[1] == 1 and 90 <= r[2] < 95]
    q = pushed(spark, data_dir, subscribe="ts").where("offset IN (3, 500) OR partition = 0")  # OR: not pushed
    assert spark_rows(q) == [r for r in all_rows if r[2] in (3, 500) or r[1] == 0]
    assert pushed(spark, data_dir, subscribe="ts").where("topic = 'other'").count() == 0


def test_pushdown_switches(spark, data_dir):
    from pyspark.errors import PySparkException

    from kafkalog.spark.pushdown import plan_kept_per_scan
    from kafkalog.spark.session import FILTER_PUSHDOWN_CONF

    n = len(log_rows(data_dir, "ts"))
    spark.conf.set(FILTER_PUSHDOWN_CONF, "false")
    try:
        # Opting in needs Spark's flag: Spark refuses a reader with pushFilters without it.
        with pytest.raises(PySparkException, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
            pushed(spark, data_dir, subscribe="ts").count()
        # The plain reader works whatever the flag says.
        df = read(spark, data_dir, subscribe="ts", filterPushdown="false")
        assert df.where("partition = 0").count() == n // 2
        assert df.count() == n
        if not plan_kept_per_scan():
            # The default, where Spark shares one plan between scans: the plain reader too.
            assert read(spark, data_dir, subscribe="ts").where("partition = 0").count() == n // 2
    finally:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")


def test_opt_in_pushdown_on_a_reused_dataframe_goes_wrong_as_documented(spark, data_dir):
    """docs/SPARK.md lists what ``filterPushdown=true`` does to a reused DataFrame where Spark
    shares the plan; this keeps that list true (and notices when a Spark stops doing it)."""
    from kafkalog.spark.pushdown import plan_kept_per_scan

    if plan_kept_per_scan():
        pytest.skip("this Spark keeps each scan's plan: nothing goes wrong to document")
    rows = log_rows(data_dir, "ts")
    p1 = [r for r in rows if r[1] == 1]
    df = pushed(spark, data_dir, subscribe="ts")
    assert spark_rows(df.where("partition = 0").union(df.where("partition = 1"))) == sorted(p1 + p1)
    df = pushed(spark, data_dir, subscribe="ts")
    assert df.where("partition = 1").count() == len(p1)
    assert df.count() == len(p1)  # the narrowed plan again
