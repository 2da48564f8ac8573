"""A read-only log (a reader in another process: Spark, ``kafkalog consume``) whose segments a writer
replaces or deletes after the reader opened them: the cleaner's swap, retention. Indexes are read
lazily, so a reader could pair a new index with the old data it holds open; it must notice and go
on with what is on disk now, never return a wrong batch or fail."""

from __future__ import annotations

import random
from pathlib import Path

from kafkalog.clock import MockTime
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.storage.cleaner.cleaner import Cleaner
from kafkalog.storage.cleaner.log_to_clean import LogToClean
from kafkalog.storage.cleaner.offset_map import OffsetMap
from kafkalog.storage.log import FetchIsolation, Log
from tests.storage.conftest import config

KEYS = 150
PROPS = {"cleanup_policy": "compact", "segment_bytes": 30000, "index_interval_bytes": 64,
         "file_delete_delay_ms": 0}


def _writer(directory: Path, time: MockTime) -> Log:
    log = Log.open(directory, config(**PROPS), time=time)
    rng = random.Random(4)
    for _ in range(400):
        # Batches of different sizes: positions in a cleaned file fall inside batches of the old one.
        records = [SimpleRecord(rng.randbytes(rng.randrange(1, 120)), b"k%d" % rng.randrange(KEYS),
                                time.milliseconds()) for _ in range(rng.randrange(1, 4))]
        log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, records))
        time.sleep(10)
    log.roll()
    return log


def _view(log: Log, start: int) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in log.records(start, isolation=FetchIsolation.LOG_END)][:5]


def test_a_reader_goes_on_after_the_cleaner_swapped_its_segments(tmp_path: Path) -> None:
    time = MockTime()
    directory = tmp_path / "t-0"
    writer = _writer(directory, time)
    end = writer.log_end_offset
    reader = Log.open(directory, config(**PROPS), read_only=True)
    try:
        Cleaner(OffsetMap(24 * 1000), io_buffer_size=1024, time=time).clean(  # many index entries
            LogToClean("t", 0, writer, 0, writer.active_segment.base_offset))
        writer.delete_pending_files(force=True)
        fresh = Log.open(directory, config(**PROPS), read_only=True)
        try:
            for start in range(0, end, 13):
                assert _view(reader, start) == _view(fresh, start), start
            middle = time.milliseconds() - 2000
            assert reader.offset_for_timestamp(middle) == fresh.offset_for_timestamp(middle)
            assert reader.collect_aborted_transactions(0, end) == fresh.collect_aborted_transactions(0, end)
        finally:
            fresh.close()
        assert reader.log_end_offset == end
    finally:
        reader.close()
        writer.close()


def test_a_reader_goes_on_after_retention_deleted_its_first_segments(tmp_path: Path) -> None:
    time = MockTime()
    directory = tmp_path / "t-0"
    writer = _writer(directory, time)
    reader = Log.open(directory, config(**PROPS), read_only=True)
    try:
        assert reader.log_start_offset == 0
        first_kept = writer.segments.base_offsets()[2]
        writer.maybe_increment_log_start_offset(first_kept)  # (DeleteRecords refuses a compacted log)
        writer.delete_old_segments()
        writer.delete_pending_files(force=True)
        assert not (directory / "00000000000000000000.log").exists()
        got = _view(reader, 0)
        assert got[0][0] == first_kept  # from the new log start, as a consumer would after retention
        assert reader.log_start_offset == first_kept
    finally:
        reader.close()
        writer.close()
