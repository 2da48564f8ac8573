"""Partitions written by Apache Kafka itself, opened as logs: every record, Kafka's answers for offset
lookups and reads (expected.json), and Kafka's recovery results for torn and corrupt segments."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import OffsetOutOfRangeError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.types import TimestampType
from kafkalog.storage.index import OffsetIndex, TimeIndex
from kafkalog.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation, Log
from tests.storage.conftest import T0, config

SEG0 = "00000000000000000000"
SEG100 = "00000000000000000100"
S1_TIMESTAMPS = [T0 + (2500 if i == 10 else 40_000 if i == 20 else i * 1000) for i in range(30)]


def partition(src: Path, data_dir: Path, topic: str) -> Path:
    """Copy a golden segment directory into ``data_dir`` as partition 0 of ``topic``."""
    target = data_dir / f"{topic}-0"
    shutil.copytree(src, target)
    return target


def open_log(directory: Path, clean: bool, **props: object) -> Log:
    return Log.open(directory, config(**props), had_clean_shutdown=clean, recovery_point=0)


def read_one(log: Log, offset: int) -> list[int]:
    """A one-byte read from ``offset`` (at least one batch) as expected.json records Kafka's answer:
    [last offset of the first batch, its position in the segment, bytes read]."""
    fetch = log.read(offset, 1, min_one_message=True)
    batch = next(fetch.records.batches())
    return [batch.last_offset, fetch.fetch_offset_metadata.relative_position_in_segment,
            fetch.records.size_in_bytes]


CLEAN_AND_UNCLEAN = pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])


@CLEAN_AND_UNCLEAN
def test_s1_records_and_offsets(kafka_golden_dir: Path, tmp_path: Path, expected: dict[str, Any],
                                clean: bool) -> None:
    directory = partition(kafka_golden_dir / "s1_v2_single" / "rolled", tmp_path, "s1")
    with open_log(directory, clean, index_interval_bytes=100) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, 30)
        assert log.size_in_bytes == expected["s1_log_size"]
        records = list(log.records(0))
        assert [r.offset for r in records] == list(range(30))
        assert [r.key for r in records] == [f"key-{i}".encode() for i in range(30)]
        assert [r.value for r in records] == [f"value-{i}".encode() for i in range(30)]
        assert [r.timestamp for r in records] == S1_TIMESTAMPS
        assert {r.timestamp_type for r in records} == {TimestampType.CREATE_TIME}
        for target, want in expected["s1_find_offset_by_timestamp_startingOffset0"]:
            found = log.offset_for_timestamp(target)
            assert (None if found is None else [found.timestamp, found.offset]) == want, target
        # Kafka's special targets: earliest, latest, and the record holding the max timestamp.
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0  # type: ignore[union-attr]
        assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 30  # type: ignore[union-attr]
        top = log.offset_for_timestamp(MAX_TIMESTAMP)
        assert top is not None and (top.timestamp, top.offset, top.leader_epoch) == (T0 + 40_000, 20, 0)


@CLEAN_AND_UNCLEAN
def test_s1_reads_like_kafka_translate_and_read(kafka_golden_dir: Path, tmp_path: Path,
                                                expected: dict[str, Any], clean: bool) -> None:
    directory = partition(kafka_golden_dir / "s1_v2_single" / "rolled", tmp_path, "s1")
    with open_log(directory, clean, index_interval_bytes=100) as log:
        for offset, want in expected["s1_translate_offsets"]:
            if want is None:
                if offset == 30:  # the LEO: an empty read
                    assert log.read(offset, 1).records.size_in_bytes == 0
                else:
                    with pytest.raises(OffsetOutOfRangeError):
                        log.read(offset, 1)
                continue
            assert read_one(log, offset) == want
        position, size = expected["s1_read_15_maxsize_1"]
        fetch = log.read(15, 1, min_one_message=False)
        assert (fetch.fetch_offset_metadata.relative_position_in_segment, fetch.records.size_in_bytes) == (
            position, size)
        assert fetch.first_entry_incomplete
        assert log.read(15, 1, min_one_message=True).records.size_in_bytes == expected[
            "s1_read_15_maxsize_1_minOneMessage"][0]


@CLEAN_AND_UNCLEAN
def test_s2_mixed_batches(kafka_golden_dir: Path, tmp_path: Path, expected: dict[str, Any],
                          clean: bool) -> None:
    directory = partition(kafka_golden_dir / "s2_v2_mixed", tmp_path, "s2")
    with open_log(directory, clean, index_interval_bytes=64) as log:
        assert (log.log_start_offset, log.log_end_offset) == (100, 110)
        for offset, want in expected["s2_translate_offsets"]:
            if offset < 100 or offset > 110:
                with pytest.raises(OffsetOutOfRangeError):
                    log.read(offset, 1)
            elif want is None:
                assert log.read(offset, 1).records.size_in_bytes == 0
            else:
                assert read_one(log, offset) == want
        records = {r.offset: r for r in log.records(100)}
        # The control record (107) is hidden; the LogAppendTime batch reports its max timestamp.
        assert sorted(records) == [100, 101, 102, 103, 104, 105, 106, 108, 109]
        assert records[101].key is None and records[102].value is None
        assert {h.key for h in records[100].headers} == {"h1", "h-null"}
        assert records[104].value == b"gzip-two"
        assert [records[o].timestamp for o in (108, 109)] == [T0 + 50, T0 + 50]
        assert {records[o].timestamp_type for o in (108, 109)} == {TimestampType.LOG_APPEND_TIME}
        # The transaction of producer 4242 (105-106) was aborted at 107. Kafka wrote no .txnindex
        # for this segment: a clean open trusts that (the aborted records show, as in Kafka), a
        # recovery rebuilds the index and read_committed hides them.
        committed = [r.offset for r in log.records(100, isolation=FetchIsolation.TXN_COMMITTED)]
        if clean:
            assert committed == [100, 101, 102, 103, 104, 105, 106, 108, 109]
        else:
            assert committed == [100, 101, 102, 103, 104, 108, 109]
            aborted = log.collect_aborted_transactions(100, 110)
            assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                    for t in aborted] == [(4242, 105, 107, 108)]
        assert log.last_stable_offset == 110
        assert log.leader_epoch_cache is not None
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == (
            [] if clean else [(3, 100)])


@CLEAN_AND_UNCLEAN
def test_s3_legacy_messages(kafka_golden_dir: Path, tmp_path: Path, expected: dict[str, Any],
                            clean: bool) -> None:
    directory = partition(kafka_golden_dir / "s3_legacy", tmp_path, "s3")
    with open_log(directory, clean) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, 9)
        records = list(log.records(0))
        assert [r.offset for r in records] == list(range(9))
        assert [r.timestamp for r in records[:4]] == [-1] * 4  # v0 has no timestamps
        assert records[5].key is None and records[5].value is None
        assert records[7].timestamp == T0 + 6 and records[8].value == b"v1-gzip-8"
        for offset, want in expected["s3_translate_offsets"]:
            if want is None:
                if offset == 9:
                    assert log.read(offset, 1).records.size_in_bytes == 0
                continue
            assert read_one(log, offset) == want
        # Records from the middle of a compressed wrapper: the whole wrapper is read, earlier
        # inner records are dropped.
        assert [r.offset for r in log.records(7, 9)] == [7, 8]
        assert [r.offset for r in log.records(2, 8)] == list(range(2, 8))  # ends inside a wrapper
        # Offsets by timestamp: v0 never matches; v1 inner timestamps are searched in offset order.
        found = log.offset_for_timestamp(T0 + 5)
        assert found is not None and (found.timestamp, found.offset) == (T0 + 5, 5)
        found = log.offset_for_timestamp(T0 + 6)
        assert found is not None and (found.timestamp, found.offset) == (T0 + 7, 6)
        assert log.offset_for_timestamp(T0 + 9) is None
        top = log.offset_for_timestamp(MAX_TIMESTAMP)
        assert top is not None and (top.timestamp, top.offset) == (T0 + 8, 8)


def test_s4_torn_tail_is_cut_by_recovery(kafka_golden_dir: Path, tmp_path: Path,
                                         expected: dict[str, Any]) -> None:
    directory = tmp_path / "s4-0"
    directory.mkdir()
    shutil.copyfile(kafka_golden_dir / "s4_recovery_input_torn_tail.log", directory / f"{SEG0}.log")
    original = (directory / f"{SEG0}.log").stat().st_size
    assert original - expected["s4_torn_tail_truncated_bytes"] == expected["s4_torn_tail_log_size_after"]
    with open_log(directory, clean=False, index_interval_bytes=100) as log:
        assert log.log_end_offset == 30
        assert log.size_in_bytes == expected["s4_torn_tail_log_size_after"]
        assert [r.offset for r in log.records(0)] == list(range(30))
        assert (directory / f"{SEG0}.log").stat().st_size == expected["s4_torn_tail_log_size_after"]
        # Appends go on right after the last whole batch.
        next_record = SimpleRecord(b"next", None, T0)
        log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, [next_record]))
        assert [r.value for r in log.records(30)] == [b"next"]
    assert (directory / f"{SEG0}.log").stat().st_size > expected["s4_torn_tail_log_size_after"]


def s5_partition(kafka_golden_dir: Path, tmp_path: Path, stale_indexes: bool = True) -> Path:
    """The s1 log with the corrupt batch 12 as a partition, with the indexes from before the
    corruption (which must not be trusted by recovery) or none at all."""
    directory = tmp_path / "s5-0"
    directory.mkdir()
    shutil.copyfile(kafka_golden_dir / "s5_recovery_input_bad_crc_batch12.log", directory / f"{SEG0}.log")
    for suffix in (".index", ".timeindex") if stale_indexes else ():
        shutil.copyfile(kafka_golden_dir / "s1_v2_single" / "rolled" / f"{SEG0}{suffix}",
                        directory / f"{SEG0}{suffix}")
    return directory


@pytest.mark.parametrize("stale_indexes", [True, False], ids=["stale-indexes", "no-indexes"])
def test_s5_bad_crc_recovery_rebuilds_kafkas_indexes(kafka_golden_dir: Path, tmp_path: Path,
                                                     expected: dict[str, Any], stale_indexes: bool) -> None:
    directory = s5_partition(kafka_golden_dir, tmp_path, stale_indexes)
    before = (directory / f"{SEG0}.log").stat().st_size
    with open_log(directory, clean=False, index_interval_bytes=100) as log:
        assert before - log.size_in_bytes == expected["s5_bad_crc_truncated_bytes"]
        assert log.size_in_bytes == expected["s5_bad_crc_log_size_after"]
        assert log.log_end_offset == expected["s5_readNextOffset_after"]
        assert [r.offset for r in log.records(0)] == list(range(12))
    recovered = kafka_golden_dir / "s5_recovered"
    for suffix in (".log", ".index", ".timeindex"):
        got = (directory / f"{SEG0}{suffix}").read_bytes()
        assert got == (recovered / f"{SEG0}{suffix}").read_bytes(), suffix


def test_s5_clean_open_trusts_the_files(kafka_golden_dir: Path, tmp_path: Path) -> None:
    """After a clean shutdown Kafka validates nothing: the corrupt batch is only found when read."""
    directory = s5_partition(kafka_golden_dir, tmp_path)
    with open_log(directory, clean=True, index_interval_bytes=100) as log:
        assert log.log_end_offset == 30
        batches = list(log.batches(0))
        assert [b.is_valid() for b in batches].count(False) == 1
        assert not batches[12].is_valid()


def test_golden_indexes_survive_a_clean_open_and_close(kafka_golden_dir: Path, tmp_path: Path) -> None:
    """Opening and closing Kafka's rolled segment leaves its indexes byte-identical."""
    src = kafka_golden_dir / "s1_v2_single" / "rolled"
    directory = partition(src, tmp_path, "s1")
    with open_log(directory, clean=True, index_interval_bytes=100, segment_index_bytes=1024) as log:
        # The active segment's indexes are opened at full size for further appends.
        assert log.active_segment.offset_index.max_entries == 128
    for suffix in (".log", ".index", ".timeindex"):
        assert (directory / f"{SEG0}{suffix}").read_bytes() == (src / f"{SEG0}{suffix}").read_bytes(), suffix
    entries = OffsetIndex(directory / f"{SEG0}.index", 0, writable=False).entries
    assert entries == 14
    assert TimeIndex(directory / f"{SEG0}.timeindex", 0, writable=False).last_entry.timestamp == T0 + 40_000


def test_golden_partitions_read_only(kafka_golden_dir: Path, tmp_path: Path) -> None:
    """A reader in another process opens Kafka's partitions without writing anything."""
    dirs = [partition(kafka_golden_dir / "s1_v2_single" / "active", tmp_path, "s1a"),
            partition(kafka_golden_dir / "s2_v2_mixed", tmp_path, "s2"),
            partition(kafka_golden_dir / "s3_legacy", tmp_path, "s3")]
    before = {p: p.read_bytes() for d in dirs for p in d.iterdir()}
    ends = []
    for directory in dirs:
        with Log.open(directory, read_only=True, log_start_offset=0) as log:
            ends.append((log.log_start_offset, log.log_end_offset))
            assert len(list(log.records(log.log_start_offset))) > 0
    assert ends == [(0, 30), (100, 110), (0, 9)]
    assert {p: p.read_bytes() for d in dirs for p in d.iterdir()} == before
