"""Helpers shared by the Spark tests: topics built through the storage API, and rows from the
storage layer (the oracle), from Spark and from the CLI in one comparable shape."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafkalog.records import (
    CompressionType,
    EndTransactionMarker,
    Header,
    MemoryRecords,
    SimpleRecord,
    TimestampType,
)
from kafkalog.records.types import ControlRecordType
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.log import FetchIsolation, Log
from kafkalog.storage.log_manager import LogManager

# (topic, partition, offset, timestamp ms, timestampType, key, value, headers or None)
Row = tuple

T0 = 1_700_000_000_000


def copy_golden(golden: Path, data_dir: Path, topic: str) -> None:
    """A golden segment directory as partition 0 of ``topic``."""
    shutil.copytree(golden, data_dir / f"{topic}-0")


def build_topic(
    data_dir: Path,
    topic: str,
    partitions: int,
    batches: int,
    per_batch: int,
    *,
    configs: dict[str, str] | None = None,
    codecs: Sequence[CompressionType] = (CompressionType.NONE,),
    ts_step: int = 10,
    headers: bool = True,
) -> None:
    """``batches`` appends of ``per_batch`` records round-robin over the partitions; every third
    record keyless, every fourth with headers, timestamps T0 + i*ts_step."""
    with LogManager(data_dir) as lm:
        if lm.has_topic(topic):
            logs = [lm.get_log(topic, p) for p in lm.partitions(topic)]
        else:
            logs = lm.create_topic(topic, partitions, configs or {})
        n = 0
        for b in range(batches):
            recs = []
            for _ in range(per_batch):
                key = None if n % 3 == 0 else b"key-%d" % n
                hs = (Header("n", b"%d" % n), Header("empty", None)) if headers and n % 4 == 0 else ()
                recs.append(SimpleRecord(b"value-%d" % n, key, T0 + n * ts_step, hs))
                n += 1
            codec = codecs[b % len(codecs)]
            logs[b % len(logs)].append_as_leader(MemoryRecords.with_records(2, codec, recs))


def append_transactions(data_dir: Path, topic: str) -> None:
    """Partition 0 of a new topic: plain records, an aborted transaction, a committed one, and a
    transaction left open (so the last stable offset stays below the log end offset)."""
    with LogManager(data_dir) as lm:
        (log,) = lm.create_topic(topic, 1)

        def txn(pid: int, values: list[bytes], base_seq: int = 0) -> None:
            recs = [SimpleRecord(v, b"k", T0 + i) for i, v in enumerate(values)]
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, recs, producer_id=pid, producer_epoch=0, base_sequence=base_seq,
                is_transactional=True))

        def marker(pid: int, kind: ControlRecordType) -> None:
            log.append_as_leader(MemoryRecords.with_end_transaction_marker(
                0, T0, 0, pid, 0, EndTransactionMarker(kind, 0)), origin=AppendOrigin.COORDINATOR)

        def plain(*values: bytes) -> None:
            recs = [SimpleRecord(v, None, T0) for v in values]
            log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, recs))

        plain(b"plain-0", b"plain-1", b"plain-2")
        txn(1, [b"aborted-1", b"aborted-2"])
        txn(2, [b"committed-1"])
        marker(1, ControlRecordType.ABORT)
        txn(2, [b"committed-2"], 1)
        marker(2, ControlRecordType.COMMIT)
        plain(b"plain-3")
        txn(3, [b"open-1"])
        plain(b"plain-4")


def _headers(hs: Iterable[Header]) -> tuple | None:
    hs = tuple((h.key, h.value) for h in hs)
    return hs or None


def log_rows(data_dir: Path, topic: str, start: int | None = None, end: int | None = None, *,
             read_committed: bool = False, partitions: Iterable[int] | None = None) -> list[Row]:
    """What the storage layer's ``Log.records`` gives (the oracle), partition by partition."""
    rows = []
    with LogManager(data_dir, read_only=True) as lm:
        for p in partitions if partitions is not None else lm.partitions(topic):
            log: Log = lm.get_log(topic, p)
            isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
            first = log.log_start_offset if start is None else start
            for r in log.records(first, end, isolation=isolation):
                rows.append((topic, p, r.offset, r.timestamp, int(r.timestamp_type), r.key, r.value,
                             _headers(r.headers)))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def spark_rows(df: DataFrame) -> list[Row]:
    cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.unix_millis("timestamp").alias("ts"),
            F.col("timestampType"), F.col("key"), F.col("value")]
    has_headers = "headers" in df.columns
    if has_headers:
        cols.append(F.col("headers"))
    rows = []
    for r in df.select(*cols).collect():
        key = None if r["key"] is None else bytes(r["key"])
        value = None if r["value"] is None else bytes(r["value"])
        headers = None
        if has_headers and r["headers"] is not None:
            headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                            for h in r["headers"])
        rows.append((r["topic"], r["partition"], r["offset"], r["ts"], r["timestampType"], key, value,
                     headers))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def without_headers(rows: list[Row]) -> list[Row]:
    return [(*r[:7], None) for r in rows]


def cli_rows(data_dir: Path, topic: str, *, read_committed: bool = False) -> list[Row]:
    """What ``kafkalog consume --binary`` prints, in the same shape."""
    args = [sys.executable, "-c", "from kafkalog.cli import main; raise SystemExit(main())", "consume",
            "--data-dir", str(data_dir), "--topic", topic, "--binary"]
    if read_committed:
        args += ["--isolation-level", "read_committed"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    names = {str(t): int(t) for t in TimestampType}

    def dec(s: str | None) -> bytes | None:
        return None if s is None else base64.b64decode(s)

    rows = []
    for line in out.splitlines():
        if not line.strip():
            continue
        j = json.loads(line)
        ts_type = j["timestampType"]
        ts_type = names[ts_type] if isinstance(ts_type, str) else int(ts_type)
        headers = tuple((k, dec(v)) for k, v in j["headers"]) or None
        rows.append((j["topic"], j["partition"], j["offset"], j["timestamp"], ts_type, dec(j["key"]),
                     dec(j["value"]), headers))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def read(spark, data_dir: Path, **options: str) -> DataFrame:
    return spark.read.format("kafkalog").options(**options).load(str(data_dir))
