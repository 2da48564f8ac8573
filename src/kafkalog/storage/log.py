"""One partition: a directory of segments (Kafka's UnifiedLog + LocalLog, single replica).

The log owns the segment map, the log end offset (LEO), the log start offset, the recovery point
and the transaction state. Appends go through Kafka's leader path (validate, assign offsets, maybe
roll, write, index) or the follower path (offsets kept). Reads are fetch-like: whole batches from
the one holding the start offset, bounded by bytes and by an isolation level.

Concurrency: one writer, many readers. ``_lock`` serialises everything that changes the log; a
reader takes a snapshot of the segment list and of the LEO, and never reads past the LEO's byte
position, which is published only after a batch is fully written.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Self

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalog.records.batch import RecordBatch
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import NO_TIMESTAMP, Record
from kafkalog.records.validator import (
    AppendOrigin,
    LogAppendInfo,
    ValidatorConfig,
    analyze_and_validate_records,
    trim_invalid_bytes,
    validate_messages_and_assign_offsets,
)
from kafkalog.storage.checkpoint import (
    PARTITION_METADATA_FILE,
    PartitionMetadataFile,
    Uuid,
    parse_topic_partition,
)
from kafkalog.storage.config import LogConfig
from kafkalog.storage.file_records import TimestampAndOffset
from kafkalog.storage.leader_epoch import LeaderEpochCache
from kafkalog.storage.loader import LoadedLogOffsets, LogLoader, offset_or_none, open_segment
from kafkalog.storage.log_segment import (
    DELETED_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    LogSegments,
    RollParams,
)
from kafkalog.storage.producer_state import ProducerStateManager
from kafkalog.storage.retention import delete_old_segments
from kafkalog.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Special targets of ListOffsets / offset_for_timestamp (Kafka's ListOffsetsRequest constants).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class FetchIsolation(Enum):
    """How far a read may go: the LEO, the high watermark, or the last stable offset."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


@dataclass(frozen=True, slots=True)
class _EndSnapshot:
    """What a reader may see: the LEO and the byte position where it lies in its segment."""

    offset: int
    segment_base_offset: int
    position: int


class Log:
    """A partition directory ``<topic>-<partition>`` of segments. Use :meth:`open`."""

    def __init__(self, directory: Path, config: LogConfig, segments: LogSegments, offsets: LoadedLogOffsets,
                 *, time: Time, read_only: bool, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochCache | None) -> None:
        self._dir = directory
        self._config = config
        self._segments = segments
        self._time = time
        self._read_only = read_only
        self._lock = threading.RLock()
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self._log_start_offset = offsets.log_start_offset
        self._recovery_point = offsets.recovery_point
        self._last_flush_ms = time.milliseconds()
        self._closed = False
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.topic, self.partition = parse_topic_partition(directory.name)
        if read_only:
            self._end = self._read_only_start()
            self._refresh_read_only_end()
        else:
            self._end = self._snapshot_end(offsets.log_end_offset)

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path | str, config: LogConfig | None = None, *, recovery_point: int = 0,
             log_start_offset: int = 0, had_clean_shutdown: bool = True, time: Time = SYSTEM_TIME,
             read_only: bool = False, topic_id: Uuid | None = None) -> Log:
        """Open (or create) the partition in ``directory``, recovering it if it was not shut down cleanly.

        With ``read_only`` nothing on disk is created, recovered, truncated or deleted: the log is
        read as it is, a torn tail simply invisible (for readers in other processes).
        """
        directory = Path(directory)
        config = config or LogConfig()
        parse_topic_partition(directory.name)  # a clear error before anything is created
        producer_state = ProducerStateManager()
        if read_only:
            if not directory.is_dir():
                raise KafkaStorageError(f"Partition directory {directory} does not exist")
            segments, offsets = LogLoader(directory, config, time=time, read_only=True,
                                          log_start_offset=log_start_offset,
                                          recovery_point=recovery_point,
                                          producer_state=producer_state).load_read_only()
            return cls(directory, config, segments, offsets, time=time, read_only=True,
                       producer_state=producer_state, leader_epoch_cache=None)
        directory.mkdir(parents=True, exist_ok=True)
        epoch_cache = LeaderEpochCache(directory)
        loader = LogLoader(directory, config, time=time, read_only=False, log_start_offset=log_start_offset,
                           recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown,
                           producer_state=producer_state, leader_epoch_cache=epoch_cache)
        segments, offsets = loader.load()
        epoch_cache.truncate_from_end(offsets.log_end_offset)
        # Kafka writes the topic id when one is assigned, before the first append.
        metadata = PartitionMetadataFile(directory / PARTITION_METADATA_FILE)
        if topic_id is not None and not metadata.exists():
            metadata.write(topic_id)
        return cls(directory, config, segments, offsets, time=time, read_only=False,
                   producer_state=producer_state, leader_epoch_cache=epoch_cache)

    # --- properties -------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    @property
    def segments(self) -> LogSegments:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active_segment

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        if self._read_only:
            self._refresh_read_only_end()
        return self._end.offset

    @property
    def high_watermark(self) -> int:
        # A single replica: everything appended is replicated.
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self._producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_unstable is None else min(first_unstable, hw)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache | None:
        return self._leader_epoch_cache

    def __repr__(self) -> str:
        return (f"Log({self._dir.name}, start={self._log_start_offset}, end={self._end.offset}, "
                f"segments={len(self._segments)})")

    def _snapshot_end(self, offset: int) -> _EndSnapshot:
        active = self._segments.active_segment
        return _EndSnapshot(offset, active.base_offset, active.size_in_bytes)

    def _read_only_start(self) -> _EndSnapshot:
        """Where a reader starts following the active segment: its last offset-index entry (whose
        batch is whole, indexes being written after the data) — the scan goes on from there."""
        active = self._segments.active_segment
        position = active.offset_index.lookup(INT64_MAX).position
        first = next(iter(active.log.batches(position)), None)
        if first is None:
            return _EndSnapshot(active.base_offset, active.base_offset, 0)
        return _EndSnapshot(first.base_offset, active.base_offset, position)

    def _refresh_read_only_end(self) -> None:
        """A read-only log follows a writer in another process: pick up segments it rolled and whole
        batches it appended since we last looked. The LEO only ever moves forward here."""
        with self._lock:
            active = self._segments.active_segment
            for path in sorted(self._dir.glob(f"*{LOG_FILE_SUFFIX}")):
                base = offset_or_none(path.name)
                if base is None or base <= active.base_offset:
                    continue
                try:
                    segment = open_segment(self._dir, base, self._config, self._time,
                                           file_already_exists=True, read_only=True)
                except KafkaStorageError:
                    continue  # deleted or renamed under us: the next refresh will see the new state
                self._segments.add(segment)
            end = self._end
            for segment in self._segments.values(end.segment_base_offset, INT64_MAX):
                if segment.base_offset < end.segment_base_offset:
                    continue
                segment.log.refresh_size()
                start = end.position if segment.base_offset == end.segment_base_offset else 0
                for batch in segment.log.batches(start):
                    end = _EndSnapshot(batch.next_offset, segment.base_offset,
                                       batch.position + batch.size_in_bytes)
            if end.offset > self._end.offset:
                self._end = end

    def _check_writable(self) -> None:
        if self._read_only:
            raise KafkaStorageError(f"Log {self._dir} is open read-only")
        if self._closed:
            raise KafkaStorageError(f"Log {self._dir} is closed")

    # --- appending --------------------------------------------------------------------------

    def _validator_config(self) -> ValidatorConfig:
        c = self._config
        return ValidatorConfig(
            target_magic=c.target_magic,
            target_compression=c.compression,
            compression_level=c.compression_level,
            timestamp_type=c.message_timestamp_type,
            timestamp_before_max_ms=c.effective_message_timestamp_before_max_ms,
            timestamp_after_max_ms=c.effective_message_timestamp_after_max_ms,
            compacted_topic=c.compact,
            max_message_bytes=c.max_message_bytes,
        )

    def append_as_leader(self, records: MemoryRecords, *, leader_epoch: int = 0,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Validate ``records``, assign offsets from the LEO and append them (Kafka's leader path)."""
        with self._lock:
            self._check_writable()
            info = analyze_and_validate_records(records, origin, assign_offsets=True,
                                                max_message_bytes=self._config.max_message_bytes)
            if info.shallow_count == 0:
                return info
            valid = trim_invalid_bytes(records, info)
            first_offset = self._end.offset
            result = validate_messages_and_assign_offsets(
                valid, offset_counter=first_offset, now_ms=self._time.milliseconds(),
                config=self._validator_config(), partition_leader_epoch=leader_epoch, origin=origin,
                source_compression=info.source_compression)
            info = info.with_validation_result(result, first_offset=first_offset,
                                               timestamp_type=self._config.message_timestamp_type)
            info = _with_log_start(info, self._log_start_offset)
            self._append(result.validated_records, info)
            return info

    def append_as_follower(self, records: MemoryRecords) -> LogAppendInfo:
        """Append ``records`` with the offsets they carry (Kafka's follower path)."""
        with self._lock:
            self._check_writable()
            info = analyze_and_validate_records(records, AppendOrigin.REPLICATION, assign_offsets=False,
                                                max_message_bytes=self._config.max_message_bytes,
                                                ignore_record_size=True)
            if info.shallow_count == 0:
                return info
            if not info.offsets_monotonic:
                raise OffsetsOutOfOrderError(
                    f"Out of order offsets found in append to {self._dir.name}")
            valid = trim_invalid_bytes(records, info)
            first = info.first_or_last_offset_of_first_batch
            if first < self._end.offset:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self._dir.name}: first offset {first} is less than "
                    f"the next offset {self._end.offset}")
            self._append(valid, _with_log_start(info, self._log_start_offset))
            return info

    def _append(self, validated: MemoryRecords, info: LogAppendInfo) -> None:
        size = validated.size_in_bytes
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self._dir.name} which exceeds "
                f"the maximum configured segment size of {self._config.segment_bytes}.")
        segment = self._maybe_roll(size, info)
        batches = list(validated.batches())
        segment.append(info.last_offset, info.max_timestamp, info.shallow_offset_of_max_timestamp, validated)
        for batch in batches:
            if batch.magic >= 2:
                if self._leader_epoch_cache is not None and batch.partition_leader_epoch >= 0:
                    self._leader_epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
                aborted = self._producer_state.update(batch)
                if aborted is not None:
                    segment.update_txn_index(aborted)
        self._end = _EndSnapshot(info.last_offset + 1, segment.base_offset, segment.size_in_bytes)
        self._maybe_flush_after_append()

    def _maybe_flush_after_append(self) -> None:
        c = self._config
        now = self._time.milliseconds()
        if (self._end.offset - self._recovery_point >= c.flush_messages
                or now - self._last_flush_ms >= c.flush_ms):
            self.flush()

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo) -> LogSegment:
        segment = self._segments.active_segment
        now = self._time.milliseconds()
        params = RollParams(
            max_segment_ms=self._config.max_segment_ms,
            max_segment_bytes=self._config.segment_bytes,
            max_timestamp_in_messages=info.max_timestamp,
            max_offset_in_messages=info.last_offset,
            messages_size=messages_size,
            now=now,
        )
        if not segment.should_roll(params):
            return segment
        # v2 appends know their first offset; legacy ones only their last, so Kafka bounds the base
        # offset from below by what still fits a 32-bit relative offset.
        expected = info.first_offset if info.first_offset >= 0 else info.last_offset - INT_MAX
        return self._roll(max(expected, self._end.offset))

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``expected_next_offset`` (default: the LEO)."""
        with self._lock:
            self._check_writable()
            return self._roll(max(expected_next_offset or 0, self._end.offset))

    def _roll(self, new_offset: int) -> LogSegment:
        active = self._segments.active_segment
        existing = self._segments.get(new_offset)
        if existing is not None:
            if existing is active and active.size_in_bytes == 0:
                # An empty active segment at the same base: recreate it (Kafka's rule).
                log.warning("Trying to roll a new segment at offset %d in %s: deleting the empty active "
                            "segment of the same base", new_offset, self._dir)
                self._segments.remove(new_offset)
                active.delete_if_exists()
            else:
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for {self._dir.name} with start offset {new_offset} "
                    f"which already exists as {existing!r}")
        elif self._segments.last_segment is not None and new_offset < active.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new segment for {self._dir.name} with start offset {new_offset} lower "
                f"than the active segment's base offset {active.base_offset}")
        else:
            active.on_become_inactive_segment()
        segment = open_segment(self._dir, new_offset, self._config, self._time, file_already_exists=False)
        self._segments.add(segment)
        self._end = _EndSnapshot(self._end.offset, segment.base_offset, 0)
        return segment

    # --- reading ----------------------------------------------------------------------------

    def _upper_bound(self, isolation: FetchIsolation) -> int:
        if isolation is FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.log_end_offset

    def read(self, start_offset: int, max_length: int, *,
             isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, at most ``max_length`` bytes (at least one
        batch with ``min_one_message``), never past the isolation level's bound (Kafka's fetch)."""
        end = self._end if not self._read_only else self._refreshed_end()
        upper = self._upper_bound(isolation)
        if start_offset < self._log_start_offset or start_offset > end.offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self._dir.name}, "
                f"but we only have log segments in the range {self._log_start_offset} to {end.offset}.")
        segments = self._segments
        empty = FetchDataInfo(LogOffsetMetadata(start_offset), MemoryRecords.EMPTY)
        if start_offset >= upper:
            return empty
        upper_position = self._position_of(upper, end)
        segment = segments.floor_segment(start_offset)
        while segment is not None:
            if segment.base_offset == upper_position[0]:
                max_position = upper_position[1]
            else:
                max_position = segment.size_in_bytes
            fetch = segment.read(start_offset, max_length, max_position, min_one_message)
            if fetch is not None:
                if isolation is FetchIsolation.TXN_COMMITTED:
                    aborted = self.collect_aborted_transactions(start_offset, upper)
                    fetch = FetchDataInfo(fetch.fetch_offset_metadata, fetch.records,
                                          fetch.first_entry_incomplete, aborted)
                return fetch
            if segment.base_offset >= upper_position[0]:
                break
            segment = segments.higher_segment(segment.base_offset)
        return empty

    def _refreshed_end(self) -> _EndSnapshot:
        self._refresh_read_only_end()
        return self._end

    def _position_of(self, offset: int, end: _EndSnapshot) -> tuple[int, int]:
        """(segment base, byte position) of the batch boundary at ``offset`` (which is ≤ the LEO)."""
        if offset >= end.offset:
            return end.segment_base_offset, end.position
        segment = self._segments.floor_segment(offset)
        if segment is None:
            return end.segment_base_offset, 0
        found = segment.translate_offset(offset)
        if found is None:
            return segment.base_offset, segment.size_in_bytes
        # Batch-granular: a bound inside a batch ends before that batch (an LSO is always a batch start).
        return segment.base_offset, found.position

    def batches(self, start_offset: int, end_offset: int | None = None, *,
                isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> Iterator[RecordBatch]:
        """Every whole batch overlapping [start_offset, end_offset), lazily, segment by segment.

        Only segments that can hold the range are opened, and within the first one the offset index
        finds where to start.
        """
        end = self._end if not self._read_only else self._refreshed_end()
        upper = self._upper_bound(isolation)
        stop = upper if end_offset is None else min(end_offset, upper)
        start = max(start_offset, self._log_start_offset)
        if start >= stop:
            return
        stop_base, stop_position = self._position_of(upper, end)
        for segment in self._segments.values(start, stop) if stop > start else []:
            if segment.base_offset > stop_base:
                break
            found = segment.translate_offset(start) if segment.base_offset <= start else None
            if segment.base_offset <= start and found is None:
                continue
            position = found.position if found is not None else 0
            limit = stop_position if segment.base_offset == stop_base else segment.size_in_bytes
            for batch in segment.log.batches(position, limit):
                if batch.base_offset >= stop and batch.magic >= 2:
                    return
                if batch.last_offset >= start:
                    yield batch
                if batch.next_offset >= stop:
                    return

    def records(self, start_offset: int, end_offset: int | None = None, *,
                isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> Iterator[Record]:
        """Records with offsets in [start_offset, end_offset) as a consumer sees them: control records
        hidden and, with ``TXN_COMMITTED``, the records of aborted transactions too."""
        upper = self._upper_bound(isolation)
        stop = upper if end_offset is None else min(end_offset, upper)
        aborted_filter = (AbortedFilter(self.collect_aborted_transactions(start_offset, stop))
                          if isolation is FetchIsolation.TXN_COMMITTED else None)
        for batch in self.batches(start_offset, stop, isolation=isolation):
            if aborted_filter is not None and aborted_filter.skip(batch):
                continue
            if batch.is_control:
                continue
            for record in batch.records():
                if record.offset >= stop:
                    return
                if record.offset >= start_offset:
                    yield record

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), from the txn indexes."""
        found: list[AbortedTxn] = []
        segment = self._segments.floor_segment(start_offset) or self._segments.first_segment
        while segment is not None and segment.base_offset < upper_bound_offset:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
            segment = self._segments.higher_segment(segment.base_offset)
        return found

    def offset_for_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets: the first record with timestamp ≥ target (time index → offset index →
        scan); -2 earliest, -1 latest, -3 the record with the largest timestamp."""
        if target_timestamp == EARLIEST_TIMESTAMP:
            start = self._log_start_offset
            return TimestampAndOffset(NO_TIMESTAMP, start, self._epoch_for(start))
        if target_timestamp == LATEST_TIMESTAMP:
            leo = self.log_end_offset
            return TimestampAndOffset(NO_TIMESTAMP, leo, self._latest_epoch())
        segments = list(self._segments)
        if target_timestamp == MAX_TIMESTAMP:
            best = None
            for segment in segments:
                ts = segment.max_timestamp_so_far
                if best is None or ts > best[0]:
                    best = (ts, segment)
            if best is None or best[0] < 0:
                return None
            offset = best[1].shallow_offset_of_max_timestamp_so_far
            return TimestampAndOffset(best[0], offset, self._epoch_for(offset))
        if target_timestamp < 0:
            raise OffsetOutOfRangeError(f"Invalid target timestamp {target_timestamp} for {self._dir.name}")
        for segment in segments:
            if segment.largest_timestamp >= target_timestamp:
                found = segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
                if found is not None and found.offset < self.log_end_offset:
                    return found
        return None

    def _epoch_for(self, offset: int) -> int | None:
        cache = self._leader_epoch_cache
        return cache.epoch_for_offset(offset) if cache is not None else None

    def _latest_epoch(self) -> int | None:
        cache = self._leader_epoch_cache
        return cache.latest_epoch() if cache is not None else None

    # --- flushing, truncation, deletion -----------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding data below ``offset`` (default: the LEO); advance the recovery point."""
        with self._lock:
            self._check_writable()
            target = self._end.offset if offset is None else min(offset, self._end.offset)
            if target <= self._recovery_point:
                return
            for segment in self._segments.values(self._recovery_point, target + 1):
                segment.flush()
            if self._leader_epoch_cache is not None:
                self._leader_epoch_cache.flush()
            self._recovery_point = target
            self._last_flush_ms = self._time.milliseconds()

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at and above ``target_offset`` (whole batches). Returns whether anything went."""
        with self._lock:
            self._check_writable()
            if target_offset < 0:
                raise OffsetOutOfRangeError(f"Cannot truncate {self._dir.name} to a negative offset")
            if target_offset >= self._end.offset:
                return False
            first = self._segments.first_segment
            if first is not None and first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            for segment in self._segments.higher_segments(target_offset):
                if segment.base_offset > target_offset:
                    self._remove_and_delete(segment)
            active = self._segments.active_segment
            active.truncate_to(target_offset)
            self._end = self._snapshot_end(active.read_next_offset())
            self._recovery_point = min(self._recovery_point, self._end.offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            if self._leader_epoch_cache is not None:
                self._leader_epoch_cache.truncate_from_end(self._end.offset)
            self._reload_producer_state()
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset``."""
        with self._lock:
            self._check_writable()
            for segment in list(self._segments):
                self._remove_and_delete(segment)
            segment = open_segment(self._dir, new_offset, self._config, self._time, file_already_exists=False)
            self._segments.add(segment)
            self._end = self._snapshot_end(new_offset)
            self._log_start_offset = new_offset
            self._recovery_point = new_offset
            if self._leader_epoch_cache is not None:
                self._leader_epoch_cache.clear_and_flush()
            self._producer_state.truncate_and_reload()

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """DeleteRecords: raise the log start offset (never lower it, never past the high watermark)."""
        with self._lock:
            self._check_writable()
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset of {self._dir.name} to {new_log_start_offset} "
                    f"beyond the high watermark {self.high_watermark}")
            if new_log_start_offset <= self._log_start_offset:
                return False
            self._log_start_offset = new_log_start_offset
            return True

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` and delete the segments wholly below it."""
        with self._lock:
            self.maybe_increment_log_start_offset(offset)
            deleted = delete_old_segments(self, log_start_offset_only=True)
            self.delete_pending_files()
            return deleted

    def delete_old_segments(self) -> int:
        """Retention (time, size, log start offset) over whole segments; returns how many were deleted."""
        with self._lock:
            self._check_writable()
            deleted = delete_old_segments(self)
            self.delete_pending_files()
            return deleted

    def _remove_and_delete(self, segment: LogSegment) -> None:
        self._segments.remove(segment.base_offset)
        segment.close()
        segment.delete_if_exists()

    def _schedule_delete(self, segments: list[LogSegment]) -> None:
        """Kafka's asynchronous delete: rename to ``.deleted`` now, remove the files after
        ``file.delete.delay.ms`` (see :meth:`delete_pending_files`)."""
        due_ms = self._time.milliseconds() + self._config.file_delete_delay_ms
        for segment in segments:
            self._segments.remove(segment.base_offset)
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            segment.close()
            self._pending_deletes.append((due_ms, segment))

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = max(self._log_start_offset, offset)

    def delete_pending_files(self, *, force: bool = False) -> int:
        """Remove the ``.deleted`` segments whose ``file.delete.delay.ms`` has passed (all with ``force``).

        Readers that opened a segment before it was renamed keep reading their open files; the delay
        gives them time to finish. Leftovers of a process that died are removed when the log is loaded.
        """
        now = self._time.milliseconds()
        due = [(t, s) for t, s in self._pending_deletes if force or t <= now]
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (force or t <= now)]
        for _, segment in due:
            segment.delete_if_exists()
        return len(due)

    def _reload_producer_state(self) -> None:
        self._producer_state.truncate_and_reload()
        for segment in self._segments:
            for batch in segment.log.batches():
                if batch.magic >= 2 and batch.is_transactional:
                    self._producer_state.update(batch)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment (final time-index entry, indexes trimmed). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._read_only:
                if self._leader_epoch_cache is not None:
                    self._leader_epoch_cache.flush()
                for segment in self._segments:
                    segment.flush()
            self._segments.close()

    def delete(self) -> None:
        """Close the log and remove its directory."""
        with self._lock:
            self.close()
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AbortedFilter:
    """A read_committed consumer's view of aborted transactions (Kafka's Fetcher logic).

    Aborted transactions become active when iteration reaches their first offset; a transactional
    batch of an active producer is skipped until that producer's ABORT marker is seen.
    """

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._active: set[int] = set()

    def skip(self, batch: RecordBatch) -> bool:
        while self._pending and self._pending[0].first_offset <= batch.last_offset:
            self._active.add(self._pending.pop(0).producer_id)
        if batch.magic < 2 or not batch.is_transactional:
            return False
        pid = batch.producer_id
        if batch.is_control:
            self._active.discard(pid)
            return True
        return pid in self._active


def _with_log_start(info: LogAppendInfo, log_start_offset: int) -> LogAppendInfo:
    from dataclasses import replace

    return replace(info, log_start_offset=log_start_offset)
