"""``LogCleanerManager``: which compacted logs need cleaning, their progress and their state (Kafka's
``LogCleanerManager``).

* **Checkpoint.** The first dirty offset of each compacted partition is kept in
  ``cleaner-offset-checkpoint`` in the data directory, in the text format of every offset
  checkpoint (``0``, the count, then ``<topic> <partition> <offset>`` lines).
* **Cleanable range** (:func:`cleanable_offsets`): from the checkpointed offset (reset to the log
  start offset when it is below it or past the log end) to the first offset that may not be cleaned
  yet — the smallest of the last stable offset, the active segment's base offset and the first
  segment holding a record newer than ``min.compaction.lag.ms``.
* **Choice** (:meth:`LogCleanerManager.grab_filthiest_compacted_log`): the log whose cleanable
  ratio is highest among those above ``min.cleanable.dirty.ratio`` — or that has cleanable data
  older than ``max.compaction.lag.ms``.
* **State.** A log being cleaned is *in progress*; aborting (before truncation or deletion) marks it
  *aborted* and waits, bounded, until the cleaner lets go; a paused log is skipped until resumed.
"""

from __future__ import annotations

import enum
import logging
import threading
import time as _time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkalog.clock import Time
from kafkalog.errors import KafkaLogError, KafkaStorageError
from kafkalog.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalog.storage.cleaner.cleaner import LogCleaningAbortedError
from kafkalog.storage.cleaner.log_to_clean import LogToClean
from kafkalog.storage.log import Log

__all__ = ["LogCleanerManager", "LogCleaningState", "OffsetsToClean", "cleanable_offsets",
           "max_compaction_delay"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class LogCleaningState(enum.Enum):
    """Kafka's ``LogCleaningState``: in progress, aborted (the cleaner must stop), or paused."""

    IN_PROGRESS = "in_progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def cleanable_offsets(target: Log, last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """The dirty range of ``target`` given its checkpointed offset (Kafka's ``cleanableOffsets``)."""
    log_start = target.log_start_offset
    checkpointed = last_clean_offset if last_clean_offset is not None else log_start
    force = False
    if checkpointed < log_start:
        if not (target.config.compact and target.config.delete):
            log.warning("Resetting first dirty offset of %s to log start offset %d since the checkpointed "
                        "offset %d is invalid", target.dir.name, log_start, checkpointed)
        first_dirty, force = log_start, True
    elif checkpointed > target.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger than the log "
                    "end offset %d. Resetting to the log start offset %d", target.dir.name, checkpointed,
                    target.log_end_offset, log_start)
        first_dirty, force = log_start, True
    else:
        first_dirty = checkpointed
    bounds = [target.last_stable_offset, target.active_segment.base_offset]
    lag = max(target.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in target.segments.non_active_log_segments_from(first_dirty):
            if segment.largest_timestamp > now - lag:
                bounds.append(segment.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(bounds)), force)


def max_compaction_delay(target: Log, first_dirty_offset: int, now: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty non-active segment is (0 if not)."""
    stamps = [s.get_first_batch_timestamp()
              for s in target.segments.non_active_log_segments_from(first_dirty_offset)]
    stamps = [t for t in stamps if t > 0]
    earliest = min(stamps) if stamps else 2**63 - 1
    clean_until = now - max(target.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


class LogCleanerManager:
    """Cleaning state of the compacted logs of one data directory."""

    def __init__(self, data_dir: Path, logs: Callable[[], dict[TopicPartition, Log]], *, time: Time) -> None:
        self._dir = Path(data_dir)
        self._logs = logs
        self._time = time
        self._lock = threading.Condition()
        self._in_progress: dict[TopicPartition, LogCleaningState] = {}
        # How many abort_and_pause_cleaning calls a PAUSED partition waits to be resumed by (Kafka's
        # LogCleaningPaused(count)): each pause needs its own resume.
        self._pauses: dict[TopicPartition, int] = {}
        # Partitions whose cleaning failed (corrupt data, I/O): skipped until the directory is
        # reloaded, as Kafka's uncleanable partitions are.
        self._uncleanable: set[TopicPartition] = set()
        self._checkpoint = OffsetCheckpointFile(self._dir / CLEANER_OFFSET_CHECKPOINT_FILE)
        self._checkpoint.create_if_missing()  # as Kafka's LogCleanerManager does: empty until written
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run = -1

    @property
    def checkpoint_file(self) -> OffsetCheckpointFile:
        return self._checkpoint

    # --- checkpoints ------------------------------------------------------------------------------

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        try:
            return self._checkpoint.read()
        except KafkaLogError as e:
            log.warning("Failed to read %s, starting every compacted log from its log start offset: %s",
                        self._checkpoint.path, e)
            return {}

    def update_checkpoints(self, *, update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        """Rewrite the checkpoint with one entry added/changed or removed; entries of partitions no
        longer in the directory are dropped (Kafka's ``updateCheckpoints``)."""
        with self._lock:
            existing = self.all_cleaner_checkpoints()
            live = self._logs()
            entries = {tp: offset for tp, offset in existing.items() if tp in live}
            if remove is not None:
                entries.pop(remove, None)
            if update is not None:
                entries[update[0]] = update[1]
            try:
                self._checkpoint.write(dict(sorted(entries.items())))
            except KafkaStorageError as e:
                log.error("Failed to write %s: %s", self._checkpoint.path, e)
                raise

    # --- choosing ---------------------------------------------------------------------------------

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        """The compacted log most in need of cleaning, marked in progress; None if none qualifies."""
        with self._lock:
            now = self._time.milliseconds()
            self.time_of_last_run = now
            last_clean = self.all_cleaner_checkpoints()
            candidates: list[LogToClean] = []
            for tp, target in self._logs().items():
                if not target.config.compact or tp in self._in_progress or tp in self._uncleanable:
                    continue
                offsets = cleanable_offsets(target, last_clean.get(tp), now)
                if offsets.force_update_checkpoint:
                    self.update_checkpoints(update=(tp, offsets.first_dirty_offset))
                delay = max_compaction_delay(target, offsets.first_dirty_offset, now)
                ltc = LogToClean(tp[0], tp[1], target, offsets.first_dirty_offset,
                                 offsets.first_uncleanable_dirty_offset, delay > 0)
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            self.dirtiest_log_cleanable_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [c for c in candidates
                         if (c.needs_compaction_now and c.cleanable_bytes > 0)
                         or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._in_progress[(filthiest.topic, filthiest.partition)] = LogCleaningState.IN_PROGRESS
            return filthiest

    def log_to_clean(self, tp: TopicPartition, *, force: bool = False) -> LogToClean | None:
        """``tp``'s cleanable range, marked in progress — regardless of the dirty ratio with ``force``
        (what ``kafkalog compact`` runs); None when it is busy, paused or has nothing to clean."""
        with self._lock:
            target = self._logs().get(tp)
            if target is None or not target.config.compact or tp in self._in_progress:
                return None
            now = self._time.milliseconds()
            offsets = cleanable_offsets(target, self.all_cleaner_checkpoints().get(tp), now)
            if offsets.force_update_checkpoint:
                self.update_checkpoints(update=(tp, offsets.first_dirty_offset))
            ltc = LogToClean(tp[0], tp[1], target, offsets.first_dirty_offset,
                             offsets.first_uncleanable_dirty_offset,
                             max_compaction_delay(target, offsets.first_dirty_offset, now) > 0)
            if ltc.cleanable_bytes <= 0:
                return None
            if not force and not (ltc.needs_compaction_now
                                  or ltc.cleanable_ratio > target.config.min_cleanable_dirty_ratio):
                return None
            self._in_progress[tp] = LogCleaningState.IN_PROGRESS
            return ltc

    def deletable_logs(self) -> list[tuple[TopicPartition, Log]]:
        """Compacted logs whose retention the cleaner thread runs, marked in progress (Kafka's
        ``deletableLogs``: for ``compact`` alone that is the log start offset rule and the removal of
        swapped-out segments; ``compact,delete`` adds time and size retention)."""
        with self._lock:
            chosen = [(tp, target) for tp, target in self._logs().items()
                      if target.config.compact and tp not in self._in_progress
                      and tp not in self._uncleanable]
            for tp, _ in chosen:
                self._in_progress[tp] = LogCleaningState.IN_PROGRESS
            return chosen

    # --- state ------------------------------------------------------------------------------------

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self._uncleanable.add(tp)

    @property
    def uncleanable_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable)

    def cleaning_state(self, tp: TopicPartition) -> LogCleaningState | None:
        with self._lock:
            return self._in_progress.get(tp)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Raise ``LogCleaningAbortedError`` when cleaning of ``tp`` was asked to stop."""
        with self._lock:
            if self._in_progress.get(tp) is LogCleaningState.ABORTED:
                raise LogCleaningAbortedError(f"Cleaning of {tp[0]}-{tp[1]} was aborted")

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_ms: int = 60_000) -> None:
        """Stop cleaning ``tp`` (waiting, bounded, for a running clean to let go) and keep it paused
        until :meth:`resume_cleaning` (Kafka's ``abortAndPauseCleaning``)."""
        deadline = _time.monotonic() + timeout_ms / 1000
        with self._lock:
            state = self._in_progress.get(tp)
            paused = state in (LogCleaningState.PAUSED, LogCleaningState.ABORTED)
            self._pauses[tp] = self._pauses.get(tp, 0) + 1 if paused else 1
            if state is None:
                self._in_progress[tp] = LogCleaningState.PAUSED
                return
            if state is LogCleaningState.PAUSED:
                return
            if state is LogCleaningState.IN_PROGRESS:
                self._in_progress[tp] = LogCleaningState.ABORTED
            while self._in_progress.get(tp) is LogCleaningState.ABORTED:
                remaining = deadline - _time.monotonic()
                if remaining <= 0:
                    raise KafkaStorageError(
                        f"Cleaning of {tp[0]}-{tp[1]} did not stop within {timeout_ms} ms")
                self._lock.wait(remaining)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        """Undo one :meth:`abort_and_pause_cleaning`: the partition is cleanable again once every
        pause has been resumed."""
        with self._lock:
            if self._in_progress.get(tp) is not LogCleaningState.PAUSED:
                return
            left = self._pauses.get(tp, 1) - 1
            if left > 0:
                self._pauses[tp] = left
                return
            self._pauses.pop(tp, None)
            del self._in_progress[tp]

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """The cleaner is done with ``tp``: checkpoint ``end_offset`` (unless aborted) and release it."""
        with self._lock:
            state = self._in_progress.get(tp)
            if state is LogCleaningState.IN_PROGRESS:
                if end_offset is not None:
                    self.update_checkpoints(update=(tp, end_offset))
                del self._in_progress[tp]
            elif state is LogCleaningState.ABORTED:
                self._in_progress[tp] = LogCleaningState.PAUSED
            self._lock.notify_all()

    def done_deleting(self, tps: list[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self._in_progress.get(tp)
                if state is LogCleaningState.IN_PROGRESS:
                    del self._in_progress[tp]
                elif state is LogCleaningState.ABORTED:
                    self._in_progress[tp] = LogCleaningState.PAUSED
            self._lock.notify_all()
