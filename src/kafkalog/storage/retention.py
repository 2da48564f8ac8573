"""Retention: which whole segments may go (Kafka's UnifiedLog.deleteOldSegments, spec §10).

Segments are examined oldest first and the scan stops at the first one that must stay, so a log
only ever loses a prefix. This module only decides; ``Log.delete_segments`` carries it out (and
keeps the log from ever being left without a segment).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalog.storage.log_segment import LogSegment

if TYPE_CHECKING:
    from kafkalog.storage.log import Log

Predicate = Callable[[LogSegment, LogSegment | None], bool]


def delete_old_segments(log: Log, *, log_start_offset_only: bool = False) -> int:
    """Apply the log-start-offset, time and size rules; returns how many segments were deleted.

    ``log_start_offset_only`` applies just the first (what DeleteRecords needs).
    """
    config = log.config
    deleted = _delete_matching(log, _log_start_offset_breach(log), "log start offset breach")
    if config.delete and not log_start_offset_only:
        # Kafka's order: size before time (each pass sees what the previous one left).
        deleted += _delete_matching(log, _retention_size_breach(log), "retention size breach")
        deleted += _delete_matching(log, _retention_ms_breach(log), "retention time breach")
    return deleted


def _log_start_offset_breach(log: Log) -> Predicate:
    def breach(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= log.log_start_offset
    return breach


def _retention_ms_breach(log: Log) -> Predicate:
    retention_ms = log.config.retention_ms
    now = log.time.milliseconds()

    def breach(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return retention_ms >= 0 and now - segment.largest_timestamp > retention_ms
    return breach


def _retention_size_breach(log: Log) -> Predicate:
    retention_bytes = log.config.retention_bytes
    size = log.size_in_bytes
    diff = size - retention_bytes

    def breach(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        nonlocal diff
        if retention_bytes < 0 or size < retention_bytes or diff - segment.size_in_bytes < 0:
            return False
        diff -= segment.size_in_bytes
        return True
    return breach


def _deletable_segments(log: Log, predicate: Predicate) -> list[LogSegment]:
    segments = list(log.segments)
    high_watermark = log.high_watermark
    chosen: list[LogSegment] = []
    for i, segment in enumerate(segments):
        next_segment = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = next_segment.base_offset if next_segment is not None else log.log_end_offset
        is_last_and_empty = next_segment is None and segment.size_in_bytes == 0
        if high_watermark >= upper_bound and predicate(segment, next_segment) and not is_last_and_empty:
            chosen.append(segment)
        else:
            break
    return chosen


def _delete_matching(log: Log, predicate: Predicate, reason: str) -> int:
    deletable = _deletable_segments(log, predicate)
    return log.delete_segments(deletable, reason) if deletable else 0
