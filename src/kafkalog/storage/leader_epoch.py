"""The leader-epoch cache: which leader epoch started at which offset (``leader-epoch-checkpoint``)."""

from __future__ import annotations

import bisect
import logging
import threading
from pathlib import Path

from kafkalog.errors import IllegalArgumentError, KafkaStorageError
from kafkalog.storage.checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry, LeaderEpochCheckpointFile
from kafkalog.storage.filesystem import FileSystem

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """(epoch, start offset) entries, epochs and offsets both increasing, persisted in Kafka's format.

    As Kafka's ``LeaderEpochFileCache``: a writer creates the file empty when it is missing, and
    writes it only when the entries change; the entries read are replayed through :meth:`assign`,
    so a file whose epochs or offsets do not increase loads as ``assign`` would have left it."""

    def __init__(self, partition_dir: Path, *, read_only: bool = False, fs: FileSystem | None = None) -> None:
        # A reader reads the file through a filesystem (which may be remote); the writer, locally.
        self._file = LeaderEpochCheckpointFile(Path(partition_dir) / LEADER_EPOCH_CHECKPOINT_FILE,
                                               fs=fs if read_only else None)
        self._lock = threading.Lock()
        self._read_only = read_only
        self._entries: list[EpochEntry] = []
        self._dirty = False
        if not read_only:
            self._file.create_if_missing()  # as Kafka's CheckpointFile: empty, read as no entries
        try:
            read = self._file.read()
        except KafkaStorageError:
            if not read_only:
                raise
            # A reader in another process only uses epochs as hints: an unreadable file means none.
            read = []
        for entry in read:
            self._assign(entry.epoch, entry.start_offset)
        # The replay leaves the file as it is, as Kafka's does: it is rewritten at the next change.
        self._dirty = False

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``assign``): nothing changes
        when it is the latest epoch and starts no earlier; otherwise the entries from the end that
        conflict with it (an epoch at or above it, or a start offset at or after its own) go, and
        it becomes the latest entry."""
        if epoch < 0 or start_offset < 0:
            raise IllegalArgumentError(
                f"Received invalid partition leader epoch entry (epoch {epoch}, start offset {start_offset}) "
                f"for {self._file.path}")
        with self._lock:
            self._assign(epoch, start_offset)

    def _assign(self, epoch: int, start_offset: int) -> None:
        entries = self._entries
        if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
            return
        removed: list[EpochEntry] = []
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
            removed.append(entries.pop())
        entries.append(EpochEntry(epoch, start_offset))
        self._dirty = True
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            # Only a non-trivial removal is worth a warning (Kafka's): the same start offset
            # means nothing had been written in the epoch replaced.
            log.warning("New epoch entry %s in %s caused truncation of conflicting entries %s",
                        EpochEntry(epoch, start_offset), self._file.path, removed)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) of ``requested_epoch`` (Kafka's ``endOffsetFor``): the latest epoch
        ends at the log end; an older one where the next known epoch starts, reported as the
        nearest known epoch at or below it (itself when none is known); an unknown or newer one
        is undefined (-1, -1)."""
        with self._lock:
            entries = list(self._entries)
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [e for e in entries if e.epoch <= requested_epoch]
        return (floor[-1].epoch if floor else requested_epoch), higher.start_offset

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0] if entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        starts = [e.start_offset for e in self._entries]
        i = bisect.bisect_right(starts, offset) - 1
        return self._entries[i].epoch if i >= 0 else None

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there); a
        negative ``end_offset`` (undefined) changes nothing, as in Kafka."""
        if end_offset < 0:
            return
        with self._lock:
            before = len(self._entries)
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            self._dirty |= len(self._entries) != before
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the entries starting at or before it collapse into
        the latest of them, moved to start exactly there (Kafka's ``truncateFromStart``)."""
        with self._lock:
            removed = [e for e in self._entries if e.start_offset <= start_offset]
            if not removed:
                return
            kept = [e for e in self._entries if e.start_offset > start_offset]
            self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
            self._dirty = True
        self.flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._entries = []
            self._dirty = True
        self.flush()

    def flush(self) -> None:
        if self._read_only:
            return
        with self._lock:
            if self._dirty:
                self._file.write(self._entries)
                self._dirty = False
