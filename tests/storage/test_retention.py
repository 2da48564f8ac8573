"""Retention over whole segments (spec §10; Kafka's UnifiedLogTest/LogCleanerManager retention cases):
time, size and log-start-offset breaches, the active segment, and asynchronous ``.deleted`` files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import IllegalArgumentError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.types import NO_TIMESTAMP
from kafkalog.storage.log import Log
from kafkalog.storage.log_manager import LogManager
from tests.storage.conftest import T0, config

HOUR = 3_600_000


def one(i: int, ts: int) -> MemoryRecords:
    """A batch of one record of fixed size (so segment sizes are predictable)."""
    return MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v%04d" % i, b"k", ts)])


SIZE = one(0, T0).size_in_bytes


def make_log(tmp_path: Path, time: MockTime, timestamps: list[int], **props: object) -> Log:
    """A log with three batches per segment, one batch per timestamp."""
    props.setdefault("segment_bytes", 3 * SIZE)
    log = Log.open(tmp_path / "t-0", config(**props), time=time)
    for i, ts in enumerate(timestamps):
        log.append_as_leader(one(i, ts))
    return log


def files(log: Log, suffix: str) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.name.endswith(suffix))


@pytest.fixture
def time() -> MockTime:
    return MockTime(T0 + 10 * HOUR)


def test_time_retention_uses_the_largest_timestamp_of_a_segment(tmp_path: Path, time: MockTime) -> None:
    # Segment [0,3): all 10 h old; [3,6): one record only 1 h old; [6,9): from the future.
    stamps = [T0, T0, T0, T0, T0 + 9 * HOUR, T0, T0 + 12 * HOUR, T0 + 12 * HOUR, T0 + 12 * HOUR]
    with make_log(tmp_path, time, stamps, retention_ms=5 * HOUR) as log:
        assert log.segments.base_offsets() == [0, 3, 6]
        assert log.delete_old_segments() == 1
        assert (log.segments.base_offsets(), log.log_start_offset) == ([3, 6], 3)
        time.sleep(5 * HOUR)  # now [3,6) is 6 h old, the active segment 3 h
        assert log.delete_old_segments() == 1
        assert log.segments.base_offsets() == [6]
        assert [r.offset for r in log.records(log.log_start_offset)] == [6, 7, 8]


def test_infinite_time_retention(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0] * 9, retention_ms=-1) as log:
        assert log.delete_old_segments() == 0


def test_every_segment_expired_rolls_first_and_keeps_the_log_end(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0] * 7, retention_ms=HOUR) as log:
        assert log.segments.base_offsets() == [0, 3, 6]
        # The active segment holds data and has expired too: a new empty one is rolled first.
        assert log.delete_old_segments() == 3
        assert log.segments.base_offsets() == [7]
        assert (log.log_start_offset, log.log_end_offset) == (7, 7)
        assert list(log.records(7)) == []
        # An empty last segment is never deleted.
        time.sleep(10 * HOUR)
        assert log.delete_old_segments() == 0
        log.append_as_leader(one(7, time.milliseconds()))
        assert [r.offset for r in log.records(7)] == [7]


@pytest.mark.parametrize("how", ["retention", "truncate_fully_and_start_at"])
def test_a_segment_never_appended_to_closes_with_empty_index_files(
        tmp_path: Path, time: MockTime, how: str, caplog: pytest.LogCaptureFixture) -> None:
    # Kafka's shutdown flush loads (creates) both indexes and closing trims them to no entry: 0 bytes.
    # Without them the next open "recovers" the segment.
    with LogManager(tmp_path, time=time) as manager:
        manager.create_topic("t", 1, {"retention.ms": str(HOUR), "segment.bytes": str(3 * SIZE)})
        log = manager.get_log("t", 0)
        for i in range(7):
            log.append_as_leader(one(i, T0))
        if how == "retention":
            assert manager.cleanup_logs() == 3
        else:
            log.truncate_fully_and_start_at(7)
        assert log.segments.base_offsets() == [7]
        # a flush before any append must not leave the active segment an index with no room (the
        # next append would then roll it): Kafka's flush creates it preallocated
        with caplog.at_level(logging.WARNING):
            log.flush()
            log.append_as_leader(one(7, T0 + 1))
        assert log.segments.base_offsets() == [7]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no "roll ... recreating"
        log.truncate_fully_and_start_at(8)
    partition_dir = tmp_path / "t-0"
    sizes = {p.name: p.stat().st_size for p in partition_dir.iterdir() if p.name.startswith("0")}
    base = "00000000000000000008"
    assert {n: sizes[n] for n in (f"{base}.log", f"{base}.index", f"{base}.timeindex")} == {
        f"{base}.log": 0, f"{base}.index": 0, f"{base}.timeindex": 0}
    assert not [n for n in sizes if not n.startswith(base)]
    with caplog.at_level(logging.WARNING), LogManager(tmp_path, time=time) as manager:
        assert manager.had_clean_shutdown
        assert manager.get_log("t", 0).log_end_offset == 8
        assert not manager.recovery_reports()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_log_manager_retention_skips_compacted_logs_as_kafka(tmp_path: Path, time: MockTime) -> None:
    # Kafka's cleanupLogs takes only logs without compact in their policy; a compact,delete log's
    # retention is the cleaner's, so without a cleaner it has none unless asked for (the CLI).
    with LogManager(tmp_path, time=time) as manager:
        for topic, policy in (("d", "delete"), ("cd", "compact,delete"), ("c", "compact")):
            manager.create_topic(topic, 1, {"cleanup.policy": policy, "retention.ms": str(HOUR),
                                            "segment.bytes": str(3 * SIZE)})
            for i in range(7):
                manager.get_log(topic, 0).append_as_leader(one(i, T0))
        assert manager.cleanup_logs() == 3
        assert [manager.get_log(t, 0).segments.base_offsets() for t in ("d", "cd", "c")] == [
            [7], [0, 3, 6], [0, 3, 6]]
        assert manager.cleanup_logs(compact_delete=True) == 3
        assert [manager.get_log(t, 0).segments.base_offsets() for t in ("cd", "c")] == [[7], [0, 3, 6]]


def test_segments_without_timestamps_use_the_file_time(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [NO_TIMESTAMP] * 9, retention_ms=HOUR) as log:
        assert log.delete_old_segments() == 0  # just written: mtime is now (the real clock)
        first = log.segments.first_segment
        assert first is not None and first.largest_timestamp > T0 + 10 * HOUR
        first.set_last_modified(T0)  # mtime long ago in the log's (mock) time
        assert log.delete_old_segments() == 1
        assert log.segments.base_offsets() == [3, 6]


def test_size_retention(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0 + 10 * HOUR] * 11, retention_bytes=5 * SIZE) as log:
        assert log.segments.base_offsets() == [0, 3, 6, 9]
        assert log.size_in_bytes == 11 * SIZE
        # 6 batches too many: whole segments go while what remains stays ≥ retention.bytes.
        assert log.delete_old_segments() == 2
        assert log.segments.base_offsets() == [6, 9]
        assert log.size_in_bytes == 5 * SIZE
        assert log.delete_old_segments() == 0


def test_size_retention_below_the_limit_deletes_nothing(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0 + 10 * HOUR] * 9, retention_bytes=100 * SIZE) as log:
        assert log.delete_old_segments() == 0


def test_log_start_offset_breach(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0 + 10 * HOUR] * 9) as log:
        log.maybe_increment_log_start_offset(5)
        # Only segments entirely below the log start offset go: [0,3) does, [3,6) holds 5.
        assert log.delete_old_segments() == 1
        assert log.segments.base_offsets() == [3, 6]
        assert log.log_start_offset == 5
        log.maybe_increment_log_start_offset(6)
        assert log.delete_old_segments() == 1 and log.log_start_offset == 6


def test_compacted_topics_only_apply_the_log_start_rule(tmp_path: Path, time: MockTime) -> None:
    stamps = [T0] * 9
    with make_log(tmp_path, time, stamps, retention_ms=HOUR, retention_bytes=SIZE,
                  cleanup_policy="compact") as log:
        assert log.delete_old_segments() == 0
        log.maybe_increment_log_start_offset(3)
        assert log.delete_old_segments() == 1


def test_size_is_applied_before_time(tmp_path: Path, time: MockTime) -> None:
    """Kafka's order: log start, size, time — each pass sees what the previous one left."""
    stamps = [T0 + 10 * HOUR] * 3 + [T0] * 3 + [T0 + 10 * HOUR] * 3
    with make_log(tmp_path, time, stamps, retention_ms=HOUR, retention_bytes=6 * SIZE) as log:
        # Size removes [0,3); then [3,6) is the oldest segment and has expired.
        assert log.delete_old_segments() == 2
        assert log.segments.base_offsets() == [6]


def test_deleted_segments_are_removed_after_the_delay(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0] * 9, retention_ms=HOUR, file_delete_delay_ms=60_000) as log:
        old_segment = log.segments.first_segment
        assert old_segment is not None
        reader = log.records(0)  # a reader that started before the deletion
        assert next(reader).offset == 0
        assert log.delete_old_segments() == 3
        assert files(log, ".log.deleted") == ["00000000000000000000.log.deleted",
                                              "00000000000000000003.log.deleted",
                                              "00000000000000000006.log.deleted"]
        assert files(log, ".index.deleted") and files(log, ".timeindex.deleted")
        assert files(log, ".log") == ["00000000000000000009.log"]
        # The old reader goes on reading the renamed, still open files.
        assert [r.offset for r in reader] == list(range(1, 9))
        assert log.delete_pending_files() == 0
        time.sleep(60_000)
        assert log.delete_pending_files() == 3
        assert not files(log, ".deleted")


def test_each_deleted_segment_reports_when_it_is_due(tmp_path: Path, time: MockTime) -> None:
    # The broker schedules Kafka's one-shot delete-file task from these reports.
    with make_log(tmp_path, time, [T0] * 9, retention_ms=HOUR, file_delete_delay_ms=60_000) as log:
        due: list[int] = []
        log.set_file_delete_listener(due.append)
        assert log.next_file_delete_ms is None
        assert log.delete_old_segments() == 3
        assert due == [time.milliseconds() + 60_000] * 3
        assert log.next_file_delete_ms == time.milliseconds() + 60_000
        time.sleep(60_000)
        assert log.delete_pending_files() == 3
        assert log.next_file_delete_ms is None


def test_close_removes_pending_deletes_and_reopen_finishes_leftovers(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0] * 9, retention_ms=HOUR) as log:
        log.delete_old_segments()
        directory = log.dir
    assert not list(directory.glob("*.deleted"))
    (directory / "00000000000000000003.log.deleted").write_bytes(b"left by a crash")
    with Log.open(directory, config(), time=time) as log:
        assert log.segments.base_offsets() == [9]
    assert not list(directory.glob("*.deleted"))


def test_producer_snapshots_of_deleted_segments_go_too(tmp_path: Path, time: MockTime) -> None:
    with make_log(tmp_path, time, [T0] * 9, retention_ms=HOUR) as log:
        assert files(log, ".snapshot") == ["00000000000000000003.snapshot", "00000000000000000006.snapshot"]
        time.sleep(0)
        log.maybe_increment_log_start_offset(6)
        log.delete_old_segments()
        assert files(log, ".snapshot") == ["00000000000000000009.snapshot"]


def test_retention_after_reopen_uses_the_time_index(tmp_path: Path, time: MockTime) -> None:
    """The final time-index entry written at roll/close carries a segment's max timestamp across
    restarts."""
    stamps = [T0, T0 + 8 * HOUR, T0, T0, T0, T0, T0 + 9 * HOUR]
    with make_log(tmp_path, time, stamps, retention_ms=5 * HOUR) as log:
        directory = log.dir
    with Log.open(directory, config(segment_bytes=3 * SIZE, retention_ms=5 * HOUR), time=time) as log:
        assert [s.max_timestamp_so_far for s in log.segments] == [T0 + 8 * HOUR, T0, T0 + 9 * HOUR]
        assert log.delete_old_segments() == 0  # the first segment is only 2 h old
        time.sleep(4 * HOUR)
        assert log.delete_old_segments() == 2


def test_delete_segments_takes_only_the_oldest_and_always_leaves_a_segment(
    tmp_path: Path, time: MockTime
) -> None:
    with make_log(tmp_path, time, [T0] * 9, retention_ms=-1) as log:
        first, second, third = list(log.segments)
        with pytest.raises(IllegalArgumentError, match="oldest segments"):
            log.delete_segments([second], "a test")
        assert log.segments.base_offsets() == [0, 3, 6]
        assert log.delete_segments([first], "a test") == 1
        assert (log.segments.base_offsets(), log.log_start_offset) == ([3, 6], 3)
        # All of them: an empty segment is rolled at the log end first, and the log starts there.
        assert log.delete_segments([second, third], "a test") == 2
        assert (log.segments.base_offsets(), log.log_start_offset, log.log_end_offset) == ([9], 9, 9)
        assert files(log, ".log.deleted") == [
            "00000000000000000000.log.deleted", "00000000000000000003.log.deleted",
            "00000000000000000006.log.deleted"]
