"""Helpers for the log cleaner tests: a compacted log, appends, and cleaning until nothing is dirty."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkalog.clock import MockTime, Time
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, Header, Record, SimpleRecord
from kafkalog.storage.cleaner.cleaner import Cleaner
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.log_cleaner_manager import LogCleanerManager
from kafkalog.storage.cleaner.offset_map import OffsetMap
from kafkalog.storage.cleaner.throttler import Throttler
from kafkalog.storage.log import FetchIsolation, Log
from tests.storage.conftest import config

Entry = tuple[bytes | None, bytes | None]  # (key, value)


def compacted_log(tmp_path: Path, time: Time | None = None, **props: object) -> Log:
    props.setdefault("cleanup_policy", "compact")
    return Log.open(tmp_path / "topic-0", config(**props), time=time or MockTime())


def append(log: Log, entries: list[Entry], *, codec: CompressionType = CompressionType.NONE,
           headers: tuple[Header, ...] = ()) -> None:
    """One batch holding ``entries`` at the log's current time."""
    now = log.time.milliseconds()
    log.append_as_leader(MemoryRecords.with_records(
        2, codec, [SimpleRecord(v, k, now, headers) for k, v in entries]))


def clean(log: Log, memory: int = 24 * 10_000, *, max_rounds: int = 1000, offset_map: OffsetMap | None = None,
          io_buffer_size: int = 4096, check_done: Callable[[str], None] = lambda name: None,
          throttler: Throttler | None = None) -> tuple[int, CleanerStats]:
    """Clean ``log`` round after round (as ``kafkalog compact`` does) until nothing cleanable is dirty.
    Returns (rounds, summed stats)."""
    logs = {(log.topic, log.partition): log}
    manager = LogCleanerManager(log.dir.parent, lambda: logs, time=log.time)
    if offset_map is None:  # (not `offset_map or ...`: an empty map has a length, 0, and is falsy)
        offset_map = OffsetMap(memory)
    cleaner = Cleaner(offset_map, io_buffer_size=io_buffer_size, time=log.time, check_done=check_done,
                      throttler=throttler)
    total = CleanerStats(log.time)
    rounds = 0
    tp = (log.topic, log.partition)
    while rounds < max_rounds:
        ltc = manager.log_to_clean(tp, force=True)
        if ltc is None:
            return rounds, total
        end = None
        try:
            end, stats = cleaner.clean(ltc)
        finally:
            manager.done_cleaning(tp, end)
        total.add(stats)
        rounds += 1
    raise AssertionError(f"cleaning did not finish in {max_rounds} rounds")


def all_records(log: Log) -> list[Record]:
    return list(log.records(log.log_start_offset, isolation=FetchIsolation.LOG_END))
