"""Reading a topic from S3 (moto's server on 127.0.0.1) against reading the same bytes locally.

* **executor read** — the Spark source's executor path outside Spark (plan the ranges, then
  ``read_range`` each into Arrow), from ``s3://`` vs from the local directory the bytes were
  uploaded from; ratio = local time / S3 time. Moto is a Python server on the same 2 cores, so this
  measures kafkalog's request pattern (1 MiB ranged GETs) against a slow, CPU-bound S3, not AWS.
* **Spark scan** — ``spark.read.format("kafkalog")`` into the noop sink on ``local[2]``, S3 vs local.
* **bytes fetched** — a ``startingTimestamp`` read of the last 10 % of the records against the full
  read, counted by the reader's filesystem (planning included); ratio = full bytes / narrowed bytes.

Run: ``.venv/bin/python benchmarks/bench_s3.py``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RECORDS = int(os.environ.get("KAFKALOG_BENCH_S3_RECORDS", "400000"))
PARTITIONS = 2
BATCH = 500  # ~60 KiB batches, a producer-sized batch (batch.size is 16 KiB by default)
REPEATS = int(os.environ.get("KAFKALOG_BENCH_S3_REPEATS", "3"))
T0 = 1_700_000_000_000
TOPIC = "s3bench"


def build_topic(data_dir: Path) -> None:
    from kafkalog.records import CompressionType, MemoryRecordsBuilder, TimestampType
    from kafkalog.storage.log_manager import LogManager

    per_partition = RECORDS // PARTITIONS
    filler = b"x" * 84
    with LogManager(data_dir) as lm:
        logs = lm.create_topic(TOPIC, PARTITIONS, {"segment.bytes": str(8 * 1024 * 1024)})
        for log in logs:
            for start in range(0, per_partition, BATCH):
                builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
                rows = range(start, min(start + BATCH, per_partition))
                builder.append_many([T0 + i for i in rows], [b"key-%d" % i for i in rows],
                                    [b"value-%09d" % i + filler for i in rows])
                log.append_as_leader(builder.build())


def _median_times(fns: list[Callable[[], object]], repeats: int = REPEATS) -> list[float]:
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def _executor_read(path: str, options: dict[str, str]) -> tuple[int, int, int]:
    """(rows, bytes fetched, requests) of a batch read through the executor path."""
    from kafkalog.spark.catalog import TopicCatalog, data_location
    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.reader import KafkaLogInputPartition, plan_batch_ranges, read_range

    opts = parse_source_options({"path": path, **options}, streaming=False)
    location = data_location(path, opts.filesystem_options)
    with TopicCatalog(path, location=location) as catalog:  # planning is counted too
        ranges = plan_batch_ranges(catalog, opts)
    rows = 0
    for r in ranges:
        for batch in read_range(KafkaLogInputPartition.of(r, opts), location):
            rows += batch.num_rows
    return rows, location[0].stats.bytes_read, location[0].stats.requests


def run() -> list[dict]:
    sys.path.insert(0, str(REPO_ROOT))
    from tests.s3server import MotoServer

    work = Path(tempfile.mkdtemp(prefix="kafkalog-bench-s3-"))
    rows: list[dict] = []
    try:
        data_dir = work / "data"
        data_dir.mkdir()
        build_topic(data_dir)
        size = sum(f.stat().st_size for f in data_dir.rglob("*.log"))
        with MotoServer() as s3:
            remote = s3.upload(data_dir, f"bench-{uuid.uuid4().hex[:8]}/kafka")
            local_opts = {"subscribe": TOPIC}
            remote_opts = {"subscribe": TOPIC, **s3.options}

            def local_read() -> None:
                assert _executor_read(str(data_dir), local_opts)[0] == RECORDS

            def remote_read() -> None:
                assert _executor_read(remote, remote_opts)[0] == RECORDS

            t_local, t_remote = _median_times([local_read, remote_read])
            rows.append({"bench": "executor read, S3 vs local", "records": RECORDS, "log_bytes": size,
                         "local_s": t_local, "s3_s": t_remote, "s3_MiB_per_s": size / t_remote / 2**20,
                         "ratio": t_local / t_remote})

            per_partition = RECORDS // PARTITIONS
            cut = T0 + per_partition - per_partition // 10
            full_rows, full_bytes, full_requests = _executor_read(remote, remote_opts)
            tail_rows, tail_bytes, tail_requests = _executor_read(
                remote, {**remote_opts, "startingTimestamp": str(cut)})
            assert full_rows == RECORDS and tail_rows == PARTITIONS * (per_partition // 10)
            rows.append({"bench": "bytes fetched, startingTimestamp last 10 % vs full", "log_bytes": size,
                         "full_bytes": full_bytes, "full_requests": full_requests,
                         "tail_bytes": tail_bytes, "tail_requests": tail_requests,
                         "tail_fraction": tail_bytes / full_bytes, "ratio": full_bytes / tail_bytes})

            from kafkalog.spark.session import get_session

            spark = get_session("kafkalog-bench-s3", "local[2]", conf={"spark.driver.memory": "1g"})
            try:
                def spark_scan(path: str, options: dict[str, str]) -> Callable[[], None]:
                    def scan() -> None:
                        spark.read.format("kafkalog").options(**options).load(path) \
                            .write.format("noop").mode("overwrite").save()
                    return scan

                t_local, t_remote = _median_times([spark_scan(str(data_dir), local_opts),
                                                   spark_scan(remote, remote_opts)])
                rows.append({"bench": "Spark scan (noop sink), S3 vs local", "records": RECORDS,
                             "local_s": t_local, "s3_s": t_remote, "ratio": t_local / t_remote})
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    for row in run():
        print("  ".join(f"{k}={v:,.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
