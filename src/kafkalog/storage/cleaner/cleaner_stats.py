"""``CleanerStats``: what one cleaning of one log read, kept and dropped (Kafka's ``CleanerStats``,
plus why records were dropped, since dropped data is always reported)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalog.clock import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from kafkalog.storage.cleaner.offset_map import FilteredChunk, SkippedRun

__all__ = ["CleanerStats"]


@dataclass(slots=True)
class CleanerStats:
    time: Time = field(default=SYSTEM_TIME, repr=False)
    start_ms: int = -1
    map_complete_ms: int = -1
    end_ms: int = -1
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    messages_read: int = 0
    bytes_written: int = 0
    messages_written: int = 0
    segments_before: int = 0
    segments_after: int = 0
    buffer_utilization: float = 0.0
    # Why records went: superseded by a later record of the same key, tombstones past their delete
    # horizon, records of aborted transactions, keyless records (Kafka counts them as invalid),
    # and transaction markers no longer needed.
    superseded_removed: int = 0
    tombstones_removed: int = 0
    aborted_removed: int = 0
    invalid_removed: int = 0
    markers_removed: int = 0
    empty_batches_kept: int = 0

    def __post_init__(self) -> None:
        if self.start_ms < 0:
            self.start_ms = self.time.milliseconds()

    def index_done(self) -> None:
        self.map_complete_ms = self.time.milliseconds()

    def all_done(self) -> None:
        self.end_ms = self.time.milliseconds()

    @property
    def records_removed(self) -> int:
        return (self.superseded_removed + self.tombstones_removed + self.aborted_removed
                + self.invalid_removed + self.markers_removed)

    @property
    def elapsed_secs(self) -> float:
        end = self.end_ms if self.end_ms >= 0 else self.time.milliseconds()
        return (end - self.start_ms) / 1000

    def add_filtered(self, chunk: FilteredChunk) -> None:
        """Count what a C walk over whole batches read, kept and dropped."""
        self.bytes_read += chunk.consumed
        self.messages_read += chunk.messages_read
        self.messages_written += chunk.messages_written
        self.bytes_written += chunk.bytes_written
        self.superseded_removed += chunk.superseded
        self.tombstones_removed += chunk.tombstones
        self.invalid_removed += chunk.keyless

    def add_skipped(self, run: SkippedRun) -> None:
        """Count batches dropped whole from the map pass's directory: read (by the map pass), not kept."""
        self.bytes_read += run.consumed
        self.messages_read += run.records
        self.superseded_removed += run.superseded
        self.invalid_removed += run.keyless

    def add(self, other: CleanerStats) -> None:
        """Accumulate ``other`` (several rounds of one log, or several logs)."""
        for name in ("map_bytes_read", "map_messages_read", "bytes_read", "messages_read", "bytes_written",
                     "messages_written", "superseded_removed", "tombstones_removed", "aborted_removed",
                     "invalid_removed", "markers_removed", "empty_batches_kept"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.segments_before += other.segments_before
        self.segments_after += other.segments_after
        self.buffer_utilization = max(self.buffer_utilization, other.buffer_utilization)

    def describe(self) -> str:
        return (f"{self.bytes_read} bytes / {self.messages_read} records read, {self.bytes_written} bytes / "
                f"{self.messages_written} records kept; removed {self.superseded_removed} superseded, "
                f"{self.tombstones_removed} tombstones, {self.aborted_removed} aborted-transaction records, "
                f"{self.invalid_removed} keyless, {self.markers_removed} transaction markers; "
                f"{self.empty_batches_kept} emptied batches kept for producer state; "
                f"map {self.buffer_utilization:.1%} full")
