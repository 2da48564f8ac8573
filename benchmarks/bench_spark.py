"""Spark source throughput: ``format("kafkalog")`` vs Spark's own Parquet reader on the same rows.

Workload: one topic, 2 partitions, 2,000,000 records (key ``key-N``, ~100-byte value, increasing
CreateTime timestamps), built through the storage API with big batches (10,000 records) and
16 MiB segments, so each partition has several segments. Spark runs ``local[2]``.

Rows measured (median of ``REPEATS`` runs after one warm-up, the compared queries interleaved):

* ``count``: ``df.count()`` on the topic vs on a Parquet copy of the same rows. Parquet answers a
  count from file metadata, so ``scan`` (a full scan into Spark's ``noop`` sink) is reported too.
* ``write.parquet``: the topic, and the Parquet copy, rewritten as Parquet.
* each of those three also against the Python Data Source API's ceiling, measured in the same
  interleaved rounds: a trivial Python source that yields the same rows as precomputed Arrow record
  batches (the batches kafkalog's reader yields, saved once as Arrow IPC files and memory-mapped by
  the source), so producing a batch costs nothing. ``vs_ceiling`` = ceiling time / kafkalog time
  (1.0 = kafkalog adds nothing to what any Python source costs), taken in each round (the two
  ran back to back) and the median of the rounds reported, with the lowest and highest round;
  these three rows run ``CEILING_REPEATS`` rounds (9 by default).
* ``filter``: ``WHERE timestamp >= X`` selecting the last 10 % vs the full-scan count; the time
  index lets the reader skip the older segments. Pushdown is off by default on PySpark 4.3.0 (see
  docs/SPARK.md), so this row opts in (``filterPushdown=true``, a fresh DataFrame per query, the
  shape that is correct there); the default filtered query costs a full scan. Measured on the
  2 M-record topic and again on a 20 M-record one (``KAFKALOG_BENCH_SPARK_LARGE_RECORDS``, 0 to
  skip): the filtered query pays Spark's whole fixed per-query cost, so its ratio grows with the
  topic.
* ``empty result``: ``WHERE offset < 0`` counted, on the topic (pushed down: no range to read) and
  on the Parquet copy — what a query costs before reading anything (Spark's planning, the Python
  planner round trips, job and task scheduling). It bounds the ``filter`` ratio: the filtered query
  pays it too.

``ratio`` is kafkalog's rows/s divided by the reference's (for count, scan and write the median of
the rounds' ratios, as ``vs_ceiling``; bars: >= 0.8 vs Parquet; the filtered query >= 5x faster
than the full scan). Run: ``.venv/bin/python benchmarks/bench_spark.py``.
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
# The rows against the ceiling take more rounds: their ratio sits near its bar (0.9), and a median
# of paired rounds is steadier the more rounds it has.
CEILING_REPEATS = int(os.environ.get("KAFKALOG_BENCH_SPARK_CEILING_REPEATS", str(max(REPEATS, 9))))
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


def _round_times(fns: list[Callable[[], object]], repeats: int = REPEATS) -> list[list[float]]:
    """Wall time of each function in each round; the functions are interleaved in every round, so
    that noise from other work on the (shared) machine hits all of them alike."""
    for fn in fns:
        fn()  # warm-up: Python workers, file cache
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return times


def _median_times(fns: list[Callable[[], object]], repeats: int = REPEATS) -> list[float]:
    """Median wall time of each function over interleaved rounds."""
    return [statistics.median(t) for t in _round_times(fns, repeats)]


def _paired_ratio(reference: list[float], ours: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of reference time / our time, taken round by round: both were
    measured back to back, so a burst of load from elsewhere moves both, where a ratio of the two
    medians could pair one run's quiet round with the other's busy one."""
    ratios = sorted(r / o for r, o in zip(reference, ours, strict=True))
    return statistics.median(ratios), ratios[0], ratios[-1]


def _filter_row(spark, data_dir: Path, topic: str, records: int, repeats: int = REPEATS) -> dict:
    """``WHERE timestamp >= X`` selecting the last 10 % vs the full-scan count of the same topic.
    Timestamps increase by 1 ms per record within each partition."""
    import datetime as dt

    per_partition = records // PARTITIONS
    cutoff = dt.datetime.fromtimestamp((T0 + per_partition - per_partition // 10) / 1000, dt.UTC)
    expected = PARTITIONS * (per_partition // 10)

    def load():
        return spark.read.format("kafkalog").option("subscribe", topic).option("filterPushdown", "true") \
            .load(str(data_dir))

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


def save_arrow_batches(data_dir: Path, topic: str, out_dir: Path) -> list[str]:
    """kafkalog's Arrow batches of every partition, read once outside Spark and saved as one Arrow
    IPC file per partition: the input of the ceiling source."""
    import pyarrow as pa

    from kafkalog.spark.arrow import arrow_schema
    from kafkalog.spark.reader import KafkaLogInputPartition, read_range

    files = []
    for p in range(PARTITIONS):
        part = KafkaLogInputPartition(str(data_dir), topic, p, 0, 0, from_earliest=True, to_latest=True)
        path = out_dir / f"{topic}-{p}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, arrow_schema(False)) as writer:
            for batch in read_range(part):
                writer.write_batch(batch)
        files.append(str(path))
    return files


def register_ceiling_source(spark) -> str:
    """A Python data source yielding precomputed Arrow batches (memory-mapped IPC files, one input
    partition per file): the fastest any Python source of these rows can be. Defined in a function
    so that it travels to the workers by value."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkalog.spark.arrow import DDL

    class CeilingReader(DataSourceReader):
        def __init__(self, files):
            self.files = files

        def partitions(self):
            return [InputPartition(f) for f in self.files]

        def read(self, partition):
            import pyarrow as pa

            with pa.memory_map(partition.value) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class CeilingSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_bench_ceiling"

        def schema(self):
            return DDL

        def reader(self, schema):
            return CeilingReader(self.options["files"].split(","))

    spark.dataSource.register(CeilingSource)
    return CeilingSource.name()


def run() -> list[dict]:
    from kafkalog.spark.session import FILTER_PUSHDOWN_CONF, get_session

    spark = get_session("kafkalog-bench", "local[2]", conf={"spark.driver.memory": "2g"})
    # For the opted-in filter rows (off by default where Spark shares pushdown plans).
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
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

        arrow_files = save_arrow_batches(data_dir, TOPIC, work)
        ceiling_name = register_ceiling_source(spark)

        def ceiling():
            return spark.read.format(ceiling_name).option("files", ",".join(arrow_files)).load()

        assert ceiling().count() == n

        def cl_count() -> None:
            assert ceiling().count() == n

        def cl_scan() -> None:
            ceiling().write.format("noop").mode("overwrite").save()

        def cl_write() -> None:
            ceiling().write.mode("overwrite").parquet(str(work / "out3.parquet"))

        for name, ours, theirs, ceil in [
            ("count", kl_count, pq_count, cl_count),
            ("scan (noop sink)", kl_scan, pq_scan, cl_scan),
            ("write.parquet", kl_write, pq_write, cl_write),
        ]:
            r_ours, r_theirs, r_ceil = _round_times([ours, theirs, ceil], CEILING_REPEATS)
            t_ours, t_theirs, t_ceil = (statistics.median(t) for t in (r_ours, r_theirs, r_ceil))
            vs, vs_low, vs_high = _paired_ratio(r_ceil, r_ours)
            rows.append({
                "bench": name, "records": n, "kafkalog_s": t_ours, "parquet_s": t_theirs,
                "ceiling_s": t_ceil, "kafkalog_rows_per_s": n / t_ours, "parquet_rows_per_s": n / t_theirs,
                "ratio": _paired_ratio(r_theirs, r_ours)[0], "vs_ceiling": vs,
                "vs_ceiling_low": vs_low, "vs_ceiling_high": vs_high,
            })

        rows.append(_filter_row(spark, data_dir, TOPIC, RECORDS))

        def kl_empty() -> None:
            df = spark.read.format("kafkalog").option("subscribe", TOPIC).option("filterPushdown", "true") \
                .load(str(data_dir))
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
    print(f"{'bench':44} {'kafkalog s':>11} {'reference s':>12} {'kafkalog rows/s':>16} {'ratio':>7} "
          f"{'ceiling s':>10} {'vs ceiling':>10} {'(rounds)':>11}")
    for r in rows:
        ours = r.get("kafkalog_s", r.get("filtered_s", r.get("seconds")))
        ref = r.get("parquet_s", r.get("full_scan_s", float("nan")))
        rate = r.get("kafkalog_rows_per_s", r["records"] / ours)
        ratio = r.get("ratio", float("nan"))
        ceil, vs = r.get("ceiling_s", float("nan")), r.get("vs_ceiling", float("nan"))
        spread = (f"{r['vs_ceiling_low']:.2f}-{r['vs_ceiling_high']:.2f}" if "vs_ceiling_low" in r else "")
        print(f"{r['bench']:44} {ours:11.2f} {ref:12.2f} {rate:16,.0f} {ratio:7.2f} {ceil:10.2f} {vs:10.2f} "
              f"{spread:>11}")


if __name__ == "__main__":
    main()
