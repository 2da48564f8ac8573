"""Which logs the cleaner picks and how far (LogCleanerManager: dirty ratio, min/max compaction lag,
last stable offset, checkpoints), and the background LogCleaner started by LogManager: it cleans,
checkpoints, runs retention of compact,delete logs, aborts for a topic deletion and stops bounded."""

from __future__ import annotations

import time as _time
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import InvalidConfigError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.cleaner.log_cleaner_manager import (
    LogCleanerManager,
    LogCleaningState,
    cleanable_offsets,
)
from kafkalog.storage.log import Log
from kafkalog.storage.log_manager import LogManager
from tests.storage._cleaning import all_records, append, compacted_log

HOUR = 3600 * 1000


def fill(log: Log, n: int, keys: int, *, roll_every: int = 0) -> None:
    for i in range(n):
        append(log, [(f"k{i % keys}".encode(), f"v{i}".encode())])
        if roll_every and i % roll_every == roll_every - 1:
            log.roll()


def manager_for(*logs: Log) -> LogCleanerManager:
    by_tp = {(log.topic, log.partition): log for log in logs}
    return LogCleanerManager(logs[0].dir.parent, lambda: by_tp, time=logs[0].time)


def test_the_filthiest_log_above_the_dirty_ratio_is_chosen(tmp_path: Path) -> None:
    time = MockTime()
    a = Log.open(tmp_path / "a-0", compacted_log(tmp_path / "x", time=time).config, time=time)
    b = Log.open(tmp_path / "b-0", a.config, time=time)
    fill(a, 40, 4, roll_every=10)
    fill(b, 40, 4, roll_every=20)
    manager = manager_for(a, b)
    # Everything is dirty in both; a has 3 of its 4 segments cleanable (ratio 1.0 too): ties keep one.
    first = manager.grab_filthiest_compacted_log()
    assert first is not None and first.cleanable_ratio == 1.0
    assert manager.cleaning_state((first.topic, 0)) is LogCleaningState.IN_PROGRESS
    second = manager.grab_filthiest_compacted_log()
    assert second is not None and second.topic != first.topic
    assert manager.grab_filthiest_compacted_log() is None  # both in progress
    manager.done_cleaning((first.topic, 0), first.first_uncleanable_offset)
    manager.done_cleaning((second.topic, 0), None)
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read() == {
        (first.topic, 0): first.first_uncleanable_offset}
    # The checkpointed log's dirty ratio is now 0: only the other is picked, then neither.
    again = manager.grab_filthiest_compacted_log()
    assert again is not None and again.topic == second.topic
    assert manager.grab_filthiest_compacted_log() is None
    a.close()
    b.close()


def test_min_cleanable_dirty_ratio_and_max_compaction_lag(tmp_path: Path) -> None:
    time = MockTime()
    log = compacted_log(tmp_path, time=time, min_cleanable_dirty_ratio="0.9",
                        max_compaction_lag_ms=str(HOUR))
    fill(log, 30, 3, roll_every=10)
    manager = manager_for(log)
    manager.update_checkpoints(update=(("topic", 0), 10))
    # 1 clean segment, 2 cleanable ones: a ratio of 2/3 < 0.9, and nothing is older than the max lag.
    assert manager.grab_filthiest_compacted_log() is None
    time.sleep(HOUR + 1)
    chosen = manager.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.needs_compaction_now and 0.6 < chosen.cleanable_ratio < 0.9
    log.close()


def test_cleanable_offsets_respect_lag_last_stable_offset_and_checkpoint(tmp_path: Path) -> None:
    time = MockTime()
    log = compacted_log(tmp_path, time=time, min_compaction_lag_ms=str(HOUR))
    fill(log, 20, 2, roll_every=10)          # segments 0 and 10, written at t0
    time.sleep(2 * HOUR)
    fill(log, 10, 2, roll_every=10)          # segment 20, written two hours later
    now = time.milliseconds()
    # Records younger than min.compaction.lag.ms are not cleaned: segment 20 is not, yet ...
    assert cleanable_offsets(log, None, now).first_uncleanable_dirty_offset == 20
    # ... an hour later it is; the active segment never is.
    assert cleanable_offsets(log, None, now + HOUR).first_uncleanable_dirty_offset == 30
    # A checkpoint below the log start offset or past the end is reset to the log start offset.
    log.maybe_increment_log_start_offset(5)
    reset = cleanable_offsets(log, 2, now)
    assert (reset.first_dirty_offset, reset.force_update_checkpoint) == (5, True)
    assert cleanable_offsets(log, 999, now).first_dirty_offset == 5
    assert cleanable_offsets(log, 12, now).first_dirty_offset == 12
    # An open transaction bounds the cleanable range at the last stable offset.
    log.append_as_leader(MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"v", b"t", now)], producer_id=3, producer_epoch=0,
        base_sequence=0, is_transactional=True))
    log.roll()
    fill(log, 5, 2)
    log.roll()
    assert log.last_stable_offset == 30
    assert cleanable_offsets(log, None, now + HOUR).first_uncleanable_dirty_offset == 30
    log.close()


def test_cleaner_config() -> None:
    assert CleanerConfig().map_memory_per_thread == 128 * 1024 * 1024
    config = CleanerConfig.from_broker_props({"log.cleaner.threads": "2", "log.cleaner.backoff.ms": "10",
                                              "log.cleaner.dedupe.buffer.size": str(4 << 20)})
    assert (config.num_threads, config.backoff_ms, config.map_memory_per_thread) == (2, 10, 2 << 20)
    with pytest.raises(InvalidConfigError, match="1MB per cleaner thread"):
        CleanerConfig(num_threads=4, dedupe_buffer_size=2 << 20)
    with pytest.raises(InvalidConfigError):
        CleanerConfig.from_broker_props({"log.cleaner.enable": "maybe"})
    assert not CleanerConfig.from_broker_props({"log.cleaner.enable": "false"}).enable_cleaner
    # Read as Kafka's ConfigDef reads them: Java's parseInt and trim, not Python's int()
    assert CleanerConfig.from_broker_props({"log.cleaner.threads": " 2\t"}).num_threads == 2
    for bad in ("1_000", "\u0663", "2.0"):
        with pytest.raises(InvalidConfigError, match="Not a number of type INT"):
            CleanerConfig.from_broker_props({"log.cleaner.threads": bad})


def _wait(condition, what: str, timeout: float = 20.0) -> None:
    deadline = _time.monotonic() + timeout
    while not condition():
        if _time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        _time.sleep(0.02)


def test_log_manager_runs_the_cleaner_in_the_background(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LogManager(data) as lm:
        (state,) = lm.create_topic("state", 1, {"cleanup.policy": "compact", "segment.bytes": "1500"})
        (both,) = lm.create_topic("both", 1, {"cleanup.policy": "compact,delete", "segment.bytes": "1500",
                                              "retention.bytes": "3000", "file.delete.delay.ms": "0"})
        (plain,) = lm.create_topic("plain", 1, {"segment.bytes": "1500"})
        for target in (state, both, plain):
            fill(target, 300, 5)
        # Two threads (log.cleaner.threads), each with half of the dedupe buffer.
        cleaner = lm.start_cleaner(CleanerConfig(num_threads=2, backoff_ms=20, dedupe_buffer_size=2 << 20))
        assert cleaner is not None and lm.start_cleaner() is cleaner
        assert [t.cleaner.offset_map.memory for t in cleaner.threads] == [(1 << 20) // 24 * 24] * 2
        _wait(lambda: len(all_records(state)) < 300, "cleaning")
        _wait(lambda: both.size_in_bytes <= 3000 + 1500, "compact,delete retention by the cleaner")
        assert len(all_records(plain)) == 300  # not compacted
        _wait(lambda: ("state", 0) in OffsetCheckpointFile(data / CLEANER_OFFSET_CHECKPOINT_FILE).read(),
              "the cleaner checkpoint")
        # Deleting a topic aborts and pauses its cleaning first; its checkpoint entry goes.
        lm.delete_topic("state")
        _wait(lambda: ("state", 0) not in OffsetCheckpointFile(data / CLEANER_OFFSET_CHECKPOINT_FILE).read(),
              "the checkpoint entry of a deleted topic to go")
        threads = [t.thread for t in cleaner.threads]
        started = _time.monotonic()
    # Closing the manager stops the cleaner threads, bounded.
    assert not any(t.is_alive() for t in threads)
    assert _time.monotonic() - started < 10
    with LogManager(data) as lm:
        assert lm.start_cleaner(CleanerConfig(enable_cleaner=False)) is None


def test_a_cleaner_thread_makes_its_offset_map_only_once_it_has_a_log_to_clean(tmp_path: Path) -> None:
    with LogManager(tmp_path / "data") as lm:
        (plain,) = lm.create_topic("plain", 1, {"segment.bytes": "1500"})
        fill(plain, 100, 5)
        cleaner = lm.start_cleaner(CleanerConfig(backoff_ms=10, dedupe_buffer_size=4 << 20))
        assert cleaner is not None
        (thread,) = cleaner.threads
        _time.sleep(0.2)  # twenty rounds with nothing to compact
        assert not thread.has_cleaner
        (state,) = lm.create_topic("state", 1, {"cleanup.policy": "compact", "segment.bytes": "1500"})
        fill(state, 300, 5)
        _wait(lambda: len(all_records(state)) < 300, "cleaning")
        assert thread.has_cleaner and thread.cleaner.offset_map.memory == (4 << 20) // 24 * 24


def test_a_partition_that_fails_to_clean_is_marked_uncleanable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LogManager(data) as lm:
        (state,) = lm.create_topic("state", 1, {"cleanup.policy": "compact", "segment.bytes": "1500"})
        (other,) = lm.create_topic("other", 1, {"cleanup.policy": "compact", "segment.bytes": "1500"})
        fill(state, 100, 5)
        fill(other, 100, 5)
        first = state.segments.first_segment
        assert first is not None
        with open(first.log.path, "r+b") as f:  # flip a byte inside the first batch: a CRC mismatch
            f.seek(70)
            byte = f.read(1)
            f.seek(70)
            f.write(bytes([byte[0] ^ 0xFF]))
        cleaner = lm.start_cleaner(CleanerConfig(backoff_ms=20, dedupe_buffer_size=1 << 20))
        assert cleaner is not None
        _wait(lambda: ("state", 0) in cleaner.manager.uncleanable_partitions, "state marked uncleanable")
        _wait(lambda: len(all_records(other)) < 100, "the other partition to be cleaned all the same")


def test_compacting_one_topic_keeps_the_checkpoint_of_the_others(tmp_path: Path) -> None:
    from kafkalog.storage.cleaner.compact import compact_logs

    with LogManager(tmp_path / "data") as lm:
        for topic in ("a", "b"):
            (log,) = lm.create_topic(topic, 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
            fill(log, 60, 3)
        compact_logs(lm, "a")
        compact_logs(lm, "b")
        checkpoint = OffsetCheckpointFile(tmp_path / "data" / CLEANER_OFFSET_CHECKPOINT_FILE).read()
        assert set(checkpoint) == {("a", 0), ("b", 0)}
        assert checkpoint[("a", 0)] == lm.get_log("a", 0).active_segment.base_offset


def test_each_pause_needs_its_own_resume(tmp_path: Path) -> None:
    """Kafka counts pauses (LogCleaningPaused(count)): a partition paused twice stays paused until
    it has been resumed twice."""
    log = compacted_log(tmp_path)
    for i in range(20):
        append(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    log.roll()
    tp = (log.topic, log.partition)
    manager = LogCleanerManager(log.dir.parent, lambda: {tp: log}, time=log.time)
    manager.abort_and_pause_cleaning(tp)
    manager.abort_and_pause_cleaning(tp)
    manager.resume_cleaning(tp)
    assert manager.cleaning_state(tp) is LogCleaningState.PAUSED
    assert manager.log_to_clean(tp, force=True) is None
    manager.resume_cleaning(tp)
    assert manager.cleaning_state(tp) is None
    assert manager.log_to_clean(tp, force=True) is not None
    log.close()
