"""``LogToClean``: one compacted log and the range a cleaning would cover (Kafka's ``LogToClean``).

The *clean* part is below ``first_dirty_offset`` (already cleaned); the *cleanable* part runs from
there to ``first_uncleanable_offset``, the base offset of the segment holding the uncleanable
offset (the active segment, the last stable offset or the min.compaction.lag.ms bound). The
cleanable ratio — cleanable bytes over clean + cleanable bytes — is what
``min.cleanable.dirty.ratio`` is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalog.storage.log import Log

__all__ = ["LogToClean", "calculate_cleanable_bytes"]


def calculate_cleanable_bytes(log: Log, first_dirty_offset: int, uncleanable_offset: int) -> tuple[int, int]:
    """(first uncleanable offset, cleanable bytes): the first uncleanable offset is rounded down to
    the base offset of the segment holding it (the active segment if none other does)."""
    segments = log.segments
    non_active = segments.non_active_log_segments_from(uncleanable_offset)
    first_uncleanable = non_active[0] if non_active else segments.active_segment
    first_uncleanable_offset = first_uncleanable.base_offset
    start = min(first_dirty_offset, first_uncleanable_offset)
    cleanable = sum(s.size_in_bytes for s in segments.values(start, first_uncleanable_offset))
    return first_uncleanable_offset, cleanable


@dataclass(frozen=True, slots=True)
class LogToClean:
    topic: str
    partition: int
    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    needs_compaction_now: bool = False
    clean_bytes: int = field(init=False)
    first_uncleanable_offset: int = field(init=False)
    cleanable_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        segments = self.log.segments
        clean = sum(s.size_in_bytes for s in segments.values(-1, self.first_dirty_offset))
        first_uncleanable, cleanable = calculate_cleanable_bytes(
            self.log, self.first_dirty_offset, self.uncleanable_offset)
        object.__setattr__(self, "clean_bytes", clean)
        object.__setattr__(self, "first_uncleanable_offset", first_uncleanable)
        object.__setattr__(self, "cleanable_bytes", cleanable)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0
