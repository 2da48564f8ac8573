"""One DataFrame, many queries: every query shape returns exactly Spark's rows, and a later action
on the same DataFrame sees the log as it is then (appends, retention), as Spark's Kafka source does.

PySpark 4.3.0 keeps one read plan per ``load()`` and hands it to every later scan of the
DataFrame; these shapes returned wrong rows or failed when that plan was narrowed by pushdown.
Expected rows come from the storage layer (``log_rows``), never from the source itself."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.spark.pushdown import plan_kept_per_scan
from kafkalog.storage.log_manager import LogManager

from ._util import T0, build_topic, log_rows, read, spark_rows

N_BATCHES, PER_BATCH = 12, 10  # 2 partitions x 60 records


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("reuse")
    build_topic(d, "two", 2, N_BATCHES, PER_BATCH, headers=False)
    return d


def ts(ms: int):
    return F.lit(ms / 1000).cast("timestamp")


def part(rows, p):
    return [r for r in rows if r[1] == p]


def test_every_shape_on_one_dataframe(spark, data_dir):
    rows = log_rows(data_dir, "two")
    assert len(part(rows, 0)) == len(part(rows, 1)) == N_BATCHES * PER_BATCH // 2
    df = read(spark, data_dir, subscribe="two")

    # Two differently filtered views of one DataFrame in one query.
    assert spark_rows(df.where("partition = 0").union(df.where("partition = 1"))) == rows
    # The whole DataFrame and a filtered view of it: partition 1 appears twice, as it must.
    assert spark_rows(df.union(df.where("partition = 1"))) == sorted(rows + part(rows, 1))
    # A filtered plan only explained / optimized, then the whole DataFrame.
    df.where("partition = 0").explain()
    df.where("partition = 1")._jdf.queryExecution().optimizedPlan()
    assert df.count() == len(rows)
    # A filtered action, then an unfiltered one.
    assert df.where("partition = 1 AND offset < 5").count() == 5
    assert df.count() == len(rows)
    # A cached filtered DataFrame, then the whole one.
    cached = df.where("offset < 7").cache()
    try:
        assert cached.count() == 14
        assert df.count() == len(rows)
        assert cached.count() == 14
    finally:
        cached.unpersist()
    # A pushable filter, then one with OR (not pushable).
    assert spark_rows(df.where("offset < 3")) == [r for r in rows if r[2] < 3]
    assert spark_rows(df.where("offset < 3 OR partition = 0")) == [
        r for r in rows if r[2] < 3 or r[1] == 0]
    # Three different timestamp filters in a row.
    for x in (T0 + 50, T0 + 600, T0 + 1100):
        assert spark_rows(df.where(F.col("timestamp") >= ts(x))) == [r for r in rows if r[3] >= x], x


def test_shapes_with_spark_pushdown_flag_on(spark, data_dir):
    """With ``spark.sql.python.filterPushdown.enabled=true`` (set for some other source, say) Spark
    asks the default reader to push filters too; where it shares plans, that reader pushes none."""
    from kafkalog.spark.session import FILTER_PUSHDOWN_CONF

    rows = log_rows(data_dir, "two")
    before = spark.conf.get(FILTER_PUSHDOWN_CONF)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    try:
        df = read(spark, data_dir, subscribe="two")
        assert spark_rows(df.where("partition = 0").union(df.where("partition = 1"))) == rows
        assert df.where("partition = 1").count() == len(part(rows, 1))
        assert df.count() == len(rows)
    finally:
        spark.conf.set(FILTER_PUSHDOWN_CONF, before)


def test_later_actions_see_appends_and_retention(spark, tmp_path):
    build_topic(tmp_path, "grow", 2, 6, 10, configs={"segment.bytes": "600"}, headers=False)
    df = read(spark, tmp_path, subscribe="grow")
    split = read(spark, tmp_path, subscribe="grow", minPartitions="6")
    assert spark_rows(df) == spark_rows(split) == log_rows(tmp_path, "grow")
    # More records after the first action: the same DataFrames see them.
    build_topic(tmp_path, "grow", 2, 4, 10, headers=False)
    assert len(log_rows(tmp_path, "grow")) == 100
    assert spark_rows(df) == spark_rows(split) == log_rows(tmp_path, "grow")
    # Retention removes the head: the same DataFrames read from the new log start.
    with LogManager(tmp_path) as lm:
        for p in (0, 1):
            lm.get_log("grow", p).delete_records_before(25)
    expected = log_rows(tmp_path, "grow")
    assert [r[2] for r in part(expected, 0)] == list(range(25, 50))
    assert spark_rows(df) == spark_rows(split) == expected


def test_explicit_offsets_lost_since_planning_follow_fail_on_data_loss(spark, tmp_path):
    build_topic(tmp_path, "lossy", 1, 10, 10, configs={"segment.bytes": "600"}, headers=False)
    strict = read(spark, tmp_path, subscribe="lossy", startingOffsets='{"lossy":{"0":3}}')
    lenient = read(spark, tmp_path, subscribe="lossy", startingOffsets='{"lossy":{"0":3}}',
                   failOnDataLoss="false")
    assert strict.count() == lenient.count() == 97
    with LogManager(tmp_path) as lm:
        lm.get_log("lossy", 0).delete_records_before(40)
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        strict.count()
    assert [r[2] for r in spark_rows(lenient)] == list(range(40, 100))


def test_pushdown_follows_what_spark_does_with_the_plan(spark, tmp_path):
    """The cheap class check (``plan_kept_per_scan``) agrees with a probe query on a tiny source
    that narrows its plan by a pushed filter: a later unfiltered scan of the same DataFrame sees
    every row only where Spark keeps the plan per scan."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo

    class ProbeReader(DataSourceReader):
        def __init__(self):
            self.only = None

        def pushFilters(self, filters):
            rest = []
            for f in filters:
                if isinstance(f, EqualTo) and f.attribute == ("x",):
                    self.only = f.value
                else:
                    rest.append(f)
            return rest

        def read(self, partition):
            for x in range(3):
                if self.only is None or x == self.only:
                    yield (x,)

    class ProbeSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_plan_probe"

        def schema(self):
            return "x int"

        def reader(self, schema):
            return ProbeReader()

    from kafkalog.spark.session import FILTER_PUSHDOWN_CONF

    spark.dataSource.register(ProbeSource)
    before = spark.conf.get(FILTER_PUSHDOWN_CONF)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    try:
        df = spark.read.format("kafkalog_plan_probe").load()
        assert df.where("x = 1").count() == 1
        per_scan = df.count() == 3
    finally:
        spark.conf.set(FILTER_PUSHDOWN_CONF, before)
    assert plan_kept_per_scan() == per_scan
    # The default reader follows it; filterPushdown=false is always the plain reader.
    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.source import pushdown_enabled

    opts = {"path": str(tmp_path), "subscribe": "t"}
    assert pushdown_enabled(parse_source_options(opts, streaming=False)) == per_scan
    assert not pushdown_enabled(parse_source_options({**opts, "filterpushdown": "false"}, streaming=False))
    assert pushdown_enabled(parse_source_options({**opts, "filterpushdown": "true"}, streaming=False))


def test_missing_subscribed_topic_reads_nothing_with_one_warning(spark, data_dir, caplog):
    import logging

    from kafkalog.spark.catalog import TopicCatalog
    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.reader import warn_missing_topics

    assert read(spark, data_dir, subscribe="nosuchtopic,two").where("partition = 0").count() == 60
    opts = parse_source_options({"path": str(data_dir), "subscribe": "nosuchtopic,two"}, streaming=False)
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark.reader"), TopicCatalog(str(data_dir)) as c:
        warn_missing_topics(c, opts)
    assert len(caplog.records) == 1 and "'nosuchtopic'" in caplog.records[0].getMessage()
    assert "'two'" not in caplog.records[0].getMessage()


def test_empty_partition_planned_now_is_read_later(spark, tmp_path):
    with LogManager(tmp_path) as lm:
        lm.create_topic("late", 2)
    df = read(spark, tmp_path, subscribe="late")
    assert df.count() == 0
    with LogManager(tmp_path) as lm:
        recs = [SimpleRecord(b"v%d" % i, None, T0 + i) for i in range(4)]
        lm.get_log("late", 1).append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, recs))
    assert spark_rows(df) == log_rows(tmp_path, "late")
    assert df.count() == 4
