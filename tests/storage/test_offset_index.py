"""OffsetIndex: Kafka's OffsetIndexTest behaviours, warm/cold search, read-only opens, golden files."""

from __future__ import annotations

import bisect
import json
import random
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptIndexError,
    IllegalIndexOperationError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    KafkaStorageError,
)
from kafkalog.storage.index import OffsetIndex, OffsetPosition

BASE_OFFSET = 45
ENTRY = 8


@pytest.fixture
def index(tmp_path: Path) -> Iterator[OffsetIndex]:
    idx = OffsetIndex(tmp_path / "00000000000000000045.index", BASE_OFFSET, 30 * ENTRY)
    yield idx
    idx.close()


def _monotonic(rng: random.Random, start: int, count: int) -> list[int]:
    values, last = [], start
    for _ in range(count):
        last += rng.randint(1, 15)
        values.append(last)
    return values


def _fill_random(idx: OffsetIndex, rng: random.Random, count: int) -> list[OffsetPosition]:
    offsets = _monotonic(rng, idx.base_offset, count)
    positions = _monotonic(rng, 0, count)
    entries = [OffsetPosition(o, p) for o, p in zip(offsets, positions, strict=True)]
    for e in entries:
        idx.append(e.offset, e.position)
    return entries


def _floor(entries: list[OffsetPosition], base: int, target: int) -> OffsetPosition:
    keys = [e.offset for e in entries]
    i = bisect.bisect_right(keys, target)
    return entries[i - 1] if i else OffsetPosition(base, 0)


def _ceiling(entries: list[OffsetPosition], target: int) -> OffsetPosition | None:
    keys = [e.offset for e in entries]
    i = bisect.bisect_left(keys, target)
    return entries[i] if i < len(entries) else None


# --- creation, sizes ----------------------------------------------------------------------------


def test_new_file_is_preallocated_with_zeros(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    with OffsetIndex(path, 0, 1000) as idx:
        assert path.stat().st_size == 1000  # multiple of 8 already
        assert (idx.entries, idx.max_entries, idx.length) == (0, 125, 1000)
        assert not idx.is_full()
        assert path.read_bytes() == bytes(1000)
    with OffsetIndex(tmp_path / "b.index", 0, 1003) as idx:
        assert idx.length == 1000  # rounded down to whole entries


def test_new_file_needs_room_for_one_entry(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    with pytest.raises(IllegalIndexOperationError, match="Invalid max index size"):
        OffsetIndex(path, 0, 7)
    assert not path.exists()
    with pytest.raises(IllegalIndexOperationError):
        OffsetIndex(path, 0)  # default -1 is only fine for files that exist


def test_existing_file_is_trusted_whole(tmp_path: Path) -> None:
    # Kafka does not scan a reopened index: 3 zero-filled slots count as 3 entries (spec §12.4).
    path = tmp_path / "a.index"
    path.write_bytes(bytes(24))
    with OffsetIndex(path, 10, 4096) as idx:
        assert (idx.entries, idx.max_entries, idx.length) == (3, 3, 24)
        assert idx.last_offset == 10
        assert idx.is_full()
        assert idx.entry(2) == OffsetPosition(10, 0)
    assert path.stat().st_size == 24


# --- lookups ------------------------------------------------------------------------------------


def test_random_lookups_match_sorted_model(index: OffsetIndex) -> None:
    assert index.lookup(92) == OffsetPosition(BASE_OFFSET, 0)
    rng = random.Random(1)
    entries = _fill_random(index, rng, index.max_entries)
    for e in entries:
        assert index.lookup(e.offset) == e
    for target in range(BASE_OFFSET - 3, entries[-1].offset + 5):
        assert index.lookup(target) == _floor(entries, BASE_OFFSET, target)
        assert index.lookup_ceiling(target) == _ceiling(entries, target)


def test_lookup_extreme_cases(index: OffsetIndex) -> None:
    assert index.lookup(BASE_OFFSET) == OffsetPosition(BASE_OFFSET, 0)
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    assert index.lookup(BASE_OFFSET) == OffsetPosition(BASE_OFFSET, 0)
    last = OffsetPosition(BASE_OFFSET + index.max_entries, index.max_entries - 1)
    assert index.lookup(BASE_OFFSET + index.max_entries) == last
    assert index.lookup(10**12) == last
    assert index.lookup(-5) == OffsetPosition(BASE_OFFSET, 0)


def test_lookup_ceiling(index: OffsetIndex) -> None:
    assert index.lookup_ceiling(50) is None
    for o, p in [(50, 0), (53, 100), (60, 250)]:
        index.append(o, p)
    assert index.lookup_ceiling(0) == OffsetPosition(50, 0)
    assert index.lookup_ceiling(50) == OffsetPosition(50, 0)
    assert index.lookup_ceiling(51) == OffsetPosition(53, 100)
    assert index.lookup_ceiling(53) == OffsetPosition(53, 100)
    assert index.lookup_ceiling(59) == OffsetPosition(60, 250)
    assert index.lookup_ceiling(60) == OffsetPosition(60, 250)
    assert index.lookup_ceiling(61) is None


def test_entry(index: OffsetIndex) -> None:
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i, i)
    for i in range(index.max_entries):
        assert index.entry(i) == OffsetPosition(BASE_OFFSET + i, i)
    assert index.entries_list() == [OffsetPosition(BASE_OFFSET + i, i) for i in range(index.max_entries)]


def test_positions_are_the_entries_positions_in_order(index: OffsetIndex) -> None:
    assert list(index.positions()) == []
    rng = random.Random(5)
    position = 0
    for i in range(index.max_entries):
        position += rng.randrange(1, 70_000)  # past 16 bits: the big-endian words are read whole
        index.append(BASE_OFFSET + 3 * i, position)
    assert list(index.positions()) == [entry.position for entry in index.entries_list()]


def test_entry_out_of_range(index: OffsetIndex) -> None:
    with pytest.raises(IllegalIndexOperationError, match="0th entry"):
        index.entry(0)
    index.append(50, 0)
    with pytest.raises(IllegalIndexOperationError):
        index.entry(1)
    with pytest.raises(IllegalIndexOperationError):
        index.entry(-1)


def test_fetch_upper_bound_offset(index: OffsetIndex) -> None:
    first = OffsetPosition(BASE_OFFSET, 0)
    second = OffsetPosition(BASE_OFFSET + 1, 10)
    third = OffsetPosition(BASE_OFFSET + 2, 23)
    fourth = OffsetPosition(BASE_OFFSET + 3, 37)
    assert index.fetch_upper_bound_offset(first, 5) is None
    for e in (first, second, third, fourth):
        index.append(e.offset, e.position)
    assert index.fetch_upper_bound_offset(first, 5) == second
    assert index.fetch_upper_bound_offset(first, 10) == second
    assert index.fetch_upper_bound_offset(first, 23) == third
    assert index.fetch_upper_bound_offset(first, 22) == third
    assert index.fetch_upper_bound_offset(second, 24) == fourth
    assert index.fetch_upper_bound_offset(fourth, 1) is None
    assert index.fetch_upper_bound_offset(first, 200) is None
    assert index.fetch_upper_bound_offset(second, 200) is None
    # Kafka's smallest-upper-bound search never compares the first slot of its range, so a target
    # equal to the first entry's position answers with the second entry (still an upper bound).
    assert index.fetch_upper_bound_offset(first, 0) == second


# --- appends ------------------------------------------------------------------------------------


def test_append_too_many(index: OffsetIndex) -> None:
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    assert index.is_full()
    with pytest.raises(IllegalIndexOperationError, match="full"):
        index.append(BASE_OFFSET + index.max_entries + 1, 1)


def test_append_out_of_order(index: OffsetIndex) -> None:
    index.append(51, 0)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        index.append(50, 1)
    with pytest.raises(InvalidOffsetError):
        index.append(51, 1)  # equal is rejected as well
    assert index.entries == 1
    assert index.last_offset == 51


def test_append_writes_big_endian_entries(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    with OffsetIndex(path, 1000, 32) as idx:
        idx.append(1000, 0)
        idx.append(1002, 0x01020304)
        assert idx.last_offset == 1002
    assert path.read_bytes() == bytes.fromhex("00000000 00000000 00000002 01020304")


def test_relative_offset_overflow(index: OffsetIndex) -> None:
    assert index.relative_offset(BASE_OFFSET + 2**31 - 1) == 2**31 - 1
    assert index.can_append_offset(BASE_OFFSET)
    assert index.can_append_offset(BASE_OFFSET + 2**31 - 1)
    assert not index.can_append_offset(BASE_OFFSET + 2**31)
    assert not index.can_append_offset(BASE_OFFSET - 1)
    with pytest.raises(IndexOffsetOverflowError, match=str(BASE_OFFSET + 2**31)):
        index.relative_offset(BASE_OFFSET + 2**31)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(BASE_OFFSET - 1, 0)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(BASE_OFFSET + 2**31, 0)
    assert index.entries == 0


def test_position_must_fit_an_int(index: OffsetIndex) -> None:
    with pytest.raises(IllegalIndexOperationError):
        index.append(50, 2**31)
    with pytest.raises(IllegalIndexOperationError):
        index.append(50, -1)
    assert index.entries == 0


# --- reopen, truncate, resize -------------------------------------------------------------------


def test_reopen(index: OffsetIndex) -> None:
    first, second = OffsetPosition(51, 0), OffsetPosition(52, 1)
    index.append(first.offset, first.position)
    index.append(second.offset, second.position)
    index.close()
    assert index.path.stat().st_size == 16  # close trims
    with OffsetIndex(index.path, BASE_OFFSET) as reopened:
        assert reopened.lookup(first.offset) == first
        assert reopened.lookup(second.offset) == second
        assert reopened.last_offset == second.offset
        assert reopened.entries == 2
        assert reopened.is_full()  # a trimmed file has no free slot until it is resized
        with pytest.raises(IllegalIndexOperationError):
            reopened.append(53, 1)


def test_truncate(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "t.index", 0, 10 * ENTRY) as idx:
        idx.truncate()
        for i in range(1, 10):
            idx.append(i, i)

        idx.truncate_to(12)
        assert idx.lookup(10) == OffsetPosition(9, 9), "truncate past the end changes nothing"
        assert idx.last_offset == 9

        idx.append(10, 10)
        idx.truncate_to(10)
        assert idx.lookup(10) == OffsetPosition(9, 9), "an exact match is removed"
        assert idx.last_offset == 9
        idx.append(10, 10)

        idx.truncate_to(9)
        assert idx.lookup(10) == OffsetPosition(8, 8)
        assert idx.last_offset == 8
        idx.append(9, 9)

        idx.truncate_to(5)
        assert idx.lookup(10) == OffsetPosition(4, 4)
        assert idx.last_offset == 4
        idx.append(5, 5)

        idx.truncate()
        assert idx.entries == 0
        assert idx.last_offset == 0
        idx.append(0, 0)


def test_truncate_to_between_entries_and_below_first(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "t.index", 100, 10 * ENTRY) as idx:
        for o in (102, 105, 109):
            idx.append(o, o * 10)
        idx.truncate_to(107)
        assert idx.entries_list() == [OffsetPosition(102, 1020), OffsetPosition(105, 1050)]
        idx.truncate_to(101)
        assert idx.entries == 0
        assert idx.last_offset == 100
        assert idx.length == 80  # truncation never shrinks the file


def test_sanity_last_offset_equal_to_base_offset(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "s.index", 20, 10 * ENTRY) as idx:
        idx.append(20, 0)
        idx.sanity_check()


def test_sanity_check_negative_relative_offset(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000020.index"
    path.write_bytes(bytes.fromhex("00000001 00000010 ffffffff 00000020"))
    with OffsetIndex(path, 20) as idx:
        assert idx.last_offset == 19
        with pytest.raises(CorruptIndexError, match=r"0000000020\.index.*less than the base offset"):
            idx.sanity_check()


def test_sanity_check_length_not_multiple_of_entry(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes.fromhex("00000001 00000010") + b"\x00\x00\x00")
    with OffsetIndex(path, 0) as idx:
        assert idx.entries == 1
        assert idx.lookup(5) == OffsetPosition(1, 16)
        with pytest.raises(CorruptIndexError, match=r"00000000000000000000\.index.*found 11 bytes"):
            idx.sanity_check()


def test_sanity_check_empty_and_full(index: OffsetIndex) -> None:
    index.sanity_check()
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i, i)
    index.sanity_check()


def test_resize_keeps_entries(index: OffsetIndex) -> None:
    index.append(50, 5)
    index.append(60, 6)
    assert index.resize(30 * ENTRY) is False
    assert index.resize(15 * ENTRY + 3) is True
    assert (index.length, index.max_entries) == (120, 15)
    assert index.path.stat().st_size == 120
    assert index.resize(60 * ENTRY) is True
    assert index.max_entries == 60
    assert index.entries_list() == [OffsetPosition(50, 5), OffsetPosition(60, 6)]
    index.append(70, 7)
    assert index.lookup(1000) == OffsetPosition(70, 7)
    with pytest.raises(IllegalIndexOperationError, match="holds 3 entries"):
        index.resize(2 * ENTRY)
    assert index.entries == 3


def test_trim_and_reset(index: OffsetIndex) -> None:
    index.append(50, 5)
    index.append(60, 6)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 16
    assert index.is_full()
    index.reset()
    assert index.entries == 0
    assert index.path.stat().st_size == 30 * ENTRY
    index.append(46, 1)
    assert index.lookup(46) == OffsetPosition(46, 1)


def test_trim_to_zero_and_grow_again(tmp_path: Path) -> None:
    path = tmp_path / "z.index"
    with OffsetIndex(path, 0, 80) as idx:
        idx.trim_to_valid_size()
        assert path.stat().st_size == 0
        assert idx.lookup(3) == OffsetPosition(0, 0)
        assert idx.is_full()
        assert idx.resize(80)
        idx.append(3, 30)
        assert idx.lookup(3) == OffsetPosition(3, 30)


def test_empty_existing_file(tmp_path: Path) -> None:
    # Python cannot map 0 bytes; the index must still work (Kafka opens such files after a crash).
    path = tmp_path / "e.index"
    path.touch()
    with OffsetIndex(path, 7, 4096) as idx:
        assert (idx.entries, idx.max_entries, idx.length) == (0, 0, 0)
        assert idx.lookup(100) == OffsetPosition(7, 0)
        assert idx.lookup_ceiling(8) is None
        assert idx.fetch_upper_bound_offset(OffsetPosition(7, 0), 10) is None
        assert idx.last_offset == 7
        idx.sanity_check()
        idx.truncate_to(3)
        idx.flush()
        with pytest.raises(IllegalIndexOperationError):
            idx.append(8, 0)
        idx.reset()
        assert idx.length == 4096
        idx.append(8, 0)
    assert path.stat().st_size == 8


# --- lifecycle ----------------------------------------------------------------------------------


def test_use_after_close_is_a_storage_error(index: OffsetIndex) -> None:
    index.append(50, 5)
    index.close()
    assert index.is_closed
    calls = [
        lambda: index.lookup(50),
        lambda: index.lookup_ceiling(50),
        lambda: index.entry(0),
        lambda: index.entries_list(),
        lambda: index.fetch_upper_bound_offset(OffsetPosition(45, 0), 1),
        lambda: index.append(60, 6),
        lambda: index.truncate_to(40),
        lambda: index.truncate(),
        lambda: index.resize(800),
        lambda: index.flush(),
        lambda: index.reset(),
        lambda: index.sanity_check(),
    ]
    for call in calls:
        with pytest.raises(KafkaStorageError, match="closed"):
            call()
    index.close()  # twice is fine
    index.trim_to_valid_size()  # no-op when closed, as in Kafka


def test_context_manager_trims(tmp_path: Path) -> None:
    path = tmp_path / "c.index"
    with OffsetIndex(path, 0, 800) as idx:
        idx.append(1, 10)
        idx.flush()
        assert path.stat().st_size == 800
    assert path.stat().st_size == 8
    assert idx.is_closed


def test_rename_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 80)
    idx.append(1, 10)
    target = tmp_path / "00000000000000000000.index.deleted"
    idx.rename_to(target)
    assert idx.path == target
    assert not path.exists() and target.exists()
    idx.append(2, 20)  # the map survives the rename
    assert idx.lookup(2) == OffsetPosition(2, 20)
    assert idx.delete_if_exists() is True
    assert not target.exists()
    assert idx.is_closed
    assert idx.delete_if_exists() is False


def test_rename_failure_still_moves_the_name(tmp_path: Path) -> None:
    path = tmp_path / "r.index"
    idx = OffsetIndex(path, 0, 80)
    target = tmp_path / "missing-dir" / "r.index"
    with pytest.raises(KafkaStorageError, match="Cannot rename"):
        idx.rename_to(target)
    assert idx.path == target
    idx.close_handler()


def test_update_parent_dir(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "p.index", 0, 80) as idx:
        other = tmp_path / "other"
        idx.update_parent_dir(other)
        assert idx.path == other / "p.index"
        idx.update_parent_dir(tmp_path)


# --- warm / cold search -------------------------------------------------------------------------


def test_warm_and_cold_search_over_many_entries(tmp_path: Path) -> None:
    rng = random.Random(7)
    count = 3000  # > 1024 warm entries, so both sections are exercised
    with OffsetIndex(tmp_path / "w.index", 1000, count * ENTRY) as idx:
        entries = _fill_random(idx, rng, count)
        assert idx.is_full()
        last = entries[-1].offset
        targets = [rng.randint(990, last + 10) for _ in range(3000)] + [e.offset for e in entries[::7]]
        targets += [entries[0].offset, entries[-1].offset, entries[count - 1025].offset]
        for t in targets:
            assert idx.lookup(t) == _floor(entries, 1000, t), t
            assert idx.lookup_ceiling(t) == _ceiling(entries, t), t
        positions = [e.position for e in entries]
        for p in [rng.randint(-5, positions[-1] + 5) for _ in range(2000)] + positions[::11]:
            got = idx.fetch_upper_bound_offset(OffsetPosition(0, 0), p)
            i = bisect.bisect_left(positions, p)
            if i < count and positions[i] == p and i == 0:
                i = 1  # the documented first-slot quirk
            assert got == (entries[i] if i < count else None), p


def test_warm_section_lookups_touch_only_warm_entries(tmp_path: Path) -> None:
    count = 3000
    with OffsetIndex(tmp_path / "w.index", 0, count * ENTRY) as idx:
        for i in range(count):
            idx.append(i * 2, i * 100)
        probed: list[int] = []
        real = idx._offset_at

        def spy(mm: object, n: int) -> int:
            probed.append(n)
            return real(mm, n)  # type: ignore[arg-type]

        idx._offset_at = spy  # type: ignore[method-assign]
        first_hot = count - 1 - 8192 // ENTRY
        assert idx.lookup(2 * (count - 10) + 1) == OffsetPosition(2 * (count - 10), (count - 10) * 100)
        assert probed and min(probed) >= first_hot
        probed.clear()
        assert idx.lookup(201) == OffsetPosition(200, 10000)
        assert min(probed) == 0 and first_hot in probed  # cold: hot check, first entry, then [0, first_hot]


# --- concurrency ----------------------------------------------------------------------------------


def test_concurrent_lookups_never_see_half_written_entries(tmp_path: Path) -> None:
    total = 20000
    idx = OffsetIndex(tmp_path / "c.index", 0, 1000 * ENTRY)
    errors: list[str] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(1, total + 1):
                if idx.is_full():
                    idx.resize(idx.length + 1000 * ENTRY)  # remap while readers are busy
                idx.append(i * 3, i * 10)
        finally:
            done.set()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        newest = 0
        while not done.is_set():
            # the newest entry is where a half-written append would show: (0, 0) or a torn pair
            last = idx.lookup(10**9)
            if last.offset < newest or last.position * 3 != last.offset * 10:
                errors.append(f"newest entry went from {newest} to {last}")
            newest = last.offset
            target = rng.randint(0, total * 3 + 10)
            got = idx.lookup(target)
            if got.offset > target or (got.offset != 0 and got.position * 3 != got.offset * 10):
                errors.append(f"lookup({target}) -> {got}")
            ceiling = idx.lookup_ceiling(target)
            if ceiling is not None and (
                ceiling.offset < target or ceiling.position * 3 != ceiling.offset * 10
            ):
                errors.append(f"lookup_ceiling({target}) -> {ceiling}")

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(3)]
    threads.append(threading.Thread(target=writer))
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors[:5]
    assert idx.entries == total
    idx.close()


# --- read-only opens -----------------------------------------------------------------------------


def test_read_only_open_counts_only_real_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    writer = OffsetIndex(path, 100, 80)
    writer.append(103, 50)
    writer.append(107, 120)
    writer.flush()
    with OffsetIndex(path, 100, writable=False) as reader:
        assert (reader.entries, reader.max_entries) == (2, 10)
        assert reader.lookup(110) == OffsetPosition(107, 120)
        assert reader.last_offset == 107
        reader.sanity_check()
        with pytest.raises(KafkaStorageError, match="read-only"):
            reader.append(110, 200)
        with pytest.raises(KafkaStorageError, match="read-only"):
            reader.resize(800)
        with pytest.raises(KafkaStorageError, match="read-only"):
            reader.truncate_to(104)
        writer.append(109, 300)
        assert reader.entries == 2  # a snapshot until refreshed
        assert reader.refresh() == 3
        assert reader.lookup(200) == OffsetPosition(109, 300)
    assert path.stat().st_size == 80  # closing a reader never trims
    with pytest.raises(IllegalIndexOperationError, match="read-only"):
        writer.refresh()
    writer.close()


def test_read_only_ignores_torn_and_zero_entries(tmp_path: Path) -> None:
    path = tmp_path / "t.index"
    # (3,40) (5,90), then an entry whose position has not been written yet, then zeros.
    path.write_bytes(bytes.fromhex("00000003 00000028 00000005 0000005a 00000009 00000000") + bytes(16))
    with OffsetIndex(path, 0, writable=False) as reader:
        assert reader.entries == 2
    path.write_bytes(bytes(64))
    with OffsetIndex(path, 0, writable=False) as reader:
        assert reader.entries == 0
        assert reader.lookup(5) == OffsetPosition(0, 0)
    path.write_bytes(bytes.fromhex("00000000 00000000 00000004 00000010"))
    with OffsetIndex(path, 0, writable=False) as reader:
        assert reader.entries == 0  # a leading all-zero slot is taken for the unused tail


def test_read_only_missing_or_empty_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.index"
    with OffsetIndex(missing, 5, writable=False) as reader:
        assert reader.entries == 0
        assert reader.lookup(9) == OffsetPosition(5, 0)
    assert not missing.exists()
    empty = tmp_path / "empty.index"
    empty.touch()
    with OffsetIndex(empty, 5, writable=False) as reader:
        assert (reader.entries, reader.length) == (0, 0)


# --- golden files written by Kafka ---------------------------------------------------------------


def _expected(kafka_golden_dir: Path) -> dict[str, object]:
    return json.loads((kafka_golden_dir / "expected.json").read_text())


def test_golden_s1_active_and_rolled(kafka_golden_dir: Path, tmp_path: Path) -> None:
    expected = _expected(kafka_golden_dir)
    s1 = kafka_golden_dir / "s1_v2_single"
    translate = {o: r for o, r in expected["s1_translate_offsets"] if r is not None}  # type: ignore[union-attr]
    with OffsetIndex(s1 / "rolled" / "00000000000000000000.index", 0, writable=False) as rolled:
        entries = rolled.entries_list()
    assert len(entries) == expected["s1_active_offset_index_entries"] == 14
    assert entries[0] == OffsetPosition(2, 160)
    assert entries[-1] == OffsetPosition(28, 2276)
    for e in entries:
        last_offset, position, _size = translate[e.offset]
        assert (last_offset, position) == (e.offset, e.position)
    with OffsetIndex(s1 / "active" / "00000000000000000000.index", 0, writable=False) as active:
        assert (active.entries, active.max_entries, active.length) == (14, 128, 1024)
        assert active.entries_list() == entries
        for target in range(-1, 35):
            assert active.lookup(target) == _floor(entries, 0, target)
        assert active.lookup(15) == OffsetPosition(14, 1128)
        assert active.lookup(1) == OffsetPosition(0, 0)
        active.sanity_check()
    # Opened for writing, Kafka (and kafkalog) trusts the length: all 128 slots count.
    copy = tmp_path / "00000000000000000000.index"
    shutil.copyfile(s1 / "active" / "00000000000000000000.index", copy)
    with OffsetIndex(copy, 0, 1024) as trusted:
        assert trusted.entries == 128
        assert trusted.last_offset == 0
        trusted.sanity_check()  # last offset == base offset passes, as in Kafka


def test_golden_s1_replay_is_byte_identical(kafka_golden_dir: Path, tmp_path: Path) -> None:
    s1 = kafka_golden_dir / "s1_v2_single"
    with OffsetIndex(s1 / "rolled" / "00000000000000000000.index", 0, writable=False) as rolled:
        entries = rolled.entries_list()
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, 1024)
    for e in entries:
        idx.append(e.offset, e.position)
    idx.flush()
    assert path.read_bytes() == (s1 / "active" / "00000000000000000000.index").read_bytes()
    idx.trim_to_valid_size()
    assert path.read_bytes() == (s1 / "rolled" / "00000000000000000000.index").read_bytes()
    idx.close()
    assert path.read_bytes() == (s1 / "rolled" / "00000000000000000000.index").read_bytes()


@pytest.mark.parametrize(
    ("relpath", "base_offset", "translate_key"),
    [
        ("s2_v2_mixed/00000000000000000100.index", 100, "s2_translate_offsets"),
        ("s3_legacy/00000000000000000000.index", 0, "s3_translate_offsets"),
        ("s5_recovered/00000000000000000000.index", 0, "s1_translate_offsets"),
    ],
)
def test_golden_other_indexes(kafka_golden_dir: Path, tmp_path: Path, relpath: str, base_offset: int,
                              translate_key: str) -> None:
    golden = kafka_golden_dir / relpath
    expected = _expected(kafka_golden_dir)
    # position of each entry (batch start) -> last offset of the batch there, from Kafka's translateOffset
    batch_at = {r[1]: r[0] for _, r in expected[translate_key] if r is not None}  # type: ignore[union-attr]
    with OffsetIndex(golden, base_offset, writable=False) as ro:
        entries = ro.entries_list()
        assert ro.entries == golden.stat().st_size // ENTRY
        ro.sanity_check()
    for e in entries:
        # an entry is (last offset of an append, start of that append): a batch starts there and
        # ends at or before the entry's offset
        assert e.position in batch_at
        assert batch_at[e.position] <= e.offset
    copy = tmp_path / golden.name
    shutil.copyfile(golden, copy)
    with OffsetIndex(copy, base_offset) as rw:
        assert rw.entries_list() == entries
        for target in range(base_offset - 2, entries[-1].offset + 3):
            assert rw.lookup(target) == _floor(entries, base_offset, target)
    # replay into a fresh preallocated index and trim: same bytes as Kafka's file
    replay = tmp_path / ("replay-" + golden.name)
    with OffsetIndex(replay, base_offset, 1024) as fresh:
        for e in entries:
            fresh.append(e.offset, e.position)
    assert replay.read_bytes() == golden.read_bytes()


def test_golden_s5_recovered_entries(kafka_golden_dir: Path) -> None:
    expected = _expected(kafka_golden_dir)
    with OffsetIndex(kafka_golden_dir / "s5_recovered" / "00000000000000000000.index", 0,
                     writable=False) as idx:
        assert idx.entries_list() == [OffsetPosition(o, o * 80) for o in (2, 4, 6, 8, 10)]
        # nothing at or past the truncation point survives
        assert idx.entry(idx.entries - 1).position < expected["s5_bad_crc_log_size_after"]


# --- model-based: random operation sequences ------------------------------------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 40), st.integers(1, 50)),
        st.tuples(st.just("truncate_to"), st.integers(-5, 400), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
        st.tuples(st.just("trim_resize"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_operations_match_a_list_model(tmp_path_factory: pytest.TempPathFactory,
                                       ops: list[tuple[str, int, int]]) -> None:
    path = tmp_path_factory.mktemp("model") / "00000000000000000010.index"
    base, max_size = 10, 16 * ENTRY
    model: list[OffsetPosition] = []
    idx = OffsetIndex(path, base, max_size)
    try:
        for op, a, b in ops:
            if op == "append":
                offset = (model[-1].offset if model else base) + a
                position = (model[-1].position if model else 0) + b
                if len(model) == 16:
                    with pytest.raises(IllegalIndexOperationError):
                        idx.append(offset, position)
                elif model and offset <= model[-1].offset:
                    with pytest.raises(InvalidOffsetError):
                        idx.append(offset, position)
                else:
                    idx.append(offset, position)
                    model.append(OffsetPosition(offset, position))
            elif op == "truncate_to":
                idx.truncate_to(base + a)
                model = [e for e in model if e.offset < base + a]
            elif op == "reopen":
                idx.close()  # trims; the reopened file is exactly the entries
                idx = OffsetIndex(path, base, max_size)
                assert idx.length == len(model) * ENTRY
                idx.resize(max_size)
            else:
                idx.trim_to_valid_size()
                assert path.stat().st_size == len(model) * ENTRY
                idx.resize(max_size)
            assert idx.entries_list() == model
            assert idx.last_offset == (model[-1].offset if model else base)
            for target in (base - 1, base, base + a, base + a + 1, base + 400):
                assert idx.lookup(target) == _floor(model, base, target)
                assert idx.lookup_ceiling(target) == _ceiling(model, target)
        idx.sanity_check()
    finally:
        idx.close()
