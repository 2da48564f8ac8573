"""``Cleaner``: compacts one log (Kafka's ``Cleaner`` in ``LogCleaner.scala``).

One cleaning round of a log:

1. **Offset map.** The dirty range [first dirty offset, first uncleanable offset) is read and the
   latest offset of every key put into the :class:`OffsetMap` — records of aborted transactions
   left out. When the map reaches its load factor the round stops there: the map's latest offset
   is the last batch fully mapped, and the next round starts after it.
2. **Groups.** Every segment from the start of the log up to that offset is grouped into runs that
   fit one segment (``segment.bytes``, ``segment.index.bytes`` for both indexes, and offsets within
   the 32-bit relative range).
3. **Clean.** Each group is copied into one new segment ``<first base>.log.cleaned`` keeping, per
   batch, the records that are the latest of their key (or past the mapped range), tombstones
   until their delete horizon, and what transactions and producer state need (see
   :meth:`Cleaner._check_batch_retention`). Records keep their offsets, timestamps and headers; a
   v2 batch whose records all stay is copied byte for byte (v0/v1 messages are rewritten as v2
   batches, as Kafka 4 does), and one the map pass saw none of whose records stays is dropped from
   its :class:`BatchDirectory` entry without being read again. The new segment is sealed, flushed
   and swapped in with :meth:`Log.replace_segments` (``.cleaned`` -> ``.swap`` -> old ones
   ``.deleted`` -> swap suffix dropped) on a helper thread -- the groups cleaned meanwhile
   together -- while the next group is cleaned; a crash
   at any point leaves what the loader recovers. An abort or error drops the cleaned segments not
   yet swapped in; the groups swapped in before stay cleaned.

Where the whole dirty range fits the map and is plain batches (no aborted transaction, nothing for
the Python path), the round overlaps steps 1 and 3 instead (:meth:`Cleaner._clean_newest_first`):
the helper maps the segments *newest first*, so a record whose key it has not met yet is its key's
latest, and once a segment and every later one are mapped their fate is final -- their groups are
cleaned, sealed and flushed while older segments are still being mapped, and all are swapped in at
once when the pass is done. The files written are the ones the offset-order round writes; anything
it cannot take hands the round, unchanged, to the offset-order path.

The active segment is never cleaned. What is removed is counted in :class:`CleanerStats` and logged.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections import deque
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import KafkaLogError, KafkaStorageError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.default_batch import build_batch, compute_attributes
from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import (
    MAGIC_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    TimestampType,
)
from kafkalog.storage.cleaner import map_pass as map_pass_module
from kafkalog.storage.cleaner.batch_directory import BatchDirectory
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.log_to_clean import LogToClean
from kafkalog.storage.cleaner.map_pass import MapPass, MapProgress, plain_batch
from kafkalog.storage.cleaner.offset_map import OffsetMap, RetainedRecord, WalkStop
from kafkalog.storage.cleaner.throttler import Throttler
from kafkalog.storage.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.storage.file_records import FileRecords, read_buffer
from kafkalog.storage.loader import open_segment
from kafkalog.storage.log_file_utils import CLEANED_FILE_SUFFIX
from kafkalog.storage.log_segment import LogSegment

if TYPE_CHECKING:
    from kafkalog.storage.log import LastRecord, Log

__all__ = ["Cleaner", "LogCleaningAbortedError", "group_segments_by_size"]

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
DEFAULT_IO_BUFFER_SIZE = 512 * 1024
DEFAULT_LOAD_FACTOR = 0.9


class LogCleaningAbortedError(KafkaLogError):
    """Cleaning of a log was aborted (Kafka's ``LogCleaningAbortedException``): the groups not yet
    swapped in were dropped."""


class BatchRetention(Enum):
    DELETE = "delete"            # the batch goes, records and all
    DELETE_EMPTY = "delete_empty"  # the batch goes if none of its records stay
    RETAIN_EMPTY = "retain_empty"  # the batch stays, as an empty batch if none of its records do


@dataclass(slots=True)
class _Chunk:
    """Cleaned batches for one append to the new segment, with what the append needs."""

    parts: list[bytes | memoryview]
    input_bytes: int = 0  # of the batches read into this chunk (the kept ones and the others)
    max_offset: int = -1
    max_timestamp: int = NO_TIMESTAMP
    shallow_offset_of_max_timestamp: int = -1

    def add(self, data: bytes | memoryview, max_offset: int, max_timestamp: int, shallow_offset: int) -> None:
        self.parts.append(data)
        if max_offset > self.max_offset:
            self.max_offset = max_offset
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.shallow_offset_of_max_timestamp = shallow_offset


def _raise_first_failure(swaps: list[Future[None]]) -> None:
    """Raise the error of the first swap that failed (the later ones were stopped by it)."""
    for swap in swaps:
        if swap.done() and swap.exception() is not None:
            swap.result()


def _no_abort(topic_partition: str) -> None:
    return None


def _seal(cleaned: LogSegment, group: list[LogSegment]) -> None:
    """A cleaned segment made ready to be swapped in for ``group``: indexes trimmed, flushed."""
    cleaned.on_become_inactive_segment()
    cleaned.flush()
    cleaned.set_last_modified(group[-1].last_modified)


def _discard(cleaned: list[tuple[LogSegment, list[LogSegment]]]) -> None:
    for segment, _ in cleaned:
        segment.close()
        segment.delete_if_exists()


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Runs of consecutive segments that fit one cleaned segment: total log bytes within
    ``segment.bytes``, each index's used bytes within ``segment.index.bytes``, and every offset of
    the run within 2^31-1 of its first base offset (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        log_size = first.size_in_bytes
        index_size = first.offset_index.size_in_bytes
        time_index_size = first.time_index.size_in_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            # The worst-case last offset of the candidate: the next base offset - 1, or for the last
            # segment of the list, the first uncleanable offset - 1.
            last_offset = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                           else first_uncleanable_offset - 1)
            if not (log_size + candidate.size_in_bytes <= max_size
                    and index_size + candidate.offset_index.size_in_bytes <= max_index_size
                    and time_index_size + candidate.time_index.size_in_bytes <= max_index_size
                    and (candidate.size_in_bytes == 0 or last_offset - first.base_offset <= INT32_MAX)):
                break
            group.append(candidate)
            log_size += candidate.size_in_bytes
            index_size += candidate.offset_index.size_in_bytes
            time_index_size += candidate.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


class Cleaner(MapPass):
    """Cleans one log at a time with one offset map (one per cleaner thread)."""

    def __init__(self, offset_map: OffsetMap, *, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
                 dup_buffer_load_factor: float = DEFAULT_LOAD_FACTOR, time: Time = SYSTEM_TIME,
                 check_done: Callable[[str], None] = _no_abort, cleaner_id: int = 0,
                 throttler: Throttler | None = None) -> None:
        self.offset_map = offset_map
        self._throttler = throttler  # log.cleaner.io.max.bytes.per.second; None: no limit
        # Kafka splits its I/O buffer into a read and a write half; a read covers whole batches of
        # up to this many bytes (one larger batch is read whole, as Kafka grows its buffer for it),
        # and what stays of them is one append to the cleaned segment.
        self._read_size = max(1, io_buffer_size // 2)
        self._buffer = read_buffer(self._read_size)  # the C walks' reads, reused
        # The map pass writes nothing: its reads take the whole I/O buffer.
        self._map_buffer = read_buffer(2 * self._read_size)
        # Where the map pass found each plain batch: the cleaning pass skips those that keep nothing.
        # An eighth of the map's memory (as much again as the latest-offset bits may take).
        self._directory = BatchDirectory(offset_map.memory // 8)
        self._helper: ThreadPoolExecutor | None = None  # set while do_clean runs
        self._load_factor = dup_buffer_load_factor
        # Logs whose dirty range could not be mapped newest first: their rounds go in offset order.
        self._in_offset_order: set[str] = set()
        self._time = time
        self._check_done = check_done
        self.cleaner_id = cleaner_id

    # --- one round -------------------------------------------------------------------------------

    def clean(self, cleanable: LogToClean) -> tuple[int, CleanerStats]:
        """Clean once; returns the next dirty offset (the new checkpoint) and the stats."""
        return self.do_clean(cleanable, self._time.milliseconds())

    def do_clean(self, cleanable: LogToClean, current_time: int) -> tuple[int, CleanerStats]:
        target = cleanable.log
        name = target.dir.name
        log.info("Beginning cleaning of log %s", name)
        # Only legacy (v0/v1) records use this: their tombstones go once the last clean segment is
        # older than delete.retention.ms (v2 batches carry their own delete horizon).
        first_dirty = cleanable.first_dirty_offset
        clean_part = target.segments.values(0, first_dirty) if first_dirty > 0 else []
        legacy_delete_horizon_ms = (clean_part[-1].last_modified - target.config.delete_retention_ms
                                    if clean_part else 0)
        # One helper thread: it hashes half of each read of the map pass, then flushes and swaps in
        # the cleaned segments.
        thread_name = f"cleaner-{self.cleaner_id}-helper"
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name) as helper:
            self._helper = helper
            try:
                return self._do_clean(cleanable, current_time, legacy_delete_horizon_ms, helper)
            finally:
                self._helper = None
                self._directory.clear()  # it is this round's: its memory goes with it

    def _do_clean(self, cleanable: LogToClean, current_time: int, legacy_delete_horizon_ms: int,
                  helper: ThreadPoolExecutor) -> tuple[int, CleanerStats]:
        target = cleanable.log
        stats = CleanerStats(self._time)
        end_offset = self._clean_newest_first(target, cleanable.first_dirty_offset,
                                              cleanable.first_uncleanable_offset, current_time,
                                              legacy_delete_horizon_ms, helper, stats)
        if end_offset is None:
            end_offset = self._clean_in_offset_order(cleanable, current_time, legacy_delete_horizon_ms,
                                                     helper, stats)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        log.info("Cleaned log %s up to offset %d in %.1f s: %d segment(s) into %d; %s", target.dir.name,
                 end_offset, stats.elapsed_secs, stats.segments_before, stats.segments_after,
                 stats.describe())
        return end_offset, stats

    def _clean_in_offset_order(self, cleanable: LogToClean, current_time: int, legacy_delete_horizon_ms: int,
                               helper: ThreadPoolExecutor, stats: CleanerStats) -> int:
        """Kafka's round: map the dirty range oldest first (as far as the map holds), then clean the
        groups in order, each swapped in on the helper while the next is cleaned."""
        target = cleanable.log
        name = target.dir.name
        first_dirty = cleanable.first_dirty_offset
        upper_bound = cleanable.first_uncleanable_offset
        self.build_offset_map(target, cleanable.first_dirty_offset, upper_bound, self.offset_map, stats)
        self.offset_map.end_map_pass(first_dirty)
        end_offset = self.offset_map.latest_offset + 1
        if end_offset <= first_dirty < upper_bound:
            # The map filled within the first dirty batch: no round could ever get past it.
            raise KafkaStorageError(
                f"Cannot clean {name}: the offset map ({self.offset_map.slots} slots at load factor "
                f"{self._load_factor}) cannot hold the keys of the batch at offset {first_dirty}; "
                "raise log.cleaner.dedupe.buffer.size")
        stats.index_done()
        transaction_metadata = CleanedTransactionMetadata()
        groups = self._groups(target, end_offset, upper_bound, stats)
        # Each cleaned segment is sealed (indexes trimmed), flushed and swapped in on a helper thread,
        # in order, while the next group is cleaned: the fsyncs of the files and of the directory (a
        # third of a clean of page-cached data) overlap the work. A failure there, or here, stops every
        # later swap.
        stop = threading.Event()
        swaps: list[Future[None]] = []
        ready: deque[tuple[LogSegment, list[LogSegment]]] = deque()
        # Producers' last batches as the round starts: a producer's append meanwhile goes to the
        # active segment, and only keeps a batch of the cleaned range that could have gone.
        last_records = target.last_records_of_active_producers()
        try:
            for group in groups:
                _raise_first_failure(swaps)
                cleaned = self.clean_segments(target, group, self.offset_map, current_time, stats,
                                              transaction_metadata, legacy_delete_horizon_ms, upper_bound,
                                              last_records)
                ready.append((cleaned, group))
                swaps.append(helper.submit(self._swap_in, target, ready, stop))
            futures.wait(swaps)
            _raise_first_failure(swaps)
        except BaseException:
            stop.set()
            futures.wait(swaps)
            raise
        return end_offset

    @staticmethod
    def _groups(target: Log, end_offset: int, upper_bound: int,
                stats: CleanerStats) -> list[list[LogSegment]]:
        """The round's groups: every segment below ``end_offset``, counted in ``stats``."""
        segments = target.segments.values(0, end_offset) if end_offset > 0 else []
        config = target.config
        groups = group_segments_by_size(segments, config.segment_bytes, config.segment_index_bytes,
                                        upper_bound)
        stats.segments_before = len(segments)
        stats.segments_after = len(groups)
        return groups

    def _clean_newest_first(self, target: Log, start: int, end: int, current_time: int,
                            legacy_delete_horizon_ms: int, helper: ThreadPoolExecutor,
                            stats: CleanerStats) -> int | None:
        """A round whose cleaning overlaps its map pass, where the whole dirty range [``start``,
        ``end``) fits the map: the helper maps the segments newest first, and a record whose key it
        has not met yet is then its key's latest -- so once a segment and every later one are
        mapped, their records' fate is final, and the groups of those segments are cleaned, sealed
        and flushed on this thread while older segments are still being mapped (the costly newest
        group no longer waits for the whole pass). A group is cleaned against batches the pass has
        read and checked, and nothing older can change it; groups reaching below ``start`` (the
        clean part) wait for the whole pass; all go in with one :meth:`Log.replace_segments`.

        It takes what the offset-order round would map identically, and cleans those groups into
        the same bytes: plain batches (the C map pass), no aborted transaction, a range ending at a
        segment's base, every key fitting the map. Anything else stops the pass and None says the
        round is to be done in offset order (as every later round of this log): the cleaned
        segments wait, sealed, until the whole range is mapped, so one handed back changes nothing."""
        name = target.dir.name
        offset_map = self.offset_map
        if (name in self._in_offset_order or not offset_map.maps_newest_first or start >= end
                or len(self._map_buffer) < map_pass_module.MIN_SPLIT_READ or end not in target.segments
                or target.collect_aborted_transactions(start, end)):
            return None
        dirty = target.segments.values(start, end)
        if not dirty or any(segment.log.local_descriptor() is None for segment in dirty):
            return None
        offset_map.clear()
        self._directory.clear()
        if not offset_map.begin_newest_first(start, end):
            return None
        progress = MapProgress()
        mapping = helper.submit(self._map_newest_first, target, dirty, start, stats, progress)
        # Each cleaned segment is sealed and flushed at once, while the pass goes on; all go in
        # together once the whole range is mapped -- so that a round handed back has changed nothing.
        cleaned: list[tuple[LogSegment, list[LogSegment]]] = []
        cleaning = CleanerStats(self._time)  # counted in the round's stats once swapped in
        last_records: dict[int, LastRecord] = {}

        def clean(group: list[LogSegment], transactions: CleanedTransactionMetadata) -> None:
            segment = self.clean_segments(target, group, offset_map, current_time, cleaning, transactions,
                                          legacy_delete_horizon_ms, end, last_records)
            cleaned.append((segment, group))
            _seal(segment, group)

        try:
            groups = self._groups(target, end, end, stats)  # (while the first segment is being mapped)
            last_records.update(target.last_records_of_active_producers())
            early = [group for group in groups if group[0].base_offset >= start]
            # No transaction reaches into the range (its batches are all plain): one state will do.
            transactions = CleanedTransactionMetadata()
            for group in reversed(early):
                if not progress.wait_mapped(group[0].base_offset):
                    break
                clean(group, transactions)
            if not mapping.result():
                log.info("Cleaning %s in offset order: its dirty range cannot be mapped newest first", name)
                self._in_offset_order.add(name)
                _discard(cleaned)
                return None
            stats.index_done()
            transactions = CleanedTransactionMetadata()  # the clean part, oldest first
            for group in groups[:len(groups) - len(early)]:
                clean(group, transactions)
            ready = deque(sorted(cleaned, key=lambda done: done[0].base_offset))
            cleaned = []  # _swap_in's now: it drops them if it fails
            self._swap_in(target, ready, threading.Event(), sealed=True)
            stats.add(cleaning)
        except BaseException:
            progress.stop()
            futures.wait([mapping])
            _discard(cleaned)
            raise
        return end

    # --- cleaning ----------------------------------------------------------------------------------

    def clean_segments(self, target: Log, group: list[LogSegment], offset_map: OffsetMap, current_time: int,
                       stats: CleanerStats, transaction_metadata: CleanedTransactionMetadata,
                       legacy_delete_horizon_ms: int, upper_bound_offset: int,
                       last_records: dict[int, LastRecord]) -> LogSegment:
        """Clean ``group`` into one new segment (``.cleaned``, still active: :meth:`_swap_in` seals,
        flushes and swaps it in) and return it. ``last_records`` are the log's
        :meth:`~Log.last_records_of_active_producers` as the round started."""
        base = group[0].base_offset
        LogSegment.delete_files_if_exist(target.dir, base, CLEANED_FILE_SUFFIX)
        cleaned = open_segment(target.dir, base, target.config, self._time, file_already_exists=False,
                               file_suffix=CLEANED_FILE_SUFFIX)
        transaction_metadata.cleaned_index = cleaned.txn_index
        try:
            for i, segment in enumerate(group):
                following = group[i + 1] if i + 1 < len(group) else None
                upper = following.base_offset if following is not None else segment.read_next_offset()
                transaction_metadata.add_aborted_transactions(
                    target.collect_aborted_transactions(segment.base_offset, upper))
                retain_legacy_deletes = segment.last_modified > legacy_delete_horizon_ms
                log.debug("Cleaning %r of %s into %d", segment, target.dir.name, base)
                self.clean_into(target, segment.log, cleaned, offset_map, retain_legacy_deletes,
                                target.config.delete_retention_ms, transaction_metadata, last_records,
                                upper_bound_offset, stats, current_time,
                                self._directory.entries(segment.base_offset))
            return cleaned
        except BaseException:
            cleaned.close()
            cleaned.delete_if_exists()
            raise

    def _swap_in(self, target: Log, ready: deque[tuple[LogSegment, list[LogSegment]]],
                 stop: threading.Event, *, sealed: bool = False) -> None:
        """Seal and flush every cleaned segment waiting in ``ready`` (unless ``sealed``: done
        already) and swap them in for their groups with one ``Log.replace_segments`` (all or none,
        as for Kafka's split segments): when the swaps fall behind the cleaning, the directory is
        fsynced once for several groups. Unless ``stop`` is set: then, or if this fails, the
        cleaned files go and the groups stand."""
        taken: list[tuple[LogSegment, list[LogSegment]]] = []
        while ready:
            taken.append(ready.popleft())  # an earlier call may have taken them all
        if not taken:
            return
        try:
            if stop.is_set():
                raise LogCleaningAbortedError(f"Not swapping in cleaned segments of {target.dir.name}: "
                                              "cleaning of this log stopped")
            if not sealed:
                for segment, group in taken:
                    _seal(segment, group)
            self._check_done(target.dir.name)
            if stop.is_set():
                raise LogCleaningAbortedError(f"Not swapping in cleaned segments of {target.dir.name}: "
                                              "cleaning of this log stopped")
            for segment, group in taken:
                log.info("Swapping in cleaned segment %d for %d segment(s) of %s", segment.base_offset,
                         len(group), target.dir.name)
            target.replace_segments([s for s, _ in taken], [old for _, group in taken for old in group])
        except BaseException:
            stop.set()
            _discard(taken)
            raise

    def clean_into(self, target: Log, source: FileRecords, dest: LogSegment, offset_map: OffsetMap,
                   retain_legacy_deletes: bool, delete_retention_ms: int,
                   transaction_metadata: CleanedTransactionMetadata, last_records: dict[int, LastRecord],
                   upper_bound_offset: int, stats: CleanerStats, current_time: int,
                   directory: bytearray | None = None) -> None:
        """Copy what stays of ``source`` into ``dest``, one append per read of whole batches (up to
        half the I/O buffer). With the C module, plain batches are cleaned a buffer at a time --
        into the same bytes and the same appends -- and the Python path takes the others; batches
        the map pass recorded in ``directory`` (:class:`BatchDirectory`) that keep nothing are
        dropped without being read, counted in the chunks as if they had been."""
        name = target.dir.name
        chunk = _Chunk([])
        walk = offset_map.walks_batches
        # Batches whose header must stay even if every record goes: each active producer's last
        # data batch, and the round's last batch (its offset bounds what was cleaned; KAFKA-17076).
        protected = sorted({last.last_data_offset for last in last_records.values()
                            if last.last_data_offset is not None} | {upper_bound_offset - 1})
        protected_array = array("q", protected)
        protected_set = set(protected)
        position = 0
        end = source.size_in_bytes
        # The bytes last read (from file position data_at): a walk that stops because the chunk is
        # full goes on in them once the chunk is appended; only a batch cut by their end is read again.
        data, data_at = self._buffer[:0], 0
        while True:
            while walk and position < end:
                if directory:
                    # A run that keeps nothing from here is passed over unread; the superseded
                    # batches between live ones in a read are dropped by filter_batches.
                    skip = offset_map.skip_superseded(directory, position, protected_array, chunk.input_bytes,
                                                      self._read_size, not chunk.parts)
                    position += skip.consumed
                    chunk.input_bytes = skip.chunk_bytes
                    stats.add_skipped(skip)
                    if skip.stop is WalkStop.BUDGET:
                        self._check_done(name)
                        chunk = self._flush_chunk(dest, chunk)
                        continue
                    if position >= end:
                        break
                fresh = not data_at <= position < data_at + len(data)
                if fresh:
                    data, data_at = source.read_into(position, self._buffer), position
                    self._throttle(len(data))
                out = offset_map.filter_batches(data[position - data_at:], current_time, delete_retention_ms,
                                                protected_array, chunk.input_bytes, self._read_size,
                                                directory or b"", position)
                position += out.consumed
                chunk.input_bytes += out.consumed
                stats.add_filtered(out)
                if out.data:
                    chunk.add(out.data, out.max_offset, out.max_timestamp,
                              out.shallow_offset_of_max_timestamp)
                if out.stop is WalkStop.BUDGET:
                    self._check_done(name)
                    chunk = self._flush_chunk(dest, chunk)
                elif out.stop is WalkStop.END and (out.consumed or not fresh):
                    data = data[:0]  # what is left of them holds no whole batch: read from here
                else:
                    break
            taken = 0  # the Python path: every batch without the C module, else at least one
            for batch in self._read_batches(source, position):
                if walk and taken and plain_batch(batch) and batch.last_offset not in protected_set:
                    break
                if directory and taken and offset_map.skip_superseded(
                        directory, position, protected_array, chunk.input_bytes, self._read_size,
                        not chunk.parts).consumed:
                    break  # a run that keeps nothing (compressed batches, say): skipped unread above
                taken += 1
                if chunk.input_bytes and chunk.input_bytes + batch.size_in_bytes > self._read_size:
                    self._check_done(name)
                    chunk = self._flush_chunk(dest, chunk)
                chunk.input_bytes += batch.size_in_bytes
                stats.bytes_read += batch.size_in_bytes
                self._filter_batch(batch, chunk, offset_map, retain_legacy_deletes, delete_retention_ms,
                                   transaction_metadata, last_records, upper_bound_offset, stats,
                                   current_time)
                position += batch.size_in_bytes
            if not walk or not taken:
                break
        self._flush_chunk(dest, chunk)

    def _flush_chunk(self, dest: LogSegment, chunk: _Chunk) -> _Chunk:
        """Append the chunk's cleaned batches (if any); returns a new, empty chunk."""
        if chunk.parts:
            data = b"".join(chunk.parts)
            dest.append(chunk.max_offset, chunk.max_timestamp, chunk.shallow_offset_of_max_timestamp, data)
            self._throttle(len(data))
        return _Chunk([])

    def _check_batch_retention(self, batch: RecordBatch, transaction_metadata: CleanedTransactionMetadata,
                               last_records: dict[int, LastRecord], upper_bound_offset: int,
                               current_time: int) -> tuple[BatchRetention, bool, bool]:
        """(what happens to the batch, whether its records are all discarded, whether it is a marker
        that may go once its delete horizon passes). Kafka's rules:

        * A data batch of an aborted transaction is discarded; a marker is discarded once no batch
          of its transaction remains *and* the delete horizon it was given has passed.
        * The last batch of each active producer stays — emptied if its records go — so the producer
          state (sequence numbers, epoch) survives a reload of the cleaned log.
        * So does the round's last batch (its next offset is the round's upper bound), so the log's
          last cleaned offset is not lost (KAFKA-17076). A v0/v1 batch cannot be written empty:
          Kafka fails the round there; this drops it as any other emptied legacy batch.
        """
        if batch.is_control:
            can_discard = transaction_metadata.on_control_batch_read(batch)
            discard_records = (can_discard and batch.has_delete_horizon
                               and batch.delete_horizon_ms <= current_time)
        else:
            can_discard = transaction_metadata.on_batch_read(batch)
            discard_records = can_discard
        last_of_producer = False
        if batch.has_producer_id:
            last = last_records.get(batch.producer_id)
            if last is not None:
                if last.last_data_offset is not None:
                    last_of_producer = batch.last_offset == last.last_data_offset
                else:
                    last_of_producer = batch.is_control and batch.producer_epoch == last.producer_epoch
        last_of_round = batch.next_offset == upper_bound_offset and batch.magic >= MAGIC_V2
        if last_of_producer or last_of_round:
            retention = BatchRetention.RETAIN_EMPTY
        elif discard_records:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        return retention, discard_records, can_discard and batch.is_control

    def _filter_batch(self, batch: RecordBatch, chunk: _Chunk, offset_map: OffsetMap,
                      retain_legacy_deletes: bool, delete_retention_ms: int,
                      transaction_metadata: CleanedTransactionMetadata,
                      last_records: dict[int, LastRecord], upper_bound_offset: int, stats: CleanerStats,
                      current_time: int) -> None:
        retention, discard_records, marker_for_empty_txn = self._check_batch_retention(
            batch, transaction_metadata, last_records, upper_bound_offset, current_time)
        if retention is BatchRetention.DELETE:
            self._count_discarded(batch, stats)
            return
        n = batch.record_count
        stats.messages_read += n
        kept: list[RetainedRecord] | None  # None: every record stays
        contains_tombstones = False
        if discard_records:
            kept = []
            self._count_discarded(batch, stats)
        elif batch.is_control:
            kept = None if n else []  # a control batch's records all stay (an empty one has none)
        else:
            if batch.magic < MAGIC_V2:
                retain_deletes = retain_legacy_deletes
            else:
                retain_deletes = not batch.has_delete_horizon or current_time < batch.delete_horizon_ms
            decided = offset_map.retain_batch(batch, retain_deletes)
            stats.superseded_removed += decided.superseded
            stats.tombstones_removed += decided.tombstones
            stats.invalid_removed += decided.keyless
            kept = decided.kept
            contains_tombstones = decided.kept_tombstone
        if kept is None or kept:
            need_delete_horizon = (batch.magic >= MAGIC_V2 and (contains_tombstones or marker_for_empty_txn)
                                   and not batch.has_delete_horizon)
            if kept is None and not need_delete_horizon and batch.magic >= MAGIC_V2:
                data: bytes | memoryview = batch.buffer
                chunk.add(data, batch.last_offset, batch.max_timestamp, batch.last_offset)
                stats.messages_written += n
                stats.bytes_written += batch.size_in_bytes
                return
            if kept is None:
                c = batch.decode_columns()
                kept = list(zip(c.offsets, c.timestamps, c.keys, c.values, c.headers, strict=True))
            if need_delete_horizon:
                delete_horizon = current_time + delete_retention_ms
            else:
                delete_horizon = batch.delete_horizon_ms
            rebuilt, max_timestamp, shallow = self._rebuild(batch, kept, delete_horizon)
            chunk.add(rebuilt, kept[-1][0], max_timestamp, shallow)
            stats.messages_written += len(kept)
            stats.bytes_written += len(rebuilt)
        elif retention is BatchRetention.RETAIN_EMPTY:
            empty = self._empty_batch(batch)
            chunk.add(empty, batch.last_offset, batch.max_timestamp, batch.last_offset)
            stats.empty_batches_kept += 1
            stats.bytes_written += len(empty)

    @staticmethod
    def _count_discarded(batch: RecordBatch, stats: CleanerStats) -> None:
        count = batch.record_count
        if batch.is_control:
            stats.markers_removed += count
        else:
            stats.aborted_removed += count

    @staticmethod
    def _rebuild(batch: RecordBatch, kept: list[RetainedRecord], delete_horizon_ms: int
                 ) -> tuple[bytes, int, int]:
        """The kept records as a new v2 batch (Kafka's ``buildRetainedRecordsInto``). A v2 batch keeps
        its base offset, last offset (so the producer's last sequence stays), producer fields, epoch,
        codec and timestamp type. A v0/v1 message set becomes a v2 batch, as Kafka 4 writes every
        cleaned batch (KIP-724, KAFKA-13093): from its first kept offset to its last, same codec, no
        producer; v0's missing timestamps stay -1 under CreateTime. Returns (bytes, max timestamp,
        shallow offset of it)."""
        ts_type = batch.timestamp_type
        if ts_type is TimestampType.NO_TIMESTAMP_TYPE:
            ts_type = TimestampType.CREATE_TIME  # no log append time can be made up when cleaning
        log_append_time = batch.max_timestamp if ts_type is TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP
        base_offset = batch.base_offset if batch.magic >= MAGIC_V2 else kept[0][0]
        builder = MemoryRecordsBuilder(
            MAGIC_V2, batch.compression_type, ts_type, base_offset, log_append_time,
            batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional,
            batch.is_control, batch.partition_leader_epoch, delete_horizon_ms=delete_horizon_ms)
        append = builder.append_retained
        for offset, timestamp, key, value, headers in kept:
            append(offset, timestamp, key, value, headers)
        if batch.magic >= MAGIC_V2:
            builder.override_last_offset(batch.last_offset)
        info = builder.info()
        return builder.build().to_bytes(), info.max_timestamp, info.shallow_offset_of_max_timestamp

    @staticmethod
    def _empty_batch(batch: RecordBatch) -> bytes:
        """A v2 header without records, keeping the batch's producer fields and offset range (Kafka's
        ``writeEmptyHeader``: no codec, no base timestamp, the original max timestamp)."""
        return build_batch(
            b"", base_offset=batch.base_offset, last_offset_delta=batch.last_offset - batch.base_offset,
            attributes=compute_attributes(CompressionType.NONE, batch.timestamp_type, batch.is_transactional,
                                          batch.is_control),
            base_timestamp=NO_TIMESTAMP, max_timestamp=batch.max_timestamp, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
            partition_leader_epoch=batch.partition_leader_epoch, count=0)


assert RECORD_BATCH_OVERHEAD == 61  # the size of an empty batch written by _empty_batch
