"""The append path's shortcuts give the same answers as the general code they stand in for: the
single-batch producer-state bypass, the per-config settings cache, the LogAppendInfo copy, the
in-memory batch iterator, the parameterised roll check and the index maps."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import CorruptRecordError, RecordTooLargeError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.memory import iter_batches
from kafkalog.records.types import NO_TIMESTAMP
from kafkalog.records.validator import LogAppendInfo
from kafkalog.storage.config import LogConfig
from kafkalog.storage.file_records import as_bytes_view
from kafkalog.storage.index import OffsetIndex, TimeIndex, _map_writable
from kafkalog.storage.log import Log, _lone_v2_batch_without_producer, _with_log_start_offset
from kafkalog.storage.log_segment import LogSegment, RollParams

T0 = 1_700_000_000_000


def config(**props: object) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


def v2(n: int, base_offset: int = 0, *, epoch: int = -1, producer_id: int = -1,
       magic: int = 2) -> MemoryRecords:
    records = [SimpleRecord(b"v%d" % i, b"k%d" % i, T0 + i) for i in range(n)]
    if magic < 2:
        return MemoryRecords.with_records(magic, CompressionType.NONE, records, base_offset)
    return MemoryRecords.with_records(
        2, CompressionType.NONE, records, base_offset, partition_leader_epoch=epoch, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1)


# --- the lone-batch bypass of producer state --------------------------------------------------------


def test_lone_batch_header_peek() -> None:
    assert _lone_v2_batch_without_producer(v2(3, 40, epoch=7).buffer) == (40, 7)
    assert _lone_v2_batch_without_producer(v2(1, 0).buffer) == (0, -1)
    assert _lone_v2_batch_without_producer(v2(3, producer_id=5).buffer) is None  # idempotent: full path
    two = v2(2).to_bytes() + v2(2, 2).to_bytes()
    assert _lone_v2_batch_without_producer(memoryview(two)) is None
    assert _lone_v2_batch_without_producer(v2(2, magic=1).buffer) is None
    assert _lone_v2_batch_without_producer(memoryview(v2(1).to_bytes()[:40])) is None


def test_plain_and_idempotent_appends_keep_epochs_and_producer_state(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(), time=MockTime(T0)) as log:
        log.append_as_leader(v2(2), leader_epoch=3)  # bypass
        log.append_as_leader(v2(2, producer_id=9), leader_epoch=4)  # full path
        log.append_as_leader(v2(2), leader_epoch=4)
        log.append_as_leader(v2(1), leader_epoch=6)
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(3, 0), (4, 2), (6, 6)]
        assert log.producer_state.last_entry(9) is not None
        assert log.producer_state.map_end_offset == log.log_end_offset == 7
        # A retry of the idempotent batch is still found as a duplicate.
        retry = log.append_as_leader(v2(2, producer_id=9), leader_epoch=4)
        assert (retry.first_offset, retry.last_offset) == (2, 3)
        assert log.log_end_offset == 7
        # Followers' batches carry their epoch; several batches in one append take the full path.
        both = MemoryRecords(v2(1, 7, epoch=8).to_bytes() + v2(1, 8, epoch=9).to_bytes())
        log.append_as_follower(both)
        assert [e.epoch for e in log.leader_epoch_cache.entries][-2:] == [8, 9]


# --- settings cache and the LogAppendInfo copy ------------------------------------------------------


def test_append_follows_update_config(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", config(), time=MockTime(T0)) as log:
        log.append_as_leader(v2(5))
        log.update_config(config(max_message_bytes=100))
        with pytest.raises(RecordTooLargeError):
            log.append_as_leader(v2(5))
        log.update_config(config())
        log.append_as_leader(v2(5))
        assert log.log_end_offset == 10


def test_with_log_start_offset_is_replace() -> None:
    info = LogAppendInfo(3, 9, 2, T0, 9, CompressionType.GZIP, 500, 4, 2, True, T0 + 1)
    assert _with_log_start_offset(info, 17) == replace(info, log_start_offset=17)


# --- MemoryRecords.batches against the general iterator ---------------------------------------------


def _outcome(make) -> object:  # type: ignore[no-untyped-def]
    try:
        return [(b.position, b.size_in_bytes, bytes(b.buffer)) for b in make()]
    except CorruptRecordError as e:
        return ("error", str(e))


@pytest.mark.parametrize(
    "case", ["one", "two", "partial", "short", "tiny-size", "bad-magic", "legacy", "empty"])
def test_memory_batches_match_iter_batches(case: str) -> None:
    one = v2(3).to_bytes()
    data = {
        "one": one,
        "two": one + v2(2, 3).to_bytes(),
        "partial": one + one[:30],
        "short": one + one[:11],
        "tiny-size": one + struct.pack(">qi", 0, 13) + bytes(20),
        "bad-magic": one[:16] + b"\x05" + one[17:],
        "legacy": v2(2, magic=1).to_bytes() + v2(1, 2, magic=0).to_bytes(),
        "empty": b"",
    }[case]
    records = MemoryRecords(bytearray(data))
    expected = _outcome(lambda: iter_batches(bytearray(data), in_memory=True))
    assert _outcome(records.batches) == expected
    assert _outcome(lambda: iter(records)) == expected


def test_as_bytes_view_of_memory_records_is_its_buffer() -> None:
    records = v2(2)
    assert as_bytes_view(records) is records.buffer
    view = memoryview(b"abc")
    assert as_bytes_view(view) is view
    assert bytes(as_bytes_view(bytearray(b"xy"))) == b"xy"


# --- roll check and index maps ----------------------------------------------------------------------


def test_should_roll_for_matches_should_roll(tmp_path: Path) -> None:
    time = MockTime(T0)
    with LogSegment.open(tmp_path, 0, time=time, roll_jitter_ms=10) as segment:
        segment.append(2, T0 + 2, 2, v2(3))
        grid = [(ms, nbytes, ts, off, size)
                for ms in (100, 10**6) for nbytes in (200, 10**6) for ts in (NO_TIMESTAMP, T0 + 50, T0 + 500)
                for off in (5, 2**31 + 5) for size in (10, 500)]
        for ms, nbytes, ts, off, size in grid:
            expected = segment.should_roll(RollParams(ms, nbytes, ts, off, size, time.milliseconds()))
            assert segment.should_roll_for(ms, nbytes, ts, off, size, time.milliseconds()) is expected


def test_writable_index_maps(tmp_path: Path) -> None:
    assert _map_writable(-1, 0) is None
    index = OffsetIndex(tmp_path / "0.index", 0, 80)
    index.append(3, 100)
    index.append(9, 4000)
    assert index.resize(160)
    index.append(12, 9000)
    assert [(e.offset, e.position) for e in index.entries_list()] == [(3, 100), (9, 4000), (12, 9000)]
    index.close()
    times = TimeIndex(tmp_path / "0.timeindex", 0, 120)
    times.maybe_append(T0, 3)
    times.maybe_append(T0, 4)  # same timestamp: nothing
    times.maybe_append(T0 + 5, 9)
    assert [(e.timestamp, e.offset) for e in times.entries_list()] == [(T0, 3), (T0 + 5, 9)]
    times.close()
    assert (tmp_path / "0.index").stat().st_size == 24
    assert (tmp_path / "0.timeindex").stat().st_size == 24
