"""One partition: a directory of segments (Kafka's UnifiedLog + LocalLog, single replica).

The log owns the segment map, the log end offset (LEO), the log start offset, the recovery point,
the producer state and the leader-epoch cache. Appends go through Kafka's leader path (validate,
assign offsets, maybe roll, check producer state, write, index) or the follower path (offsets
kept). Reads are fetch-like: whole batches from the one holding the start offset, bounded by bytes
and by an isolation level.

Concurrency: one writer, many readers. ``_lock`` serialises everything that changes the log. A
reader takes the published end (LEO and its byte position) once and never reads past it; the
writer publishes it only after a batch is fully written, its producer state applied and its
aborted-transaction entry indexed, so a reader never sees a partial batch nor an open transaction
without the last stable offset that hides it.

A log opened ``read_only`` belongs to a reader in another process: nothing on disk is created,
recovered or deleted; the end is found by scanning the active segment (a torn or preallocated tail
is not data) and moves forward as the writer appends or rolls. Its files are read through a
``storage.filesystem.FileSystem``: the local disk by default, or any other (object storage, a backup)
holding a directory laid out as Kafka's. Writable logs are local only.
"""

from __future__ import annotations

import logging
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from enum import Enum
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple, Self, TypeVar

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import (
    CorruptRecordError,
    IllegalArgumentError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    PolicyViolationError,
    RecordBatchTooLargeError,
    SegmentReplacedError,
    UnexpectedAppendOffsetError,
)
from kafkalog.records.batch import RecordBatch
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import (
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V2,
    NO_TIMESTAMP,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    Record,
    TimestampType,
)
from kafkalog.records.validator import (
    AppendOrigin,
    LogAppendInfo,
    ValidatorConfig,
    analyze_and_validate_records,
    trim_invalid_bytes,
    validate_lone_v2_batch,
    validate_messages_and_assign_offsets,
)
from kafkalog.storage.config import LogConfig
from kafkalog.storage.file_records import TimestampAndOffset
from kafkalog.storage.files import fsync_directory
from kafkalog.storage.filesystem import LOCAL_FILESYSTEM, FileSystem, LocalFileSystem
from kafkalog.storage.index import OffsetPosition
from kafkalog.storage.leader_epoch import LeaderEpochCache
from kafkalog.storage.loader import (
    LoadedLogOffsets,
    LogLoader,
    list_segment_logs,
    open_segment,
)
from kafkalog.storage.log_file_utils import (
    DELETED_FILE_SUFFIX,
    offset_index_file,
    parse_topic_partition,
    time_index_file,
    transaction_index_file,
)
from kafkalog.storage.log_file_utils import log_file as segment_log_file
from kafkalog.storage.log_segment import FetchDataInfo, LogOffsetMetadata, LogSegment, LogSegments
from kafkalog.storage.metadata_files import PARTITION_METADATA_FILE, PartitionMetadataFile, Uuid
from kafkalog.storage.producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    ProducerStateManagerConfig,
    rebuild_producer_state,
)
from kafkalog.storage.recovery_report import RecoveryReport
from kafkalog.storage.retention import delete_old_segments
from kafkalog.storage.segment_swap import swap_segments
from kafkalog.storage.txn_index import AbortedTxn

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AbortedFilter",
    "FetchIsolation",
    "LastRecord",
    "Log",
]

_R = TypeVar("_R")
# A read-only read that finds its segments replaced on disk starts over this many times at most.
_READ_ONLY_ATTEMPTS = 3

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Special targets of ListOffsets / offset_for_timestamp (Kafka's ListOffsetsRequest constants).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


class FetchIsolation(Enum):
    """How far a read may go: the LEO, the high watermark, or the last stable offset."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer's last data batch (its last offset; None after a marker) and epoch, which
    the log cleaner keeps so that the producer state survives compaction (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


class _EndSnapshot(NamedTuple):
    """What a reader may see: the LEO and the byte position where it lies in its segment. (A named
    tuple: immutable as the readers need, and a new one is made for every append.)"""

    offset: int
    segment_base_offset: int
    position: int


@dataclass(frozen=True, slots=True)
class _AppendSettings:
    """What every append reads from the config, derived once per ``LogConfig`` (which is immutable;
    several of these are computed properties, and the validator config is a new object otherwise)."""

    source: LogConfig
    validator: ValidatorConfig
    max_message_bytes: int
    segment_bytes: int
    max_segment_ms: int
    timestamp_type: TimestampType
    flush_messages: int
    flush_ms: int

    @classmethod
    def of(cls, c: LogConfig, topic_partition: str) -> _AppendSettings:
        validator = ValidatorConfig(
            target_magic=c.target_magic,
            target_compression=c.compression,
            compression_level=c.compression_level,
            timestamp_type=c.message_timestamp_type,
            timestamp_before_max_ms=c.effective_message_timestamp_before_max_ms,
            timestamp_after_max_ms=c.effective_message_timestamp_after_max_ms,
            compacted_topic=c.compact,
            max_message_bytes=c.max_message_bytes,
            topic_partition=topic_partition,
        )
        return cls(c, validator, c.max_message_bytes, c.segment_bytes, c.max_segment_ms,
                   c.message_timestamp_type, c.flush_messages, c.flush_ms)


# Base offset, size, partition leader epoch and magic: the first 17 bytes of a v2 batch.
_V2_HEAD = struct.Struct(">qiib")
_I64 = struct.Struct(">q")


def _lone_v2_batch_without_producer(buffer: memoryview) -> tuple[int, int] | None:
    """(base offset, partition leader epoch) when ``buffer`` is exactly one v2 batch with no producer id
    — the usual non-idempotent produce, whose append has no producer state to check or update — else
    None. Read from the header alone (the batch was validated before), without building batch views."""
    if len(buffer) < RECORD_BATCH_OVERHEAD:
        return None
    base_offset, size, epoch, magic = _V2_HEAD.unpack_from(buffer, 0)
    if (magic != MAGIC_V2 or size + LOG_OVERHEAD != len(buffer)
            or _I64.unpack_from(buffer, PRODUCER_ID_OFFSET)[0] >= 0):
        return None
    return base_offset, epoch


# ``replace(info, log_start_offset=...)`` without dataclasses.replace's per-call field introspection
# (it runs once per append): the init fields' values in order, one of them swapped.
_INFO_FIELDS = tuple(f.name for f in fields(LogAppendInfo) if f.init)
_info_values = attrgetter(*_INFO_FIELDS)
_INFO_LOG_START_AT = _INFO_FIELDS.index("log_start_offset")


def _with_log_start_offset(info: LogAppendInfo, log_start_offset: int) -> LogAppendInfo:
    values = list(_info_values(info))
    values[_INFO_LOG_START_AT] = log_start_offset
    return LogAppendInfo(*values)


class Log:
    """A partition directory ``<topic>-<partition>`` of segments. Use :meth:`open`."""

    def __init__(self, directory: Path, config: LogConfig, segments: LogSegments, offsets: LoadedLogOffsets,
                 *, time: Time, read_only: bool, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochCache | None, fs: FileSystem | None = None) -> None:
        self._dir = directory
        self._fs = fs or LOCAL_FILESYSTEM
        self._config = config
        self._settings: _AppendSettings | None = None  # built at the first append (it may raise)
        self._segments = segments
        self._time = time
        self._read_only = read_only
        self._lock = threading.RLock()
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self._leader_epoch = 0  # the highest epoch a leader append used or the cache held (leader_epoch)
        self._log_start_offset = offsets.log_start_offset
        # As Kafka's UnifiedLog starts (updateLogStartOffset): never a recovery point below the start.
        self._recovery_point = max(offsets.recovery_point, offsets.log_start_offset)
        self._last_flush_ms = time.milliseconds()
        self._closed = False
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        # Told the due time of each segment renamed ``.deleted`` (the broker schedules its deletion).
        self._file_delete_listener: Callable[[int], None] | None = None
        self._retired: list[LogSegment] = []  # read-only: segments replaced on disk (closed at close)
        self.topic, self.partition = parse_topic_partition(directory.name)
        self._recovery_report = RecoveryReport(self.topic, self.partition)
        # Published for readers, always before ``_end`` (see the module docstring).
        self._first_unstable: LogOffsetMetadata | None = None
        # A read-only log builds its producer state only when a read_committed reader needs it.
        self._producer_state_loaded = not read_only
        if read_only:
            self._end = self._read_only_start()
            self._refresh_read_only_end()
        else:
            self._first_unstable = self._compute_first_unstable()
            self._end = self._snapshot_end(offsets.log_end_offset)

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path | str, config: LogConfig | None = None, *, recovery_point: int = 0,
             log_start_offset: int = 0, had_clean_shutdown: bool = True, time: Time = SYSTEM_TIME,
             read_only: bool = False, topic_id: Uuid | None = None, fs: FileSystem | None = None,
             producer_state_manager_config: ProducerStateManagerConfig | None = None) -> Log:
        """Open (or create) the partition in ``directory``, recovering it if it was not shut down cleanly.

        A newly created directory gets its ``partition.metadata`` (``topic_id``, or a random one).
        With ``read_only`` nothing on disk is created, recovered, truncated or deleted: the log is
        read as it is, a torn tail simply invisible (for readers in other processes), through ``fs``
        (default: the local filesystem). Without ``read_only`` ``fs`` must be local or None.
        ``producer_state_manager_config``: the producer-id expiry, shared by a ``LogManager``'s logs
        (default: its own, with Kafka's default ``producer.id.expiration.ms``).
        """
        directory = Path(directory)
        config = config or LogConfig()
        parse_topic_partition(directory.name)  # a clear error before anything is created
        if read_only:
            fs = fs or LOCAL_FILESYSTEM
            if not fs.is_dir(directory):
                raise KafkaStorageError(f"Partition directory {fs.describe(directory)} does not exist")
            producer_state = ProducerStateManager(directory, time=time, read_only=True, fs=fs,
                                                  config=producer_state_manager_config)
            segments, offsets = LogLoader(directory, config, time=time, read_only=True,
                                          log_start_offset=log_start_offset,
                                          recovery_point=recovery_point,
                                          producer_state=producer_state, fs=fs).load_read_only()
            return cls(directory, config, segments, offsets, time=time, read_only=True,
                       producer_state=producer_state,
                       leader_epoch_cache=LeaderEpochCache(directory, read_only=True, fs=fs), fs=fs)
        if fs is not None and not isinstance(fs, LocalFileSystem):
            raise KafkaStorageError(
                f"Cannot open {fs.describe(directory)} for writing: writes need a local directory")
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        metadata = PartitionMetadataFile(directory / PARTITION_METADATA_FILE)
        if not metadata.exists() and (created or topic_id is not None):
            # Kafka writes the topic id when the partition is created, before the first append.
            metadata.write(topic_id if topic_id is not None else Uuid.random())
        epoch_cache = LeaderEpochCache(directory)
        producer_state = ProducerStateManager(directory, time=time, config=producer_state_manager_config)
        loader = LogLoader(directory, config, time=time, read_only=False, log_start_offset=log_start_offset,
                           recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown,
                           producer_state=producer_state, leader_epoch_cache=epoch_cache)
        segments, offsets = loader.load()
        opened = cls(directory, config, segments, offsets, time=time, read_only=False,
                     producer_state=producer_state, leader_epoch_cache=epoch_cache)
        opened._recovery_report = loader.report
        return opened

    # --- properties -------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def recovery_report(self) -> RecoveryReport:
        """What opening this log cut from its data (no cuts: nothing; always so when read-only)."""
        return self._recovery_report

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    @property
    def time(self) -> Time:
        return self._time

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
        return self._current_end().offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        end = self._current_end()
        return LogOffsetMetadata(end.offset, end.segment_base_offset, end.position)

    @property
    def high_watermark(self) -> int:
        # A single replica: everything appended is replicated.
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        end = self._current_end()  # read before the first unstable offset (see module docstring)
        first_unstable = self._first_unstable_offset()
        if first_unstable is None or first_unstable >= end.offset:
            return end.offset
        return first_unstable

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

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def latest_epoch(self) -> int | None:
        cache = self._leader_epoch_cache
        return cache.latest_epoch() if cache is not None else None

    @property
    def leader_epoch(self) -> int:
        """The epoch a leader append stamps on its batches unless told otherwise: the highest the
        log has held (in its leader-epoch cache, or used by an append since it opened), 0 for a new
        log. A writer continues the leadership the directory records -- Kafka's controller only
        ever raises a partition's epoch -- so a directory Kafka wrote at epoch 7 goes on at 7, and
        its cache keeps that history (an append at a lower epoch would drop the later epochs from it,
        as Kafka's ``assign`` does)."""
        latest = self.latest_epoch
        if latest is not None and latest > self._leader_epoch:
            self._leader_epoch = latest  # kept: a truncation that empties the cache does not lower it
        return self._leader_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) of ``leader_epoch`` from the leader-epoch cache (Kafka's
        ``endOffsetForEpoch``); None when undefined (no cache, an unknown epoch)."""
        cache = self._leader_epoch_cache
        if cache is None:
            return None
        epoch, end = cache.end_offset_for(leader_epoch, self.log_end_offset)
        return None if end < 0 else (epoch, end)

    def become_leader(self) -> None:
        """What Kafka's ``Partition.makeLeader`` does to the log: its leader epoch starts at the log
        end (``maybeAssignEpochStartOffset``), so that even an empty partition answers
        OffsetForLeaderEpoch and ListOffsets with its epoch. Nothing changes when the cache already
        holds that epoch or a later one."""
        cache = self._leader_epoch_cache
        if cache is None:
            return
        with self._lock:
            self._check_writable()
            cache.assign(self.leader_epoch, self.log_end_offset)
            cache.flush()

    def __repr__(self) -> str:
        return (f"Log({self._dir.name}, start={self._log_start_offset}, end={self._end.offset}, "
                f"segments={len(self._segments)})")

    def _current_end(self) -> _EndSnapshot:
        if self._read_only:
            self._refresh_read_only_end()
        return self._end

    def _snapshot_end(self, offset: int) -> _EndSnapshot:
        active = self._segments.active_segment
        return _EndSnapshot(offset, active.base_offset, active.size_in_bytes)

    def _check_writable(self) -> None:
        if self._read_only:
            raise KafkaStorageError(f"Log {self._dir} is open read-only")
        if self._closed:
            raise KafkaStorageError(f"Log {self._dir} is closed")

    # --- transactions: the first unstable offset ---------------------------------------------

    def _compute_first_unstable(self) -> LogOffsetMetadata | None:
        found = self._producer_state.first_unstable_offset()
        if found is None:
            return None
        # An open transaction that began before the log start offset is unstable from the start on.
        if found.message_offset < self._log_start_offset:
            return LogOffsetMetadata(self._log_start_offset)
        return found

    def _first_unstable_offset(self) -> int | None:
        if not self._producer_state_loaded:
            self._load_read_only_producer_state()
        found = self._first_unstable
        return None if found is None else found.message_offset

    def _load_read_only_producer_state(self) -> None:
        """Rebuild, for a reader, the producer state up to the end it sees: from the writer's latest
        snapshot (never touching a file) plus the batches after it."""
        with self._lock:
            if self._producer_state_loaded:
                return
            end = self._end
            state = self._producer_state
            state.load_read_only(self._log_start_offset, end.offset)
            self._replay_into_producer_state(state.map_end_offset, end)
            self._producer_state_loaded = True
            self._first_unstable = self._compute_first_unstable()

    def _replay_into_producer_state(self, from_offset: int, end: _EndSnapshot) -> None:
        state = self._producer_state
        if from_offset >= end.offset:
            return
        for segment in self._segments.values(from_offset, end.offset + 1):
            if segment.base_offset > end.segment_base_offset:
                break
            found = segment.translate_offset(from_offset) if segment.base_offset <= from_offset else None
            if segment.base_offset <= from_offset and found is None:
                continue
            position = found.position if found is not None else 0
            limit = end.position if segment.base_offset == end.segment_base_offset else segment.size_in_bytes
            for batch in segment.log.batches(position, limit):
                state.apply(batch)
        state.update_map_end_offset(end.offset)

    # --- read-only: following a writer in another process ----------------------------------

    def _read_only_start(self) -> _EndSnapshot:
        """Where a reader starts looking for the end of the active segment: its last offset-index
        entry, whose batch is whole (a writer indexes a batch after writing it)."""
        active = self._segments.active_segment
        from_start = _EndSnapshot(active.base_offset, active.base_offset, 0)
        entry = active.offset_index.lookup(INT64_MAX)
        if entry.position == 0 or entry.position > active.size_in_bytes:
            return from_start
        try:
            found = active.translate_offset(entry.offset)
            if found is None or found.position != entry.position:
                return from_start
            # Positioned at the indexed batch; the scan of _refresh_read_only_end counts it.
            first = next(active.log.batches(found.position), None)
        except CorruptRecordError:
            return from_start  # an index that does not match the data (a crashed writer): scan it all
        if first is None:
            return from_start
        return _EndSnapshot(first.base_offset, active.base_offset, found.position)

    @staticmethod
    def _scan_segment_end(segment: LogSegment, start: _EndSnapshot) -> _EndSnapshot:
        """The end of the last whole, valid batch from ``start`` on. A preallocated or torn tail ends
        the scan: size fields that make no sense, or a last batch whose CRC does not match yet."""
        ends: list[tuple[RecordBatch, _EndSnapshot]] = []
        try:
            for batch in segment.log.batches(start.position):
                ends.append((batch, _EndSnapshot(batch.next_offset, segment.base_offset,
                                                 batch.position + batch.size_in_bytes)))
        except CorruptRecordError:
            pass  # zeros of a preallocated file, or a header caught mid-write
        # Bytes of one write land in order, so only the tail can be incomplete.
        while ends and not ends[-1][0].is_valid():
            ends.pop()
        return ends[-1][1] if ends else start

    def _refresh_read_only_end(self) -> None:
        """A read-only log follows a writer in another process: pick up segments it rolled and whole
        batches it appended since we last looked. The LEO only ever moves forward here."""
        with self._lock:
            active = self._segments.active_segment
            try:
                found_logs = list_segment_logs(self._fs, self._dir)
            except KafkaStorageError:
                found_logs = []  # the directory went away: the next refresh sees the new state
            for base, size in found_logs:
                if base <= active.base_offset:
                    continue
                try:
                    segment = open_segment(self._dir, base, self._config, self._time,
                                           file_already_exists=True, read_only=True, fs=self._fs,
                                           log_size=size)
                except KafkaStorageError:
                    continue  # deleted or renamed under us: the next refresh will see the new state
                self._segments.add(segment)
            old = end = self._end
            for segment in self._segments.values(end.segment_base_offset, INT64_MAX):
                if segment.base_offset < end.segment_base_offset:
                    continue
                segment.log.refresh_size()
                start = end if segment.base_offset == end.segment_base_offset else _EndSnapshot(
                    max(end.offset, segment.base_offset), segment.base_offset, 0)
                found = self._scan_segment_end(segment, start)
                if found.position > 0 or segment.base_offset == end.segment_base_offset:
                    end = found
            if end.offset > old.offset or (end.offset == old.offset and end.position > old.position):
                if self._producer_state_loaded:
                    self._replay_into_producer_state(self._producer_state.map_end_offset, end)
                    self._first_unstable = self._compute_first_unstable()
                self._end = end

    def _retrying(self, read: Callable[..., _R], *args: Any) -> _R:
        """``read(*args)``; a read-only log retries it after taking in replaced segments."""
        for attempt in range(_READ_ONLY_ATTEMPTS):
            try:
                return read(*args)
            except SegmentReplacedError:
                if not self._read_only or attempt + 1 == _READ_ONLY_ATTEMPTS:
                    raise
                self._reopen_replaced_segments()
        raise AssertionError("unreachable")

    def _reopen_replaced_segments(self) -> None:
        """Read-only: the segments a writer in another process replaced (the cleaner's swap) or
        deleted (retention) since this log opened them give way to what is on disk now. Those let go
        stay open until :meth:`close`: batches already handed out may still read through them."""
        with self._lock:
            try:
                on_disk = dict(list_segment_logs(self._fs, self._dir))
            except KafkaStorageError:
                on_disk = {}
            active_base = self._segments.active_segment.base_offset
            replaced = set()
            for segment in list(self._segments):
                if segment.base_offset in on_disk and segment.log.is_current_file():
                    continue
                self._segments.remove(segment.base_offset)
                self._retired.append(segment)
                replaced.add(segment.base_offset)
            for base, size in sorted(on_disk.items()):
                if base in self._segments or base > active_base:
                    continue  # newer segments are the end refresh's to pick up
                try:
                    self._segments.add(open_segment(self._dir, base, self._config, self._time,
                                                    file_already_exists=True, read_only=True, fs=self._fs,
                                                    log_size=size))
                except KafkaStorageError:
                    continue  # gone again: the next attempt looks once more
            first = self._segments.first_segment
            if first is None:
                raise SegmentReplacedError(f"Every segment of {self._fs.describe(self._dir)} went away")
            self._log_start_offset = max(self._log_start_offset, first.base_offset)
            if self._end.segment_base_offset in replaced:
                # The end's segment was replaced too: find the end again in what is there now.
                last = self._segments.active_segment
                self._end = self._scan_segment_end(last, _EndSnapshot(last.base_offset, last.base_offset, 0))
            self._refresh_read_only_end()

    # --- appending --------------------------------------------------------------------------

    def _append_settings(self) -> _AppendSettings:
        settings = self._settings
        if settings is None or settings.source is not self._config:  # first append, or a new config
            settings = self._settings = _AppendSettings.of(self._config, f"{self.topic}-{self.partition}")
        return settings

    def append_as_leader(self, records: MemoryRecords, *, leader_epoch: int | None = None,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Validate ``records``, assign offsets from the LEO and append them (Kafka's leader path),
        stamped with ``leader_epoch`` (default :attr:`leader_epoch`).

        A retried batch of an idempotent producer (same epoch and sequence range as one of its last
        five) is not written again: the returned info then names the offsets it already has.
        """
        with self._lock:
            self._check_writable()
            if leader_epoch is None:
                leader_epoch = self.leader_epoch
            elif leader_epoch > self._leader_epoch:
                self._leader_epoch = leader_epoch
            settings = self._append_settings()
            # One clock reading per append: validation, the roll check and the flush check.
            now = self._time.milliseconds()
            first_offset = self._end.offset
            fast = validate_lone_v2_batch(
                records, offset_counter=first_offset, now_ms=now, config=settings.validator,
                partition_leader_epoch=leader_epoch, origin=origin,
                max_message_bytes=settings.max_message_bytes, log_start_offset=self._log_start_offset)
            if fast is not None:  # the usual produce: the same result, checked in one pass
                return self._append(fast[0].validated_records, fast[1], origin, settings, now)
            info = analyze_and_validate_records(records, origin, assign_offsets=True,
                                                max_message_bytes=settings.max_message_bytes)
            if info.valid_bytes <= 0:
                return info
            valid = trim_invalid_bytes(records, info)
            result = validate_messages_and_assign_offsets(
                valid, offset_counter=first_offset, now_ms=now,
                config=settings.validator, partition_leader_epoch=leader_epoch, origin=origin,
                source_compression=info.source_compression)
            info = info.with_validation_result(result, first_offset=first_offset,
                                               timestamp_type=settings.timestamp_type,
                                               log_start_offset=self._log_start_offset)
            return self._append(result.validated_records, info, origin, settings, now)

    def append_as_follower(self, records: MemoryRecords) -> LogAppendInfo:
        """Append ``records`` with the offsets they carry (Kafka's follower path: no validation of
        the records, max.message.bytes not enforced)."""
        with self._lock:
            self._check_writable()
            settings = self._append_settings()
            info = analyze_and_validate_records(records, AppendOrigin.REPLICATION, assign_offsets=False,
                                                max_message_bytes=settings.max_message_bytes,
                                                ignore_record_size=True)
            if info.valid_bytes <= 0:
                return info
            if not info.offsets_monotonic:
                raise OffsetsOutOfOrderError(f"Out of order offsets found in append to {self._dir.name}")
            valid = trim_invalid_bytes(records, info)
            first = info.first_or_last_offset_of_first_batch
            if first < self._end.offset:
                what = "First offset" if info.first_offset >= 0 else "Last offset of the first batch"
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self._dir.name}: {what} {first} is less than the "
                    f"next offset {self._end.offset} (last offset in append: {info.last_offset}, log start "
                    f"offset {self._log_start_offset})")
            return self._append(valid, info, AppendOrigin.REPLICATION, settings, self._time.milliseconds())

    def _append(self, validated: MemoryRecords, info: LogAppendInfo, origin: AppendOrigin,
                settings: _AppendSettings, now: int) -> LogAppendInfo:
        size = validated.size_in_bytes
        if size > settings.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self._dir.name} which exceeds "
                f"the maximum configured segment size of {settings.segment_bytes}.")
        last_offset = info.last_offset
        segment = self._maybe_roll(size, info, settings, now)
        updated: list[ProducerAppendInfo]
        completed: list[CompletedTxn]
        lone = _lone_v2_batch_without_producer(validated.buffer)
        if lone is not None:
            # What _analyze_producer_state and _update_leader_epochs do for such a batch.
            updated, completed = [], []
            base_offset, epoch = lone
            cache = self._leader_epoch_cache
            if cache is not None and epoch >= 0:
                cache.assign(epoch, base_offset)
        else:
            batches = list(validated.batches())
            updated, completed, duplicate = self._analyze_producer_state(segment, batches, origin)
            if duplicate is not None:
                return replace(info, first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
                               log_append_time=duplicate.timestamp, log_start_offset=self._log_start_offset)
            self._update_leader_epochs(batches)
        segment.append(last_offset, info.max_timestamp, info.shallow_offset_of_max_timestamp, validated)
        state = self._producer_state
        for append_info in updated:
            state.update(append_info)
        for txn in completed:
            lso = state.last_stable_offset(txn)
            if txn.is_aborted:
                segment.update_txn_index(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            state.complete_txn(txn)
        state.update_map_end_offset(last_offset + 1)
        if updated or completed:  # else no transaction started or ended: the first unstable offset stands
            # Publish the transaction state before the new end (readers read them in the other order).
            self._first_unstable = self._compute_first_unstable()
        self._end = _EndSnapshot(last_offset + 1, segment.base_offset, segment.size_in_bytes)
        self._maybe_flush_after_append(settings, now)
        if info.log_start_offset == self._log_start_offset:
            return info
        return _with_log_start_offset(info, self._log_start_offset)

    def _analyze_producer_state(
        self, segment: LogSegment, batches: list[RecordBatch], origin: AppendOrigin
    ) -> tuple[list[ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
        """Kafka's ``analyzeAndValidateProducerState``: epoch/sequence checks (which raise), the
        transactions the batches start or end, and a retried duplicate (which stops everything)."""
        state = self._producer_state
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        position = segment.size_in_bytes
        for batch in batches:
            if batch.magic >= MAGIC_V2 and batch.has_producer_id:
                pid = batch.producer_id
                if origin is AppendOrigin.CLIENT:
                    entry = state.last_entry(pid)
                    duplicate = entry.find_duplicate_batch(batch) if entry is not None else None
                    if duplicate is not None:
                        return [], [], duplicate
                # Where a transaction starts is kept, so the LSO's byte position needs no lookup.
                first_metadata = (LogOffsetMetadata(batch.base_offset, segment.base_offset, position)
                                  if batch.is_transactional else None)
                append_info = updated.get(pid)
                if append_info is None:
                    append_info = updated[pid] = state.prepare_update(pid, origin)
                txn = append_info.append(batch, first_metadata)
                if txn is not None:
                    completed.append(txn)
            position += batch.size_in_bytes
        return list(updated.values()), completed, None

    def _update_leader_epochs(self, batches: list[RecordBatch]) -> None:
        cache = self._leader_epoch_cache
        if cache is None:
            return
        for batch in batches:
            if batch.magic >= MAGIC_V2:
                if batch.partition_leader_epoch >= 0:
                    cache.assign(batch.partition_leader_epoch, batch.base_offset)
            elif cache.entries:
                # Kafka: legacy data after epoch-stamped data makes the epochs unreliable; forget them.
                log.warning("Clearing the leader epoch cache of %s after an append with message format v%d",
                            self._dir.name, batch.magic)
                cache.clear_and_flush()

    def _maybe_flush_after_append(self, settings: _AppendSettings, now: int) -> None:
        if (self._end.offset - self._recovery_point >= settings.flush_messages
                or now - self._last_flush_ms >= settings.flush_ms):
            self.flush()

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo, settings: _AppendSettings,
                    now: int) -> LogSegment:
        segment = self._segments.active_segment
        if not segment.should_roll_for(settings.max_segment_ms, settings.segment_bytes, info.max_timestamp,
                                       info.last_offset, messages_size, now):
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
                # An empty active segment at the same base (e.g. its index was full): recreate it.
                log.warning("Trying to roll a new segment at offset %d in %s: recreating the empty active "
                            "segment of the same base", new_offset, self._dir)
                self._mark_deleted(active)  # replaced in the map below, deleted later
            else:
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for {self._dir.name} with start offset {new_offset} "
                    f"which already exists as {existing!r}")
        elif new_offset < active.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new segment for {self._dir.name} with start offset {new_offset} lower "
                f"than the active segment's base offset {active.base_offset}")
        else:
            leftovers = [make(self._dir, new_offset) for make in (
                segment_log_file, offset_index_file, time_index_file, transaction_index_file)]
            for path in leftovers:
                if path.exists():
                    log.warning("Newly rolled segment file %s already exists; deleting it first", path)
                    path.unlink()
            active.on_become_inactive_segment()
        segment = open_segment(self._dir, new_offset, self._config, self._time, file_already_exists=False)
        self._segments.add(segment)
        self._end = _EndSnapshot(self._end.offset, segment.base_offset, 0)
        # A snapshot at the new base lets recovery of the new segment start there; the rolled
        # segments are flushed, which moves the recovery point to the new base (Kafka does both).
        self._producer_state.update_map_end_offset(new_offset)
        self._producer_state.take_snapshot()
        self._flush(new_offset, including_offset=False)
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
        batch with ``min_one_message``), never past the isolation level's bound (Kafka's fetch).

        ``OffsetOutOfRangeError`` outside [log start offset, LEO]. With ``TXN_COMMITTED`` the result
        lists the aborted transactions overlapping what was read, as a fetch response does.
        """
        end = self._current_end()
        upper = self._upper_bound(isolation)
        if start_offset < self._log_start_offset or start_offset > end.offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self._dir.name}, "
                f"but we only have log segments in the range {self._log_start_offset} to {end.offset}.")
        if max_length < 0:
            raise IllegalArgumentError(f"Invalid max length {max_length} for a read from {self._dir.name}")
        aborted: list[AbortedTxn] | None = [] if isolation is FetchIsolation.TXN_COMMITTED else None
        if start_offset >= upper:
            bound_base, bound_position = self._position_of(upper, end)
            return FetchDataInfo(LogOffsetMetadata(start_offset, bound_base, bound_position)
                                 if start_offset == upper else LogOffsetMetadata(start_offset),
                                 MemoryRecords.EMPTY, False, aborted)
        bound_base, bound_position = self._position_of(upper, end)
        segment = self._segments.floor_segment(start_offset)
        while segment is not None and segment.base_offset <= bound_base:
            max_position = bound_position if segment.base_offset == bound_base else segment.size_in_bytes
            fetch = segment.read(start_offset, max_length, max_position, min_one_message)
            if fetch is not None:
                if aborted is not None:
                    fetch = self._add_aborted_transactions(start_offset, segment, fetch, end)
                return fetch
            segment = self._segments.higher_segment(segment.base_offset)
        return FetchDataInfo(LogOffsetMetadata(end.offset, end.segment_base_offset, end.position),
                             MemoryRecords.EMPTY, False, aborted)

    def _add_aborted_transactions(self, start_offset: int, segment: LogSegment, fetch: FetchDataInfo,
                                  end: _EndSnapshot) -> FetchDataInfo:
        """Kafka's ``addAbortedTransactions``: the aborts overlapping [start, the first offset after
        the fetched bytes), searched from this segment on until a txn index says it is complete."""
        metadata = fetch.fetch_offset_metadata
        start_position = OffsetPosition(metadata.message_offset, metadata.relative_position_in_segment)
        upper = segment.fetch_upper_bound_offset(start_position, fetch.records.size_in_bytes)
        if upper is None:
            higher = self._segments.higher_segment(segment.base_offset)
            upper = higher.base_offset if higher is not None else end.offset
        found: list[AbortedTxn] = []
        current: LogSegment | None = segment
        while current is not None:
            result = current.collect_aborted_txns(start_offset, upper)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
            current = self._segments.higher_segment(current.base_offset)
        return FetchDataInfo(fetch.fetch_offset_metadata, fetch.records, fetch.first_entry_incomplete, found)

    def _position_of(self, offset: int, end: _EndSnapshot) -> tuple[int, int]:
        """(segment base, byte position) of the batch boundary at ``offset`` (which is ≤ the LEO)."""
        if offset >= end.offset:
            return end.segment_base_offset, end.position
        first_unstable = self._first_unstable
        if (first_unstable is not None and first_unstable.message_offset == offset
                and not first_unstable.message_offset_only):
            return first_unstable.segment_base_offset, first_unstable.relative_position_in_segment
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
        """Every whole batch overlapping [start_offset, end_offset) below the isolation bound, lazily,
        segment by segment.

        Only segments that can hold the range are touched, and within the first one the offset index
        finds where to start. A start below the log start offset reads from the log start offset.
        A read-only log whose segments a writer in another process replaced meanwhile (compaction,
        retention) goes on from the next offset in what is on disk now.
        """
        if not self._read_only:
            yield from self._batches_once(start_offset, end_offset, isolation)
            return
        start = start_offset
        for attempt in range(_READ_ONLY_ATTEMPTS):
            try:
                for batch in self._batches_once(start, end_offset, isolation):
                    yield batch
                    start = batch.last_offset + 1
                return
            except SegmentReplacedError:
                if attempt + 1 == _READ_ONLY_ATTEMPTS:
                    raise
                self._reopen_replaced_segments()

    def _batches_once(self, start_offset: int, end_offset: int | None,
                      isolation: FetchIsolation) -> Iterator[RecordBatch]:
        end = self._current_end()
        upper = self._upper_bound(isolation)
        stop = upper if end_offset is None else min(end_offset, upper)
        start = max(start_offset, self._log_start_offset)
        if start >= stop:
            return
        stop_base, stop_position = self._position_of(upper, end)
        for segment in self._segments.values(start, stop):
            if segment.base_offset > stop_base:
                break
            found = segment.translate_offset(start) if segment.base_offset <= start else None
            if segment.base_offset <= start and found is None:
                continue
            position = found.position if found is not None else 0
            limit = stop_position if segment.base_offset == stop_base else segment.size_in_bytes
            for batch in segment.log.batches(position, limit):
                last_offset = batch.last_offset
                if last_offset >= stop and batch.base_offset >= stop:
                    return
                if last_offset >= start:
                    yield batch
                if last_offset + 1 >= stop:
                    return

    def visible_batches(self, start_offset: int, end_offset: int | None = None, *,
                        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> Iterator[RecordBatch]:
        """The data batches overlapping [start_offset, end_offset) as a consumer sees them: control
        batches hidden and, with ``TXN_COMMITTED``, the batches of aborted transactions too (read up to
        the last stable offset). Whole batches: the first and last may hold records outside the range."""
        upper = self._upper_bound(isolation)
        stop = upper if end_offset is None else min(end_offset, upper)
        start = max(start_offset, self._log_start_offset)
        aborted_filter = (AbortedFilter(self.collect_aborted_transactions(start, stop))
                          if isolation is FetchIsolation.TXN_COMMITTED else None)
        for batch in self.batches(start, stop, isolation=isolation):
            # The filter sees control batches too: an ABORT marker ends its producer's transaction.
            if aborted_filter is not None and aborted_filter.skip(batch):
                continue
            if not batch.is_control:
                yield batch

    def records(self, start_offset: int, end_offset: int | None = None, *,
                isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> Iterator[Record]:
        """Records with offsets in [start_offset, end_offset) as a consumer sees them (the records of
        ``visible_batches`` within the range)."""
        upper = self._upper_bound(isolation)
        stop = upper if end_offset is None else min(end_offset, upper)
        start = max(start_offset, self._log_start_offset)
        for batch in self.visible_batches(start, stop, isolation=isolation):
            for record in batch.records():
                if record.offset >= stop:
                    return
                if record.offset >= start:
                    yield record

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), from the txn indexes
        (an abort may be indexed in a later segment than its data)."""
        return self._retrying(self._collect_aborted_once, start_offset, upper_bound_offset)

    def _collect_aborted_once(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        found: list[AbortedTxn] = []
        segment = self._segments.floor_segment(start_offset) or self._segments.first_segment
        while segment is not None:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
            segment = self._segments.higher_segment(segment.base_offset)
        return found

    def offset_for_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ``fetchOffsetByTimestamp``: the first record with timestamp ≥ target in the first
        segment whose largest timestamp reaches it (time index → offset index → scan; None if no
        record there qualifies); -2 earliest and -1 latest (no timestamp), -3 the record with the
        largest timestamp; -4 earliest local is -2, and -5 latest tiered and -6 earliest pending
        upload are offset -1, as Kafka answers them for a log without tiered storage."""
        if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = self._log_start_offset
            cache = self._leader_epoch_cache
            earliest = cache.earliest_entry() if cache is not None else None
            epoch = earliest.epoch if earliest is not None and earliest.start_offset <= start else None
            return TimestampAndOffset(NO_TIMESTAMP, start, epoch)
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset, self.latest_epoch)
        if target_timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return TimestampAndOffset(NO_TIMESTAMP, -1, -1)  # no tiered storage: Kafka's answer
        if target_timestamp != MAX_TIMESTAMP and target_timestamp < 0:
            raise IllegalArgumentError(f"Invalid target timestamp {target_timestamp} for {self._dir.name}")
        return self._retrying(self._offset_for_timestamp_once, target_timestamp)

    def fetch_offset_for_timestamp(self, target_timestamp: int,
                                   last_fetchable_offset: int) -> TimestampAndOffset | None:
        """What ListOffsets answers a consumer that may read up to ``last_fetchable_offset`` (the high
        watermark, or the last stable offset under read_committed): Kafka's
        ``Partition.fetchOffsetForTimestamp`` and the filter ``ReplicaManager`` applies to it. -1 is
        that offset itself; -2 and -4 the log start, whatever it is; any other answer at or past
        the fetchable offset is none (None), as a record there is not visible yet. An answer of
        offset -1 (-5 and -6 on a log without tiered storage) also means "no offset" to clients."""
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, last_fetchable_offset, self.latest_epoch)
        found = self.offset_for_timestamp(target_timestamp)
        if (found is not None and found.offset >= last_fetchable_offset
                and target_timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)):
            return None
        return found

    def _offset_for_timestamp_once(self, target_timestamp: int) -> TimestampAndOffset | None:
        end = self._current_end()
        segments = list(self._segments)
        if target_timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_and_offset(segments, end)
        for segment in segments:
            if segment.largest_timestamp >= target_timestamp:
                found = segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
                return found if found is not None and found.offset < end.offset else None
        return None

    def _max_timestamp_and_offset(self, segments: list[LogSegment],
                                  end: _EndSnapshot) -> TimestampAndOffset | None:
        if not segments:
            return None
        best = segments[0]
        for segment in segments[1:]:
            if segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment  # the first segment holding the maximum wins, as Kafka's maxBy
        known = best.read_max_timestamp_and_offset_so_far()
        if known.timestamp < 0:
            return None
        position = best.offset_index.lookup(known.offset).position
        limit = end.position if best.base_offset == end.segment_base_offset else best.size_in_bytes
        for batch in best.log.batches(position, limit):
            if batch.max_timestamp != known.timestamp:
                continue
            if batch.magic == MAGIC_V0:
                return None
            columns = batch.decode_columns()
            for timestamp, offset in zip(columns.timestamps, columns.offsets, strict=True):
                if timestamp == known.timestamp:
                    epoch = batch.partition_leader_epoch if batch.magic >= MAGIC_V2 else -1
                    return TimestampAndOffset(timestamp, offset, epoch if epoch >= 0 else None)
            return None
        return None

    # --- compaction -------------------------------------------------------------------------

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """Producer id -> its last data batch's last offset and epoch, for every producer the log
        knows (what the cleaner must not remove entirely)."""
        with self._lock:
            return {pid: LastRecord(entry.last_data_offset if entry.last_data_offset >= 0 else None,
                                    entry.producer_epoch)
                    for pid, entry in self._producer_state.producers.items()}

    def remove_expired_producers(self, current_time_ms: int | None = None) -> int:
        """Forget the producers idle past ``producer.id.expiration.ms`` without an open transaction
        (Kafka's ``UnifiedLog.removeExpiredProducers``, run by the broker's periodic check); returns
        how many. Under the log's lock: appends and the cleaner read the same entries."""
        with self._lock:
            self._check_writable()
            now = self._time.milliseconds() if current_time_ms is None else current_time_ms
            return self._producer_state.remove_expired_producers(now)

    def replace_segments(self, new_segments: list[LogSegment],
                         old_segments: list[LogSegment]) -> list[LogSegment]:
        """Swap ``new_segments`` (files suffixed ``.cleaned``) in for ``old_segments`` (Kafka's
        ``replaceSegments``; the steps and their crash safety are in ``segment_swap``). The old
        segments' files are deleted after ``file.delete.delay.ms``.

        Old segments no longer in the log (deleted by retention meanwhile) are skipped. Returns the
        old segments that were deleted without a new segment of the same base offset.
        """
        with self._lock:
            self._check_writable()
            new_sorted = sorted(new_segments, key=attrgetter("base_offset"))
            old_sorted = sorted((s for s in old_segments if self._segments.get(s.base_offset) is s),
                                key=attrgetter("base_offset"))
            if not new_sorted:
                raise IllegalArgumentError(f"No segments to swap into {self._dir.name}")
            new_end = max(s.read_next_offset() for s in new_sorted)
            if new_end > self._end.offset:
                # Truncated meanwhile (Kafka aborts cleaning first; this keeps data from coming back).
                raise KafkaStorageError(
                    f"Cannot swap segments ending at offset {new_end} into {self._dir.name}, whose log now "
                    f"ends at {self._end.offset}")
            active = self._segments.active_segment
            if any(s is active for s in old_sorted):
                raise IllegalArgumentError(f"The active segment of {self._dir.name} cannot be replaced")
            deadline = self._time.milliseconds() + self._config.file_delete_delay_ms
            deleted_not_replaced = swap_segments(
                self._dir, self._segments, new_sorted, old_sorted,
                lambda segment: self._add_pending_delete(deadline, segment))
            for segment in deleted_not_replaced:
                self._producer_state.delete_snapshot(segment.base_offset)
            return deleted_not_replaced

    # --- flushing, truncation, deletion -----------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding data below ``offset`` (default: everything, the active segment
        included) and move the recovery point there."""
        with self._lock:
            self._check_writable()
            if offset is None:
                self._flush(self._end.offset, including_offset=True)
            else:
                self._flush(min(offset, self._end.offset), including_offset=False)

    def _flush(self, offset: int, *, including_offset: bool) -> None:
        flush_offset = offset + 1 if including_offset else offset
        current = self._recovery_point
        if flush_offset <= current:
            return
        flushed = self._segments.values(current, flush_offset)
        for segment in flushed:
            segment.flush()
        if any(s.base_offset >= current for s in flushed):
            fsync_directory(self._dir)  # a new segment file must survive a crash too
        if self._leader_epoch_cache is not None:
            self._leader_epoch_cache.flush()
        if offset > self._recovery_point:
            self._recovery_point = offset
        self._last_flush_ms = self._time.milliseconds()

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at and above ``target_offset`` (whole batches). Returns whether anything went."""
        with self._lock:
            self._check_writable()
            if target_offset < 0:
                raise IllegalArgumentError(
                    f"Cannot truncate partition {self._dir.name} to a negative offset ({target_offset})")
            if target_offset >= self._end.offset:
                if self._leader_epoch_cache is not None:
                    self._leader_epoch_cache.truncate_from_end(self._end.offset)
                return False
            first = self._segments.first_segment
            if first is not None and first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [s for s in self._segments if s.base_offset > target_offset]
            self._schedule_delete(doomed)
            active = self._segments.active_segment
            active.truncate_to(target_offset)
            new_end = active.read_next_offset()
            self._recovery_point = min(self._recovery_point, new_end)
            if self._leader_epoch_cache is not None:
                self._leader_epoch_cache.truncate_from_end(new_end)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            rebuild_producer_state(self._producer_state, self._segments, self._log_start_offset, new_end)
            self._first_unstable = self._compute_first_unstable()
            self._end = self._snapshot_end(new_end)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset`` (also the new log start offset)."""
        with self._lock:
            self._check_writable()
            if new_offset < 0:
                raise IllegalArgumentError(f"Cannot start partition {self._dir.name} at a negative offset")
            old = list(self._segments)
            same_base = self._segments.get(new_offset)
            if same_base is not None:
                self._mark_deleted(same_base)  # its files make way; it stays readable until replaced
            # The new segment goes in before the old ones go, so the log is never without one.
            segment = open_segment(self._dir, new_offset, self._config, self._time, file_already_exists=False)
            self._segments.add(segment)
            self._schedule_delete([s for s in old if s.base_offset != new_offset])
            self._log_start_offset = new_offset
            self._recovery_point = min(self._recovery_point, new_offset)
            if self._leader_epoch_cache is not None:
                self._leader_epoch_cache.clear_and_flush()
            self._producer_state.truncate_fully_and_start_at(new_offset)
            self._first_unstable = None
            self._end = self._snapshot_end(new_offset)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """DeleteRecords: raise the log start offset (never lower it, never past the high watermark).
        Segments wholly below it go at the next retention pass (or use :meth:`delete_records_before`)."""
        with self._lock:
            self._check_writable()
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset of {self._dir.name} to {new_log_start_offset} "
                    f"since it is larger than the high watermark {self.high_watermark}")
            if new_log_start_offset <= self._log_start_offset:
                return False
            self._set_log_start_offset(new_log_start_offset)
            return True

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` and delete the segments wholly below it
        (DeleteRecords). As Kafka's ``Partition.deleteRecordsOnLeader``: a log whose cleanup policy
        does not delete (``compact``) refuses, its records go only by key; then a negative offset is
        out of range."""
        with self._lock:
            if not self._config.delete:
                raise PolicyViolationError(
                    f"Records of partition {self.topic}-{self.partition} can not be deleted due to the "
                    "configured policy")
            if offset < 0:
                raise OffsetOutOfRangeError(
                    f"The offset {offset} for partition {self.topic}-{self.partition} is not valid")
            self.maybe_increment_log_start_offset(offset)
            deleted = delete_old_segments(self, log_start_offset_only=True)
            self.delete_pending_files()
            return deleted

    def delete_old_segments(self) -> int:
        """Retention (log start offset, size, time — spec §10) over whole segments; returns how many
        were deleted. Their files are renamed ``.deleted`` and removed after ``file.delete.delay.ms``
        (by this or a later call, :meth:`delete_pending_files` or :meth:`close`)."""
        with self._lock:
            self._check_writable()
            self.delete_pending_files()
            return delete_old_segments(self)

    def delete_segments(self, segments: list[LogSegment], reason: str) -> int:
        """Kafka's ``deleteSegments``: delete ``segments``, which must be the oldest segments of the log
        in order (what retention chose, ``reason`` says why); returns how many were deleted.

        The log always keeps a segment: when every segment is to go, an empty one is rolled first (and
        if the roll recreated the last of them, that one stays). The log start offset moves to the
        first remaining segment before the files go, so no reader is sent to a segment being deleted.
        """
        with self._lock:
            self._check_writable()
            oldest = list(self._segments)[: len(segments)]
            if [s.base_offset for s in segments] != [s.base_offset for s in oldest]:
                raise IllegalArgumentError(
                    f"Only the oldest segments of {self._dir.name} can be deleted, in order; got base "
                    f"offsets {[s.base_offset for s in segments]}")
            deletable = list(segments)
            if deletable and len(deletable) == len(self._segments):
                new_active = self._roll(self._end.offset)
                if deletable[-1].base_offset == new_active.base_offset:
                    deletable = deletable[:-1]  # that empty segment was recreated by the roll
            if not deletable:
                return 0
            log.info("Deleting segments of %s due to %s: %s", self._dir.name, reason,
                     [s.base_offset for s in deletable])
            following = self._segments.higher_segment(deletable[-1].base_offset)
            if following is not None:
                self._set_log_start_offset(following.base_offset)
            self._schedule_delete(deletable)
            return len(deletable)

    def _schedule_delete(self, segments: list[LogSegment]) -> None:
        """Kafka's asynchronous delete: out of the map and renamed ``.deleted`` now, the files removed
        after ``file.delete.delay.ms``; readers that hold the segment keep reading its open files."""
        for segment in segments:
            self._segments.remove(segment.base_offset)
            self._mark_deleted(segment)

    def _mark_deleted(self, segment: LogSegment) -> None:
        segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
        self._add_pending_delete(self._time.milliseconds() + self._config.file_delete_delay_ms, segment)
        self._producer_state.delete_snapshot(segment.base_offset)

    def _add_pending_delete(self, due_ms: int, segment: LogSegment) -> None:
        self._pending_deletes.append((due_ms, segment))
        listener = self._file_delete_listener
        if listener is not None:
            listener(due_ms)

    def set_file_delete_listener(self, listener: Callable[[int], None] | None) -> None:
        """``listener(due_ms)`` is called (under this log's lock, from whichever thread deletes) each time
        a segment is renamed ``.deleted``: at ``due_ms`` (this log's clock) :meth:`delete_pending_files`
        removes it. Kafka schedules that as a one-shot ``delete-file`` task after ``file.delete.delay.ms``;
        the listener lets the owner of the scheduler do so. It must not block."""
        with self._lock:
            self._file_delete_listener = listener

    @property
    def next_file_delete_ms(self) -> int | None:
        """When the earliest ``.deleted`` segment is due for removal (None: nothing waits)."""
        with self._lock:
            return min((t for t, _ in self._pending_deletes), default=None)

    def _set_log_start_offset(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        # Kafka's updateLogStartOffset: nothing below the log start offset is ever recovered again.
        self._recovery_point = max(self._recovery_point, offset)
        if self._leader_epoch_cache is not None:
            self._leader_epoch_cache.truncate_from_start(offset)
        self._producer_state.on_log_start_offset_incremented(offset)
        self._first_unstable = self._compute_first_unstable()

    def delete_pending_files(self, *, force: bool = False) -> int:
        """Remove the ``.deleted`` segments whose ``file.delete.delay.ms`` has passed (all with ``force``).

        Leftovers of a process that died are removed when the log is loaded.
        """
        with self._lock:
            now = self._time.milliseconds()
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (force or t <= now)]
        for segment in due:
            segment.close_handlers()
            segment.delete_if_exists()
        return len(due)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Snapshot the producer state, flush, and close every segment (final time-index entry,
        indexes trimmed). Segments waiting for deletion are deleted now. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                if not self._read_only:
                    self._producer_state.take_snapshot()
                    self._flush(self._end.offset, including_offset=True)
            finally:
                self._closed = True
                self._segments.close()
                for segment in self._retired:
                    segment.close()
                self._retired.clear()
                self.delete_pending_files(force=True)

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
        if batch.magic < MAGIC_V2 or not batch.is_transactional:
            return False
        pid = batch.producer_id
        if batch.is_control:
            self._active.discard(pid)
            return True
        return pid in self._active
