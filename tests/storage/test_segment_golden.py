"""Segments written by Apache Kafka itself (golden ``kafka_java_generated``): reading them gives Kafka's
answers, recovering them gives Kafka's bytes, and appending the same batches writes Kafka's bytes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kafkalog.records.batch import RecordBatch
from kafkalog.records.memory import iter_batches
from kafkalog.storage.index import OffsetPosition, TimestampOffset
from kafkalog.storage.log_file_utils import log_file, offset_index_file, time_index_file
from kafkalog.storage.log_segment import LogSegment
from tests.storage.conftest import T0

S1_INTERVAL = 100
S1_MAX_INDEX = 1024


def copy_segment(source_dir: Path, base_offset: int, target_dir: Path) -> Path:
    """Copy a golden segment's files (read-only in the golden tree) into a writable directory."""
    target_dir.mkdir(parents=True, exist_ok=True)
    for make in (log_file, offset_index_file, time_index_file):
        src = make(source_dir, base_offset)
        if src.exists():
            shutil.copyfile(src, make(target_dir, base_offset))
    return target_dir


def translate(seg: LogSegment, offset: int) -> list[int] | None:
    found = seg.translate_offset(offset)
    return None if found is None else [found.offset, found.position, found.size]


def golden_batches(path: Path) -> list[RecordBatch]:
    return list(iter_batches(path.read_bytes()))


# --- reading Kafka's segments ---------------------------------------------------------------------


@pytest.mark.parametrize("image", ["active", "rolled"])
def test_s1_reads_match_kafka(kafka_golden_dir: Path, tmp_path: Path, expected: dict[str, Any],
                              image: str) -> None:
    directory = copy_segment(kafka_golden_dir / "s1_v2_single" / image, 0, tmp_path)
    with LogSegment.open(directory, 0, index_interval_bytes=S1_INTERVAL, max_index_size=S1_MAX_INDEX,
                         file_already_exists=True) as seg:
        assert seg.size_in_bytes == expected["s1_log_size"]
        for offset, want in expected["s1_translate_offsets"]:
            assert translate(seg, offset) == want, offset
        for timestamp, want in expected["s1_find_offset_by_timestamp_startingOffset0"]:
            found = seg.find_offset_by_timestamp(timestamp, 0)
            assert (None if found is None else [found.timestamp, found.offset]) == want, timestamp
            if found is not None:
                assert found.leader_epoch == 0
        fetch = seg.read(15, 1)
        assert fetch is not None
        assert [fetch.fetch_offset_metadata.relative_position_in_segment, fetch.records.size_in_bytes] == \
            expected["s1_read_15_maxsize_1"]
        assert fetch.fetch_offset_metadata.message_offset == 15 and fetch.first_entry_incomplete
        fetch = seg.read(15, 1, min_one_message=True)
        assert fetch is not None
        assert [fetch.records.size_in_bytes] == expected["s1_read_15_maxsize_1_minOneMessage"]
        assert not fetch.first_entry_incomplete
        assert [r.value for r in fetch.records.records()] == [b"value-15"]
        assert (seg.read(30, 1000) is None) is expected["s1_read_30_is_null"]
        assert seg.read_next_offset() == expected["s1_readNextOffset"]
        if image == "active":
            # Kafka trusts an index file's length when opening it for writing (spec §12.4): the
            # untrimmed active images count every preallocated slot. Lookups stay correct because a
            # zero slot reads as (base offset, position 0), a valid lower bound.
            assert seg.offset_index.entries == S1_MAX_INDEX // 8
            assert seg.time_index.entries == S1_MAX_INDEX // 12
        else:
            assert seg.offset_index.entries == 14
            assert seg.time_index.entries == expected["s1_rolled_time_index_entries"]
            last = seg.time_index.last_entry
            assert [last.timestamp, last.offset] == expected["s1_rolled_time_index_last"]
            assert seg.max_timestamp_so_far == T0 + 40_000
            assert seg.shallow_offset_of_max_timestamp_so_far == 20


def test_s1_active_image_read_only_counts_real_entries(kafka_golden_dir: Path,
                                                        expected: dict[str, Any]) -> None:
    # A read-only opener (another process) counts only the plausible prefix of a preallocated index.
    directory = kafka_golden_dir / "s1_v2_single" / "active"
    with LogSegment.open(directory, 0, max_index_size=S1_MAX_INDEX, read_only=True) as seg:
        assert seg.offset_index.entries == expected["s1_active_offset_index_entries"]
        assert seg.time_index.entries == expected["s1_active_time_index_entries"]
        for offset, want in expected["s1_translate_offsets"]:
            assert translate(seg, offset) == want
        assert seg.read_next_offset() == expected["s1_readNextOffset"]
    # Nothing was trimmed or written in the golden tree.
    assert offset_index_file(directory, 0).stat().st_size == S1_MAX_INDEX


@pytest.mark.parametrize(("name", "base_offset", "key"), [
    ("s2_v2_mixed", 100, "s2_translate_offsets"),
    ("s3_legacy", 0, "s3_translate_offsets"),
])
def test_s2_s3_translate_offsets(kafka_golden_dir: Path, tmp_path: Path, expected: dict[str, Any],
                                 name: str, base_offset: int, key: str) -> None:
    directory = copy_segment(kafka_golden_dir / name, base_offset, tmp_path)
    with LogSegment.open(directory, base_offset, file_already_exists=True) as seg:
        for offset, want in expected[key]:
            assert translate(seg, offset) == want, offset
        golden_index = offset_index_file(kafka_golden_dir / name, base_offset)
        assert seg.offset_index.entries == golden_index.stat().st_size // 8
        last = expected[key][-3][1]
        assert seg.read_next_offset() == last[0] + 1


def test_s2_log_append_time_and_timestamps(kafka_golden_dir: Path, tmp_path: Path) -> None:
    directory = copy_segment(kafka_golden_dir / "s2_v2_mixed", 100, tmp_path)
    with LogSegment.open(directory, 100, file_already_exists=True) as seg:
        assert seg.time_index.last_entry == TimestampOffset(T0 + 50, 109)
        # The LogAppendTime batch reports its max timestamp for every record.
        found = seg.find_offset_by_timestamp(T0 + 41, 0)
        assert found is not None and (found.timestamp, found.offset, found.leader_epoch) == (T0 + 50, 108, 3)
        assert seg.find_offset_by_timestamp(T0 + 51, 0) is None


# --- recovery ---------------------------------------------------------------------------------------


def kafka_recover_cadence(batches: list[RecordBatch], interval: int) -> tuple[list[OffsetPosition],
                                                                               list[TimestampOffset]]:
    """The entries Kafka's LogSegment.recover writes (spec §5.6): per batch, an entry when the bytes
    since the *position of the last entry* exceed the interval, then a final time entry.

    Live appends count bytes since the last entry per *append* instead, so the two can differ when
    appends hold several batches or sizes vary; for the s1 data (one batch per append) they agree.
    """
    offsets: list[OffsetPosition] = []
    times: list[TimestampOffset] = []
    max_ts, max_offset = -1, batches[0].base_offset if batches else 0
    valid = last_entry = 0
    for batch in batches:
        if batch.max_timestamp > max_ts:
            max_ts, max_offset = batch.max_timestamp, batch.last_offset
        if valid - last_entry > interval:
            offsets.append(OffsetPosition(batch.last_offset, valid))
            if max_ts > (times[-1].timestamp if times else -1):
                times.append(TimestampOffset(max_ts, max_offset))
            last_entry = valid
        valid += batch.size_in_bytes
    if max_ts > (times[-1].timestamp if times else -1):
        times.append(TimestampOffset(max_ts, max_offset))
    return offsets, times


def test_s4_torn_tail_recovery(kafka_golden_dir: Path, tmp_path: Path, expected: dict[str, Any]) -> None:
    torn = kafka_golden_dir / "s4_recovery_input_torn_tail.log"
    assert torn.stat().st_size == expected["s4_orig_size"] + expected["s4_torn_tail_truncated_bytes"]
    shutil.copyfile(torn, log_file(tmp_path, 0))
    with LogSegment.open(tmp_path, 0, index_interval_bytes=S1_INTERVAL, max_index_size=S1_MAX_INDEX,
                         file_already_exists=True) as seg:
        assert seg.recover() == expected["s4_torn_tail_truncated_bytes"]
        assert seg.size_in_bytes == expected["s4_torn_tail_log_size_after"]
        offsets = seg.offset_index.entries_list()
        times = seg.time_index.entries_list()
        assert seg.read_next_offset() == 30
    assert log_file(tmp_path, 0).read_bytes() == torn.read_bytes()[: expected["s4_torn_tail_log_size_after"]]
    # The rebuilt indexes follow Kafka's *recover* cadence (independently modelled here)...
    want_offsets, want_times = kafka_recover_cadence(golden_batches(log_file(tmp_path, 0)), S1_INTERVAL)
    assert offsets == want_offsets and times == want_times
    # ...which for these equal-sized single-batch appends coincides with the live cadence, so the
    # files equal Kafka's rolled s1 images byte for byte.
    rolled = kafka_golden_dir / "s1_v2_single" / "rolled"
    assert offset_index_file(tmp_path, 0).read_bytes() == offset_index_file(rolled, 0).read_bytes()
    assert time_index_file(tmp_path, 0).read_bytes() == time_index_file(rolled, 0).read_bytes()


def test_s5_bad_crc_recovery_is_byte_identical(kafka_golden_dir: Path, tmp_path: Path,
                                               expected: dict[str, Any]) -> None:
    bad = kafka_golden_dir / "s5_recovery_input_bad_crc_batch12.log"
    shutil.copyfile(bad, log_file(tmp_path, 0))
    with LogSegment.open(tmp_path, 0, index_interval_bytes=S1_INTERVAL, max_index_size=S1_MAX_INDEX,
                         file_already_exists=True) as seg:
        assert seg.recover() == expected["s5_bad_crc_truncated_bytes"]
        assert seg.size_in_bytes == expected["s5_bad_crc_log_size_after"]
        assert seg.size_in_bytes == expected["s5_bad_crc_batch12_position"]
        assert seg.read_next_offset() == expected["s5_readNextOffset_after"]
    recovered = kafka_golden_dir / "s5_recovered"
    for make in (log_file, offset_index_file, time_index_file):
        assert make(tmp_path, 0).read_bytes() == make(recovered, 0).read_bytes(), make.__name__


def test_recovering_a_clean_segment_changes_nothing(kafka_golden_dir: Path, tmp_path: Path) -> None:
    rolled = kafka_golden_dir / "s1_v2_single" / "rolled"
    copy_segment(rolled, 0, tmp_path)
    with LogSegment.open(tmp_path, 0, index_interval_bytes=S1_INTERVAL, max_index_size=S1_MAX_INDEX,
                         file_already_exists=True) as seg:
        assert seg.recover() == 0
    for make in (log_file, offset_index_file, time_index_file):
        assert make(tmp_path, 0).read_bytes() == make(rolled, 0).read_bytes()


# --- replaying Kafka's appends --------------------------------------------------------------------


def replay(seg: LogSegment, groups: list[list[RecordBatch]]) -> None:
    """Append each group of batches as one append, with what Kafka's log layer passes: the last offset,
    the max timestamp, and the offset of the first entry holding it (v2: a batch's last offset)."""
    for group in groups:
        data = b"".join(bytes(b.buffer) for b in group)
        max_ts, shallow = -1, -1
        for batch in group:
            if batch.max_timestamp > max_ts:
                max_ts, shallow = batch.max_timestamp, batch.last_offset
        seg.append(group[-1].last_offset, max_ts, shallow, data)


def assert_same_files(directory: Path, golden: Path, base_offset: int) -> None:
    for make in (log_file, offset_index_file, time_index_file):
        assert make(directory, base_offset).read_bytes() == make(golden, base_offset).read_bytes(), \
            make.__name__


def test_replay_s1_writes_kafkas_bytes(kafka_golden_dir: Path, tmp_path: Path,
                                       expected: dict[str, Any]) -> None:
    golden = kafka_golden_dir / "s1_v2_single"
    batches = golden_batches(log_file(golden / "rolled", 0))
    assert len(batches) == 30
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=S1_INTERVAL, max_index_size=S1_MAX_INDEX)
    try:
        replay(seg, [[b] for b in batches])
        assert seg.offset_index.entries == expected["s1_active_offset_index_entries"]
        assert seg.time_index.entries == expected["s1_active_time_index_entries"]
        # The append of offset 10 (timestamp T0+2500, below the max so far) indexes (T0+9000, 9).
        assert TimestampOffset(T0 + 9000, 9) in seg.time_index.entries_list()
        assert OffsetPosition(10, 800) in seg.offset_index.entries_list()
        assert_same_files(tmp_path, golden / "active", 0)  # preallocated indexes, zeros included
        seg.on_become_inactive_segment()
        assert_same_files(tmp_path, golden / "rolled", 0)
    finally:
        seg.close()
    assert_same_files(tmp_path, golden / "rolled", 0)  # closing a rolled segment changes nothing


def test_replay_s2_writes_kafkas_bytes(kafka_golden_dir: Path, tmp_path: Path) -> None:
    golden = kafka_golden_dir / "s2_v2_mixed"
    batches = golden_batches(log_file(golden, 100))
    assert [b.last_offset for b in batches] == [102, 104, 106, 107, 109]
    with LogSegment.open(tmp_path, 100, index_interval_bytes=64) as seg:
        replay(seg, [[b] for b in batches])
        seg.on_become_inactive_segment()
        assert_same_files(tmp_path, golden, 100)


# The README does not give s3's parameters. Its index — (3, 74), (5, 162), (8, 242) — pins down how
# the entries were appended: offsets 4 and 5 went in one append (an entry at 162 carries offset 5).
# With offsets 0 and 1 in one append any interval below 74 reproduces it; appended separately, any
# interval in [38, 74). Both readings are checked.
@pytest.mark.parametrize(("interval", "groups"), [
    (0, [[0, 1], [3], [4, 5], [8]]),
    (64, [[0], [1], [3], [4, 5], [8]]),
])
def test_replay_s3_legacy_writes_kafkas_bytes(kafka_golden_dir: Path, tmp_path: Path, interval: int,
                                              groups: list[list[int]]) -> None:
    golden = kafka_golden_dir / "s3_legacy"
    by_offset = {b.last_offset: b for b in golden_batches(log_file(golden, 0))}
    assert sorted(by_offset) == [0, 1, 3, 4, 5, 8]
    with LogSegment.open(tmp_path, 0, index_interval_bytes=interval) as seg:
        replay(seg, [[by_offset[o] for o in group] for group in groups])
        seg.on_become_inactive_segment()
        assert_same_files(tmp_path, golden, 0)
        assert seg.time_index.entries_list() == [TimestampOffset(T0 + 5, 5), TimestampOffset(T0 + 8, 8)]
