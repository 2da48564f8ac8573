"""Log (one partition): Kafka's golden directories, the append paths, rolling, reading, transactions,
truncation, retention and reloading — behaviours of UnifiedLogTest / LogLoaderTest, in our words."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import (
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.types import ControlRecordType, TimestampType
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation, Log

T0 = 1_700_000_000_000
SEGMENT = "00000000000000000000"


def config(**props: object) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


def batch(n: int, start: int = 0, *, ts: int = T0, magic: int = 2,
          codec: CompressionType = CompressionType.NONE, key: bytes | None = b"k") -> MemoryRecords:
    return MemoryRecords.with_records(magic, codec, [
        SimpleRecord(f"value-{i}".encode(), key, ts + i) for i in range(start, start + n)])


def copy_golden(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


# --- Kafka's own directories ------------------------------------------------------------------


def test_golden_partitions_read_like_kafka(kafka_golden_dir: Path, tmp_path: Path) -> None:
    expected = json.loads((kafka_golden_dir / "expected.json").read_text())
    s1 = copy_golden(kafka_golden_dir / "s1_v2_single" / "rolled", tmp_path / "s1-0")
    with Log.open(s1, config(index_interval_bytes=100)) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, 30)
        records = list(log.records(0))
        assert [r.offset for r in records] == list(range(30))
        assert records[7].key == b"key-7" and records[7].value == b"value-7"
        for target, want in expected["s1_find_offset_by_timestamp_startingOffset0"]:
            got = log.offset_for_timestamp(target)
            assert (None if got is None else [got.timestamp, got.offset]) == want, target
        for offset, want in expected["s1_translate_offsets"]:
            if want is None:
                continue
            fetch = log.read(offset, 1, min_one_message=True)
            assert fetch.fetch_offset_metadata.relative_position_in_segment == want[1]
            assert fetch.records.size_in_bytes == want[2]
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
        assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 30
        assert log.offset_for_timestamp(MAX_TIMESTAMP).offset == 20  # T0+40000 is the largest
        with pytest.raises(OffsetOutOfRangeError):
            log.read(31, 100)
        assert log.read(30, 100).records.size_in_bytes == 0

    s2 = copy_golden(kafka_golden_dir / "s2_v2_mixed", tmp_path / "s2-0")
    with Log.open(s2, config(), had_clean_shutdown=False) as log:
        assert (log.log_start_offset, log.log_end_offset) == (100, 110)
        records = list(log.records(100))
        assert 107 not in [r.offset for r in records]  # the ABORT marker is a control record
        assert {r.timestamp for r in records if r.offset >= 108} == {T0 + 50}
        assert {r.timestamp_type for r in records if r.offset >= 108} == {TimestampType.LOG_APPEND_TIME}

    s3 = copy_golden(kafka_golden_dir / "s3_legacy", tmp_path / "s3-0")
    with Log.open(s3, config()) as log:
        assert [r.offset for r in log.records(0)] == list(range(9))
        assert [r.offset for r in log.records(2, 8)] == list(range(2, 8))


@pytest.mark.parametrize("name, truncated_size, next_offset", [
    ("s4_recovery_input_torn_tail.log", 2440, 30),
    ("s5_recovery_input_bad_crc_batch12.log", 964, 12),
])
def test_unclean_open_recovers_like_kafka(kafka_golden_dir: Path, tmp_path: Path, name: str,
                                          truncated_size: int, next_offset: int) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    shutil.copy(kafka_golden_dir / name, directory / f"{SEGMENT}.log")
    cfg = config(index_interval_bytes=100, segment_index_bytes=1024)
    with Log.open(directory, cfg, had_clean_shutdown=False) as log:
        assert log.log_end_offset == next_offset
        assert [r.offset for r in log.records(0)] == list(range(next_offset))
    assert (directory / f"{SEGMENT}.log").stat().st_size == truncated_size
    if next_offset == 12:
        for ext in ("index", "timeindex"):
            assert (directory / f"{SEGMENT}.{ext}").read_bytes() == \
                (kafka_golden_dir / "s5_recovered" / f"{SEGMENT}.{ext}").read_bytes()


# --- appending --------------------------------------------------------------------------------


@pytest.mark.parametrize("magic, codec", [
    (m, c) for m in (0, 1, 2) for c in CompressionType if m == 2 or c is not CompressionType.ZSTD])
def test_leader_append_assigns_contiguous_offsets(tmp_path: Path, magic: int, codec: CompressionType) -> None:
    fmt = {0: "0.9.0", 1: "0.10.2", 2: "3.0-IV1"}[magic]
    with Log.open(tmp_path / "t-0", config(message_format_version=fmt)) as log:
        for i in range(5):
            info = log.append_as_leader(batch(3, ts=T0, magic=magic, codec=codec))
            assert (info.first_offset, info.last_offset) == (3 * i, 3 * i + 2) or magic < 2
        records = list(log.records(0))
        assert [r.offset for r in records] == list(range(15))
        assert [r.value for r in records[:3]] == [b"value-0", b"value-1", b"value-2"]
        assert {b.magic for b in log.batches(0)} == {magic}


def test_follower_append_keeps_offsets_and_rejects_regressions(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_follower(MemoryRecords.with_records(2, CompressionType.NONE, [
            SimpleRecord(b"a", None, T0), SimpleRecord(b"b", None, T0)], base_offset=10))
        assert log.log_end_offset == 12
        assert [r.offset for r in log.records(0)] == [10, 11]
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(MemoryRecords.with_records(
                2, CompressionType.NONE, [SimpleRecord(b"c", None, T0)], base_offset=5))


def test_rolls_on_size_time_and_index_full(tmp_path: Path) -> None:
    time = MockTime(T0)
    with Log.open(tmp_path / "size-0", config(segment_bytes=1000), time=time) as log:
        for i in range(60):
            log.append_as_leader(batch(2, 2 * i))
        assert len(log.segments) >= 5
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(bases) and all(s.size_in_bytes <= 1000 for s in log.segments)
        assert [r.offset for r in log.records(0)] == list(range(120))
        with pytest.raises(RecordBatchTooLargeError):
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, [SimpleRecord(b"x" * 2000, None, T0)]))

    with Log.open(tmp_path / "time-0", config(segment_ms=1000), time=time) as log:
        log.append_as_leader(batch(1, ts=T0))
        log.append_as_leader(batch(1, ts=T0 + 500))
        assert len(log.segments) == 1
        log.append_as_leader(batch(1, ts=T0 + 1500))  # message time 1500 ms after the first batch
        assert len(log.segments) == 2

    with Log.open(tmp_path / "index-0", config(index_interval_bytes=1, segment_index_bytes=48),
                  time=time) as log:
        for i in range(20):
            log.append_as_leader(batch(1, i, ts=T0 + i))
        assert len(log.segments) >= 3  # 6 offset entries / 4 usable time entries per segment
        assert [r.offset for r in log.records(0)] == list(range(20))


def test_read_respects_max_length_and_isolation(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config()) as log:
        for i in range(10):
            log.append_as_leader(batch(10, 10 * i))
        one = log.read(0, 1, min_one_message=True)
        assert [b.base_offset for b in one.records.batches()] == [0]
        none = log.read(0, 1, min_one_message=False)
        assert none.records.size_in_bytes == 1 and none.first_entry_incomplete
        middle = log.read(55, 10_000)
        assert next(b.base_offset for b in middle.records.batches()) == 50
        assert [r.offset for r in log.records(55, 62)] == list(range(55, 62))
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1, 100)


# --- transactions -----------------------------------------------------------------------------


def txn_batch(pid: int, values: list[bytes]) -> MemoryRecords:
    records = [SimpleRecord(v, b"k", T0) for v in values]
    return MemoryRecords.with_records(2, CompressionType.NONE, records, producer_id=pid, producer_epoch=0,
                                      base_sequence=0, is_transactional=True)


def marker(pid: int, kind: ControlRecordType, offset: int) -> MemoryRecords:
    return MemoryRecords.with_end_transaction_marker(offset, T0, 0, pid, 0, EndTransactionMarker(kind, 3))


def test_transactions_lso_txn_index_and_read_committed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()) as log:
        log.append_as_leader(batch(2))                                   # 0-1
        log.append_as_leader(txn_batch(7, [b"a1", b"a2"]))               # 2-3 aborted later
        log.append_as_leader(txn_batch(8, [b"c1"]))                      # 4 committed later
        assert log.last_stable_offset == 2 and log.high_watermark == 5
        assert [r.offset for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)] == [0, 1]
        log.append_as_leader(marker(7, ControlRecordType.ABORT, 0), origin=_coordinator())  # 5
        assert log.last_stable_offset == 4
        log.append_as_leader(marker(8, ControlRecordType.COMMIT, 0), origin=_coordinator())  # 6
        log.append_as_leader(batch(1, 100))                              # 7
        assert log.last_stable_offset == log.log_end_offset == 8
        aborted = log.collect_aborted_transactions(0, 8)
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(7, 2, 5)]
        committed = [r.value for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)]
        assert committed == [b"value-0", b"value-1", b"c1", b"value-100"]
        everything = [r.value for r in log.records(0)]
        assert b"a1" in everything and len(everything) == 6
    # The txn index is rebuilt by recovery too.
    txn_index = directory / f"{SEGMENT}.txnindex"
    written = txn_index.read_bytes()
    txn_index.unlink()
    (directory / f"{SEGMENT}.index").unlink()
    with Log.open(directory, config(), had_clean_shutdown=False) as log:
        assert txn_index.read_bytes() == written
        assert [r.value for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)][-1] == b"value-100"


def _coordinator() -> AppendOrigin:
    return AppendOrigin.COORDINATOR


# --- truncation, deletion, retention ----------------------------------------------------------


def test_truncate_and_delete_records(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(segment_bytes=600), time=MockTime(T0)) as log:
        for i in range(20):
            log.append_as_leader(batch(2, 2 * i))
        segments = len(log.segments)
        assert log.truncate_to(25)  # inside the batch 24-25: the whole batch goes
        assert log.log_end_offset == 24 and len(log.segments) < segments
        assert [r.offset for r in log.records(0)] == list(range(24))
        log.append_as_leader(batch(2, 500))
        assert [r.offset for r in log.records(23)] == [23, 24, 25]
        assert not log.truncate_to(100)
        with pytest.raises(OffsetOutOfRangeError):
            log.maybe_increment_log_start_offset(1000)
        log.delete_records_before(10)
        assert log.log_start_offset == 10
        assert log.segments.first_segment.base_offset <= 10
        with pytest.raises(OffsetOutOfRangeError):
            log.read(5, 100)
        log.truncate_fully_and_start_at(1000)
        assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (1000, 1000, 1)


def test_retention_by_time_size_and_async_delete(tmp_path: Path) -> None:
    time = MockTime(T0 + 10_000_000)
    cfg = config(segment_bytes=600, retention_ms=1_000_000, file_delete_delay_ms=1000)
    with Log.open(tmp_path / "t-0", cfg, time=time) as log:
        for i in range(10):  # old data: older than retention.ms
            log.append_as_leader(batch(2, 2 * i, ts=T0))
        for i in range(10, 20):
            log.append_as_leader(batch(2, 2 * i, ts=T0 + 10_000_000))
        before = len(log.segments)
        deleted = log.delete_old_segments()
        assert 0 < deleted < before
        assert log.log_start_offset == log.segments.first_segment.base_offset > 0
        assert all(r.timestamp >= T0 + 10_000_000 or r.offset >= log.log_start_offset
                   for r in log.records(log.log_start_offset))
        pending = list(log.dir.glob("*.deleted"))
        assert pending  # renamed, not yet removed
        time.sleep(2000)
        log.delete_pending_files()
        assert not list(log.dir.glob("*.deleted"))

        log.update_config(config(segment_bytes=600, retention_bytes=1200))
        log.delete_old_segments()
        assert log.size_in_bytes <= 1200 + 600
        assert log.log_end_offset == 40


def test_retention_never_loses_the_active_segment(tmp_path: Path) -> None:
    time = MockTime(T0 + 10**9)
    with Log.open(tmp_path / "t-0", config(retention_ms=1000), time=time) as log:
        log.append_as_leader(batch(5, ts=T0))
        assert log.delete_old_segments() == 1
        assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (5, 5, 1)
        log.append_as_leader(batch(1, ts=T0 + 10**9))
        assert [r.offset for r in log.records(5)] == [5]


# --- reloading --------------------------------------------------------------------------------


def test_reload_after_crash_is_a_prefix(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    cfg = config(segment_bytes=800, index_interval_bytes=50)
    with Log.open(directory, cfg) as log:
        for i in range(30):
            log.append_as_leader(batch(2, 2 * i))
    active = sorted(directory.glob("*.log"))[-1]
    with open(active, "ab") as f:
        f.write(os.urandom(37))  # a torn write
    (sorted(directory.glob("*.index"))[-1]).write_bytes(b"\0" * 64)  # a zeroed index
    with Log.open(directory, cfg, had_clean_shutdown=False) as log:
        assert [r.offset for r in log.records(0)] == list(range(60))
        log.append_as_leader(batch(1, 60))
        assert log.log_end_offset == 61
    with Log.open(directory, cfg) as log:
        assert log.log_end_offset == 61


def test_loader_finishes_leftovers(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    cfg = config(segment_bytes=800)
    with Log.open(directory, cfg) as log:
        for i in range(10):
            log.append_as_leader(batch(2, 2 * i))
        bases = [s.base_offset for s in log.segments]
    (directory / "00000000000000000099.index").write_bytes(b"")          # orphaned index
    (directory / "00000000000000000000.log.deleted").write_bytes(b"x")   # delete that did not finish
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"x")   # cleaning that did not finish
    with Log.open(directory, cfg) as log:
        assert [s.base_offset for s in log.segments] == bases
        assert [r.offset for r in log.records(0)] == list(range(20))
    names = {p.name for p in directory.iterdir()}
    assert "00000000000000000099.index" not in names
    assert not any(n.endswith((".deleted", ".cleaned")) for n in names)

    # A swap file replaces the segments it covers.
    first = sorted(directory.glob("*.log"))[0]
    shutil.copy(first, directory / (first.name + ".swap"))
    with Log.open(directory, cfg) as log:
        assert [r.offset for r in log.records(0)] == list(range(20))
    assert not list(directory.glob("*.swap"))


def test_read_only_open_sees_whole_batches_and_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()) as writer:
        writer.append_as_leader(batch(3))
        before = {p.name: p.stat().st_size for p in directory.iterdir()}
        with open(directory / f"{SEGMENT}.log", "ab") as f:
            f.write(batch(3, 3).buffer.tobytes()[:40])  # a batch caught mid-write
        reader = Log.open(directory, config(), read_only=True)
        assert reader.log_end_offset == 3
        assert [r.offset for r in reader.records(0)] == [0, 1, 2]
        with pytest.raises(Exception, match="read-only"):
            reader.append_as_leader(batch(1))
        reader.close()
        size = (directory / f"{SEGMENT}.log").stat().st_size
        assert size == before[f"{SEGMENT}.log"] + 40


def test_compacted_topic_requires_keys(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(cleanup_policy="compact")) as log, \
            pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(1, key=None))
