"""``compact_logs``: clean compacted logs now, in the calling thread, until nothing cleanable is dirty
(what ``kafkalog compact`` runs; a broker uses the background :class:`LogCleaner` instead).

Unlike the background cleaner, this ignores ``min.cleanable.dirty.ratio`` (it was asked for), but
everything else is the cleaner's: the active segment, the last stable offset and
``min.compaction.lag.ms`` bound what is cleaned, progress goes to ``cleaner-offset-checkpoint``, and
the offset map has a fixed size — a log with more keys than fit is cleaned in several rounds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.storage.cleaner.cleaner import Cleaner
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.log_cleaner_manager import LogCleanerManager
from kafkalog.storage.cleaner.offset_map import OffsetMap

if TYPE_CHECKING:
    from kafkalog.storage.log_manager import LogManager

__all__ = ["CompactionResult", "compact_logs"]

log = logging.getLogger(__name__)

# (partitions done, partitions in all, rounds of the current partition)
ProgressCallback = Callable[[int, int, int], None]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    topic: str
    partition: int
    rounds: int
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    stats: CleanerStats
    # Where the active segment starts, and the log end: the records between them are never cleaned
    # until the segment rolls (segment.bytes, segment.ms).
    active_base_offset: int = 0
    log_end_offset: int = 0

    def to_json(self) -> dict[str, object]:
        s = self.stats
        return {
            "topic": self.topic, "partition": self.partition, "rounds": self.rounds,
            "segmentsBefore": self.segments_before, "segmentsAfter": self.segments_after,
            "bytesBefore": self.bytes_before, "bytesAfter": self.bytes_after,
            "recordsRead": s.messages_read, "recordsKept": s.messages_written,
            "recordsRemoved": s.records_removed, "supersededRemoved": s.superseded_removed,
            "tombstonesRemoved": s.tombstones_removed, "abortedRemoved": s.aborted_removed,
            "keylessRemoved": s.invalid_removed, "markersRemoved": s.markers_removed,
            "activeSegmentBaseOffset": self.active_base_offset, "logEndOffset": self.log_end_offset,
        }


def compact_logs(manager: LogManager, topic: str | None = None, *, config: CleanerConfig | None = None,
                 offset_map: OffsetMap | None = None, progress: ProgressCallback | None = None,
                 max_rounds: int = 10_000) -> list[CompactionResult]:
    """Clean every compacted partition (of ``topic``, if given) until nothing cleanable is left dirty."""
    config = config if config is not None else CleanerConfig()
    if manager.read_only:
        raise KafkaStorageError(f"Cannot compact: data directory {manager.data_dir} is opened read-only")
    if topic is not None:
        if not manager.topic_config(topic).compact:
            raise InvalidConfigError(f"Topic {topic} is not compacted (cleanup.policy="
                                     f"{','.join(manager.topic_config(topic).cleanup_policy)})")
        targets = [manager.get_log(topic, p) for p in manager.partitions(topic)]
    else:
        targets = [p for p in manager.logs() if p.config.compact]
    if manager.cleaner is not None:
        raise KafkaStorageError("The background log cleaner is running on this data directory")
    # Every log of the directory is live for the checkpoint (its entries for other topics stay).
    live = {(p.topic, p.partition): p for p in manager.logs()}
    cleaner_manager = LogCleanerManager(manager.data_dir, lambda: live, time=manager.time)
    cleaner = Cleaner(offset_map if offset_map is not None else OffsetMap(config.map_memory_per_thread),
                      io_buffer_size=config.io_buffer_size,
                      dup_buffer_load_factor=config.dedupe_buffer_load_factor, time=manager.time,
                      throttler=config.throttler(time=manager.time))
    results = []
    for done, target in enumerate(targets):
        tp = (target.topic, target.partition)
        segments_before, bytes_before = len(target.segments), target.size_in_bytes
        total = CleanerStats(manager.time)
        rounds = 0
        while rounds < max_rounds:
            if progress is not None:
                progress(done, len(targets), rounds)
            cleanable = cleaner_manager.log_to_clean(tp, force=True)
            if cleanable is None:
                break
            end_offset: int | None = None
            try:
                end_offset, stats = cleaner.clean(cleanable)
            finally:
                cleaner_manager.done_cleaning(tp, end_offset)
            total.add(stats)
            rounds += 1
        total.all_done()
        results.append(CompactionResult(target.topic, target.partition, rounds, segments_before,
                                        len(target.segments), bytes_before, target.size_in_bytes, total,
                                        target.active_segment.base_offset, target.log_end_offset))
    if progress is not None:
        progress(len(targets), len(targets), 0)
    return results
