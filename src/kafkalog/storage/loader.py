"""Opening a partition directory: Kafka's LogLoader (spec §8).

Load order matters and follows Kafka: first a pass over the files (finish or undo interrupted
deletes, cleanings and swaps, drop orphaned indexes), then every ``.log`` becomes a segment, then —
only after an unclean shutdown — every segment from the recovery point on is recovered (indexes
rebuilt, the log cut at the first invalid or torn batch, later segments deleted).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kafkalog.clock import Time
from kafkalog.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
    NoSuchFileError,
)
from kafkalog.records.batch import RecordBatch
from kafkalog.storage.config import LogConfig
from kafkalog.storage.filesystem import LOCAL_FILESYSTEM, FileSystem
from kafkalog.storage.leader_epoch import LeaderEpochCache
from kafkalog.storage.log_file_utils import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    is_index_file,
    log_file,
    offset_from_file_name,
    parse_topic_partition,
    time_index_file,
)
from kafkalog.storage.log_segment import LogSegment, LogSegments
from kafkalog.storage.producer_state import ProducerStateManager, rebuild_producer_state
from kafkalog.storage.recovery_report import CutKind, DataCut, RecoveryReport
from kafkalog.storage.segment_swap import swap_segments

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class LoadedLogOffsets:
    log_start_offset: int
    recovery_point: int
    log_end_offset: int


def open_segment(directory: Path, base_offset: int, config: LogConfig, time: Time, *,
                 file_already_exists: bool, file_suffix: str = "", read_only: bool = False,
                 fs: FileSystem | None = None, log_size: int | None = None) -> LogSegment:
    """A segment with the partition's configured index interval, index size, jitter and preallocation."""
    return LogSegment.open(
        directory, base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        roll_jitter_ms=0 if read_only else config.random_segment_jitter(),
        time=time,
        file_already_exists=file_already_exists,
        init_file_size=0 if read_only else config.init_file_size,
        preallocate=False if read_only else config.preallocate,
        file_suffix=file_suffix,
        read_only=read_only,
        fs=fs,
        log_size=log_size,
    )


def list_segment_logs(fs: FileSystem, directory: Path) -> list[tuple[int, int]]:
    """(base offset, size) of every ``.log`` file of a partition directory, by base offset; files
    with other suffixes (``.deleted``, ``.swap``, ...) and names without an offset are not segments."""
    found = []
    for status in fs.list_dir(directory):
        if status.is_dir or not status.name.endswith(LOG_FILE_SUFFIX):
            continue
        base = offset_or_none(status.name)
        if base is not None:
            found.append((base, status.size))
    found.sort()
    return found


class LogLoader:
    """Turns a partition directory into a :class:`LogSegments` plus its offsets."""

    def __init__(self, directory: Path, config: LogConfig, *, time: Time, read_only: bool,
                 log_start_offset: int, recovery_point: int, had_clean_shutdown: bool = True,
                 producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochCache | None = None, fs: FileSystem | None = None) -> None:
        self._dir = directory
        self._fs = fs or LOCAL_FILESYSTEM
        self._config = config
        self._time = time
        self._read_only = read_only
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._had_clean_shutdown = had_clean_shutdown
        self._producer_state = producer_state
        self._epoch_cache = leader_epoch_cache
        self._segments = LogSegments()
        self._cuts: list[DataCut] = []

    @property
    def report(self) -> RecoveryReport:
        """What this load cut from the data (see ``recovery_report``)."""
        topic, partition = parse_topic_partition(self._dir.name)
        return RecoveryReport(topic, partition, tuple(self._cuts))

    # --- read-only ----------------------------------------------------------------------------

    def load_read_only(self) -> tuple[LogSegments, LoadedLogOffsets]:
        """Segments as they are on disk; nothing written, nothing scanned (the log finds its end
        itself). Leftover suffixed files are ignored. Files are read through the loader's filesystem;
        a ``.log`` is not touched until a read needs it (the listing gave its size)."""
        for base, size in list_segment_logs(self._fs, self._dir):
            self._segments.add(open_segment(self._dir, base, self._config, self._time,
                                            file_already_exists=True, read_only=True, fs=self._fs,
                                            log_size=size))
        if self._segments.is_empty:
            raise KafkaStorageError(
                f"Partition directory {self._fs.describe(self._dir)} holds no log segments")
        first = self._segments.first_segment
        assert first is not None
        start = max(self._log_start_offset, first.base_offset)
        # The end is found by the log (it follows a live writer); the base offset is a lower bound.
        end = self._segments.active_segment.base_offset
        return self._segments, LoadedLogOffsets(start, min(self._recovery_point, end), end)

    # --- read-write ---------------------------------------------------------------------------

    def load(self) -> tuple[LogSegments, LoadedLogOffsets]:
        self._remove_temp_files_and_finish_swaps()
        self._load_segment_files()
        if not self._had_clean_shutdown:
            self._recover_from(self._recovery_point)
        end = self._end_offset() if not self._segments.is_empty else None
        if end is not None and end < self._log_start_offset:
            log.warning("Log end offset %d of %s is below its log start offset %d: deleting every segment",
                        end, self._dir, self._log_start_offset)
            reason = f"log end offset {end} is below the log start offset {self._log_start_offset}"
            for segment in list(self._segments):
                self._delete_segment(segment, reason)
            if self._epoch_cache is not None:
                self._epoch_cache.clear_and_flush()
            self._producer_state.truncate_fully_and_start_at(self._log_start_offset)
            end = None
        if self._segments.is_empty:
            self._segments.add(open_segment(self._dir, self._log_start_offset, self._config, self._time,
                                            file_already_exists=False))
        if self._had_clean_shutdown and end is not None:
            recovery_point = end
        else:
            if end is None:
                end = self._end_offset()
            recovery_point = min(self._recovery_point, end)
        self._segments.active_segment.resize_indexes(self._config.segment_index_bytes)
        first = self._segments.first_segment
        assert first is not None
        start = max(self._log_start_offset, first.base_offset)
        if self._epoch_cache is not None:
            self._epoch_cache.truncate_from_end(end)
            self._epoch_cache.truncate_from_start(self._log_start_offset)
        # Snapshots taken by the temporary states of recovery are reread from disk here.
        self._producer_state.remove_stray_snapshots(self._segments.base_offsets())
        rebuild_producer_state(self._producer_state, self._segments, start, end)
        if self._cuts:
            # Library users hear of it even when nobody asks for the report.
            log.warning("Recovery of %s: %s", self._dir, self.report.describe())
        return self._segments, LoadedLogOffsets(start, recovery_point, end)

    def _delete_segment(self, segment: LogSegment, reason: str | None = None) -> None:
        """Remove a segment; with a ``reason`` its data counts as cut (reported)."""
        if reason is not None:
            self._cuts.append(DataCut(CutKind.DELETED, segment.log.path.name, segment.size_in_bytes, 0,
                                      segment.base_offset, reason))
        self._segments.remove(segment.base_offset)
        segment.close()
        segment.delete_if_exists()
        self._producer_state.delete_snapshot(segment.base_offset)

    def _end_offset(self) -> int:
        return self._segments.active_segment.read_next_offset()

    def _remove_temp_files_and_finish_swaps(self) -> None:
        """Spec §8.2 steps 1-3."""
        swap_files: list[Path] = []
        cleaned_files: list[Path] = []
        min_cleaned_offset = None
        for path in sorted(self._dir.iterdir()):
            if not path.is_file():
                continue
            name = path.name
            if name.endswith(DELETED_FILE_SUFFIX):
                if not name.endswith(".checkpoint" + DELETED_FILE_SUFFIX):
                    path.unlink(missing_ok=True)
            elif name.endswith(CLEANED_FILE_SUFFIX):
                offset = offset_or_none(name)
                if offset is not None and (min_cleaned_offset is None or offset < min_cleaned_offset):
                    min_cleaned_offset = offset
                cleaned_files.append(path)
            elif name.endswith(SWAP_FILE_SUFFIX):
                swap_files.append(path)
        # A swap at or above the oldest .cleaned file belongs to a split that never finished.
        remaining_swaps = []
        for path in swap_files:
            offset = offset_or_none(path.name)
            if min_cleaned_offset is not None and offset is not None and offset >= min_cleaned_offset:
                path.unlink(missing_ok=True)
            else:
                remaining_swaps.append(path)
        for path in cleaned_files:
            path.unlink(missing_ok=True)
        log_swaps = [p for p in remaining_swaps if p.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)]
        if log_swaps:
            bases = []
            ends = []
            for path in log_swaps:
                base = offset_from_file_name(path.name)
                # Probed read-only so that no index file is created for it.
                swap = open_segment(self._dir, base, self._config, self._time, file_already_exists=True,
                                    file_suffix=SWAP_FILE_SUFFIX, read_only=True)
                bases.append(base)
                ends.append(swap.read_next_offset())
                swap.close()
            lo, hi = min(bases), max(ends)
            # The swapped-in segments replace every old segment they cover.
            for path in list(self._dir.iterdir()):
                name = path.name
                if name.endswith(SWAP_FILE_SUFFIX) or not path.is_file():
                    continue
                offset = offset_or_none(name)
                if offset is not None and lo <= offset < hi:
                    path.unlink(missing_ok=True)
        for path in remaining_swaps:
            path.rename(path.with_name(path.name[: -len(SWAP_FILE_SUFFIX)]))

    def _load_segment_files(self) -> None:
        """Spec §8.2 steps 4-5."""
        for path in sorted(self._dir.iterdir()):
            if not path.is_file():
                continue
            if is_index_file(path):
                offset = offset_or_none(path.name)
                if offset is None or not log_file(self._dir, offset).exists():
                    log.warning("Deleting orphaned index file %s", path)
                    path.unlink(missing_ok=True)
        for path in sorted(self._dir.glob(f"*{LOG_FILE_SUFFIX}")):
            base = offset_or_none(path.name)
            if base is None:
                continue
            time_index_missing = not time_index_file(self._dir, base).exists()
            segment = open_segment(self._dir, base, self._config, self._time, file_already_exists=True)
            try:
                segment.sanity_check(time_index_missing)
            except (NoSuchFileError, CorruptIndexError) as e:
                log.warning("Recovering segment %s: %s", path, e)
                self._recover_segment(segment)
            if self._segments.get(base) is None:  # else an overflowed segment's split took its place
                self._segments.add(segment)

    def _recover_segment(self, segment: LogSegment) -> int:
        """Rebuild one segment's indexes from its data (and cut it at the first bad batch).

        Its ``.txnindex`` is rebuilt too, which needs the transactions open at its base offset: a
        temporary producer state is brought there from the earlier segments (and snapshots), and
        its snapshot at the end of this segment spares the next recovery that work.
        """
        size_before = segment.size_in_bytes
        reasons: list[str] = []
        state = self._producer_state_at(segment.base_offset)
        try:
            segment.recover(producer_state_hook=state.apply, leader_epoch_hook=self._epoch_hook,
                            invalid_hook=reasons.append)
        except LogSegmentOffsetOverflowError as e:
            rising, whole_end = _rising_batches(segment)
            if rising:
                # Offsets that go on rising past the segment's 32-bit range: what brokers before
                # KAFKA-6264's fix wrote. Kafka splits such a segment (its LogLoader's
                # splitOverflowedSegment), keeping every byte; so does kafkalog.
                return self._split_overflowed_segment(segment, e, whole_end)
            # An offset out of order as well as out of range is a damaged offset field (v2's is not
            # covered by the CRC): the log is cut before that batch, and the cut reported.
            position = _first_overflowing_batch(segment)
            log.warning("%s; truncating %s at position %d", e, segment.log.path, position)
            reasons.insert(0, str(e))
            segment.log.truncate_to(position)
            state = self._producer_state_at(segment.base_offset)
            segment.recover(producer_state_hook=state.apply, leader_epoch_hook=self._epoch_hook,
                            invalid_hook=reasons.append)
        state.take_snapshot()
        truncated = size_before - segment.size_in_bytes
        if truncated > 0:
            reason = reasons[0] if reasons else "an incomplete batch at the end, a torn write"
            self._cuts.append(DataCut(CutKind.TRUNCATED, segment.log.path.name, truncated,
                                      segment.size_in_bytes, segment.read_next_offset(), reason))
        return truncated

    def _split_overflowed_segment(self, segment: LogSegment, error: LogSegmentOffsetOverflowError,
                                  whole_end: int) -> int:
        """Copy ``segment``'s batches up to ``whole_end`` into as many new segments as their offsets
        need, each based at its first batch's offset (``LogSegment.append_from_file``), swap them in
        for it and recover them; returns the bytes cut: what follows the last whole batch (a torn
        write), and what the pieces' recovery cut. The split itself loses nothing; it only spreads
        the data over more files."""
        records = segment.log.slice(0, whole_end)
        pieces: list[LogSegment] = []
        position = 0
        try:
            while position < whole_end:
                first = next(iter(records.batches(position)))
                LogSegment.delete_files_if_exist(self._dir, first.base_offset, CLEANED_FILE_SUFFIX)
                piece = open_segment(self._dir, first.base_offset, self._config, self._time,
                                     file_already_exists=False, file_suffix=CLEANED_FILE_SUFFIX)
                pieces.append(piece)
                copied = piece.append_from_file(records, position)
                if copied == 0:
                    raise KafkaStorageError(f"Cannot split {records.path} at position {position}")
                position += copied
            for piece in pieces:
                piece.on_become_inactive_segment()
                piece.flush()
                piece.set_last_modified(segment.last_modified)
            if sum(p.size_in_bytes for p in pieces) != whole_end:
                raise KafkaStorageError(f"The segments split from {records.path} do not add up to it")
        except BaseException:
            for piece in pieces:
                piece.close()
                piece.delete_if_exists()
            raise
        torn = segment.size_in_bytes - whole_end
        if torn:
            self._cuts.append(DataCut(CutKind.TRUNCATED, records.path.name, torn, whole_end,
                                      pieces[-1].read_next_offset(),
                                      "an incomplete batch after the last whole one, a torn write"))
        log.warning("%s; replacing %s with %d segments based at %s", error, records.path, len(pieces),
                    ", ".join(str(p.base_offset) for p in pieces))

        def retire(old: LogSegment) -> None:  # its data is in the pieces: nothing to flush or trim
            old.close_handlers()
            old.delete_if_exists()

        swap_segments(self._dir, self._segments, pieces, [segment], retire)
        for i, piece in enumerate(pieces):
            truncated = self._recover_segment(piece)
            if truncated > 0:
                for later in pieces[i + 1:]:
                    self._delete_segment(later, f"it follows the corrupt segment {piece.log.path.name}")
                return truncated + torn
        return torn

    def _producer_state_at(self, offset: int) -> ProducerStateManager:
        # The temporary state expires producers as the log's own does (Kafka's LogLoader does the same).
        state = ProducerStateManager(self._dir, time=self._time,
                                     config=self._producer_state.producer_state_manager_config)
        rebuild_producer_state(state, self._segments, self._log_start_offset, offset)
        return state

    def _epoch_hook(self, batch: RecordBatch) -> None:
        # Kafka's LogSegment.recover assigns only an epoch above the latest one (its assign would
        # otherwise truncate the later entries the recovered batches are about to confirm)
        cache = self._epoch_cache
        if cache is not None and batch.partition_leader_epoch >= 0:
            latest = cache.latest_epoch()
            if latest is None or batch.partition_leader_epoch > latest:
                cache.assign(batch.partition_leader_epoch, batch.base_offset)

    def _recover_from(self, recovery_point: int) -> None:
        """Recover every segment from the one holding ``recovery_point`` on; after the first segment
        that had to be truncated, everything later is garbage and is deleted."""
        pending = self._segments.values(recovery_point, 2**63 - 1)
        while pending:
            segment = pending.pop(0)
            try:
                truncated = self._recover_segment(segment)
            except (InvalidOffsetError, OSError) as e:
                log.warning("Could not recover segment %s (%s): truncating it to its base offset",
                            segment.log.path, e)
                truncated = segment.truncate_to(segment.base_offset)
                if truncated > 0:
                    self._cuts.append(DataCut(CutKind.TRUNCATED, segment.log.path.name, truncated, 0,
                                              segment.base_offset, f"could not recover the segment: {e}"))
            if truncated > 0 and pending:
                log.warning("Corruption found in segment %s: deleting %d later segment(s)",
                            segment.log.path, len(pending))
                for later in pending:
                    self._delete_segment(later, f"it follows the corrupt segment {segment.log.path.name}")
                pending = []


def _rising_batches(segment: LogSegment) -> tuple[bool, int]:
    """(whether every whole batch of the segment starts after the previous one ended -- offsets may
    leave the segment's 32-bit range, but never go back --, the position where its whole batches
    end: what follows is a torn write or damage, which recovery cuts)."""
    last, end = segment.base_offset - 1, 0
    try:
        for batch in segment.log.batches():
            if batch.base_offset <= last or batch.last_offset < batch.base_offset:
                return False, end
            last, end = batch.last_offset, batch.position + batch.size_in_bytes
    except CorruptRecordError:  # a batch header that is not one: the whole batches end before it
        pass
    return True, end


def _first_overflowing_batch(segment: LogSegment) -> int:
    """Position of the first batch whose last offset does not fit the segment's 32-bit range."""
    base = segment.base_offset
    for batch in segment.log.batches():
        if not 0 <= batch.last_offset - base <= INT32_MAX:
            return batch.position
    return segment.size_in_bytes


def offset_or_none(name: str) -> int | None:
    """The base offset a segment file name starts with, or None for other files."""
    try:
        return offset_from_file_name(name)
    except ValueError:  # IllegalArgumentError is one
        return None
