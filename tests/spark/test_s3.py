"""Reading a data directory from S3 (moto's server on 127.0.0.1): the directory kafkalog wrote,
uploaded byte for byte, gives through ``s3://bucket/prefix`` exactly the rows of the local read for
every read option, batch and streaming; a read of the last 10 % by timestamp fetches a fraction of
the bytes of the full read; writes to S3 are refused in one line."""

from __future__ import annotations

import json
import uuid

import pytest
from pyspark.errors import PySparkException

from kafkalog.records import CompressionType
from kafkalog.spark.catalog import TopicCatalog, data_location
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.reader import KafkaLogInputPartition, plan_batch_ranges, read_range

from ._util import T0, append_transactions, build_topic, spark_rows
from .test_stream import run_available_now, sink_rows

CODECS = (CompressionType.NONE, CompressionType.ZSTD, CompressionType.LZ4, CompressionType.GZIP)
TS_STEP = 10
RECORDS = 3 * 60 * 20  # build_topic below: 60 batches of 20 per partition, 3 partitions


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3src")
    build_topic(d, "events", 3, 180, 20, codecs=CODECS, ts_step=TS_STEP,
                configs={"segment.bytes": "8192", "index.interval.bytes": "512"})
    build_topic(d, "other", 1, 10, 10, headers=False)
    append_transactions(d, "txn")
    return d


@pytest.fixture(scope="module")
def remote(s3, data_dir) -> str:
    return s3.upload(data_dir, f"kafka-{uuid.uuid4().hex[:8]}/backups/broker-1")


def _read(spark, path: str, options: dict[str, str]):
    return spark.read.format("kafkalog").options(**options).load(path)


CUT = T0 + RECORDS * TS_STEP * 9 // 10  # the last 10 % of the timestamps

OPTION_SETS = {
    "subscribe": {"subscribe": "events", "includeHeaders": "true"},
    "pattern": {"subscribePattern": "ev.*|oth.*"},
    "assign+offsets": {"assign": json.dumps({"events": [0, 2]}),
                       "startingOffsets": json.dumps({"events": {"0": 100, "2": -2}}),
                       "endingOffsets": json.dumps({"events": {"0": 700, "2": -1}})},
    "timestamps": {"subscribe": "events", "startingTimestamp": str(T0 + 5_000),
                   "endingTimestamp": str(T0 + 20_000)},
    "byTimestamp": {"subscribe": "events", "startingOffsetsByTimestamp": json.dumps(
        {"events": {"0": T0 + 30_000, "1": T0, "2": CUT}})},
    "minPartitions": {"subscribe": "events", "minPartitions": "7"},
    "read_committed": {"subscribe": "txn", "kafka.isolation.level": "read_committed"},
}


@pytest.mark.parametrize("name", list(OPTION_SETS))
def test_batch_read_from_s3_equals_local(spark, s3, data_dir, remote, name):
    options = OPTION_SETS[name]
    local = spark_rows(_read(spark, str(data_dir), options))
    assert local
    assert spark_rows(_read(spark, remote, {**options, **s3.options})) == local


def test_pushed_filters_from_s3(spark, s3, data_dir, remote):
    def query(path, extra):
        df = _read(spark, path, {"subscribe": "events", **extra})
        return spark_rows(df.where(f"partition = 1 AND offset >= 300 AND timestamp >= "
                                   f"timestamp_millis({T0 + 20_000})"))

    local = query(str(data_dir), {})
    assert local
    assert query(remote, s3.options) == local


def test_available_now_stream_from_s3_equals_local(spark, s3, data_dir, remote, tmp_path):
    opts = {"subscribe": "events", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "2500"}
    local = run_available_now(spark, data_dir, tmp_path / "lo", tmp_path / "lc", **opts)
    batches = run_available_now(spark, remote, tmp_path / "ro", tmp_path / "rc", **opts, **s3.options)
    assert batches == local  # the same micro-batches (maxOffsetsPerTrigger split per partition)
    assert len(batches) == 2 and sum(batches) == RECORDS
    assert sink_rows(spark, tmp_path / "ro") == sink_rows(spark, tmp_path / "lo")


def _bytes_fetched(s3, remote: str, options: dict[str, str]) -> tuple[int, int]:
    """(bytes fetched, rows) of planning plus every task of a batch read, as the executors read."""
    opts = parse_source_options({"path": remote, **options, **s3.options}, streaming=False)
    location = data_location(remote, opts.filesystem_options)
    with TopicCatalog(remote, location=location) as catalog:
        ranges = plan_batch_ranges(catalog, opts)
    rows = 0
    for r in ranges:
        for batch in read_range(KafkaLogInputPartition.of(r, opts), location):
            rows += batch.num_rows
    return location[0].stats.bytes_read, rows


def test_last_tenth_by_timestamp_fetches_a_fraction(s3, remote):
    full_bytes, full_rows = _bytes_fetched(s3, remote, {"subscribe": "events"})
    tail_bytes, tail_rows = _bytes_fetched(s3, remote, {"subscribe": "events", "startingTimestamp": str(CUT)})
    assert full_rows == RECORDS
    assert RECORDS // 10 - 3 <= tail_rows <= RECORDS // 10 + 3
    assert tail_bytes < full_bytes / 3, (tail_bytes, full_bytes)


def test_write_to_s3_is_refused_in_one_line(spark, s3, remote):
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(PySparkException) as e:
        df.write.format("kafkalog").mode("append").options(topic="events", **s3.options).save(remote)
    message = str(e.value)
    assert f"kafkalog option 'path': '{remote}' is not a local directory: writes need a local directory" \
        in message
    assert message.count('File "') <= 1


def test_missing_remote_directory_is_one_clear_error(spark, s3, remote):
    with pytest.raises(PySparkException) as e:
        _read(spark, remote + "-missing", {"subscribe": "events", **s3.options}).count()
    assert f"Directory {remote}-missing does not exist" in str(e.value)
