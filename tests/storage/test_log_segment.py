"""LogSegment and LogSegments behaviour (ported from Kafka's LogSegmentTest / LogSegmentsTest)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import (
    CorruptIndexError,
    IllegalArgumentError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
    NoSuchFileError,
)
from kafkalog.records.batch import RecordBatch
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import NO_TIMESTAMP, CompressionType, ControlRecordType, SimpleRecord
from kafkalog.storage.file_records import FileRecords, TimestampAndOffset
from kafkalog.storage.index import OffsetPosition, TimestampOffset
from kafkalog.storage.log_file_utils import (
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from kafkalog.storage.log_segment import LogOffsetMetadata, LogSegment, LogSegments, RollParams
from kafkalog.storage.txn_index import AbortedTxn

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def records(offset: int, *values: str, magic: int = 1, timestamp: int | None = None) -> MemoryRecords:
    """Kafka's test helper: one message set, offsets from ``offset``, timestamp ``offset * 10``."""
    ts = offset * 10 if timestamp is None else timestamp
    return MemoryRecords.with_records(magic, CompressionType.NONE,
                                      [SimpleRecord(v.encode(), timestamp=ts) for v in values], offset)


def values_of(recs: object) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in recs.records()]  # type: ignore[attr-defined]


@pytest.fixture
def make_segment(tmp_path: Path) -> Iterator:
    opened: list[LogSegment] = []

    def make(base_offset: int, index_interval_bytes: int = 10, time: MockTime | None = None,
             **kwargs: object) -> LogSegment:
        # Kafka's LogTestUtils uses 1000/1500-byte indexes; one size serves both here.
        seg = LogSegment.open(tmp_path, base_offset, index_interval_bytes=index_interval_bytes,
                              max_index_size=1500, time=time or MockTime(), **kwargs)
        opened.append(seg)
        return seg

    yield make
    for seg in opened:
        seg.close()


# --- append / read --------------------------------------------------------------------------------


@pytest.mark.parametrize(("base_offset", "largest_offset"), [
    (0, -(2**31)), (0, 2**31), (1, 0), (100, 10), (2**31, 0), (-(2**31), 0), (2**31, 2**32),
])
def test_append_offset_overflow(make_segment, base_offset: int, largest_offset: int) -> None:
    seg = make_segment(base_offset)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(largest_offset, 0, largest_offset, records(0, "hello"))
    assert seg.size_in_bytes == 0


def test_read_on_empty_segment_is_none(make_segment) -> None:
    assert make_segment(40).read(40, 300) is None


def test_read_before_first_offset(make_segment) -> None:
    seg = make_segment(40)
    ms = records(50, "hello", "there", "little", "bee")
    seg.append(53, NO_TIMESTAMP, -1, ms)
    read = seg.read(41, 300)
    assert read is not None
    assert values_of(read.records) == values_of(ms)
    assert read.fetch_offset_metadata == LogOffsetMetadata(41, 40, 0)


def test_read_after_last_is_none(make_segment) -> None:
    seg = make_segment(40)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    assert seg.read(52, 200) is None


def test_read_from_gap(make_segment) -> None:
    seg = make_segment(40)
    seg.append(51, NO_TIMESTAMP, -1, records(50, "hello", "there"))
    ms2 = records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    read = seg.read(55, 200)
    assert read is not None and values_of(read.records) == values_of(ms2)


@pytest.mark.parametrize("min_one_message", [False, True])
def test_read_sizes_positions_and_min_one_message(make_segment, min_one_message: bool) -> None:
    seg = make_segment(40)
    first = records(50, "hello")
    second = records(51, "there")
    seg.append(50, NO_TIMESTAMP, -1, first)
    seg.append(51, NO_TIMESTAMP, -1, second)
    size1 = first.size_in_bytes
    for offset, position in ((48, 0), (50, 0), (51, size1)):
        read = seg.read(offset, 1, min_one_message=min_one_message)
        assert read is not None
        assert read.fetch_offset_metadata == LogOffsetMetadata(offset, 40, position)
        expected = second.size_in_bytes if offset == 51 else size1
        if min_one_message:
            assert read.records.size_in_bytes == expected and not read.first_entry_incomplete
        else:
            # One byte of the batch: not a whole batch, so nothing to iterate.
            assert read.records.size_in_bytes == 1 and read.first_entry_incomplete
            assert list(read.records.batches()) == []
    assert seg.read(52, 1, min_one_message=min_one_message) is None
    assert seg.read(53, 1, min_one_message=min_one_message) is None
    # max_size 0 without min_one_message: an empty (but present) result.
    empty = seg.read(50, 0)
    assert empty is not None and empty.records.size_in_bytes == 0
    # max_position stops the slice, even inside a batch.
    capped = seg.read(50, 10_000, max_position=size1)
    assert capped is not None and values_of(capped.records) == values_of(first)
    with pytest.raises(IllegalArgumentError):
        seg.read(50, -1)


def test_truncate_in_a_loop(make_segment) -> None:
    seg = make_segment(40)
    offset = 40
    for _ in range(30):
        ms1 = records(offset, "hello")
        seg.append(offset, NO_TIMESTAMP, -1, ms1)
        ms2 = records(offset + 1, "hello")
        seg.append(offset + 1, NO_TIMESTAMP, -1, ms2)
        read = seg.read(offset, 10_000)
        assert values_of(read.records) == values_of(ms1) + values_of(ms2)
        seg.truncate_to(offset + 1)
        assert values_of(seg.read(offset, 10_000).records) == values_of(ms1)
        offset += 1


def test_truncate_empty_segment_and_roll(tmp_path: Path) -> None:
    max_segment_ms = 300_000
    time = MockTime()
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=10, max_index_size=1000, time=time)
    seg.time_index  # noqa: B018 - force the indexes into existence before closing
    seg.offset_index  # noqa: B018
    seg.close()
    reopened = LogSegment.open(tmp_path, 0, index_interval_bytes=10, max_index_size=1000, time=time,
                               file_already_exists=True)
    try:
        assert reopened.time_index.size_in_bytes == 0 and reopened.offset_index.size_in_bytes == 0
        assert reopened.offset_index.length == 0  # trimmed on close
        time.sleep(500)
        reopened.truncate_to(57)
        assert reopened.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 0
        assert not reopened.time_index.is_full() and not reopened.offset_index.is_full()
        params = RollParams(max_segment_ms, INT_MAX, NO_TIMESTAMP, 100, 1024, time.milliseconds())
        assert not reopened.should_roll(params)
        # An empty segment is never rolled for time...
        time.sleep(max_segment_ms + 1)
        assert reopened.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == max_segment_ms + 1
        params = RollParams(max_segment_ms, INT_MAX, NO_TIMESTAMP, 100, 1024, time.milliseconds())
        assert not reopened.should_roll(params)
        # ...but is when the next offset would not fit.
        params = RollParams(max_segment_ms, INT_MAX, NO_TIMESTAMP, INT_MAX + 200, 1024, time.milliseconds())
        assert reopened.should_roll(params)
    finally:
        reopened.close()


def test_reload_largest_timestamp_and_next_offset_after_truncation(make_segment) -> None:
    num_messages = 30
    seg = make_segment(40, index_interval_bytes=2 * records(0, "hello").size_in_bytes - 1)
    offset = 40
    for _ in range(num_messages):
        seg.append(offset, offset, offset, records(offset, "hello"))
        offset += 1
    assert seg.read_next_offset() == offset
    assert seg.time_index.entries == num_messages // 2 - 1
    seg.truncate_to(41)
    assert seg.time_index.entries == 0
    assert seg.largest_timestamp == 400
    assert seg.read_next_offset() == 41


def test_truncate_full_and_reappend(make_segment) -> None:
    time = MockTime()
    seg = make_segment(40, time=time)
    seg.append(41, NO_TIMESTAMP, -1, records(40, "hello", "there"))
    time.sleep(500)
    assert seg.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 500
    assert seg.truncate_to(0) > 0
    assert seg.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 0  # created time reset
    assert not seg.time_index.is_full() and not seg.offset_index.is_full()
    assert seg.read(0, 1024) is None
    seg.append(41, NO_TIMESTAMP, -1, records(40, "hello", "there"))
    assert seg.read_next_offset() == 42


def test_truncate_inside_a_batch_removes_the_whole_batch(make_segment) -> None:
    seg = make_segment(0)
    seg.append(2, 100, 2, records(0, "a", "b", "c", magic=2))
    second = records(3, "d", "e", "f", magic=2)
    seg.append(5, 200, 5, second)
    size_before = seg.size_in_bytes
    assert seg.truncate_to(4) == second.size_in_bytes
    assert seg.size_in_bytes == size_before - second.size_in_bytes
    assert seg.read_next_offset() == 3
    assert seg.truncate_to(10) == 0  # above everything: nothing to do
    remaining = seg.size_in_bytes
    assert seg.truncate_to(0) == remaining
    assert seg.size_in_bytes == 0 and seg.read_next_offset() == 0


def test_truncate_to_a_gap_removes_the_next_batch(make_segment) -> None:
    seg = make_segment(40)
    seg.append(40, NO_TIMESTAMP, -1, records(40, "first message", magic=2, timestamp=40_000))
    seg.append(43, NO_TIMESTAMP, -1, records(43, "message after gap", magic=2, timestamp=43_000))
    seg.truncate_to(41)
    read = seg.read(40, 10_000)
    assert [b.base_offset for b in read.records.batches()] == [40]


def test_find_offset_by_timestamp(make_segment) -> None:
    message_size = records(0, "msg00").size_in_bytes
    seg = make_segment(40, index_interval_bytes=message_size * 2 - 1)
    for i in range(40, 50):
        seg.append(i, i * 10, i, records(i, f"msg{i}"))
    assert seg.largest_timestamp == 490
    found = {ts: seg.find_offset_by_timestamp(ts, 0) for ts in (420, 421, 430, 431, 491, 401, 399)}
    assert {ts: (r.offset if r else None) for ts, r in found.items()} == \
        {420: 42, 421: 43, 430: 43, 431: 44, 491: None, 401: 41, 399: 40}
    assert found[420] == TimestampAndOffset(420, 42, None)
    assert seg.find_offset_by_timestamp(399, 45).offset == 45  # starting offset respected


def test_next_offset_calculation(make_segment) -> None:
    seg = make_segment(40)
    assert seg.read_next_offset() == 40
    seg.append(52, NO_TIMESTAMP, -1, records(50, "hello", "there", "you"))
    assert seg.read_next_offset() == 53


def test_change_file_suffixes_keeps_indexes_lazy(make_segment, tmp_path: Path) -> None:
    seg = make_segment(40)
    log_path, index_path, time_path = seg.log.path, seg.offset_index_file, seg.time_index_file
    assert not index_path.exists() and not time_path.exists()
    seg.change_file_suffixes("", ".deleted")
    assert not seg.offset_index_file.exists() and not seg.time_index_file.exists()
    assert seg.log.path == Path(f"{log_path}.deleted") and seg.log.path.exists()
    assert seg.offset_index_file == Path(f"{index_path}.deleted")
    assert seg.time_index_file == Path(f"{time_path}.deleted")
    assert seg.has_suffix(".deleted")
    seg.offset_index  # noqa: B018 - loading creates the file under its new name
    assert seg.offset_index_file.exists()
    seg.time_index  # noqa: B018
    assert seg.time_index_file.exists()
    seg.change_file_suffixes(".deleted", "")
    assert seg.offset_index_file == index_path and index_path.exists() and log_path.exists()
    with pytest.raises(IllegalArgumentError):
        seg.change_file_suffixes(".swap", "")


def test_delete_if_exists(make_segment, tmp_path: Path) -> None:
    seg = make_segment(7)
    seg.append(7, 5, 7, records(7, "x"))
    seg.update_txn_index(AbortedTxn(1, 7, 7, 7))
    seg.offset_index  # noqa: B018
    assert seg.txn_index_file.exists()
    seg.delete_if_exists()
    assert seg.deleted and list(tmp_path.iterdir()) == []
    never_loaded = make_segment(100)
    never_loaded.delete_if_exists()  # indexes never created: nothing to do for them
    assert never_loaded.deleted


def test_recovery_fixes_corrupt_offset_index(make_segment) -> None:
    seg = make_segment(0)
    for i in range(100):
        seg.append(i, NO_TIMESTAMP, -1, records(i, str(i)))
    path = seg.offset_index_file
    rng = random.Random(1)
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(bytes(rng.randrange(256) for _ in range(path.stat().st_size - 5)))
    seg.recover()
    for i in range(100):
        read = seg.read(i, 1, max_position=seg.size_in_bytes, min_one_message=True)
        assert next(read.records.records()).offset == i


def test_recovery_fixes_corrupt_time_index(make_segment) -> None:
    seg = make_segment(0)
    for i in range(100):
        seg.append(i, i * 10, i, records(i, str(i)))
    path = seg.time_index_file
    rng = random.Random(2)
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(bytes(rng.randrange(256) for _ in range(path.stat().st_size - 5)))
    seg.recover()
    for i in range(100):
        assert seg.find_offset_by_timestamp(i * 10, 0).offset == i
        if i < 99:
            assert seg.find_offset_by_timestamp(i * 10 + 1, 0).offset == i + 1


def test_recovery_with_corrupt_message(make_segment) -> None:
    rng = random.Random(3)
    for _ in range(10):
        seg = make_segment(0)
        for i in range(20):
            seg.append(i, NO_TIMESTAMP, -1, records(i, str(i)))
        corrupt_from = rng.randrange(20)
        position = seg.log.search_for_offset_with_size(corrupt_from, 0).position + rng.randrange(15)
        path = seg.log.path
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(bytes(rng.randrange(255) for _ in range(path.stat().st_size - position)))
        seg.recover()
        assert [b.last_offset for b in seg.log.batches()] == list(range(corrupt_from))
        seg.delete_if_exists()


def test_recover_with_garbage_appended_to_log_and_index(make_segment) -> None:
    seg = make_segment(0, index_interval_bytes=0)
    for i in range(10):
        seg.append(i, 1000 + i, i, records(i, f"v{i}", magic=2, timestamp=1000 + i))
    good_size = seg.size_in_bytes
    good_index = seg.offset_index.entries_list()
    seg.flush()
    # A crash mid-append: half a batch in the log and junk index entries past the real ones.
    with open(seg.log.path, "ab") as f:
        f.write(bytes(records(10, "torn", magic=2).buffer)[:30])
    seg.offset_index.append(50, 9999)
    seg.close_handlers()
    reopened = LogSegment.open(seg.log.path.parent, 0, index_interval_bytes=0, max_index_size=1000,
                               file_already_exists=True)
    try:
        assert reopened.recover() == 30
        assert reopened.size_in_bytes == good_size == reopened.log.file_size
        assert reopened.offset_index.entries_list() == good_index
        assert reopened.read_next_offset() == 10
        assert reopened.time_index.last_entry == TimestampOffset(1009, 9)
    finally:
        reopened.close()


def test_recover_hooks_rebuild_epochs_and_txn_index(make_segment) -> None:
    seg = make_segment(100)
    seg.append(105, NO_TIMESTAMP, 104, MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"a"), SimpleRecord(b"b")], 104, partition_leader_epoch=0))
    seg.append(107, NO_TIMESTAMP, 106, MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"a"), SimpleRecord(b"b")], 106, partition_leader_epoch=1,
        producer_id=10, producer_epoch=0, base_sequence=0, is_transactional=True))
    marker = MemoryRecords.with_end_transaction_marker(108, NO_TIMESTAMP, 1, 10, 0,
                                                      EndTransactionMarker(ControlRecordType.ABORT, 0))
    seg.append(108, NO_TIMESTAMP, 108, marker)
    seg.append(110, NO_TIMESTAMP, 109, MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"a"), SimpleRecord(b"b")], 109, partition_leader_epoch=2))
    seg.update_txn_index(AbortedTxn(99, 0, 1, 0))  # stale: recovery resets the index first

    epochs: list[tuple[int, int]] = []

    def on_epoch(batch: RecordBatch) -> None:
        if batch.partition_leader_epoch >= 0 and (not epochs or batch.partition_leader_epoch > epochs[-1][0]):
            epochs.append((batch.partition_leader_epoch, batch.base_offset))

    first_offsets: dict[int, int] = {}

    def on_batch(batch: RecordBatch) -> AbortedTxn | None:
        if batch.is_transactional and not batch.is_control:
            first_offsets.setdefault(batch.producer_id, batch.base_offset)
        if batch.is_control:
            first = first_offsets.pop(batch.producer_id)
            return AbortedTxn(batch.producer_id, first, batch.last_offset, 100)
        return None

    assert seg.recover(producer_state_hook=on_batch, leader_epoch_hook=on_epoch) == 0
    assert epochs == [(0, 104), (1, 106), (2, 109)]
    assert seg.txn_index.all_aborted_txns() == [AbortedTxn(10, 106, 108, 100)]
    result = seg.collect_aborted_txns(100, 200)
    assert result.aborted_transactions == [AbortedTxn(10, 106, 108, 100)] and result.is_complete is False


def test_create_with_preallocation_and_clean_shutdown(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 40, index_interval_bytes=10, max_index_size=1000,
                          init_file_size=512 * 1024 * 1024, preallocate=True)
    ms = records(50, "hello", "there")
    seg.append(51, NO_TIMESTAMP, -1, ms)
    ms2 = records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert values_of(seg.read(55, 200).records) == values_of(ms2)
    old_size = seg.size_in_bytes
    assert seg.log.path.stat().st_size == 512 * 1024 * 1024
    seg.close()
    assert seg.log.path.stat().st_size == old_size
    again = LogSegment.open(tmp_path, 40, index_interval_bytes=10, max_index_size=1000,
                            file_already_exists=True, init_file_size=512 * 1024 * 1024, preallocate=True)
    try:
        assert values_of(again.read(55, 200).records) == values_of(ms2)
        assert again.size_in_bytes == old_size == again.log.file_size
    finally:
        again.close()


def test_reload_after_close(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=1000)
    for i in range(10):
        seg.append(i, 100 + i, i, records(i, f"m{i}", magic=2, timestamp=100 + i))
    index_entries = seg.offset_index.entries_list()
    seg.close()
    assert seg.offset_index_file.stat().st_size == 8 * len(index_entries)  # trimmed
    again = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=1000,
                            file_already_exists=True)
    try:
        assert again.offset_index.entries_list() == index_entries
        assert again.max_timestamp_so_far == 109  # lazily, from the time index's last entry
        assert again.shallow_offset_of_max_timestamp_so_far == 9
        assert again.read_next_offset() == 10
        assert again.translate_offset(5).offset == 5
        again.sanity_check(time_index_file_newly_created=False)
    finally:
        again.close()


def test_append_from_file_stops_at_offset_overflow(tmp_path: Path) -> None:
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    with FileRecords.open(log_file(source_dir, 0), file_already_exists=False) as source:
        source.append(MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(bytes(1024))], 0))
        source.append(MemoryRecords.with_records(2, CompressionType.NONE,
                                                 [SimpleRecord(bytes(1024 * 1024 + 1))], 500))
        size_before_overflow = source.size_in_bytes
        source.append(MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(bytes(1024))],
                                                 INT_MAX + 5))
        size_after_overflow = source.size_in_bytes
        with LogSegment.open(tmp_path, 0) as seg:
            assert seg.append_from_file(source, 0) == size_before_overflow == seg.size_in_bytes
        with LogSegment.open(tmp_path, INT_MAX) as overflow:
            copied = overflow.append_from_file(source, size_before_overflow)
            assert copied == size_after_overflow - size_before_overflow == overflow.size_in_bytes
            assert not overflow.has_overflow()


def test_get_first_batch_timestamp(make_segment) -> None:
    seg = make_segment(1)
    assert seg.get_first_batch_timestamp() == LONG_MAX
    seg.append(1, 1000, 1, records(1, "one", magic=2, timestamp=1000))
    assert seg.get_first_batch_timestamp() == 1000


def test_first_batch_timestamp_is_loaded_from_disk(tmp_path: Path) -> None:
    with LogSegment.open(tmp_path, 0) as seg:
        seg.append(0, 5000, 0, records(0, "x", magic=2, timestamp=5000))
    time = MockTime()
    with LogSegment.open(tmp_path, 0, file_already_exists=True, time=time) as again:
        assert again.time_waited_for_roll(time.milliseconds(), 9000) == 4000
        assert again.get_first_batch_timestamp() == 5000


def test_should_roll_conditions(tmp_path: Path) -> None:
    time = MockTime()
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=48, roll_jitter_ms=100,
                          time=time)
    try:
        def params(**kw: int) -> RollParams:
            base = {"max_segment_ms": 1000, "max_segment_bytes": 10_000, "max_timestamp_in_messages": 1500,
                    "max_offset_in_messages": 5, "messages_size": 100, "now": time.milliseconds()}
            base.update(kw)
            return RollParams(**base)

        assert not seg.should_roll(params(max_timestamp_in_messages=10**12))  # empty: never for time
        batch = records(0, "x", magic=2, timestamp=1000)
        seg.append(0, 1000, 0, batch)
        size = seg.size_in_bytes
        assert not seg.should_roll(params())
        # Size: the append must still fit segment.bytes.
        assert not seg.should_roll(params(max_segment_bytes=size + 100))
        assert seg.should_roll(params(max_segment_bytes=size + 99))
        # Time, measured from the first batch's timestamp, with the jitter subtracted.
        assert not seg.should_roll(params(max_timestamp_in_messages=1000 + 900))
        assert seg.should_roll(params(max_timestamp_in_messages=1000 + 901))
        # Relative offset overflow.
        assert seg.should_roll(params(max_offset_in_messages=INT_MAX + 1))
        assert seg.should_roll(params(max_offset_in_messages=-1))
        # Offset index full (6 entries here; index_interval_bytes=0 indexes every append after the first).
        # The timestamp never grows, so the time index keeps one entry and is not full.
        for i in range(1, 7):
            assert not seg.should_roll(params(max_offset_in_messages=i))
            seg.append(i, 1000, 0, records(i, "x", magic=2, timestamp=1000))
        assert seg.offset_index.is_full() and not seg.time_index.is_full()
        assert seg.should_roll(params(max_offset_in_messages=7))
    finally:
        seg.close()


def test_should_roll_on_time_index_full_and_wall_clock(tmp_path: Path) -> None:
    time = MockTime()
    # Time index of 3 slots: full at 2 entries (one slot is kept for the roll entry).
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=36, time=time)
    try:
        seg.append(0, NO_TIMESTAMP, -1, records(0, "a", magic=0))
        # No timestamps: the wall clock since creation decides.
        time.sleep(10_001)
        assert seg.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 10_001
        assert seg.should_roll(RollParams(10_000, 10**6, NO_TIMESTAMP, 10, 10, time.milliseconds()))
        assert not seg.should_roll(RollParams(20_000, 10**6, NO_TIMESTAMP, 10, 10, time.milliseconds()))
        seg.append(1, 100, 1, records(1, "b", magic=2, timestamp=100))
        seg.append(2, 200, 2, records(2, "c", magic=2, timestamp=200))
        assert seg.time_index.entries == 2 and seg.time_index.is_full()
        assert not seg.offset_index.is_full()
        assert seg.should_roll(RollParams(20_000, 10**6, NO_TIMESTAMP, 10, 10, time.milliseconds()))
    finally:
        seg.close()


def test_an_empty_segment_becomes_inactive_with_empty_indexes_never_mapped(tmp_path: Path) -> None:
    """What the cleaner's emptied segments do: the indexes end as empty files (Kafka creates them
    preallocated and trims them to nothing), created directly; a later use maps them as any other."""
    seg = LogSegment.open(tmp_path, 0, max_index_size=1024)
    try:
        seg.on_become_inactive_segment()
        seg.flush()
        assert not seg._lazy_offset_index.is_loaded and not seg._lazy_time_index.is_loaded
        assert seg.offset_index_file.stat().st_size == 0 and seg.time_index_file.stat().st_size == 0
        seg.on_become_inactive_segment()  # idempotent: the files exist now, and are loaded to trim
        assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
        assert seg.offset_index_file.stat().st_size == 0 and seg.time_index_file.stat().st_size == 0
    finally:
        seg.close()
    reopened = LogSegment.open(tmp_path, 0, max_index_size=1024, file_already_exists=True)
    try:
        assert reopened.size_in_bytes == 0 and reopened.offset_index.entries == 0
    finally:
        reopened.close()


def test_on_become_inactive_segment_trims_and_writes_final_time_entry(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=10_000, max_index_size=1024,
                          init_file_size=1 << 20, preallocate=True)
    try:
        seg.append(0, 500, 0, records(0, "a", magic=2, timestamp=500))
        seg.append(1, 700, 1, records(1, "b", magic=2, timestamp=700))
        assert seg.time_index.entries == 0  # interval not reached
        assert seg.max_timestamp_so_far == 700 and seg.shallow_offset_of_max_timestamp_so_far == 1
        seg.on_become_inactive_segment()
        assert seg.time_index.entries_list() == [TimestampOffset(700, 1)]
        assert seg.offset_index_file.stat().st_size == 0
        assert seg.time_index_file.stat().st_size == 12
        assert seg.log.path.stat().st_size == seg.size_in_bytes
        seg.on_become_inactive_segment()  # idempotent
        assert seg.time_index.entries == 1
    finally:
        seg.close()


def test_close_appends_final_time_entry_only_if_known(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=10_000, max_index_size=1024)
    seg.append(0, 500, 0, records(0, "a", magic=2, timestamp=500))
    seg.close()
    assert time_index_file(tmp_path, 0).read_bytes() == (500).to_bytes(8, "big") + (0).to_bytes(4, "big")
    assert offset_index_file(tmp_path, 0).stat().st_size == 0
    # A segment closed without any use never creates its indexes.
    untouched = LogSegment.open(tmp_path, 100)
    untouched.close()
    assert not offset_index_file(tmp_path, 100).exists() and not time_index_file(tmp_path, 100).exists()


def test_max_timestamp_so_far_tracks_first_batch_with_max(make_segment) -> None:
    seg = make_segment(0)
    seg.append(0, 300, 0, records(0, "a", magic=2, timestamp=300))
    seg.append(1, 300, 1, records(1, "b", magic=2, timestamp=300))
    seg.append(2, 100, 2, records(2, "c", magic=2, timestamp=100))
    assert (seg.max_timestamp_so_far, seg.shallow_offset_of_max_timestamp_so_far) == (300, 0)
    assert seg.largest_record_timestamp == 300 and seg.largest_timestamp == 300


def test_largest_timestamp_falls_back_to_mtime(make_segment) -> None:
    seg = make_segment(0)
    seg.append(0, NO_TIMESTAMP, -1, records(0, "a", magic=0))
    os.utime(seg.log.path, ns=(1_600_000_000_123_000_000, 1_600_000_000_123_000_000))
    assert seg.largest_record_timestamp is None
    assert seg.largest_timestamp == 1_600_000_000_123
    seg.set_last_modified(1_500_000_000_000)
    assert seg.last_modified == 1_500_000_000_000


def test_sanity_check(tmp_path: Path) -> None:
    with LogSegment.open(tmp_path, 0, max_index_size=1200) as seg:
        with pytest.raises(NoSuchFileError):
            seg.sanity_check(time_index_file_newly_created=False)
        seg.offset_index  # noqa: B018 - now the file exists
        seg.sanity_check(time_index_file_newly_created=True)
        assert seg.time_index.length == 0
        seg.update_txn_index(AbortedTxn(1, 0, 5, 0))
        seg.sanity_check(time_index_file_newly_created=False)
    # A txn index entry below the base offset is corrupt.
    with LogSegment.open(tmp_path, 10, max_index_size=1200) as seg:
        seg.offset_index  # noqa: B018
        transaction_index_file(tmp_path, 10).write_bytes(AbortedTxn(1, 0, 5, 0).to_bytes())
        with pytest.raises(CorruptIndexError, match="less than start offset"):
            seg.sanity_check(time_index_file_newly_created=False)


def test_read_only_segment_refuses_changes(make_segment, tmp_path: Path) -> None:
    seg = make_segment(0, index_interval_bytes=0)
    for i in range(5):
        seg.append(i, 10 + i, i, records(i, "v", magic=2, timestamp=10 + i))
    seg.flush()
    ro = LogSegment.open(tmp_path, 0, read_only=True, max_index_size=1500)
    try:
        assert ro.read_next_offset() == 5
        assert ro.translate_offset(3).offset == 3
        assert ro.offset_index.entries == 4  # the still-preallocated file's plausible prefix
        for action in (lambda: ro.append(5, 0, 5, records(5, "x")), lambda: ro.truncate_to(0), ro.recover,
                       ro.on_become_inactive_segment):
            with pytest.raises(KafkaStorageError):
                action()
    finally:
        ro.close()
    assert seg.offset_index_file.stat().st_size == 1496  # the reader did not trim the writer's index


def test_fetch_upper_bound_offset(make_segment) -> None:
    seg = make_segment(0, index_interval_bytes=0)
    for i in range(5):
        seg.append(i, NO_TIMESTAMP, -1, records(i, "v", magic=2))
    entries = seg.offset_index.entries_list()
    assert seg.fetch_upper_bound_offset(OffsetPosition(0, 0), entries[1].position + 1) == entries[2].offset
    assert seg.fetch_upper_bound_offset(OffsetPosition(0, 0), 10**6) is None


# --- LogSegments ----------------------------------------------------------------------------------


@pytest.fixture
def segment_map(tmp_path: Path) -> Iterator[tuple[LogSegments, dict[int, LogSegment]]]:
    segments = LogSegments()
    made = {}
    for base in (10, 20, 30):
        made[base] = LogSegment.open(tmp_path, base)
        segments.add(made[base])
    yield segments, made
    segments.close()


def test_log_segments_basic_operations(tmp_path: Path) -> None:
    segments = LogSegments()
    assert segments.is_empty and len(segments) == 0 and segments.last_segment is None
    with pytest.raises(KafkaStorageError):
        _ = segments.active_segment
    seg1 = LogSegment.open(tmp_path, 1)
    assert segments.add(seg1) is None
    assert len(segments) == 1 and 1 in segments and segments.get(1) is seg1
    assert segments.active_segment is seg1 and segments.first_segment is seg1
    seg1_again = LogSegment.open(tmp_path, 1, file_already_exists=True)
    assert segments.add(seg1_again) is seg1  # same base offset: replaced
    assert len(segments) == 1 and segments.get(1) is seg1_again
    seg2 = LogSegment.open(tmp_path, 2)
    segments.add(seg2)
    assert segments.base_offsets() == [1, 2] and segments.active_segment is seg2
    seg2.append(2, 0, 2, records(2, "x", magic=2))
    assert segments.size_in_bytes == seg2.size_in_bytes
    segments.remove(2)
    segments.remove(99)
    assert segments.base_offsets() == [1]
    segments.clear()
    assert segments.is_empty
    for s in (seg1, seg1_again, seg2):
        s.close()


def test_log_segments_navigation(segment_map: tuple[LogSegments, dict[int, LogSegment]]) -> None:
    segments, made = segment_map
    bases = lambda segs: [s.base_offset for s in segs]  # noqa: E731
    assert segments.floor_segment(9) is None
    assert segments.floor_segment(10) is made[10] and segments.floor_segment(25) is made[20]
    assert segments.floor_segment(1000) is made[30]
    assert segments.lower_segment(10) is None and segments.lower_segment(11) is made[10]
    assert segments.lower_segment(30) is made[20]
    assert segments.higher_segment(9) is made[10] and segments.higher_segment(10) is made[20]
    assert segments.higher_segment(30) is None
    assert bases(segments.higher_segments(10)) == [20, 30] and segments.higher_segments(30) == []
    assert bases(segments.higher_segments(5)) == [10, 20, 30]
    assert bases(segments) == [10, 20, 30] and bases(segments.values()) == [10, 20, 30]
    assert segments.first_segment_base_offset == 10


def test_log_segments_values_range(segment_map: tuple[LogSegments, dict[int, LogSegment]]) -> None:
    segments, _ = segment_map
    bases = lambda segs: [s.base_offset for s in segs]  # noqa: E731
    assert segments.values(15, 15) == []
    with pytest.raises(IllegalArgumentError):
        segments.values(20, 10)
    assert bases(segments.values(10, 30)) == [10, 20]
    assert bases(segments.values(15, 31)) == [10, 20, 30]
    assert bases(segments.values(20, 21)) == [20]
    assert bases(segments.values(1, 20)) == [10]  # no floor: from the first segment
    assert bases(segments.values(1, 5)) == []
    assert bases(segments.non_active_log_segments_from(10)) == [10, 20]
    assert bases(segments.non_active_log_segments_from(25)) == [20]
    assert segments.non_active_log_segments_from(31) == []
    assert bases(segments.filter(lambda s: s.base_offset != 20)) == [10, 30]
