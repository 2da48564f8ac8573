"""Log (one partition): appends on the leader and follower paths, rolling, fetch-like reads, range
iterators, offsets by timestamp, truncation, DeleteRecords, flushing, leader epochs and read-only
opens (behaviours of Kafka's UnifiedLogTest, in our own words)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import (
    IllegalArgumentError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    PolicyViolationError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.types import NO_TIMESTAMP, TimestampType
from kafkalog.storage.checkpoint import LEADER_EPOCH_CHECKPOINT_FILE
from kafkalog.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation, Log
from kafkalog.storage.metadata_files import PARTITION_METADATA_FILE, PartitionMetadataFile, Uuid
from tests.storage.conftest import T0, config


def batch(n: int, start: int = 0, *, ts: int | None = T0, magic: int = 2,
          codec: CompressionType = CompressionType.NONE, size: int = 0) -> MemoryRecords:
    """One client batch of ``n`` records named after ``start``..; timestamps ``ts + i`` (None: -1)."""
    pad = b"x" * size
    return MemoryRecords.with_records(magic, codec, [
        SimpleRecord(b"value-%d" % i + pad, b"key-%d" % i, NO_TIMESTAMP if ts is None else ts + i)
        for i in range(start, start + n)])


def at(records: MemoryRecords, base_offset: int, *, magic: int = 2, epoch: int = 0) -> MemoryRecords:
    """The same records re-built at ``base_offset`` (what a follower receives)."""
    return MemoryRecords.with_records(magic, CompressionType.NONE, [
        SimpleRecord(r.value, r.key, r.timestamp) for r in records.records()], base_offset,
        partition_leader_epoch=epoch if magic >= 2 else -1)


def values(log: Log, start: int = 0, end: int | None = None, **kw: object) -> list[bytes | None]:
    return [r.value for r in log.records(start, end, **kw)]  # type: ignore[arg-type]


@pytest.fixture
def time() -> MockTime:
    return MockTime(T0)


# --- leader appends -------------------------------------------------------------------------------


def test_leader_assigns_contiguous_offsets_across_magics_and_codecs(tmp_path: Path) -> None:
    shapes = [(magic, codec) for magic in (0, 1, 2) for codec in CompressionType
              if not (codec is CompressionType.ZSTD and magic < 2)]
    with Log.open(tmp_path / "t-0", config()) as log:
        expected: list[bytes] = []
        for i, (magic, codec) in enumerate(shapes):
            n = 1 + i % 3
            info = log.append_as_leader(batch(n, 10 * i, magic=magic, codec=codec))
            assert (info.first_offset, info.last_offset) == (len(expected), len(expected) + n - 1)
            expected += [b"value-%d" % j for j in range(10 * i, 10 * i + n)]
        assert log.log_end_offset == len(expected)
        records = list(log.records(0))
        assert [r.offset for r in records] == list(range(len(expected)))
        assert [r.value for r in records] == expected
        # The topic's format is v2: every batch on disk was written (or converted) as v2.
        assert {b.magic for b in log.batches(0)} == {2}


def test_leader_keeps_legacy_format_when_the_topic_asks(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(message_format_version="0.10.2")) as log:
        log.append_as_leader(batch(3, magic=2))
        log.append_as_leader(batch(2, 3, magic=1, codec=CompressionType.GZIP))
        assert {b.magic for b in log.batches(0)} == {1}
        assert [r.offset for r in log.records(0)] == [0, 1, 2, 3, 4]
        assert values(log, 3) == [b"value-3", b"value-4"]


@pytest.mark.parametrize("magic, codec", [(magic, codec) for magic in (0, 1) for codec in CompressionType
                                          if codec is not CompressionType.ZSTD])
def test_legacy_topic_formats_store_their_own_magic_with_every_codec(tmp_path: Path, magic: int,
                                                                      codec: CompressionType) -> None:
    fmt = {0: "0.9.0", 1: "0.10.2"}[magic]
    with Log.open(tmp_path / "t-0", config(message_format_version=fmt)) as log:
        for i in range(5):
            log.append_as_leader(batch(3, 3 * i, magic=magic, codec=codec))
        assert [r.offset for r in log.records(0)] == list(range(15))
        assert values(log) == [b"value-%d" % i for i in range(15)]
        assert {b.magic for b in log.batches(0)} == {magic}


def test_leader_append_info_and_log_append_time(tmp_path: Path, time: MockTime) -> None:
    with Log.open(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"), time=time) as log:
        log.append_as_leader(batch(2))
        time.sleep(500)
        info = log.append_as_leader(batch(3, ts=T0 - 10_000))
        assert (info.first_offset, info.last_offset, info.log_start_offset) == (2, 4, 0)
        assert info.log_append_time == T0 + 500 == info.max_timestamp
        records = list(log.records(2))
        assert {(r.timestamp, r.timestamp_type) for r in records} == {
            (T0 + 500, TimestampType.LOG_APPEND_TIME)}


def test_leader_rejects_bad_appends_and_writes_nothing(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(max_message_bytes=200)) as log:
        with pytest.raises(RecordTooLargeError):
            log.append_as_leader(batch(1, size=300))
        with pytest.raises(InvalidRecordError):  # client batches start at offset 0
            log.append_as_leader(at(batch(1), 5))
        assert (log.log_end_offset, log.size_in_bytes) == (0, 0)
        # An empty append and a lone partial batch are no-ops.
        assert log.append_as_leader(MemoryRecords(b"")).valid_bytes == 0
        assert log.append_as_leader(MemoryRecords(batch(1).to_bytes()[:40])).valid_bytes == 0
        # A partial trailing batch is trimmed, the whole one before it appended.
        log.append_as_leader(MemoryRecords(batch(1).to_bytes() + batch(1).to_bytes()[:30]))
        assert log.log_end_offset == 1


def test_compacted_topic_rejects_records_without_keys(tmp_path: Path) -> None:
    keyless = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v", None, T0)])
    with Log.open(tmp_path / "t-0", config(cleanup_policy="compact")) as log:
        with pytest.raises(InvalidRecordError):
            log.append_as_leader(keyless)
        assert log.log_end_offset == 0
        log.append_as_leader(batch(1))
        assert log.log_end_offset == 1


def test_append_larger_than_a_segment_is_rejected(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(segment_bytes=100, max_message_bytes=10_000)) as log:
        with pytest.raises(RecordBatchTooLargeError):
            log.append_as_leader(batch(1, size=200))
        with pytest.raises(RecordBatchTooLargeError):
            log.append_as_follower(MemoryRecords(at(batch(1), 0).to_bytes() + at(batch(1, 1), 1).to_bytes()))
        assert log.log_end_offset == 0


# --- follower appends -----------------------------------------------------------------------------


def test_follower_keeps_offsets_and_checks_them(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(max_message_bytes=100)) as log:
        info = log.append_as_follower(at(batch(3, size=200), 0, epoch=4))  # too big for a client: fine
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 2, 3)
        log.append_as_follower(at(batch(2), 10))  # gaps are allowed (compacted leaders)
        assert [r.offset for r in log.records(0)] == [0, 1, 2, 10, 11]
        assert log.log_end_offset == 12
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(at(batch(1), 11))
        backwards = MemoryRecords(at(batch(1), 20).to_bytes() + at(batch(1), 15).to_bytes())
        with pytest.raises(OffsetsOutOfOrderError):
            log.append_as_follower(backwards)
        assert log.log_end_offset == 12
        # Legacy messages only carry their last offset; it is what is checked.
        log.append_as_follower(at(batch(2), 30, magic=1))
        assert log.log_end_offset == 32
        assert log.leader_epoch_cache is not None and log.leader_epoch_cache.entries == []
    with Log.open(tmp_path / "u-0", config()) as log:  # the first append of an empty log may skip ahead
        log.append_as_follower(at(batch(2), 10))
        assert ([r.offset for r in log.records(0)], log.log_end_offset) == ([10, 11], 12)
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(at(batch(1), 5))


# --- rolling --------------------------------------------------------------------------------------


def test_roll_on_size_keeps_segments_under_segment_bytes(tmp_path: Path) -> None:
    one = batch(1).size_in_bytes
    with Log.open(tmp_path / "t-0", config(segment_bytes=3 * one)) as log:
        for i in range(10):
            log.append_as_leader(batch(1, i))
        assert log.segments.base_offsets() == [0, 3, 6, 9]
        assert all(s.size_in_bytes <= 3 * one for s in log.segments)
        assert values(log) == [b"value-%d" % i for i in range(10)]
        # Rolled segments were trimmed and flushed: the recovery point is the active base offset.
        assert log.recovery_point == 9
        assert all(s.offset_index.max_entries == s.offset_index.entries for s in log.segments.values()[:-1])


def test_roll_on_record_time_and_on_wall_time(tmp_path: Path, time: MockTime) -> None:
    with Log.open(tmp_path / "t-0", config(segment_ms=1000), time=time) as log:
        log.append_as_leader(batch(1, ts=T0))
        log.append_as_leader(batch(1, 1, ts=T0 + 999))  # the first batch's time + 999: no roll
        assert len(log.segments) == 1
        log.append_as_leader(batch(1, 2, ts=T0 + 1001))  # record time is what counts
        assert log.segments.base_offsets() == [0, 2]
    with Log.open(tmp_path / "u-0", config(segment_ms=1000), time=time) as log:
        log.append_as_leader(batch(1, ts=None))  # no timestamps: the segment's age is what counts
        time.sleep(1000)
        log.append_as_leader(batch(1, 1, ts=None))
        assert len(log.segments) == 1
        time.sleep(1)
        log.append_as_leader(batch(1, 2, ts=None))
        assert log.segments.base_offsets() == [0, 2]
        # An empty segment never rolls for time.
        time.sleep(10_000)
        log.roll()
        base = log.active_segment.base_offset
        time.sleep(10_000)
        log.append_as_leader(batch(1, 3, ts=None))
        assert log.active_segment.base_offset == base


def test_roll_when_an_index_is_full(tmp_path: Path) -> None:
    # 4 offset-index entries, 2 time-index slots (one reserved): appends fill them quickly.
    with Log.open(tmp_path / "t-0", config(segment_index_bytes=32, index_interval_bytes=1)) as log:
        for i in range(12):
            log.append_as_leader(batch(1, i))
        assert len(log.segments) > 1
        for segment in log.segments:
            assert segment.offset_index.entries <= 4 and segment.time_index.entries <= 2
        assert values(log) == [b"value-%d" % i for i in range(12)]


def test_roll_base_offset_rules(tmp_path: Path) -> None:
    one = at(batch(1), 0, magic=1).size_in_bytes
    with Log.open(tmp_path / "t-0", config(segment_bytes=one, message_format_version="0.10.2")) as log:
        log.append_as_follower(at(batch(1), 0, magic=1))
        # A legacy append only says its last offset: the new segment starts at
        # max(last offset - Int.MAX, LEO), not at the (unknown) first offset.
        log.append_as_follower(at(batch(1), 5, magic=1))
        assert log.segments.base_offsets() == [0, 1]
    with Log.open(tmp_path / "u-0", config(segment_bytes=batch(1).size_in_bytes)) as log:
        log.append_as_follower(at(batch(1), 0))
        log.append_as_follower(at(batch(1), 7))  # v2 knows its first offset
        assert log.segments.base_offsets() == [0, 7]
        # Rolling onto an empty active segment with the same base recreates it.
        log.roll()
        first = log.active_segment
        log.roll()
        assert log.segments.base_offsets() == [0, 7, 8] and log.active_segment is not first
        log.append_as_leader(batch(1))
        assert [r.offset for r in log.records(0)] == [0, 7, 8]
        assert log.roll(3).base_offset == 9  # never below the LEO


def test_roll_takes_a_producer_snapshot_at_the_new_base(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()) as log:
        log.append_as_leader(batch(4))
        log.roll()
        assert (directory / "00000000000000000004.snapshot").exists()
        assert log.recovery_point == 4


# --- reads ----------------------------------------------------------------------------------------


def fixed(i: int) -> MemoryRecords:
    """Batch ``i`` of a filled log: three equal-sized records named ``r000``.."""
    return MemoryRecords.with_records(2, CompressionType.NONE, [
        SimpleRecord(b"r%03d" % o, None, T0 + o) for o in range(3 * i, 3 * i + 3)])


def filled(tmp_path: Path, **props: object) -> Log:
    """10 batches of 3 records (offsets 0..29), 4 batches to a segment: bases 0, 12, 24."""
    log = Log.open(tmp_path / "t-0", config(segment_bytes=4 * fixed(0).size_in_bytes, **props))
    for i in range(10):
        log.append_as_leader(fixed(i))
    assert log.segments.base_offsets() == [0, 12, 24]
    return log


def test_read_is_batch_granular_and_bounded_by_bytes(tmp_path: Path) -> None:
    with filled(tmp_path) as log:
        size = fixed(0).size_in_bytes
        fetch = log.read(4, 10 * size)  # inside the second batch: starts with that whole batch
        first = next(fetch.records.batches())
        assert (first.base_offset, first.last_offset) == (3, 5)
        # A read never crosses into the next segment.
        assert [b.base_offset for b in fetch.records.batches()] == [3, 6, 9]
        assert fetch.fetch_offset_metadata.segment_base_offset == 0
        assert log.read(4, 2 * size).records.size_in_bytes == 2 * size
        cut = log.read(4, 10, min_one_message=False)
        assert cut.records.size_in_bytes == 10 and cut.first_entry_incomplete
        assert log.read(4, 10, min_one_message=True).records.size_in_bytes == size
        assert log.read(4, 0, min_one_message=False).records.size_in_bytes == 0
        assert log.read(30, 1000).records.size_in_bytes == 0  # at the LEO: empty
        with pytest.raises(OffsetOutOfRangeError):
            log.read(31, 1000)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1, 1000)
        with pytest.raises(IllegalArgumentError):
            log.read(0, -1)


def test_read_from_a_gap_moves_to_the_next_segment(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_follower(at(batch(2), 0))
        log.roll(50)
        log.append_as_follower(at(batch(2), 60))
        fetch = log.read(10, 10_000)
        assert [b.base_offset for b in fetch.records.batches()] == [60]
        assert [r.offset for r in log.records(10)] == [60, 61]


def test_isolation_levels(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_leader(batch(2))
        open_txn = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"t", b"k", T0)],
                                              producer_id=9, producer_epoch=0, base_sequence=0,
                                              is_transactional=True)
        log.append_as_leader(open_txn)
        log.append_as_leader(batch(1, 5))
        assert (log.high_watermark, log.last_stable_offset) == (4, 2)
        for isolation, want in [(FetchIsolation.LOG_END, [0, 1, 2, 3]),
                                (FetchIsolation.HIGH_WATERMARK, [0, 1, 2, 3]),
                                (FetchIsolation.TXN_COMMITTED, [0, 1])]:
            assert [r.offset for r in log.records(0, isolation=isolation)] == want
            fetched = [r.offset for r in log.read(0, 100_000, isolation=isolation).records.records()]
            assert fetched == want
        committed = log.read(2, 1000, isolation=FetchIsolation.TXN_COMMITTED)
        assert committed.records.size_in_bytes == 0 and committed.aborted_transactions == []


def test_batches_and_records_ranges_are_lazy(tmp_path: Path) -> None:
    with filled(tmp_path) as log:
        assert [(b.base_offset, b.last_offset) for b in log.batches(4, 10)] == [(3, 5), (6, 8), (9, 11)]
        assert [r.offset for r in log.records(4, 10)] == [4, 5, 6, 7, 8, 9]
        assert list(log.records(10, 10)) == [] and list(log.records(40)) == []
        # Only the segments overlapping the range are touched.
        first = log.segments.first_segment
        assert first is not None

        def boom(*args: object, **kwargs: object) -> None:
            raise AssertionError("the first segment must not be read")

        class Untouchable:
            def __getattr__(self, name: str) -> object:
                raise AssertionError(f"the first segment's .log must not be read ({name})")

        real_log = first._log
        first.translate_offset = boom  # type: ignore[method-assign]
        first._log = Untouchable()  # type: ignore[assignment]
        try:
            assert [r.offset for r in log.records(25)] == [25, 26, 27, 28, 29]
            iterator = log.records(13)
            assert next(iterator).offset == 13  # lazily: nothing else is needed for the first record
        finally:
            first._log = real_log
            del first.translate_offset


def test_records_below_the_log_start_offset_are_not_returned(tmp_path: Path) -> None:
    with filled(tmp_path) as log:
        log.maybe_increment_log_start_offset(7)
        assert [r.offset for r in log.records(0, 9)] == [7, 8]
        with pytest.raises(OffsetOutOfRangeError):
            log.read(6, 1000)


def test_readers_on_threads_never_see_partial_batches(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(segment_bytes=4000)) as log:
        stop = threading.Event()
        problems: list[str] = []

        def reader() -> None:
            deadline = 200
            while not stop.is_set() and deadline:
                deadline -= 1
                end = log.log_end_offset
                offsets = [r.offset for r in log.records(0, end)]
                if offsets != list(range(len(offsets))) or len(offsets) < end:
                    problems.append(f"saw {offsets[-3:]} with end {end}")

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        for i in range(150):
            log.append_as_leader(batch(2, 2 * i))
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert not problems


# --- offsets by timestamp -------------------------------------------------------------------------


def test_offset_for_timestamp(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(segment_bytes=300)) as log:
        log.append_as_leader(batch(3, ts=T0), leader_epoch=1)  # 0..2 at T0..T0+2
        log.append_as_leader(batch(3, ts=T0 + 100), leader_epoch=2)  # 3..5
        records = [SimpleRecord(b"a", None, T0 + 500), SimpleRecord(b"b", None, T0 + 900),
                   SimpleRecord(b"c", None, T0 + 200)]
        log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, records), leader_epoch=2)
        assert len(log.segments) > 1
        found = log.offset_for_timestamp(T0 + 1)
        assert found is not None and (found.timestamp, found.offset, found.leader_epoch) == (T0 + 1, 1, 1)
        found = log.offset_for_timestamp(T0 + 150)
        assert found is not None and (found.timestamp, found.offset) == (T0 + 500, 6)
        assert log.offset_for_timestamp(T0 + 901) is None
        earliest = log.offset_for_timestamp(EARLIEST_TIMESTAMP)
        assert earliest is not None
        assert (earliest.timestamp, earliest.offset, earliest.leader_epoch) == (-1, 0, 1)
        latest = log.offset_for_timestamp(LATEST_TIMESTAMP)
        assert latest is not None and (latest.offset, latest.leader_epoch) == (9, 2)
        # The max timestamp is found inside its batch: offset 7, not the batch's last offset 8.
        top = log.offset_for_timestamp(MAX_TIMESTAMP)
        assert top is not None and (top.timestamp, top.offset, top.leader_epoch) == (T0 + 900, 7, 2)
        with pytest.raises(IllegalArgumentError):
            log.offset_for_timestamp(-7)
    with Log.open(tmp_path / "e-0", config()) as log:
        assert log.offset_for_timestamp(MAX_TIMESTAMP) is None
        assert log.offset_for_timestamp(T0) is None


# --- truncation and DeleteRecords -----------------------------------------------------------------


def test_truncate_to(tmp_path: Path) -> None:
    with filled(tmp_path) as log:
        log.append_as_leader(batch(1, 30), leader_epoch=5)
        assert not log.truncate_to(31) and not log.truncate_to(100)
        assert log.truncate_to(16)  # inside the batch 15-17: the whole batch goes
        assert log.log_end_offset == 15
        assert log.segments.base_offsets() == [0, 12]
        assert [r.offset for r in log.records(0)] == list(range(15))
        assert log.leader_epoch_cache is not None
        assert [e.epoch for e in log.leader_epoch_cache.entries] == [0]
        info = log.append_as_leader(batch(1, 99))
        assert info.first_offset == 15 and values(log, 15) == [b"value-99"]
        with pytest.raises(IllegalArgumentError):
            log.truncate_to(-1)


def test_truncate_below_the_first_segment_starts_over(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(), log_start_offset=100) as log:
        assert log.segments.base_offsets() == [100]
        log.append_as_follower(at(batch(3), 100))
        assert log.truncate_to(50)
        assert (log.log_start_offset, log.log_end_offset, log.segments.base_offsets()) == (50, 50, [50])
        log.truncate_fully_and_start_at(50)
        assert log.segments.base_offsets() == [50]
        log.append_as_leader(batch(1))
        assert [r.offset for r in log.records(50)] == [50]


def test_delete_records_moves_the_log_start_offset(tmp_path: Path) -> None:
    with filled(tmp_path) as log:
        assert log.maybe_increment_log_start_offset(13)
        assert not log.maybe_increment_log_start_offset(5)  # never backwards
        assert log.log_start_offset == 13
        with pytest.raises(OffsetOutOfRangeError):
            log.maybe_increment_log_start_offset(31)  # beyond the high watermark
        assert log.segments.base_offsets() == [0, 12, 24]  # segments go with retention
        assert log.delete_records_before(13) == 1
        assert log.segments.base_offsets() == [12, 24]
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 13  # type: ignore[union-attr]
        assert log.delete_records_before(25) == 1  # raises the log start offset itself too
        assert (log.log_start_offset, log.segments.base_offsets()) == (25, [24])
        with pytest.raises(OffsetOutOfRangeError):
            log.read(20, 1000)
        log.truncate_fully_and_start_at(1000)
        assert (log.log_start_offset, log.log_end_offset, log.segments.base_offsets()) == (1000, 1000, [1000])


def test_delete_records_needs_a_cleanup_policy_that_deletes(tmp_path: Path) -> None:
    keyed = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v", b"k", T0)] * 3)
    with Log.open(tmp_path / "t-0", config(cleanup_policy="compact")) as log:
        log.append_as_leader(keyed)
        for offset in (2, -5):  # the policy first, as Kafka checks it
            refused = "Records of partition t-0 can not be deleted due to the configured policy"
            with pytest.raises(PolicyViolationError, match=refused):
                log.delete_records_before(offset)
        assert log.log_start_offset == 0
    with Log.open(tmp_path / "u-0", config(cleanup_policy="compact,delete")) as log:
        log.append_as_leader(keyed)
        with pytest.raises(OffsetOutOfRangeError, match="The offset -5 for partition u-0 is not valid"):
            log.delete_records_before(-5)
        log.delete_records_before(2)
        assert log.log_start_offset == 2


def test_update_config_applies_to_the_next_retention_pass(tmp_path: Path, time: MockTime) -> None:
    with Log.open(tmp_path / "t-0", config(segment_bytes=600), time=time) as log:
        for i in range(20):
            log.append_as_leader(batch(2, 2 * i))
        assert log.delete_old_segments() == 0  # no size limit, nothing older than retention.ms
        log.update_config(config(segment_bytes=600, retention_bytes=1200))
        assert log.delete_old_segments() > 0
        assert log.size_in_bytes <= 1200 + 600 and log.log_end_offset == 40
        assert [r.offset for r in log.records(log.log_start_offset)][-1] == 39


# --- flushing -------------------------------------------------------------------------------------


def test_flush_by_message_count_and_by_time(tmp_path: Path, time: MockTime) -> None:
    with Log.open(tmp_path / "t-0", config(flush_messages=5), time=time) as log:
        log.append_as_leader(batch(3))
        assert log.recovery_point == 0
        log.append_as_leader(batch(3, 3))
        assert log.recovery_point == 6
    with Log.open(tmp_path / "u-0", config(flush_ms=1000), time=time) as log:
        log.append_as_leader(batch(1))
        assert log.recovery_point == 0
        time.sleep(1000)
        log.append_as_leader(batch(1, 1))
        assert log.recovery_point == 2
        log.append_as_leader(batch(1, 2))
        log.flush(2)
        assert log.recovery_point == 2
        log.flush()
        assert log.recovery_point == 3


# --- side files -----------------------------------------------------------------------------------


def test_leader_epochs_are_checkpointed_in_kafkas_format(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()) as log:
        log.append_as_leader(batch(2), leader_epoch=3)
        log.append_as_leader(batch(2), leader_epoch=3)
        log.append_as_leader(batch(1), leader_epoch=5)
        log.append_as_leader(batch(1), leader_epoch=4)  # an older epoch replaces the later (Kafka's assign)
    assert (directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n2\n3 0\n4 5\n"
    with Log.open(directory, config()) as log:
        assert log.latest_epoch == 4
        log.truncate_to(3)
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(3, 0)]  # type: ignore[union-attr]
    assert (directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n1\n3 0\n"


def test_a_leader_append_continues_at_the_highest_epoch_the_log_holds(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()) as log:
        assert log.leader_epoch == 0
        log.append_as_leader(batch(2))
        assert log.leader_epoch == 0 and log.latest_epoch == 0
        log.append_as_leader(batch(2), leader_epoch=7)  # another leader (Kafka's, say) took over
        assert log.leader_epoch == 7
    with Log.open(directory, config()) as log:  # reopened: the checkpoint says 7
        assert log.leader_epoch == 7
        log.append_as_leader(batch(1))
        stamped = [b.partition_leader_epoch for s in log.segments for b in s.log.batches()]
        assert stamped == [0, 7, 7]
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(0, 0), (7, 2)]  # type: ignore[union-attr]
        log.truncate_fully_and_start_at(10)  # the cache empties; the epoch does not go back
        assert log.latest_epoch is None and log.leader_epoch == 7
        log.append_as_leader(batch(1))
        assert log.latest_epoch == 7


def test_partition_metadata_is_written_on_create(tmp_path: Path) -> None:
    topic_id = Uuid.random()
    with Log.open(tmp_path / "a-0", config(), topic_id=topic_id):
        pass
    assert PartitionMetadataFile(tmp_path / "a-0" / PARTITION_METADATA_FILE).read().topic_id == topic_id
    with Log.open(tmp_path / "b-0", config()):
        pass
    assert (tmp_path / "b-0" / PARTITION_METADATA_FILE).read_text().startswith("version: 0\ntopic_id: ")
    with pytest.raises(KafkaStorageError):
        Log.open(tmp_path / "not a partition", config())
    assert not (tmp_path / "not a partition").exists()


def test_close_trims_and_reopen_continues(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config(index_interval_bytes=1)) as log:
        for i in range(5):
            log.append_as_leader(batch(2, 2 * i))
        assert log.active_segment.offset_index.max_entries > log.active_segment.offset_index.entries
    assert (directory / "00000000000000000000.index").stat().st_size == 4 * 8
    # Entries are made at the start of the later appends; the last one already holds the max.
    assert (directory / "00000000000000000000.timeindex").stat().st_size == 4 * 12
    with Log.open(directory, config(index_interval_bytes=1)) as log:
        assert log.log_end_offset == 10 and log.recovery_point == 10
        log.append_as_leader(batch(1, 10))
        assert values(log, 9) == [b"value-9", b"value-10"]
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch(1))  # closed


# --- read-only opens ------------------------------------------------------------------------------


@pytest.mark.parametrize("preallocate", [False, True])
def test_read_only_follows_a_writer_and_writes_nothing(tmp_path: Path, preallocate: bool) -> None:
    directory = tmp_path / "t-0"
    size = batch(2).size_in_bytes
    writer = Log.open(directory, config(segment_bytes=3 * size, preallocate=str(preallocate).lower()))
    try:
        writer.append_as_leader(batch(2))
        listing = sorted((p.name, p.stat().st_size) for p in directory.iterdir())
        with Log.open(directory, config(), read_only=True) as reader:
            assert reader.log_end_offset == 2
            assert sorted((p.name, p.stat().st_size) for p in directory.iterdir()) == listing
            for i in range(1, 6):
                writer.append_as_leader(batch(2, 2 * i))
            assert reader.log_end_offset == 12  # followed the writer, across its rolls
            assert [r.offset for r in reader.records(0)] == list(range(12))
            with pytest.raises(KafkaStorageError, match="read-only"):
                reader.append_as_leader(batch(1))
            with pytest.raises(KafkaStorageError):
                reader.truncate_to(0)
    finally:
        writer.close()


def test_read_only_ignores_a_torn_tail(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()) as log:
        log.append_as_leader(batch(2))
        log.append_as_leader(batch(2, 2))
    log_file = directory / "00000000000000000000.log"
    whole = log_file.read_bytes()
    with open(log_file, "ab") as f:  # a batch being written: its header is there, its body not yet
        f.write(batch(1).to_bytes()[:50])
    with Log.open(directory, config(), read_only=True) as reader:
        assert reader.log_end_offset == 4
        assert [r.offset for r in reader.records(0)] == [0, 1, 2, 3]
    assert log_file.stat().st_size == len(whole) + 50  # left as it was
    # A whole-looking batch with a bad CRC at the very end is a write in progress too.
    bad = bytearray(batch(1).to_bytes())
    bad[-1] ^= 0xFF
    log_file.write_bytes(whole + bytes(bad))
    with Log.open(directory, config(), read_only=True) as reader:
        assert reader.log_end_offset == 4
    os.truncate(log_file, len(whole))
    with pytest.raises(KafkaStorageError):
        Log.open(tmp_path / "missing-0", config(), read_only=True)
