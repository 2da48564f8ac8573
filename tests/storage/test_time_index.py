"""TimeIndex: Kafka's TimeIndexTest behaviours, the §4.3 append rules, read-only opens, golden files."""

from __future__ import annotations

import bisect
import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import (
    CorruptIndexError,
    IllegalIndexOperationError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    KafkaStorageError,
)
from kafkalog.storage.index import TimeIndex, TimestampOffset

MAX_ENTRIES = 30
BASE_OFFSET = 45
ENTRY = 12
T0 = 1_700_000_000_000


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[TimeIndex]:
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE_OFFSET, MAX_ENTRIES * ENTRY)
    yield index
    index.close()


def _append_entries(index: TimeIndex, count: int) -> None:
    for i in range(1, count + 1):
        index.maybe_append(i * 10, i * 10 + BASE_OFFSET)


def _floor(entries: list[TimestampOffset], base: int, target: int) -> TimestampOffset:
    keys = [e.timestamp for e in entries]
    i = bisect.bisect_right(keys, target)
    return entries[i - 1] if i else TimestampOffset(-1, base)


# --- Kafka's TimeIndexTest ------------------------------------------------------------------------


def test_lookup(idx: TimeIndex) -> None:
    assert idx.lookup(100) == TimestampOffset(-1, BASE_OFFSET)
    _append_entries(idx, MAX_ENTRIES - 1)
    assert idx.lookup(9) == TimestampOffset(-1, BASE_OFFSET)
    assert idx.lookup(25) == TimestampOffset(20, 65)
    assert idx.lookup(30) == TimestampOffset(30, 75)
    assert idx.lookup(10**15) == TimestampOffset(290, 335)


def test_entry(idx: TimeIndex) -> None:
    _append_entries(idx, MAX_ENTRIES - 1)
    assert idx.entry(0) == TimestampOffset(10, 55)
    assert idx.entry(1) == TimestampOffset(20, 65)
    assert idx.entry(2) == TimestampOffset(30, 75)
    assert idx.entry(3) == TimestampOffset(40, 85)
    assert len(idx.entries_list()) == MAX_ENTRIES - 1


def test_entry_out_of_range(idx: TimeIndex) -> None:
    with pytest.raises(IllegalIndexOperationError, match="0th entry"):
        idx.entry(0)


def test_truncate(idx: TimeIndex) -> None:
    _append_entries(idx, MAX_ENTRIES - 1)
    idx.truncate()
    assert idx.entries == 0
    assert idx.last_entry == TimestampOffset(-1, BASE_OFFSET)
    _append_entries(idx, MAX_ENTRIES - 1)
    idx.truncate_to(10 + BASE_OFFSET)
    assert idx.entries == 0


def test_truncate_to_by_offset(idx: TimeIndex) -> None:
    _append_entries(idx, 5)  # (10,55) (20,65) (30,75) (40,85) (50,95)
    idx.truncate_to(200)
    assert idx.entries == 5
    idx.truncate_to(95)  # exact offset: removed
    assert idx.last_entry == TimestampOffset(40, 85)
    idx.truncate_to(70)  # between entries: the lower one stays
    assert idx.entries_list() == [TimestampOffset(10, 55), TimestampOffset(20, 65)]
    assert idx.last_entry == TimestampOffset(20, 65)
    idx.maybe_append(25, 70)
    assert idx.last_entry == TimestampOffset(25, 70)


def test_truncate_to_with_repeated_offsets_follows_kafka_search(tmp_path: Path) -> None:
    # Offsets may repeat (same offset, larger timestamp). Kafka's binary search stops at whichever
    # equal slot it probes first, so one entry with the target offset can survive; kafkalog matches.
    with TimeIndex(tmp_path / "r.timeindex", 0, 120) as index:
        for ts, off in [(5, 40), (10, 50), (20, 50), (30, 50)]:
            index.maybe_append(ts, off)
        index.truncate_to(50)
        assert index.entries_list() == [TimestampOffset(5, 40), TimestampOffset(10, 50)]


def test_append_rules(idx: TimeIndex) -> None:
    _append_entries(idx, MAX_ENTRIES - 1)
    with pytest.raises(IllegalIndexOperationError, match="full"):
        idx.maybe_append(10000, 1000)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        idx.maybe_append(10000, (MAX_ENTRIES - 2) * 10, True)
    idx.maybe_append(10000, 1000, True)  # the reserved slot
    assert idx.entries == MAX_ENTRIES
    assert idx.last_entry == TimestampOffset(10000, 1000)
    # now truly out of room: an equal timestamp is still a silent no-op, a new one cannot be written
    idx.maybe_append(10000, 1000, True)
    with pytest.raises(IllegalIndexOperationError):
        idx.maybe_append(10001, 1001, True)


def test_sanity_check(idx: TimeIndex, tmp_path: Path) -> None:
    idx.sanity_check()
    _append_entries(idx, 5)
    idx.sanity_check()
    idx.close()
    good = idx.path.read_bytes()
    assert len(good) == 5 * ENTRY

    # last offset below the base offset
    bad_offset = tmp_path / "00000000000000000045-a.timeindex"
    bad_offset.write_bytes(good[:-4] + (-1).to_bytes(4, "big", signed=True))
    with TimeIndex(bad_offset, BASE_OFFSET) as index, pytest.raises(
            CorruptIndexError, match=r"-a\.timeindex.*last offset is 44"):
        index.sanity_check()

    # last timestamp below the first one
    bad_ts = tmp_path / "00000000000000000045-b.timeindex"
    bad_ts.write_bytes(good[:-12] + (9).to_bytes(8, "big") + good[-4:])
    with TimeIndex(bad_ts, BASE_OFFSET) as index, pytest.raises(
            CorruptIndexError, match=r"-b\.timeindex.*last timestamp is 9"):
        index.sanity_check()

    # length not a multiple of 12
    bad_len = tmp_path / "00000000000000000045-c.timeindex"
    bad_len.write_bytes(good + b"\x00")
    with TimeIndex(bad_len, BASE_OFFSET) as index:
        assert index.entries == 5
        with pytest.raises(CorruptIndexError, match=r"-c\.timeindex.*found 61 bytes"):
            index.sanity_check()

    with TimeIndex(idx.path, BASE_OFFSET, MAX_ENTRIES * ENTRY) as index:
        index.sanity_check()


def test_is_full_keeps_one_slot(idx: TimeIndex) -> None:
    assert not idx.is_full()
    _append_entries(idx, MAX_ENTRIES - 2)
    assert not idx.is_full()
    idx.maybe_append(1000, 1000)
    assert idx.is_full()
    assert idx.entries == idx.max_entries - 1


def test_last_entry(idx: TimeIndex) -> None:
    assert idx.last_entry == TimestampOffset(-1, BASE_OFFSET)
    idx.maybe_append(1, 1 + BASE_OFFSET)
    assert idx.last_entry == TimestampOffset(1, BASE_OFFSET + 1)


def test_resize(idx: TimeIndex) -> None:
    assert idx.resize(MAX_ENTRIES * ENTRY) is False
    assert idx.resize(MAX_ENTRIES // 2 * ENTRY) is True
    assert idx.max_entries == MAX_ENTRIES // 2
    assert idx.resize(MAX_ENTRIES * 2 * ENTRY) is True
    assert idx.path.stat().st_size == MAX_ENTRIES * 2 * ENTRY
    idx.maybe_append(5, 50)
    assert idx.resize(1000) is True  # 1000 → 996
    assert idx.length == 996
    assert idx.last_entry == TimestampOffset(5, 50)


def test_entry_size_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "b.timeindex"
    with TimeIndex(path, 100, 1024) as index:
        assert index.length == 1020
        index.maybe_append(0x0102030405060708, 0x100 + 100)
    assert path.read_bytes() == bytes.fromhex("0102030405060708 00000100")


# --- the §4.3 append rules -----------------------------------------------------------------------


def test_empty_index_takes_only_real_timestamps(idx: TimeIndex) -> None:
    idx.maybe_append(-1, 50)  # NO_TIMESTAMP (message format v0) never makes an entry
    assert idx.entries == 0
    idx.maybe_append(0, 50)  # 0 > -1
    assert idx.entries == 1
    assert idx.last_entry == TimestampOffset(0, 50)


def test_only_strictly_greater_timestamps_are_written(idx: TimeIndex) -> None:
    idx.maybe_append(100, 50)
    idx.maybe_append(100, 60)  # equal timestamp: ignored, even with a larger offset
    assert idx.entries_list() == [TimestampOffset(100, 50)]
    idx.maybe_append(100, 50, skip_full_check=True)  # the roll/close re-append is idempotent
    assert idx.entries == 1
    idx.maybe_append(150, 50)  # same offset, larger timestamp: written
    assert idx.entries_list() == [TimestampOffset(100, 50), TimestampOffset(150, 50)]
    with pytest.raises(IllegalIndexOperationError, match="timestamp"):
        idx.maybe_append(120, 70)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(200, 49)
    assert idx.entries == 2


def test_offset_overflow(idx: TimeIndex) -> None:
    with pytest.raises(IndexOffsetOverflowError):
        idx.maybe_append(10, BASE_OFFSET + 2**31)
    with pytest.raises(IndexOffsetOverflowError):
        idx.maybe_append(10, BASE_OFFSET - 1)
    assert idx.entries == 0
    assert idx.can_append_offset(BASE_OFFSET + 2**31 - 1)


def test_reopen_trusts_length(idx: TimeIndex) -> None:
    _append_entries(idx, 3)
    idx.flush()
    idx.close_handler()  # no trim: like a crash of an active segment
    with TimeIndex(idx.path, BASE_OFFSET, MAX_ENTRIES * ENTRY) as reopened:
        assert reopened.entries == MAX_ENTRIES  # Kafka does not scan for the zero tail
        assert reopened.last_entry == TimestampOffset(0, BASE_OFFSET)
        with pytest.raises(CorruptIndexError):
            reopened.sanity_check()  # last timestamp 0 < first timestamp 10: recovery would rebuild it


def test_resize_and_reset_refresh_last_entry(idx: TimeIndex) -> None:
    _append_entries(idx, 4)
    idx.trim_to_valid_size()
    assert idx.path.stat().st_size == 4 * ENTRY
    assert idx.is_full()
    with pytest.raises(IllegalIndexOperationError):
        idx.maybe_append(41, 100, skip_full_check=True)  # trimmed: not even the reserved slot is left
    idx.reset()
    assert idx.entries == 0
    assert idx.last_entry == TimestampOffset(-1, BASE_OFFSET)
    assert idx.length == MAX_ENTRIES * ENTRY


def test_use_after_close(idx: TimeIndex) -> None:
    _append_entries(idx, 2)
    idx.close()
    assert idx.path.stat().st_size == 2 * ENTRY
    for call in (lambda: idx.lookup(10), lambda: idx.entry(0), lambda: idx.maybe_append(100, 100),
                 lambda: idx.truncate_to(50), lambda: idx.sanity_check(), lambda: idx.resize(120),
                 lambda: idx.flush(), lambda: idx.entries_list()):
        with pytest.raises(KafkaStorageError, match="closed"):
            call()


# --- search ---------------------------------------------------------------------------------------


def test_random_lookups_over_warm_and_cold_sections(tmp_path: Path) -> None:
    rng = random.Random(3)
    count = 2000  # warm section = 682 entries
    with TimeIndex(tmp_path / "w.timeindex", 500, (count + 1) * ENTRY) as index:
        entries: list[TimestampOffset] = []
        ts, off = T0, 500
        for _ in range(count):
            ts += rng.randint(1, 50)
            off += rng.randint(0, 3)  # offsets may repeat
            index.maybe_append(ts, off)
            entries.append(TimestampOffset(ts, off))
        assert index.is_full()
        targets = [rng.randint(T0 - 10, ts + 10) for _ in range(3000)] + [e.timestamp for e in entries[::5]]
        targets += [entries[count - 683].timestamp, entries[count - 684].timestamp, -1, 0]
        for target in targets:
            assert index.lookup(target) == _floor(entries, 500, target), target
        probed: list[int] = []
        real = index._timestamp_at

        def spy(mm: object, n: int) -> int:
            probed.append(n)
            return real(mm, n)  # type: ignore[arg-type]

        index._timestamp_at = spy  # type: ignore[method-assign]
        index.lookup(entries[-5].timestamp)
        assert min(probed) >= count - 1 - 8192 // ENTRY


# --- read-only opens -----------------------------------------------------------------------------


def test_read_only_counts_valid_prefix(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.timeindex"
    writer = TimeIndex(path, BASE_OFFSET, MAX_ENTRIES * ENTRY)
    writer.maybe_append(100, 50)
    writer.maybe_append(200, 50)
    writer.maybe_append(300, 60)
    writer.flush()
    with TimeIndex(path, BASE_OFFSET, writable=False) as reader:
        assert reader.entries == 3
        assert reader.last_entry == TimestampOffset(300, 60)
        assert reader.lookup(250) == TimestampOffset(200, 50)
        reader.sanity_check()
        with pytest.raises(KafkaStorageError, match="read-only"):
            reader.maybe_append(400, 70)
        writer.maybe_append(400, 70)
        assert reader.refresh() == 4
        assert reader.last_entry == TimestampOffset(400, 70)
    assert path.stat().st_size == MAX_ENTRIES * ENTRY
    writer.close()


def test_read_only_stops_at_torn_or_zero_entries(tmp_path: Path) -> None:
    def entry(ts: int, rel: int) -> bytes:
        return ts.to_bytes(8, "big", signed=True) + rel.to_bytes(4, "big", signed=True)

    path = tmp_path / "t.timeindex"
    # timestamps 10, 20, then one whose offset is not written yet (0 < 7), then zeros
    path.write_bytes(entry(10, 3) + entry(20, 7) + entry(30, 0) + bytes(24))
    with TimeIndex(path, 0, writable=False) as reader:
        assert reader.entries == 2
    path.write_bytes(bytes(120))
    with TimeIndex(path, 0, writable=False) as reader:
        assert reader.entries == 0
        assert reader.last_entry == TimestampOffset(-1, 0)
    missing = tmp_path / "missing.timeindex"
    with TimeIndex(missing, 9, writable=False) as reader:
        assert reader.lookup(5) == TimestampOffset(-1, 9)
    assert not missing.exists()


def test_empty_existing_file(tmp_path: Path) -> None:
    # LogLoader creates a missing .timeindex with size 0 (spec §8.2 step 5)
    path = tmp_path / "e.timeindex"
    path.touch()
    with TimeIndex(path, 3, 1024) as index:
        assert (index.entries, index.max_entries) == (0, 0)
        assert index.is_full()
        assert index.lookup(10) == TimestampOffset(-1, 3)
        index.maybe_append(-1, 3, skip_full_check=True)  # nothing to write: fine
        with pytest.raises(IllegalIndexOperationError):
            index.maybe_append(10, 3, skip_full_check=True)
        index.sanity_check()
        index.resize(1024)
        index.maybe_append(10, 3)
        assert index.entries == 1


# --- golden files written by Kafka ---------------------------------------------------------------


def _read_entries(path: Path, base: int) -> list[TimestampOffset]:
    with TimeIndex(path, base, writable=False) as index:
        return index.entries_list()


def test_golden_s1_active_and_rolled(kafka_golden_dir: Path, tmp_path: Path) -> None:
    expected = json.loads((kafka_golden_dir / "expected.json").read_text())
    s1 = kafka_golden_dir / "s1_v2_single"
    rolled = _read_entries(s1 / "rolled" / "00000000000000000000.timeindex", 0)
    assert len(rolled) == expected["s1_rolled_time_index_entries"] == 10
    assert rolled[-1] == TimestampOffset(*expected["s1_rolled_time_index_last"])
    # the append of offset 10 (ts T0+2500) repeated the max-so-far: entry (T0+9000, 9)
    assert TimestampOffset(T0 + 9000, 9) in rolled
    assert rolled[:4] == [TimestampOffset(T0 + 2000 * i, 2 * i) for i in range(1, 5)]
    with TimeIndex(s1 / "active" / "00000000000000000000.timeindex", 0, writable=False) as active:
        assert (active.entries, active.max_entries, active.length) == (10, 85, 1020)
        assert active.entries == expected["s1_active_time_index_entries"]
        assert active.entries_list() == rolled
        assert active.last_entry == TimestampOffset(T0 + 40000, 20)
        for target in [T0 - 1, T0, T0 + 2000, T0 + 2500, T0 + 9999, T0 + 39999, T0 + 40000, T0 + 50000]:
            assert active.lookup(target) == _floor(rolled, 0, target)
        assert active.lookup(T0 + 2500) == TimestampOffset(T0 + 2000, 2)
        active.sanity_check()
    copy = tmp_path / "00000000000000000000.timeindex"
    shutil.copyfile(s1 / "active" / "00000000000000000000.timeindex", copy)
    with TimeIndex(copy, 0, 1024) as trusted:
        assert trusted.entries == 85  # opened for writing, every slot of the file counts (§12.4)
        with pytest.raises(CorruptIndexError):
            trusted.sanity_check()


def test_golden_s1_replay_is_byte_identical(kafka_golden_dir: Path, tmp_path: Path) -> None:
    s1 = kafka_golden_dir / "s1_v2_single"
    rolled = _read_entries(s1 / "rolled" / "00000000000000000000.timeindex", 0)
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, 1024)
    for e in rolled:
        index.maybe_append(e.timestamp, e.offset)
    index.maybe_append(T0 + 40000, 20, skip_full_check=True)  # the roll entry: a no-op here
    index.flush()
    assert path.read_bytes() == (s1 / "active" / "00000000000000000000.timeindex").read_bytes()
    index.trim_to_valid_size()
    assert path.read_bytes() == (s1 / "rolled" / "00000000000000000000.timeindex").read_bytes()
    index.close()
    assert path.read_bytes() == (s1 / "rolled" / "00000000000000000000.timeindex").read_bytes()


@pytest.mark.parametrize(
    ("relpath", "base_offset", "first", "last"),
    [
        ("s2_v2_mixed/00000000000000000100.timeindex", 100, (T0 + 21, 104), (T0 + 50, 109)),
        ("s3_legacy/00000000000000000000.timeindex", 0, (T0 + 5, 5), (T0 + 8, 8)),
        ("s5_recovered/00000000000000000000.timeindex", 0, (T0 + 2000, 2), (T0 + 11000, 11)),
    ],
)
def test_golden_other_time_indexes(kafka_golden_dir: Path, tmp_path: Path, relpath: str, base_offset: int,
                                   first: tuple[int, int], last: tuple[int, int]) -> None:
    golden = kafka_golden_dir / relpath
    entries = _read_entries(golden, base_offset)
    assert len(entries) == golden.stat().st_size // ENTRY
    assert entries[0] == TimestampOffset(*first)
    assert entries[-1] == TimestampOffset(*last)
    copy = tmp_path / golden.name
    shutil.copyfile(golden, copy)
    with TimeIndex(copy, base_offset) as rw:
        rw.sanity_check()
        assert rw.entries_list() == entries
        assert rw.last_entry == entries[-1]
        for e in entries:
            assert rw.lookup(e.timestamp) == e
            assert rw.lookup(e.timestamp + 1) == e
        assert rw.lookup(entries[0].timestamp - 1) == TimestampOffset(-1, base_offset)
    replay = tmp_path / ("replay-" + golden.name)
    with TimeIndex(replay, base_offset, 1024) as fresh:
        for e in entries:
            fresh.maybe_append(e.timestamp, e.offset)
    assert replay.read_bytes() == golden.read_bytes()
