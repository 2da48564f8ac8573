"""The Spark source's only door into storage: a read-only view of one data directory.

Planning (driver) needs topics, partitions, the earliest/latest offsets of each partition, the
answer of the time index to "first offset with timestamp >= T" and batch boundaries to split
ranges at; executors need the batches of one partition. All of it goes through
``kafkalog.storage`` (``LogManager``/``Log``) opened read-only, so a writer in another process
(a broker-like ``LogManager`` or a Spark write task) is never disturbed, and nothing here reads a
``.log`` file or parses bytes by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalog.errors import UnknownTopicOrPartitionError
from kafkalog.spark.options import Subscription, TopicPartition

if TYPE_CHECKING:
    from kafkalog.storage.log import Log

__all__ = ["TopicCatalog", "open_partition"]


def _log_manager(path: str):  # -> LogManager
    from kafkalog.storage.log_manager import LogManager

    return LogManager(Path(path), read_only=True)


def open_partition(path: str, topic: str, partition: int) -> tuple[Log, object]:
    """One partition opened read-only, and the object to close when done."""
    lm = _log_manager(path)
    try:
        log = lm.get_log(topic, partition)
    except Exception:
        lm.close()
        raise
    return log, lm


class TopicCatalog:
    """Read-only metadata of the topics in one data directory (a context manager)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lm = _log_manager(path)
        self._logs: dict[TopicPartition, Log] = {}

    def __enter__(self) -> TopicCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with suppress(Exception):
            self._lm.close()

    # --- topics and partitions -----------------------------------------------------------------

    def topics(self) -> list[str]:
        return sorted(self._lm.topics())

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._lm.partitions(topic))

    def topic_partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The existing topic-partitions a subscription covers, sorted.

        ``subscribe``/``subscribePattern`` of a topic that does not exist yields nothing (as a Kafka
        consumer subscribing to it would see); ``assign`` of a missing partition is an error.
        """
        if subscription.kind == "assign":
            existing = {t: set(self.partitions(t)) for t in {t for t, _ in subscription.assigned}
                        if t in self.topics()}
            for t, p in subscription.assigned:
                if p not in existing.get(t, ()):
                    raise UnknownTopicOrPartitionError(
                        f"kafkalog option 'assign': topic-partition {t}-{p} does not exist in {self.path}"
                    )
            return sorted(subscription.assigned)
        return [(t, p) for t in self.topics() if subscription.matches(t) for p in self.partitions(t)]

    def log(self, tp: TopicPartition) -> Log:
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = self._lm.get_log(*tp)
        return log

    # --- offsets -------------------------------------------------------------------------------

    def earliest(self, tp: TopicPartition) -> int:
        return self.log(tp).log_start_offset

    def latest(self, tp: TopicPartition, read_committed: bool) -> int:
        """Kafka's ListOffsets(LATEST): the high watermark, or the last stable offset under
        read_committed (an open transaction's records are not visible yet)."""
        log = self.log(tp)
        return log.last_stable_offset if read_committed else log.high_watermark

    def offset_for_timestamp(self, tp: TopicPartition, timestamp: int) -> int | None:
        """Kafka's ListOffsets(timestamp): the first offset whose record timestamp is >= ``timestamp``."""
        found = self.log(tp).offset_for_timestamp(timestamp)
        return None if found is None else found.offset

    def batch_boundary(self, tp: TopicPartition, offset: int) -> int:
        """A batch boundary at or before ``offset + 1`` found through the segment list and the
        sparse offset index (no data read): splitting a range there lets each task decode whole
        batches, instead of both neighbours decompressing the batch that straddles the split."""
        segment = self.log(tp).segments.floor_segment(offset)
        if segment is None:
            return offset
        entry = segment.offset_index.lookup(offset)
        if entry.position == 0:
            # No entry at or below the offset: the segment's start is the nearest boundary.
            return segment.base_offset
        # The entry says an append ended at entry.offset, so the next batch starts after it.
        return entry.offset + 1


def iter_batches(log: Log, start: int, end: int, read_committed: bool) -> Iterator:
    """Whole batches overlapping [start, end) (the Log decides what is visible)."""
    from kafkalog.storage.log import FetchIsolation

    isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
    return log.batches(start, end, isolation=isolation)
