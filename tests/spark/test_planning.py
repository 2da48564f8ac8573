"""Range arithmetic that needs no Spark and no data: pushdown constraints, minPartitions splits,
maxOffsetsPerTrigger shares, offset JSON."""

from __future__ import annotations

import datetime as dt
import pickle

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from kafkalog.spark.pushdown import IntConstraint, split_filters
from kafkalog.spark.reader import KafkaLogInputPartition, OffsetRange, divide_ranges
from kafkalog.spark.stream import offsets_from_json, offsets_to_json, rate_limit

UTC = dt.UTC


def test_split_filters_offsets_partitions_topics_exact():
    filters = [
        IsNotNull(("offset",)),
        In(("partition",), [1, 3]),
        GreaterThanOrEqual(("offset",), 90),
        LessThan(("offset",), 95),
        EqualTo(("topic",), "t"),
        StringStartsWith(("key",), "k"),
        Not(EqualTo(("offset",), 3)),
    ]
    c, rest = split_filters(filters)
    assert rest == [StringStartsWith(("key",), "k"), Not(EqualTo(("offset",), 3))]
    assert c.topics == frozenset({"t"})
    assert c.partition.values == frozenset({1, 3})
    assert c.offset.ranges_within(0, 1000) == [(90, 95)]


def test_split_filters_timestamp_lower_bound_only_and_handed_back():
    x = dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)  # 1.5 ms past the second
    ms = int(dt.datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    for f, expected in [
        (GreaterThanOrEqual(("timestamp",), x), ms + 2),
        (GreaterThan(("timestamp",), x), ms + 2),
        (EqualTo(("timestamp",), x), ms + 2),
        (GreaterThan(("timestamp",), dt.datetime(2024, 1, 1, 0, 0, 0, 2000, tzinfo=UTC)), ms + 3),
        (GreaterThanOrEqual(("timestamp",), dt.datetime(2024, 1, 1, 0, 0, 0, 2000, tzinfo=UTC)), ms + 2),
        (LessThanOrEqual(("timestamp",), x), None),
    ]:
        c, rest = split_filters([f])
        assert rest == [f]
        assert c.min_timestamp_ms == expected, f


def test_split_filters_timestamp_bound_before_1970_narrows_nothing():
    # -1 ms and -3 ms would be ListOffsets' "latest" and "largest timestamp": asked as bounds, they
    # gave no rows or the wrong ones. A bound before 1970 narrows nothing; Spark re-applies it.
    for us in (-1000, -3000, -2500, -86_400_000_000):
        when = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us)
        f = GreaterThanOrEqual(("timestamp",), when)
        c, rest = split_filters([f])
        assert rest == [f]
        assert c.min_timestamp_ms is None, us
    c, _ = split_filters([GreaterThanOrEqual(("timestamp",), dt.datetime(1970, 1, 1, tzinfo=UTC))])
    assert c.min_timestamp_ms == 0


def test_int_constraint_ranges():
    c = IntConstraint().and_lo(5).and_hi(20).and_in([1, 6, 7, 8, 12, 30])
    assert c.ranges_within(0, 100) == [(6, 9), (12, 13)]
    assert c.ranges_within(7, 12) == [(7, 9)]
    assert IntConstraint().and_lo(50).ranges_within(0, 10) == []


def test_divide_ranges_like_spark():
    r = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    # Enough partitions already: unchanged (empty ranges dropped).
    assert divide_ranges(r, 2, None) == r[:2]
    out = divide_ranges(r, 4, None)
    # 100 of 110 offsets -> round(100/110*4)=4 parts... Spark excludes the unsplit small range first:
    # unsplit = [t-1] (round(10/110*4)=0 -> 1), split_total=100, split_min=3 -> t-0 in 3 parts.
    assert out == [OffsetRange("t", 0, 0, 33), OffsetRange("t", 0, 33, 66), OffsetRange("t", 0, 66, 100),
                   OffsetRange("t", 1, 0, 10)]
    # maxRecordsPerPartition=4 over 10 offsets: ceil(10/4) = 3 parts, the last takes the remainder.
    assert divide_ranges([OffsetRange("t", 0, 0, 10)], None, 4) == [
        OffsetRange("t", 0, 0, 3), OffsetRange("t", 0, 3, 6), OffsetRange("t", 0, 6, 10)]


def test_rate_limit_proportional_and_no_starvation():
    start = {("t", 0): 0, ("t", 1): 0}
    until = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 40}
    out = rate_limit(100, start, until, {("t", 2): 30})
    # sizes 1000, 10, 10 -> shares 98.0, 0.98 -> ceil 1, 0.98 -> 1
    assert out == {("t", 0): 98, ("t", 1): 1, ("t", 2): 31}
    assert rate_limit(100, start, {("t", 0): 0, ("t", 1): 0}, {}) == {("t", 0): 0, ("t", 1): 0}


def test_offsets_json_round_trip():
    offsets = {("b", 1): 5, ("a", 0): 7, ("a", 10): 1}
    js = offsets_to_json(offsets)
    assert js == {"a": {"0": 7, "10": 1}, "b": {"1": 5}}
    assert offsets_from_json(js) == offsets


def test_input_partition_pickles():
    p = KafkaLogInputPartition("/d", "t", 3, 10, 20, True, False, True)
    assert pickle.loads(pickle.dumps(p)) == p


def test_min_offsets_per_trigger_waits_at_most_max_trigger_delay(tmp_path):
    from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.stream import KafkaLogStreamReader

    opts = parse_source_options({"path": str(tmp_path), "subscribe": "t", "minoffsetspertrigger": "10",
                                 "maxtriggerdelay": "1h"}, streaming=True)
    reader = KafkaLogStreamReader(opts)
    assert reader.getDefaultReadLimit() == ReadMinRows(10)
    start, few, enough = {("t", 0): 0}, {("t", 0): 5}, {("t", 0): 10}
    assert not reader._delay_batch(start, few)  # Spark: the first batch after a start is never held
    assert reader._delay_batch(start, few)
    assert not reader._delay_batch(start, enough)
    reader._last_trigger_ms -= 3_600_000  # an hour without a batch: fire whatever is there
    assert not reader._delay_batch(start, few)
    opts = parse_source_options({"path": str(tmp_path), "subscribe": "t", "maxoffsetspertrigger": "7"},
                                streaming=True)
    assert KafkaLogStreamReader(opts).getDefaultReadLimit() == ReadMaxRows(7)


def test_auto_registration_module():
    import pyspark_kafkalog
    from kafkalog.spark.source import KafkaLogDataSource

    assert pyspark_kafkalog.DefaultSource is KafkaLogDataSource
    assert KafkaLogDataSource.name() == "kafkalog"


def test_missing_java_is_a_clear_failure(monkeypatch, tmp_path):
    from kafkalog.errors import KafkaLogError
    from kafkalog.spark.session import check_java

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KafkaLogError, match="openjdk-17"):
        check_java()


def test_class_check_for_a_plan_per_scan():
    from kafkalog.spark.pushdown import class_keeps_plan_per_scan

    # PySpark 4.3.0: the builder stores the plan on the provider; the scan has none of its own.
    assert not class_keeps_plan_per_scan(b"..setReadInfo..PythonDataSourceReadInfo..", b"..PythonBatch..")
    # Spark master: the scan carries the plan the builder made.
    assert class_keeps_plan_per_scan(b"..PythonDataSourceReadInfo..", b"..PythonDataSourceReadInfo..")
    assert not class_keeps_plan_per_scan(b"", b"")


def test_symbolic_bounds_resolved_at_read():
    from kafkalog.errors import OffsetOutOfRangeError
    from kafkalog.spark.reader import resolve_bounds

    def p(lo, hi, **kw):
        return KafkaLogInputPartition("/d", "t", 0, lo, hi, **kw)

    # earliest/latest follow the log as it is when the task starts.
    whole = p(0, 50, from_earliest=True, to_latest=True, since_earliest=True)
    assert resolve_bounds(whole, 20, 90) == (20, 90)
    # A split point of an 'earliest' range that retention passed: skipped, not data loss.
    assert resolve_bounds(p(10, 30, since_earliest=True), 20, 90) == (20, 30)
    assert resolve_bounds(p(10, 15, since_earliest=True), 20, 90) == (20, 15)
    # An explicit offset retention removed: Spark's failOnDataLoss.
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss"):
        resolve_bounds(p(10, 30), 20, 90)
    assert resolve_bounds(p(10, 30, fail_on_data_loss=False), 20, 90) == (20, 30)
    # An explicit end beyond a log that was truncated since planning.
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss"):
        resolve_bounds(p(10, 95), 0, 90)
    assert resolve_bounds(p(10, 95, fail_on_data_loss=False), 0, 90) == (10, 90)


def test_divide_ranges_keeps_symbolic_ends():
    r = OffsetRange("t", 0, 0, 90, from_earliest=True, to_latest=True, since_earliest=True)
    empty = OffsetRange("t", 1, 5, 5, to_latest=True)
    out = divide_ranges([r, empty], 4, None)
    assert [(x.from_offset, x.until_offset) for x in out] == [(0, 22), (22, 44), (44, 67), (67, 90), (5, 5)]
    assert [x.from_earliest for x in out] == [True, False, False, False, False]
    assert [x.to_latest for x in out] == [False, False, False, True, True]
    assert all(x.since_earliest for x in out[:4])


def test_worker_python_that_cannot_import_kafkalog_is_a_clear_error(tmp_path):
    import sys
    from types import SimpleNamespace

    from kafkalog.errors import KafkaLogError
    from kafkalog.spark.session import check_worker_python

    def session(python, master="local[2]"):
        return SimpleNamespace(sparkContext=SimpleNamespace(pythonExec=python, master=master))

    # A Python without kafkalog: the isolated mode ignores site-packages and the environment.
    bare = tmp_path / "bare-python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    with pytest.raises(KafkaLogError, match="PYSPARK_PYTHON") as e:
        check_worker_python(session(str(bare)))
    assert str(bare) in str(e.value) and sys.executable in str(e.value)
    with pytest.raises(KafkaLogError, match="cannot import kafkalog"):
        check_worker_python(session(str(tmp_path / "no-such-python")))
    check_worker_python(session(sys.executable))
    check_worker_python(session(str(bare), master="spark://elsewhere:7077"))  # not checkable from here
    check_worker_python(SimpleNamespace())  # Spark Connect: no context


def test_available_now_batches_are_checked_against_the_pinned_end(tmp_path):
    """Spark's verifyEndOffsetForTriggerAvailableNow: a batch of an AvailableNow run ends within what
    was pinned, on partitions that still exist and still reach it; reportLatestOffset reports the
    offsets the last latestOffset saw (the pinned ones), None before it ran."""
    import shutil

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kafkalog.errors import InvalidConfigError
    from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.stream import KafkaLogStreamReader
    from kafkalog.storage.log_manager import LogManager

    with LogManager(tmp_path) as lm:
        for log in lm.create_topic("t", 2):
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, [SimpleRecord(b"v%d" % i, None, 1) for i in range(5)]))
    opts = parse_source_options({"path": str(tmp_path), "subscribe": "t"}, streaming=True)
    reader = KafkaLogStreamReader(opts)
    assert reader.reportLatestOffset() is None
    reader.prepareForTriggerAvailableNow()
    end = reader.latestOffset({"t": {"0": 0, "1": 0}}, ReadAllAvailable())
    assert end == {"t": {"0": 5, "1": 5}} and reader.reportLatestOffset() == end
    start = {"t": {"0": 0, "1": 0}}
    assert len(reader.partitions(start, end)) == 2
    for bad, condition in (
            ({"t": {"0": 5}}, "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_END_OFFSET_AND_PREFETCHED"),
            ({"t": {"0": 6, "1": 5}}, "END_OFFSET_HAS_GREATER_OFFSET_FOR_TOPIC_PARTITION_THAN_PREFETCHED")):
        with pytest.raises(InvalidConfigError, match=condition):
            reader.partitions(start, bad)
    shutil.rmtree(tmp_path / "t-1")
    lost = "LOST_TOPIC_PARTITIONS_IN_END_OFFSET_WITH_TRIGGER_AVAILABLENOW"
    with pytest.raises(InvalidConfigError, match=lost):
        reader.partitions(start, end)
