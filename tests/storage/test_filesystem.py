"""Read-only logs through ``storage.filesystem``: the local filesystem and S3 (moto's server on
127.0.0.1) give the same answers for the same bytes; a remote ``.log`` is read in ranges with a
bounded read-ahead, so a narrowed read fetches a fraction of the data; writes need a local directory."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError, NoSuchFileError
from kafkalog.records import CompressionType, EndTransactionMarker, MemoryRecords, SimpleRecord
from kafkalog.records.types import ControlRecordType
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.filesystem import (
    ArrowFileSystem,
    LocalFileSystem,
    resolve_filesystem,
)
from kafkalog.storage.log import FetchIsolation, Log
from kafkalog.storage.log_manager import LogManager
from tests.storage.conftest import T0

SEGMENT_BYTES = 32 * 1024


def _build(data_dir: Path) -> None:
    """Topic ``t`` (2 partitions, many segments, mixed codecs) and ``txn`` (aborted, committed and
    open transactions across segments, so producer snapshots exist)."""
    with LogManager(data_dir) as lm:
        logs = lm.create_topic("t", 2, {"segment.bytes": str(SEGMENT_BYTES), "index.interval.bytes": "1024"})
        n = 0
        codecs = (CompressionType.NONE, CompressionType.ZSTD, CompressionType.LZ4)
        for b in range(300):
            recs = [SimpleRecord(b"value-%06d-" % (n + i) + b"x" * 100, b"k%d" % (n + i), T0 + (n + i) * 10)
                    for i in range(20)]
            n += 20
            logs[b % 2].append_as_leader(MemoryRecords.with_records(2, codecs[b % 3], recs))
        (txn,) = lm.create_topic("txn", 1, {"segment.bytes": "4096"})
        for i in range(40):
            pid = 100 + i % 3
            recs = [SimpleRecord(b"txn-%d-%d" % (i, j), None, T0 + i) for j in range(5)]
            txn.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, recs, producer_id=pid, producer_epoch=0, base_sequence=5 * (i // 3),
                is_transactional=True))
            if i < 39:
                kind = ControlRecordType.ABORT if i % 2 else ControlRecordType.COMMIT
                txn.append_as_leader(MemoryRecords.with_end_transaction_marker(
                    0, T0 + i, 0, pid, 0, EndTransactionMarker(kind, 0)), origin=AppendOrigin.COORDINATOR)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fsdata")
    _build(path)
    return path


@pytest.fixture(scope="module")
def remote(s3, data_dir) -> str:
    return s3.upload(data_dir, f"bucket-{uuid.uuid4().hex[:8]}/kafka/data")


def _open(uri: str, options: dict[str, str], topic: str, partition: int):
    fs, root = resolve_filesystem(uri, options)
    return fs, Log.open(root / f"{topic}-{partition}", read_only=True, fs=fs)


def _records(log: Log, start: int = 0, end: int | None = None, *, committed: bool = False) -> list[tuple]:
    isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
    return [(r.offset, r.timestamp, r.key, r.value) for r in log.records(start, end, isolation=isolation)]


def test_local_filesystem_lists_reads_and_counts(tmp_path):
    (tmp_path / "b.log").write_bytes(b"0123456789")
    (tmp_path / "a").mkdir()
    fs = LocalFileSystem()
    listed = [(s.name, s.is_dir, s.size) for s in fs.list_dir(tmp_path)]
    assert listed == [("a", True, 0), ("b.log", False, 10)]
    with pytest.raises(NoSuchFileError, match="does not exist"):
        fs.list_dir(tmp_path / "missing")
    f = fs.open_read(tmp_path / "b.log")
    assert (f.size, f.read_at(4, 3), f.read_at(100, 8)) == (10, b"3456", b"89")
    f.close()
    assert (fs.stats.bytes_read, fs.stats.requests) == (6, 2)
    assert fs.read_file(tmp_path / "missing") is None
    with pytest.raises(NoSuchFileError):
        fs.open_read(tmp_path / "missing")


def test_remote_file_reads_ahead_within_bounds(s3, tmp_path):
    data = bytes(range(256)) * 40  # 10240 bytes
    (tmp_path / "f.bin").write_bytes(data)
    uri = s3.upload(tmp_path, f"bucket-{uuid.uuid4().hex[:8]}/ra")
    fs, root = resolve_filesystem(uri, {**s3.options, "readaheadBytes": "4096"})
    assert isinstance(fs, ArrowFileSystem)
    f = fs.open_read(root / "f.bin", size=len(data), sequential=True)
    assert fs.stats.requests == 0  # the listing's size: opened at the first read
    assert f.read_at(61, 100) == data[100:161]
    assert (fs.stats.requests, fs.stats.bytes_read) == (1, 4096)  # one ranged GET of the read-ahead
    assert f.read_at(1000, 2000) == data[2000:3000]
    assert fs.stats.requests == 1  # served from the block
    assert f.read_at(2000, 4000) == data[4000:6000]  # 196 bytes held, the rest fetched with read-ahead
    assert (fs.stats.requests, fs.stats.bytes_read) == (2, 4096 + 4096)
    assert f.read_at(100, 10200) == data[10200:]  # clamped at the end of the file
    f.close()
    exact = fs.open_read(root / "f.bin")  # not sequential: exact ranges
    before = fs.stats.bytes_read
    assert exact.read_at(10, 5) == data[5:15]
    assert fs.stats.bytes_read - before == 10
    exact.close()
    with pytest.raises(NoSuchFileError, match=r"s3://.*/ra/missing does not exist"):
        fs.open_read(root / "missing")


def test_remote_log_reads_what_the_local_log_reads(s3, data_dir, remote):
    for partition in (0, 1):
        _, local = _open(str(data_dir), {}, "t", partition)
        fs, log = _open(remote, s3.options, "t", partition)
        with local, log:
            assert len(log.segments) == len(local.segments) > 3
            assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (
                local.log_start_offset, local.log_end_offset, local.high_watermark)
            assert _records(log) == _records(local)
            mid = local.log_end_offset // 2
            assert _records(log, mid, mid + 77) == _records(local, mid, mid + 77)
            for ts in (T0, T0 + 12_345, T0 + 59_990, T0 + 10**9):
                assert log.offset_for_timestamp(ts) == local.offset_for_timestamp(ts)
            assert log.offset_for_timestamp(-3) == local.offset_for_timestamp(-3)  # max timestamp
        assert fs.stats.bytes_read > 0


def test_remote_read_committed_uses_txn_indexes_and_snapshots(s3, data_dir, remote):
    _, local = _open(str(data_dir), {}, "txn", 0)
    _, log = _open(remote, s3.options, "txn", 0)
    with local, log:
        assert len(log.segments) >= 3
        assert log.last_stable_offset == local.last_stable_offset < log.log_end_offset  # one txn open
        assert _records(log, committed=True) == _records(local, committed=True)
        assert log.collect_aborted_transactions(0, log.log_end_offset) == \
            local.collect_aborted_transactions(0, local.log_end_offset)
        assert log.producer_state.snapshot_offsets() == local.producer_state.snapshot_offsets()
        assert log.producer_state.snapshot_offsets()


def test_narrowed_remote_read_fetches_a_fraction(s3, remote):
    options = {**s3.options, "readaheadBytes": str(64 * 1024)}
    fs_full, full = _open(remote, options, "t", 0)
    with full:
        end = full.log_end_offset
        start_bytes = fs_full.stats.bytes_read
        assert len(_records(full)) == end
        full_bytes = fs_full.stats.bytes_read - start_bytes
    fs_tail, tail = _open(remote, options, "t", 0)
    with tail:
        found = tail.offset_for_timestamp(T0 + 55_000)  # about the last 10 % of the timestamps
        assert found is not None
        rows = _records(tail, found.offset)
        assert 0 < len(rows) < end // 5
    total = full.size_in_bytes
    assert full_bytes >= total  # the whole log went over the wire once ...
    assert full_bytes < total * 1.2  # ... and not much more
    assert fs_tail.stats.bytes_read < full_bytes / 4, (fs_tail.stats, full_bytes)


def test_writes_need_a_local_directory(s3, remote):
    fs, root = resolve_filesystem(remote, s3.options)
    with pytest.raises(KafkaStorageError, match=r"s3://.*t-0 for writing: writes need a local directory"):
        Log.open(root / "t-0", fs=fs)
    with pytest.raises(KafkaStorageError, match="writes need a local directory"):
        FileRecords.open(root / "t-0" / "00000000000000000000.log", fs=fs)
    with pytest.raises(KafkaStorageError, match=r"Partition directory s3://.*/t-9 does not exist"):
        Log.open(root / "t-9", read_only=True, fs=fs)
