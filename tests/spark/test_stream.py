"""Streaming: AvailableNow runs resume from the checkpoint exactly once, maxOffsetsPerTrigger splits
micro-batches, new partitions/topics are read from their earliest offset, data loss is reported per
failOnDataLoss, and writeStream appends through the sink."""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from kafkalog.storage.log_manager import LogManager

from ._util import build_topic, log_rows, read, spark_rows


def run_available_now(spark, data_dir, out, ckpt, **options: str):
    reader = spark.readStream.format("kafkalog").options(**options).load(str(data_dir))
    query = (reader.writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    try:
        query.awaitTermination(180)
    finally:
        query.stop()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def sink_rows(spark, out):
    df = spark.read.parquet(str(out)).select("topic", "partition", "offset", "value")
    return sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())


def expected(data_dir, topic):
    return [(r[0], r[1], r[2], r[6]) for r in log_rows(data_dir, topic)]


def test_available_now_resumes_exactly_once(spark, tmp_path):
    data, out, ckpt = tmp_path / "data", tmp_path / "out", tmp_path / "ckpt"
    data.mkdir()
    build_topic(data, "s", 2, 10, 50, headers=False)  # 500 records, 250 per partition
    opts = {"subscribe": "s", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "120"}
    batches = run_available_now(spark, data, out, ckpt, **opts)
    # 120 per trigger, split in proportion to the two partitions' backlog: 60 + 60.
    assert batches == [120, 120, 120, 120, 20]
    assert sink_rows(spark, out) == expected(data, "s")
    build_topic(data, "s", 2, 4, 50, headers=False)
    # A new query object: restarts from the checkpoint, reads only what was appended.
    batches = run_available_now(spark, data, out, ckpt, **opts)
    assert sum(batches) == 200
    assert sink_rows(spark, out) == expected(data, "s")  # each record exactly once
    assert run_available_now(spark, data, out, ckpt, **opts) == []


def test_default_start_is_latest_and_new_topics_start_at_earliest(spark, tmp_path):
    data, out, ckpt = tmp_path / "data", tmp_path / "out", tmp_path / "ckpt"
    data.mkdir()
    build_topic(data, "p-a", 1, 2, 10, headers=False)
    assert run_available_now(spark, data, out, ckpt, subscribePattern="p-.*") == []
    build_topic(data, "p-a", 1, 1, 10, headers=False)
    build_topic(data, "p-b", 2, 2, 10, headers=False)  # a topic created after the query started
    with LogManager(data) as lm:
        lm.add_partitions("p-a", 2)  # and a partition added to an existing topic
    build_topic(data, "p-a", 2, 2, 5, headers=False)
    run_available_now(spark, data, out, ckpt, subscribePattern="p-.*")
    got = sink_rows(spark, out)
    want = [r for r in expected(data, "p-a") if not (r[1] == 0 and r[2] < 20)] + expected(data, "p-b")
    assert got == sorted(want)
    assert {(r[0], r[1]) for r in got} == {("p-a", 0), ("p-a", 1), ("p-b", 0), ("p-b", 1)}


def test_starting_timestamp_stream(spark, tmp_path):
    data, out, ckpt = tmp_path / "data", tmp_path / "out", tmp_path / "ckpt"
    data.mkdir()
    build_topic(data, "t", 1, 5, 10, headers=False, ts_step=1000)
    from ._util import T0

    run_available_now(spark, data, out, ckpt, subscribe="t", startingTimestamp=str(T0 + 20_000))
    assert [r[2] for r in sink_rows(spark, out)] == list(range(20, 50))


def test_fail_on_data_loss(spark, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    build_topic(data, "d", 1, 5, 20, headers=False, configs={"segment.bytes": "2048"})
    opts = {"subscribe": "d", "startingOffsets": "earliest"}
    for fail in ("true", "false"):
        assert run_available_now(spark, data, tmp_path / f"out-{fail}", tmp_path / f"ckpt-{fail}", **opts,
                                 failOnDataLoss=fail) == [100]
    build_topic(data, "d", 1, 5, 20, headers=False)
    # Retention removes records the queries have not read yet (100..149).
    with LogManager(data) as lm:
        log = lm.get_log("d", 0)
        log.delete_records_before(150)
        assert log.log_start_offset == 150
    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        run_available_now(spark, data, tmp_path / "out-true", tmp_path / "ckpt-true", **opts,
                          failOnDataLoss="true")
    run_available_now(spark, data, tmp_path / "out-false", tmp_path / "ckpt-false", **opts,
                      failOnDataLoss="false")
    offsets = [r[2] for r in sink_rows(spark, tmp_path / "out-false")]
    assert offsets == list(range(100)) + list(range(150, 200))


def test_write_stream_copies_a_topic(spark, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    build_topic(data, "src", 2, 6, 25)
    with LogManager(data) as lm:
        lm.create_topic("dst", 3)
    stream = (spark.readStream.format("kafkalog").option("subscribe", "src")
              .option("startingOffsets", "earliest").option("includeHeaders", "true").load(str(data))
              .selectExpr("key", "value", "headers"))
    query = (stream.writeStream.format("kafkalog").option("topic", "dst")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
             .start(str(data)))
    query.awaitTermination(120)
    query.stop()
    src = spark_rows(read(spark, data, subscribe="src", includeHeaders="true"))
    dst = spark_rows(read(spark, data, subscribe="dst", includeHeaders="true"))
    assert len(dst) == len(src) == 150
    assert sorted(repr(r[5:]) for r in dst) == sorted(repr(r[5:]) for r in src)


def test_output_mode_complete_appends_every_epoch(spark, tmp_path):
    """Spark's Kafka sink accepts outputMode complete and ignores the truncation it implies (a
    topic cannot be truncated): every epoch appends the whole result table."""
    data = tmp_path / "data"
    data.mkdir()
    build_topic(data, "src", 1, 5, 20, headers=False)
    with LogManager(data) as lm:
        lm.create_topic("counts", 1)
    counts = (spark.readStream.format("kafkalog").option("subscribe", "src")
              .option("startingOffsets", "earliest").load(str(data))
              .groupBy("key").count().selectExpr("key", "CAST(count AS STRING) AS value"))
    query = (counts.writeStream.format("kafkalog").outputMode("complete").option("topic", "counts")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
             .start(str(data)))
    query.awaitTermination(180)
    query.stop()
    src = spark_rows(read(spark, data, subscribe="src"))
    expected_counts: dict[bytes, int] = {}
    for row in src:
        expected_counts[row[5]] = expected_counts.get(row[5], 0) + 1
    written = {r[5]: int(r[6]) for r in spark_rows(read(spark, data, subscribe="counts"))}
    assert written == expected_counts and len(written) > 1
