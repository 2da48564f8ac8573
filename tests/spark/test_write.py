"""Writes: round trip, Kafka's partitioner, topic configs honoured, clear schema errors, and
appends serialised per partition (whole, non-interleaved batches) even from several processes."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from kafkalog.errors import LogDirLockedError
from kafkalog.records import CompressionType, MemoryRecordsBuilder, TimestampType
from kafkalog.spark.options import parse_sink_options
from kafkalog.spark.writer import _append_batches, _describe_topic
from kafkalog.storage.log_manager import LogManager

from ._util import log_rows, read, spark_rows

with warnings.catch_warnings():
    # kafka-python's package import warns about importlib.resources; only its murmur2 is used.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

HEADERS = "array<struct<key:string,value:binary>>"


def oracle_partition(key: bytes, n: int) -> int:
    """kafka-python's DefaultPartitioner for a keyed record (murmur2 & 0x7fffffff % n)."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


def create(data_dir: Path, topic: str, partitions: int, configs: dict | None = None) -> None:
    with LogManager(data_dir) as lm:
        lm.create_topic(topic, partitions, configs or {})


def write(df, data_dir: Path, **options: str) -> None:
    df.write.format("kafkalog").options(**options).mode("append").save(str(data_dir))


def test_round_trip_and_murmur2_partitions(spark, tmp_path):
    create(tmp_path, "rt", 5)
    ts = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=dt.UTC)
    rows = [
        (f"key-{i}", b"value-%d" % i, [("h", b"%d" % i), ("n", None)] if i % 3 == 0 else None, ts, "rt")
        for i in range(500)
    ]
    df = spark.createDataFrame(rows, f"key string, value binary, headers {HEADERS}, timestamp timestamp, "
                                     "topic string")
    write(df.repartition(3), tmp_path)
    got = spark_rows(read(spark, tmp_path, subscribe="rt", includeHeaders="true"))
    assert got == log_rows(tmp_path, "rt")
    assert len(got) == 500
    ms = int(ts.timestamp() * 1000)
    for topic, partition, _offset, timestamp, ts_type, key, value, headers in got:
        i = int(value.split(b"-")[1])
        assert key == b"key-%d" % i
        assert partition == oracle_partition(key, 5)
        assert (timestamp, ts_type, topic) == (ms, 0, "rt")
        assert headers == ((("h", b"%d" % i), ("n", None)) if i % 3 == 0 else None)


def test_known_murmur2_vectors(spark, tmp_path):
    # Vectors computed with kafka-python (the Java client's algorithm), keys of every length mod 4.
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"kafka", b"\xff\xfe\x00", "κλειδί".encode()]
    expected = {k: oracle_partition(k, 7) for k in keys}
    create(tmp_path, "mm", 7)
    df = spark.createDataFrame([(k, b"v") for k in keys], "key binary, value binary")
    write(df, tmp_path, topic="mm")
    got = {r[5]: r[1] for r in spark_rows(read(spark, tmp_path, subscribe="mm"))}
    assert got == expected


def test_keyless_records_stick_to_a_partition_per_batch(spark, tmp_path):
    create(tmp_path, "sticky", 4)
    df = spark.createDataFrame([(b"x" * 100,) for _ in range(2000)], "value binary").coalesce(1)
    write(df, tmp_path, topic="sticky")
    got = spark_rows(read(spark, tmp_path, subscribe="sticky"))
    assert len(got) == 2000
    counts = {p: sum(1 for r in got if r[1] == p) for p in range(4)}
    assert sum(1 for c in counts.values() if c) >= 2  # 200 KB moved on every 16 KiB (batch.size)


def test_topic_column_option_partition_column(spark, tmp_path):
    create(tmp_path, "a", 2)
    create(tmp_path, "b", 3)
    df = spark.createDataFrame([("a", 1, "x"), ("b", 2, "y"), ("b", None, "z")],
                               "topic string, partition int, value string")
    write(df, tmp_path)
    got = {(r[0], r[1], r[6]) for r in spark_rows(read(spark, tmp_path, subscribePattern="a|b"))}
    assert {("a", 1, b"x"), ("b", 2, b"y")} <= got and len(got) == 3
    # The option overrides the column.
    write(df.where("topic = 'a'"), tmp_path, topic="b")
    assert read(spark, tmp_path, subscribe="b").count() == 3
    with pytest.raises(PySparkException, match="invalid partition 2 for topic 'a'"):
        write(spark.createDataFrame([(2, "v")], "partition int, value string"), tmp_path, topic="a")
    with pytest.raises(PySparkException, match="null topic"):
        write(spark.createDataFrame([(None, "v")], "topic string, value string"), tmp_path)


def test_schema_and_topic_errors(spark, tmp_path):
    create(tmp_path, "t", 1)
    df = spark.createDataFrame([(1, "v")], "key int, value string")
    # Spark's KafkaWriter messages (its tests match them case-insensitively), in its order:
    # topic, key, value, headers, partition.
    key_type = "key attribute unsupported type int. key must be a(n) string or binary"
    with pytest.raises(PySparkException, match=re.escape(key_type)):
        write(df, tmp_path, topic="t")
    with pytest.raises(PySparkException, match="Required attribute 'value' not found"):
        write(df.selectExpr("CAST(key AS STRING) AS key"), tmp_path, topic="t")
    # Spark's KafkaWriter matches column names exactly: "Value" is not the value
    with pytest.raises(PySparkException, match=r"not found .*case-sensitive"):
        write(df.selectExpr("value AS Value"), tmp_path, topic="t")
    with pytest.raises(PySparkException, match="topic option required when no 'topic' attribute is present"):
        write(df.select("value"), tmp_path)
    topic_type = "topic attribute unsupported type int. topic must be a(n) string"
    with pytest.raises(PySparkException, match=re.escape(topic_type)):
        write(df.selectExpr("key AS topic", "value"), tmp_path)
    with pytest.raises(PySparkException, match=re.escape("partition attribute unsupported type bigint. "
                                                         "partition must be a(n) int")):
        write(df.selectExpr("CAST(key AS BIGINT) AS partition", "value"), tmp_path, topic="t")
    with pytest.raises(PySparkException, match="headers attribute unsupported type string"):
        write(df.selectExpr("value AS headers", "value"), tmp_path, topic="t")
    # The topic checked first (no key problem reported while the topic is missing) ...
    with pytest.raises(PySparkException, match="topic option required"):
        write(df, tmp_path)
    # ... and with the topic option set, a topic column of any type is never looked at.
    write(df.selectExpr("key AS topic", "value"), tmp_path, topic="t")
    assert read(spark, tmp_path, subscribe="t").count() == 1
    with pytest.raises(PySparkException, match="topic 'nope' does not exist"):
        write(df.select("value"), tmp_path, topic="nope")
    with pytest.raises(PySparkException, match="overwrite is not allowed"):
        df.select("value").write.format("kafkalog").option("topic", "t").mode("overwrite").save(str(tmp_path))
    write(df.select("value"), tmp_path, topic="new", createTopicPartitions="3")
    with LogManager(tmp_path, read_only=True) as lm:
        assert lm.partitions("new") == [0, 1, 2]
    assert read(spark, tmp_path, subscribe="new").count() == 1


def test_other_columns_are_ignored_as_spark_ignores_them(spark, tmp_path):
    """Spark's Kafka sink takes only topic, key, value, headers, partition and (since SPARK-50160) a
    timestamp or double "timestamp"; anything else is ignored -- a string column named "timestamp"
    (JSON data has them) too, as Spark's sink before that ignored it."""
    create(tmp_path, "t", 1)
    before = int(time.time() * 1000)
    df = spark.createDataFrame([("v", "2020-01-01 00:00:00", 7)], "value string, timestamp string, extra int")
    write(df, tmp_path, topic="t")
    (row,) = read(spark, tmp_path, subscribe="t").collect()
    assert row.value == b"v"
    assert int(row.timestamp.timestamp() * 1000) >= before - 1000  # the time of the write


def test_timestamp_column_is_the_record_timestamp(spark, tmp_path):
    """A timestamp column, or a double one of seconds, becomes each record's CreateTime, as Spark's
    sink casts it (microseconds truncated to ms toward zero); a null one is the time of the write."""
    create(tmp_path, "t", 1)
    before = int(time.time() * 1000)
    df = spark.createDataFrame(
        [("a", 1_700_000_000.1234567), ("b", 1.5005), ("c", None), ("d", float("nan"))],
        "value string, timestamp double").coalesce(1)
    write(df, tmp_path, topic="t")
    write(df.selectExpr("value", "CAST(timestamp AS TIMESTAMP) AS timestamp").where("value = 'a'"),
          tmp_path, topic="t")
    with LogManager(tmp_path, read_only=True) as lm:
        got = [(r.value, r.timestamp) for r in lm.get_log("t", 0).records(0)]
    assert got[0] == (b"a", 1_700_000_000_123) and got[1] == (b"b", 1_500)
    assert [v for v, _ in got[2:4]] == [b"c", b"d"] and all(ts >= before for _, ts in got[2:4])
    assert got[4] == (b"a", 1_700_000_000_123)
    # Before 1970: Kafka's producer refuses a negative timestamp, and so does the append.
    with pytest.raises(PySparkException, match="negative timestamp"):
        write(spark.createDataFrame([("e", -1.5)], "value string, timestamp double"), tmp_path, topic="t")


def test_topic_configs_are_honoured(spark, tmp_path):
    create(tmp_path, "gz", 1, {"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    create(tmp_path, "old", 1, {"message.format.version": "0.10.2"})
    df = spark.createDataFrame([(f"v{i}",) for i in range(50)], "value string").coalesce(1)
    before = int(time.time() * 1000)
    write(df, tmp_path, topic="gz")
    write(df, tmp_path, topic="old", **{"kafka.compression.type": "lz4"})
    with LogManager(tmp_path, read_only=True) as lm:
        (batch,) = list(lm.get_log("gz", 0).batches(0))
        assert batch.compression_type is CompressionType.GZIP
        assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        old = list(lm.get_log("old", 0).batches(0))
        assert {b.magic for b in old} == {1} and {b.compression_type for b in old} == {CompressionType.LZ4}
    got = spark_rows(read(spark, tmp_path, subscribe="gz"))
    assert {r[4] for r in got} == {1} and min(r[3] for r in got) >= before
    old_values = [r[6] for r in spark_rows(read(spark, tmp_path, subscribe="old"))]
    assert old_values == [b"v%d" % i for i in range(50)]
    hdf = spark.createDataFrame([("v", [("k", b"x")])], f"value string, headers {HEADERS}")
    with pytest.raises(PySparkException, match="no record headers"):
        write(hdf, tmp_path, topic="old")


def test_refuses_while_a_log_manager_owns_the_directory(spark, tmp_path):
    create(tmp_path, "t", 1)
    df = spark.createDataFrame([("v",)], "value string")
    with LogManager(tmp_path), pytest.raises(PySparkException, match="has it open for writing"):
        write(df, tmp_path, topic="t")
    write(df, tmp_path, topic="t")
    assert read(spark, tmp_path, subscribe="t").count() == 1


_LOCKF_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("taken")
except OSError:
    print("refused")
"""


def test_a_refused_task_in_the_owners_process_leaves_its_lock(tmp_path):
    # The writer used to open .lock itself: closing that second descriptor dropped the POSIX lock of
    # a LogManager in the same process, and a broker could then take the directory.
    create(tmp_path, "t", 1)
    builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
    builder.append(-1, None, b"v")
    config, _ = _describe_topic(str(tmp_path), "t", None)
    with LogManager(tmp_path) as lm:
        with pytest.raises(LogDirLockedError, match="has it open for writing"):
            _append_batches(str(tmp_path), "t", 0, config, [builder.build()])
        probe = subprocess.run([sys.executable, "-c", _LOCKF_PROBE, str(tmp_path / ".lock")],
                               capture_output=True, text=True, timeout=30, check=True)
        assert probe.stdout.strip() == "refused"
        assert lm.get_log("t", 0).log_end_offset == 0
    _append_batches(str(tmp_path), "t", 0, config, [builder.build()])
    assert [r[6] for r in log_rows(tmp_path, "t")] == [b"v"]


def test_two_spark_tasks_one_partition(spark, tmp_path):
    create(tmp_path, "c", 2, {"max.message.bytes": "65536"})
    n = 6000
    # Two Spark partitions (so two concurrent tasks), each with the rows of one writer.
    df = spark.range(0, n, 1, 2).select(
        F.lit(0).alias("partition"),
        F.concat(F.lit("task"), F.spark_partition_id().cast("string"), F.lit("-"), F.col("id").cast("string"),
                 F.lit("." * 200)).cast("binary").alias("value"),
    )
    write(df, tmp_path, topic="c")
    _assert_whole_homogeneous_batches(tmp_path, "c", n, lambda v: v[:5])


def _writer_process(path: str, name: bytes, appends: int) -> None:
    config, _ = _describe_topic(path, "p", None)
    for i in range(appends):
        builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
        for j in range(20):
            builder.append(-1, None, b"%s-%04d-%02d" % (name, i, j))
        _append_batches(path, "p", 0, config, [builder.build()])


def test_two_processes_one_partition(tmp_path):
    create(tmp_path, "p", 1)
    parse_sink_options({"path": str(tmp_path), "topic": "p"})
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer_process, args=(str(tmp_path), name, 60)) for name in (b"A", b"B")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    _assert_whole_homogeneous_batches(tmp_path, "p", 2 * 60 * 20, lambda v: v[:1])
    # Crash recovery finds nothing to cut: every batch was written whole.
    with LogManager(tmp_path, force_recovery=True, full_recovery=True) as lm:
        assert lm.get_log("p", 0).log_end_offset == 2400


def _assert_whole_homogeneous_batches(data_dir, topic, total, writer_of) -> None:
    seen = 0
    writers = set()
    with LogManager(data_dir, read_only=True) as lm:
        for p in lm.partitions(topic):
            log = lm.get_log(topic, p)
            expected_offset = 0
            for batch in log.batches(0):
                batch.ensure_valid()
                cols = batch.decode_columns()
                assert cols.offsets == list(range(expected_offset, expected_offset + len(cols.offsets)))
                expected_offset += len(cols.offsets)
                owners = {writer_of(v) for v in cols.values}
                assert len(owners) == 1, owners  # one writer per batch
                writers |= owners
                seen += len(cols.offsets)
    assert seen == total and len(writers) == 2


def _append_until(path: str, stop, minimum: int) -> None:
    config, _ = _describe_topic(path, "live", None)
    i = 0
    while not stop.is_set() or i < minimum:
        builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
        for _ in range(50):
            builder.append(-1, None, b"r-%07d" % i)
            i += 1
        _append_batches(path, "live", 0, config, [builder.build()])


def test_reads_next_to_a_running_writer(spark, tmp_path):
    # Small segments, so the writer rolls (and trims indexes) while Spark reads.
    create(tmp_path, "live", 1, {"segment.bytes": "16384", "index.interval.bytes": "512"})
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_append_until, args=(str(tmp_path), stop, 20_000))
    proc.start()
    state = tmp_path / "live-0" / ".kafkalog-append.lock"
    deadline = time.monotonic() + 60
    while not (state.exists() and state.read_text().strip() not in ("", "clean 0")):
        assert time.monotonic() < deadline and proc.is_alive(), "the writer process did not start appending"
        time.sleep(0.05)
    try:
        counts: list[int] = []
        while len(counts) < 4:
            got = spark_rows(read(spark, tmp_path, subscribe="live"))
            # Always a whole prefix of what the writer appended: contiguous offsets, values in order.
            assert [r[2] for r in got] == list(range(len(got)))
            assert [r[6] for r in got] == [b"r-%07d" % i for i in range(len(got))]
            assert len(got) % 50 == 0
            counts.append(len(got))
    finally:
        stop.set()
        proc.join(60)
    assert proc.exitcode == 0
    assert counts == sorted(counts) and counts[-1] > counts[0]
    assert read(spark, tmp_path, subscribe="live").count() == len(log_rows(tmp_path, "live"))
