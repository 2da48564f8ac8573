"""Batch reads: Spark returns exactly what the storage layer (and the CLI) give, for every option."""

from __future__ import annotations

import shutil

import pytest
from pyspark.errors import PySparkException
from pyspark.sql.types import StringType, StructField, StructType

from kafkalog.records import CompressionType
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.reader import KafkaLogBatchReader
from kafkalog.storage.log_manager import LogManager

from ._util import (
    T0,
    append_transactions,
    build_topic,
    cli_rows,
    copy_golden,
    log_rows,
    read,
    spark_rows,
    without_headers,
)

CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD,
          CompressionType.SNAPPY)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, kafka_golden_dir):
    d = tmp_path_factory.mktemp("read")
    copy_golden(kafka_golden_dir / "s1_v2_single" / "rolled", d, "s1")
    copy_golden(kafka_golden_dir / "s2_v2_mixed", d, "s2")
    copy_golden(kafka_golden_dir / "s3_legacy", d, "s3")
    # s1's rolled segment followed by the first 40 bytes of a 31st batch (a writer died mid-append).
    copy_golden(kafka_golden_dir / "s1_v2_single" / "rolled", d, "torn")
    shutil.copyfile(kafka_golden_dir / "s4_recovery_input_torn_tail.log",
                    d / "torn-0" / "00000000000000000000.log")
    # 3 partitions, several segments each, every codec.
    build_topic(d, "events", 3, 45, 20, codecs=CODECS,
                configs={"segment.bytes": "4096", "index.interval.bytes": "256"})
    build_topic(d, "appendtime", 1, 4, 5, configs={"message.timestamp.type": "LogAppendTime"})
    build_topic(d, "v1format", 1, 4, 5, configs={"message.format.version": "0.10.2"}, headers=False)
    append_transactions(d, "txn")
    return d


@pytest.mark.parametrize("topic", ["s1", "s2", "s3"])
def test_golden_kafka_segments(spark, data_dir, topic):
    df = read(spark, data_dir, subscribe=topic, includeHeaders="true")
    assert spark_rows(df) == log_rows(data_dir, topic)
    assert spark_rows(df) == cli_rows(data_dir, topic)
    assert spark_rows(read(spark, data_dir, subscribe=topic)) == without_headers(log_rows(data_dir, topic))


def test_torn_tail_is_never_returned(spark, data_dir):
    rows = spark_rows(read(spark, data_dir, subscribe="torn"))
    assert [r[2] for r in rows] == list(range(30))
    assert [r[1:] for r in rows] == [r[1:] for r in without_headers(log_rows(data_dir, "s1"))][:30]


def test_golden_semantics(spark, data_dir):
    s2 = spark_rows(read(spark, data_dir, subscribe="s2", includeHeaders="true"))
    # LogAppendTime batch: every record reports the batch max timestamp, type 1.
    log_append = [r for r in s2 if r[4] == 1]
    assert log_append and {r[3] for r in log_append} == {T0 + 50}
    # Headers (one with a null value) survive; records without headers have null.
    with_headers = next(r[7] for r in s2 if r[7])
    assert ("h1", b"v1") in with_headers and ("h-null", None) in with_headers
    assert any(r[7] is None for r in s2)
    # The ABORT control batch is never a row: offsets have a gap where it sits.
    assert all(r[6] != b"\x00\x00\x00\x00\x00\x0b" for r in s2)
    s3 = spark_rows(read(spark, data_dir, subscribe="s3"))
    assert [r[2] for r in s3] == list(range(9))
    assert {r[4] for r in s3 if r[2] < 4} == {-1}  # v0: no timestamp type, timestamp -1
    assert {r[3] for r in s3 if r[2] < 4} == {-1}
    assert {r[4] for r in s3 if r[2] >= 4} == {0}


def test_storage_written_topics_all_codecs(spark, data_dir):
    for topic in ("events", "appendtime", "v1format"):
        df = read(spark, data_dir, subscribe=topic, includeHeaders="true")
        expected = log_rows(data_dir, topic)
        assert spark_rows(df) == expected
        assert cli_rows(data_dir, topic) == expected
    assert {r[4] for r in log_rows(data_dir, "appendtime")} == {1}
    assert len(log_rows(data_dir, "events")) == 45 * 20


def test_isolation_levels(spark, data_dir):
    uncommitted = spark_rows(read(spark, data_dir, subscribe="txn"))
    committed = spark_rows(read(spark, data_dir, subscribe="txn",
                                **{"kafka.isolation.level": "read_committed"}))
    values_u = [r[6] for r in uncommitted]
    values_c = [r[6] for r in committed]
    assert b"aborted-1" in values_u and b"open-1" in values_u and b"plain-4" in values_u
    # read_committed: aborted records hidden, and nothing from the open transaction on (the LSO).
    assert values_c == [b"plain-0", b"plain-1", b"plain-2", b"committed-1", b"committed-2", b"plain-3"]
    assert committed == without_headers(log_rows(data_dir, "txn", read_committed=True))
    assert committed == without_headers(cli_rows(data_dir, "txn", read_committed=True))
    assert uncommitted == without_headers(log_rows(data_dir, "txn"))


def test_starting_and_ending_offsets(spark, data_dir):
    all_rows = log_rows(data_dir, "events")
    df = read(spark, data_dir, subscribe="events", includeHeaders="true",
              startingOffsets='{"events":{"0":7,"1":-2,"2":100}}',
              endingOffsets='{"events":{"0":250,"1":-1,"2":101}}')
    bounds = {0: (7, 250), 1: (0, 10**9), 2: (100, 101)}
    assert spark_rows(df) == [r for r in all_rows if bounds[r[1]][0] <= r[2] < bounds[r[1]][1]]
    with pytest.raises(PySparkException, match="must name all topic-partitions"):
        read(spark, data_dir, subscribe="events", startingOffsets='{"events":{"0":7}}').count()
    with pytest.raises(PySparkException, match="startingOffsets"):
        read(spark, data_dir, subscribe="events", startingOffsets="latest").count()


def _first_at(data_dir, topic, ts):
    with LogManager(data_dir, read_only=True) as lm:
        out = {}
        for p in lm.partitions(topic):
            found = lm.get_log(topic, p).offset_for_timestamp(ts)
            out[p] = None if found is None else found.offset
        return out


def test_timestamp_options(spark, data_dir):
    all_rows = log_rows(data_dir, "events")
    start_ts, end_ts = T0 + 2000, T0 + 6000
    starts, ends = _first_at(data_dir, "events", start_ts), _first_at(data_dir, "events", end_ts)
    expected = [r for r in all_rows if starts[r[1]] <= r[2] < ends[r[1]]]
    df = read(spark, data_dir, subscribe="events", includeHeaders="true",
              startingTimestamp=str(start_ts), endingTimestamp=str(end_ts))
    assert spark_rows(df) == expected and expected
    # Per-partition JSON; the global option wins when both are given.
    js = '{"events":{"0":%d,"1":%d,"2":%d}}'
    df = read(spark, data_dir, subscribe="events", includeHeaders="true",
              startingOffsetsByTimestamp=js % (start_ts, start_ts, start_ts),
              endingOffsetsByTimestamp=js % (end_ts, end_ts, end_ts), startingOffsets="earliest")
    assert spark_rows(df) == expected
    df = read(spark, data_dir, subscribe="events", startingTimestamp=str(start_ts),
              startingOffsetsByTimestamp=js % (0, 0, 0))
    got = {r[2] for r in spark_rows(df) if r[1] == 0}
    assert got == {r[2] for r in all_rows if r[1] == 0 and r[2] >= starts[0]}
    # No record that late: the strategy decides (error by default, latest on request).
    late = str(T0 + 10**9)
    with pytest.raises(PySparkException, match="startingOffsetsByTimestampStrategy"):
        read(spark, data_dir, subscribe="events", startingTimestamp=late).count()
    assert read(spark, data_dir, subscribe="events", startingTimestamp=late,
                startingOffsetsByTimestampStrategy="latest").count() == 0
    # An ending timestamp past every record means "latest".
    assert read(spark, data_dir, subscribe="events", endingTimestamp=late).count() == len(all_rows)


def test_assign_and_subscribe_pattern(spark, data_dir):
    all_rows = log_rows(data_dir, "events")
    df = read(spark, data_dir, assign='{"events":[0,2]}', includeHeaders="true")
    assert spark_rows(df) == [r for r in all_rows if r[1] in (0, 2)]
    df = read(spark, data_dir, subscribePattern="s[0-9]", includeHeaders="true")
    assert {r[0] for r in spark_rows(df)} == {"s1", "s2", "s3"}
    expected = log_rows(data_dir, "s1") + log_rows(data_dir, "s2") + log_rows(data_dir, "s3")
    assert spark_rows(df) == sorted(expected)
    # Spark's AssignStrategy: assigned partitions that do not exist are skipped; a missing topic fails
    assert spark_rows(read(spark, data_dir, assign='{"events":[0,7]}', includeHeaders="true")) == [
        r for r in all_rows if r[1] == 0]
    assert read(spark, data_dir, assign='{"events":[7]}').count() == 0
    with pytest.raises(PySparkException, match="topic 'nosuch' does not exist"):
        read(spark, data_dir, assign='{"nosuch":[0]}').count()
    assert read(spark, data_dir, subscribe="nosuchtopic").count() == 0


def test_min_partitions_splits_at_batch_boundaries(spark, data_dir):
    opts = parse_source_options({"path": str(data_dir), "subscribe": "events", "minpartitions": "12"},
                                streaming=False)
    ranges = KafkaLogBatchReader(opts).plan()
    assert len(ranges) == 12  # 300 offsets per partition: round(300 / 900 * 12) = 4 pieces each
    # Every split point is a batch boundary (batches hold 20 records, appended round-robin).
    for r in ranges:
        assert r.from_offset % 20 == 0 and (r.until_offset % 20 == 0 or r.until_offset == 300)
    df = read(spark, data_dir, subscribe="events", minPartitions="12", includeHeaders="true")
    assert df.rdd.getNumPartitions() == len(ranges)
    assert spark_rows(df) == log_rows(data_dir, "events")


def test_fail_on_data_loss(spark, tmp_path):
    build_topic(tmp_path, "lossy", 1, 10, 10, configs={"segment.bytes": "1024"})
    with LogManager(tmp_path) as lm:
        log = lm.get_log("lossy", 0)
        log.delete_records_before(35)
        start = log.log_start_offset
    assert start == 35
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        read(spark, tmp_path, subscribe="lossy", startingOffsets='{"lossy":{"0":3}}').count()
    df = read(spark, tmp_path, subscribe="lossy", startingOffsets='{"lossy":{"0":3}}', failOnDataLoss="false")
    assert [r[2] for r in spark_rows(df)] == list(range(35, 100))
    assert read(spark, tmp_path, subscribe="lossy").count() == 65


def test_errors_are_one_clear_message(spark, data_dir):
    with pytest.raises(PySparkException) as e:
        read(spark, data_dir, subscribe="events", startingOffset="earliest").count()
    assert "Unknown option 'startingoffset'" in str(e.value)
    # get_session() hides Python tracebacks: the message is all there is (no frame before it).
    assert str(e.value).count('File "') == 0
    assert "instance: kafkalog.errors.InvalidConfigError: Unknown option" in str(e.value)
    with pytest.raises(PySparkException, match="fixed schema"):
        spark.read.format("kafkalog").schema(StructType([StructField("value", StringType())])) \
            .option("subscribe", "events").load(str(data_dir)).count()


def test_internal_topics_are_never_read(spark, tmp_path):
    """Spark's Kafka source (admin client, Spark 3.4+) drops internal topics from every subscription:
    subscribe and assign naming __consumer_offsets read nothing, a pattern does not match it."""
    data = tmp_path / "data"
    data.mkdir()
    build_topic(data, "__consumer_offsets", 1, 1, 5, headers=False)
    build_topic(data, "t", 1, 1, 5, headers=False)
    assert read(spark, data, subscribe="__consumer_offsets").count() == 0
    assert read(spark, data, assign='{"__consumer_offsets":[0]}').count() == 0
    assert read(spark, data, subscribe="__consumer_offsets,t").count() == 5
    assert {r.topic for r in read(spark, data, subscribePattern=".*").select("topic").collect()} == {"t"}
