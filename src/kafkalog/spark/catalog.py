"""The Spark source's only door into storage: a read-only view of one data directory.

Planning (driver) needs topics, partitions, the earliest/latest offsets of each partition, the
answer of the time index to "first offset with timestamp >= T" and batch boundaries to split
ranges at; executors need the visible batches of one partition (``Log.visible_batches``). All of
it goes through ``kafkalog.storage`` (``partition_dirs.list_topic_partitions``,
``read_only_partition.open_partition_read_only``), so a writer in another process is never
disturbed, and nothing here reads a ``.log`` file, a checkpoint, parses bytes or a directory name
by itself.

Only the partitions a query touches are opened (a read-only ``LogManager`` would open every
partition of every topic in the directory, for each task).

The data directory may be any filesystem ``storage.filesystem`` resolves (``s3://bucket/prefix``
with ``s3.*`` options, ...): this module only passes the path and options on; the storage layer
reads through the filesystem it gets.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalog.errors import UnknownTopicOrPartitionError
from kafkalog.spark.options import Subscription, TopicPartition
from kafkalog.storage.filesystem import FileSystem, resolve_filesystem
from kafkalog.storage.read_only_partition import DataDirFiles, open_partition_read_only

if TYPE_CHECKING:
    from kafkalog.storage.log import Log

__all__ = ["TopicCatalog", "data_location", "open_partition"]

log = logging.getLogger(__name__)


def data_location(path: str, fs_options: Mapping[str, str] | tuple[tuple[str, str], ...] = ()
                  ) -> tuple[FileSystem, Path]:
    """The filesystem (a new one, with its own fetch counters) and root of a data directory URI."""
    return resolve_filesystem(path, dict(fs_options))


def open_partition(path: str, topic: str, partition: int, *, files: DataDirFiles | None = None,
                   fs: FileSystem | None = None, root: Path | None = None) -> Log:
    """One partition opened read-only by storage's rules (``storage.read_only_partition``);
    ``fs``/``root`` are ``path``'s ``data_location`` (default: resolved from ``path``)."""
    if fs is None or root is None:
        fs, root = data_location(path)
    try:
        return open_partition_read_only(fs, root, topic, partition, files)
    except UnknownTopicOrPartitionError:  # named by the path the user gave
        raise UnknownTopicOrPartitionError(
            f"Partition {topic}-{partition} does not exist in {path}") from None


class TopicCatalog:
    """Read-only metadata of the topics in one data directory (a context manager)."""

    def __init__(self, path: str, fs_options: Mapping[str, str] | tuple[tuple[str, str], ...] = (), *,
                 location: tuple[FileSystem, Path] | None = None) -> None:
        self.path = path
        from kafkalog.storage.partition_dirs import list_topic_partitions

        # ``location``: an existing data_location of ``path`` (to share its fetch counters).
        self.fs, self._root = location or data_location(path, fs_options)
        self._layout = list_topic_partitions(self._root, fs=self.fs)
        self._logs: dict[TopicPartition, Log] = {}
        self._files: DataDirFiles | None = None
        # One answer per partition for the catalog's life (a planning): ranges planned from one
        # snapshot, and no rescan of each active segment's tail for every question.
        self._latest: dict[tuple[TopicPartition, bool], int] = {}

    def __enter__(self) -> TopicCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for log in self._logs.values():
            with suppress(Exception):
                log.close()
        self._logs.clear()

    # --- topics and partitions -----------------------------------------------------------------

    def topics(self) -> list[str]:
        return list(self._layout)

    def partitions(self, topic: str) -> list[int]:
        return list(self._layout.get(topic, ()))

    def topic_partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The existing topic-partitions a subscription covers, sorted.

        ``subscribe``/``subscribePattern`` of a topic that does not exist yields nothing (as a Kafka
        consumer subscribing to it would see). ``assign`` is Spark's ``AssignStrategy``: the named
        partitions that exist (a missing one is skipped, with a warning: it may be created later),
        and a topic that does not exist is an error (Spark's admin client fails to describe it).
        Kafka's internal topics (``__consumer_offsets`` ...) are never read, as Spark drops them
        from every subscription; naming one gets a warning.
        """
        named = (subscription.topics if subscription.kind == "subscribe"
                 else tuple(dict.fromkeys(t for t, _ in subscription.assigned)))
        internal = [t for t in named if not subscription.matches(t) and t in self._layout]
        if internal:
            log.warning("kafkalog: %s not read: Kafka's internal topics are left out of every "
                        "subscription, as Spark's Kafka source leaves them out",
                        ", ".join(repr(t) for t in internal))
        if subscription.kind == "assign":
            for t in named:
                if t not in self._layout:
                    raise UnknownTopicOrPartitionError(
                        f"kafkalog option 'assign': topic {t!r} does not exist in {self.path}")
            missing = [(t, p) for t, p in subscription.assigned if p not in self._layout[t]]
            if missing:
                log.warning("kafkalog option 'assign': %s %s not exist in %s; skipped",
                            ", ".join(f"{t}-{p}" for t, p in missing),
                            "does" if len(missing) == 1 else "do", self.path)
            return sorted(tp for tp in subscription.assigned
                          if tp not in missing and subscription.matches(tp[0]))
        return [(t, p) for t, ps in self._layout.items() if subscription.matches(t) for p in ps]

    def log(self, tp: TopicPartition) -> Log:
        log = self._logs.get(tp)
        if log is None:
            if self._files is None:
                self._files = DataDirFiles.read(self.fs, self._root)
            log = self._logs[tp] = open_partition(self.path, *tp, files=self._files,
                                                  fs=self.fs, root=self._root)
        return log

    # --- offsets -------------------------------------------------------------------------------

    def earliest(self, tp: TopicPartition) -> int:
        return self.log(tp).log_start_offset

    def latest(self, tp: TopicPartition, read_committed: bool) -> int:
        """Kafka's ListOffsets(LATEST): the high watermark, or the last stable offset under
        read_committed (an open transaction's records are not visible yet). Asked again through
        this catalog, the first answer."""
        found = self._latest.get((tp, read_committed))
        if found is None:
            log = self.log(tp)
            found = self._latest[(tp, read_committed)] = (
                log.last_stable_offset if read_committed else log.high_watermark)
        return found

    def offset_for_timestamp(self, tp: TopicPartition, timestamp: int,
                             read_committed: bool = False) -> int | None:
        """What Kafka's ListOffsets(timestamp) answers Spark's offset reader: the first offset whose
        record timestamp is >= ``timestamp``, or one of the special timestamps (-1 latest, -2
        earliest, -3 the largest timestamp ...); None for "no offset", which includes an answer at or
        past ``latest`` (not visible yet) and Kafka's offset -1."""
        found = self.log(tp).fetch_offset_for_timestamp(timestamp, self.latest(tp, read_committed))
        return None if found is None or found.offset < 0 else found.offset

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
