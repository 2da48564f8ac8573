"""Spark source throughput: ``format("kafkalog")`` vs Spark's own Parquet reader on the same rows.

Workload: one topic, 2 partitions, 2,000,000 records (key ``key-N``, ~100-byte value, increasing
CreateTime timestamps), built through the storage API with big batches (10,000 records) and
16 MiB segments, so each partition has several segments. Spark runs ``local[2]``.

Rows measured (median of ``REPEATS`` runs after one warm-up, the compared queries interleaved):

* ``count``: ``df.count()`` on the topic vs on a Parquet copy of the same rows. Parquet answers a
  count from file metadata, so ``scan`` (a full scan into Spark's ``noop`` sink) is reported too.
* ``write.parquet``: the topic, and the Parquet copy, rewritten as Parquet.
* ``filter``: ``WHERE timestamp >= X`` selecting the last 10 % vs the full-scan count; the time
  index lets the reader skip the older segments. Measured on the 2 M-record topic and again on a
  20 M-record one (``KAFKALOG_BENCH_SPARK_LARGE_RECORDS``, 0 to skip): the filtered query pays
  Spark's whole fixed per-query cost, so its ratio grows with the topic.
* ``empty result``: ``WHERE offset < 0`` counted, on the topic (pushed down: no range to read) and
  on the Parquet copy — what a query costs before reading anything (Spark's planning, the Python
  planner round trips, job and task scheduling). It bounds the ``filter`` ratio: the filtered query
  pays it too.

``ratio`` is kafkalog's rows/s divided by the reference's (bars: >= 0.8 vs Parquet; the filtered
query >= 5x faster than the full scan). Run: ``.venv/bin/python benchmarks/bench_spark.py``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

RECORDS = int(os.environ.get("KAFKALOG_BENCH_SPARK_RECORDS", "2000000"))
# The filter row again on a bigger topic (0 to skip): the 2 M-record ratio is bounded by Spark's
# fixed cost per query, which the filtered query pays in full.
LARGE_RECORDS = int(os.environ.get("KAFKALOG_BENCH_SPARK_LARGE_RECORDS", "20000000"))
PARTITIONS = 2
BATCH = 10_000
REPEATS = int(os.environ.get("KAFKALOG_BENCH_SPARK_REPEATS", "5"))
T0 = 1_700_000_000_000
TOPIC = "bench"


def build_topic(data_dir: Path, records: int = RECORDS, topic: str = TOPIC) -> None:
    """The benchmark topic, written through ``LogManager``/``Log.append_as_leader``."""
    from kafkalog.records import CompressionType, MemoryRecordsBuilder, TimestampType
    from kafkalog.storage.log_manager import LogManager

    configs = {"segment.bytes": str(16 * 1024 * 1024), "max.message.bytes": str(8 * 1024 * 1024)}
    per_partition = records // PARTITIONS
    filler = b"x" * 84
    with LogManager(data_dir) as lm:
        logs = lm.create_topic(topic, PARTITIONS, configs)
        for p, log in enumerate(logs):
            for start in range(0, per_partition, BATCH):
                builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
                rows = range(start, min(start + BATCH, per_partition))
                builder.append_many([T0 + i for i in rows], [b"key-%d" % (i * PARTITIONS + p) for i in rows],
                                    [b"value-%09d" % i + filler for i in rows])
                log.append_as_leader(builder.build())


def _median_times(fns: list[Callable[[], object]], repeats: int = REPEATS) -> list[float]:
    """Median wall time of each function; the functions are interleaved in every round, so that
    noise from other work on the (shared) machine hits all of them alike."""
    for fn in fns:
        fn()  # warm-up: Python workers, file cache
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def _filter_row(spark, data_dir: Path, topic: str, records: int, repeats: int = REPEATS) -> dict:
    """``WHERE timestamp >= X`` selecting the last 10 % vs the full-scan count of the same topic.
    Timestamps increase by 1 ms per record within each partition."""
    import datetime as dt

    per_partition = records // PARTITIONS
    cutoff = dt.datetime.fromtimestamp((T0 + per_partition - per_partition // 10) / 1000, dt.UTC)
    expected = PARTITIONS * (per_partition // 10)

    def load():
        return spark.read.format("kafkalog").option("subscribe", topic).load(str(data_dir))

    def full() -> None:
        assert load().count() == records

    def filtered() -> None:
        df = load()
        assert df.where(df.timestamp >= cutoff).count() == expected

    t_full, t_filtered = _median_times([full, filtered], repeats)
    return {
        "bench": f"WHERE timestamp >= X (last 10 % of {records / 1e6:g} M)", "records": expected,
        "full_scan_s": t_full, "filtered_s": t_filtered, "ratio": t_full / t_filtered,
    }


def run() -> list[dict]:
    from kafkalog.spark.session import get_session

    spark = get_session("kafkalog-bench", "local[2]", conf={"spark.driver.memory": "2g"})
    work = Path(tempfile.mkdtemp(prefix="kafkalog-bench-spark-"))
    rows: list[dict] = []
    try:
        data_dir = work / "data"
        data_dir.mkdir()
        started = time.perf_counter()
        build_topic(data_dir)
        build_s = time.perf_counter() - started

        topic = spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(data_dir))
        parquet_dir = str(work / "copy.parquet")
        topic.write.mode("overwrite").parquet(parquet_dir)
        parquet = spark.read.parquet(parquet_dir)
        n = parquet.count()
        assert n == RECORDS, (n, RECORDS)

        def kl_count() -> None:
            assert spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(data_dir)).count() == n

        def pq_count() -> None:
            assert spark.read.parquet(parquet_dir).count() == n

        def kl_scan() -> None:
            spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(data_dir)) \
                .write.format("noop").mode("overwrite").save()

        def pq_scan() -> None:
            spark.read.parquet(parquet_dir).write.format("noop").mode("overwrite").save()

        def kl_write() -> None:
            spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(data_dir)) \
                .write.mode("overwrite").parquet(str(work / "out1.parquet"))

        def pq_write() -> None:
            spark.read.parquet(parquet_dir).write.mode("overwrite").parquet(str(work / "out2.parquet"))

        for name, ours, theirs in [
            ("count", kl_count, pq_count),
            ("scan (noop sink)", kl_scan, pq_scan),
            ("write.parquet", kl_write, pq_write),
        ]:
            t_ours, t_theirs = _median_times([ours, theirs])
            rows.append({
                "bench": name, "records": n, "kafkalog_s": t_ours, "parquet_s": t_theirs,
                "kafkalog_rows_per_s": n / t_ours, "parquet_rows_per_s": n / t_theirs,
                "ratio": t_theirs / t_ours,
            })

        rows.append(_filter_row(spark, data_dir, TOPIC, RECORDS))

        def kl_empty() -> None:
            df = spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(data_dir))
            assert df.where(df["offset"] < 0).count() == 0

        def pq_empty() -> None:
            df = spark.read.parquet(parquet_dir)
            assert df.where(df["offset"] < 0).count() == 0

        t_ours, t_theirs = _median_times([kl_empty, pq_empty])
        rows.append({
            "bench": "empty result (fixed cost per query)", "records": 0, "kafkalog_s": t_ours,
            "parquet_s": t_theirs, "kafkalog_rows_per_s": 0.0, "parquet_rows_per_s": 0.0,
            "ratio": t_theirs / t_ours,
        })
        rows.append({"bench": "build topic (storage API)", "records": RECORDS, "seconds": build_s,
                     "rows_per_s": RECORDS / build_s})
        if LARGE_RECORDS > RECORDS:
            build_topic(data_dir, LARGE_RECORDS, TOPIC + "-large")
            rows.append(_filter_row(spark, data_dir, TOPIC + "-large", LARGE_RECORDS, repeats=3))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    rows = run()
    print(f"{'bench':44} {'kafkalog s':>11} {'reference s':>12} {'kafkalog rows/s':>16} {'ratio':>7}")
    for r in rows:
        ours = r.get("kafkalog_s", r.get("filtered_s", r.get("seconds")))
        ref = r.get("parquet_s", r.get("full_scan_s", float("nan")))
        rate = r.get("kafkalog_rows_per_s", r["records"] / ours)
        ratio = r.get("ratio", float("nan"))
        print(f"{r['bench']:44} {ours:11.2f} {ref:12.2f} {rate:16,.0f} {ratio:7.2f}")


if __name__ == "__main__":
    main()
