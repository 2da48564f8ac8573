"""Spark reads of a compacted topic: offsets with gaps, tombstones, emptied producer batches and
kept transaction markers give exactly what the storage layer and ``kafkalog consume`` give."""

from __future__ import annotations

import pytest

from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.types import ControlRecordType
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.cleaner.compact import compact_logs
from kafkalog.storage.log_manager import LogManager
from kafkalog.tools.verify import verify_data_dir

from ._util import T0, cli_rows, log_rows, read, spark_rows, without_headers


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("compacted")
    with LogManager(d) as lm:
        logs = lm.create_topic("state", 2, {"cleanup.policy": "compact", "segment.bytes": "1200"})
        for p, log in enumerate(logs):
            seq = 0
            for i in range(120):
                key = f"k{i % 7}".encode()
                value = None if i % 29 == 0 else f"p{p}-v{i}".encode()
                if i % 10 == 0:  # an idempotent producer whose last batch will be emptied
                    log.append_as_leader(MemoryRecords.with_records(
                        2, CompressionType.GZIP, [SimpleRecord(value, key, T0 + i)], producer_id=9,
                        producer_epoch=0, base_sequence=seq))
                    seq += 1
                else:
                    log.append_as_leader(MemoryRecords.with_records(
                        2, CompressionType.NONE, [SimpleRecord(value, key, T0 + i)]))
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, [SimpleRecord(b"t", b"txn", T0)], producer_id=11, producer_epoch=0,
                base_sequence=0, is_transactional=True))
            log.append_as_leader(MemoryRecords.with_end_transaction_marker(
                0, T0, 0, 11, 0, EndTransactionMarker(ControlRecordType.COMMIT, 0)),
                origin=AppendOrigin.COORDINATOR)
            log.roll()
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, [SimpleRecord(b"x", b"k1", T0)]))
        results = compact_logs(lm, "state")
        assert all(r.stats.records_removed > 0 and r.stats.empty_batches_kept == 1 for r in results)
    report = verify_data_dir(d)
    assert report.ok, report.problems
    return d


def test_spark_reads_a_compacted_topic_like_the_log_and_the_cli(spark, data_dir):
    rows = spark_rows(read(spark, data_dir, subscribe="state", includeHeaders="true"))
    assert rows == log_rows(data_dir, "state") == cli_rows(data_dir, "state")
    for p in (0, 1):
        offsets = [r[2] for r in rows if r[1] == p]
        assert offsets == sorted(set(offsets)) and offsets[-1] - offsets[0] + 1 > len(offsets)  # gaps
    # Offset ranges split across gaps, and a range wholly inside a gap, read the same records.
    split = spark_rows(read(spark, data_dir, subscribe="state", minPartitions="7"))
    assert split == without_headers(rows)
    options = {"subscribe": "state", "kafka.isolation.level": "read_committed"}
    committed = spark_rows(read(spark, data_dir, **options))
    assert committed == without_headers(log_rows(data_dir, "state", read_committed=True))
