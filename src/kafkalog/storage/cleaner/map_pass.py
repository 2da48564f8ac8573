"""The cleaner's map pass (the first half of Kafka's ``Cleaner``: ``buildOffsetMap``): the latest
offset of every key of a log's dirty range into the :class:`OffsetMap`.

:class:`MapPass` is the part of :class:`~kafkalog.storage.cleaner.cleaner.Cleaner` that reads: in
offset order (:meth:`MapPass.build_offset_map`, Kafka's round, as far as the map holds) or newest
segment first for the overlapped round (:meth:`MapPass._map_newest_first`). Where the C module is
built, plain batches are mapped a buffer at a time on two threads -- in C over windows of a segment
file cut where the offset index says batches start (``_map_pass.c``), or from Python's thread pool
-- and the table always sees one thread, in order; the Python path takes every other batch.
"""

from __future__ import annotations

import logging
import threading
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from kafkalog.records.batch import RecordBatch
from kafkalog.records.types import MAGIC_V2, CompressionType
from kafkalog.storage.cleaner import offset_map as offset_map_module
from kafkalog.storage.cleaner.batch_directory import BatchDirectory
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.offset_map import BatchWalk, HashedChunk, OffsetMap, WalkStop
from kafkalog.storage.cleaner.throttler import Throttler
from kafkalog.storage.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.log_segment import LogSegment

if TYPE_CHECKING:
    from kafkalog.storage.log import Log

__all__ = ["MAP_CALL_BYTES", "MAP_SHARE", "MAP_SLOTS", "MIN_SPLIT_READ", "MapPass", "MapProgress",
           "plain_batch"]

log = logging.getLogger(__name__)

# A map-pass buffer at least this big is shared with the helper thread (a hand-over costs tens of
# microseconds; hashing 64 KiB of records, a few hundred).
MIN_SPLIT_READ = 64 * 1024
# This thread's share of each pair of map-pass windows, the helper taking the rest: putting the
# helper's hashes costs this thread about a tenth of what reading and hashing them cost the helper.
MAP_SHARE = 0.4
# The most of a segment one call of the C map pass covers: bounds the batch directory entries it
# hands back at once (a batch takes at least 61 bytes).
MAP_CALL_BYTES = 8 * 1024 * 1024
# The C map pass's ring: the map buffer cut into this many windows' buffers.
MAP_SLOTS = 4


def _window_end(starts: array[int], end: int, at: int, size: int) -> int:
    """Where a window of at most ``size`` bytes from ``at`` ends: at the last batch start (by the
    offset index's ``starts``) within reach, at ``at + size`` when there is none, at ``end`` if it
    gets there."""
    if at + size >= end:
        return end
    i = bisect_right(starts, at + size) - 1
    return starts[i] if i >= 0 and starts[i] > at else at + size


def _read_and_hash(source: FileRecords, position: int, buffer: memoryview, offset_map: OffsetMap,
                   start: int) -> HashedChunk:
    """The helper thread's window of a pair in the map pass (``Cleaner._put_windows``)."""
    return offset_map.hash_batches(source.read_into(position, buffer), start, position)


class MapProgress:
    """How far down a newest-first map pass has come: the base offset of the oldest segment it
    mapped whole so far; whether it has finished (whatever the outcome) or been told to stop."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._lowest = 2**63
        self._finished = False
        self.stopped = False

    def mapped(self, base_offset: int) -> None:
        with self._changed:
            self._lowest = base_offset
            self._changed.notify_all()

    def finish(self) -> None:
        with self._changed:
            self._finished = True
            self._changed.notify_all()

    def stop(self) -> None:
        self.stopped = True

    def wait_mapped(self, base_offset: int) -> bool:
        """Wait until the segment at ``base_offset`` and every later one are mapped (True) or the
        pass has finished without getting there (False). Bounded: the pass ends with its range."""
        with self._changed:
            while self._lowest > base_offset and not self._finished:
                self._changed.wait(1.0)
            return self._lowest <= base_offset


def plain_batch(batch: RecordBatch) -> bool:
    """A batch the C walks take (``OffsetMap.put_batches``/``filter_batches``) if its bytes are sound."""
    return (batch.magic == MAGIC_V2 and batch.compression_type is CompressionType.NONE
            and not batch.is_transactional and not batch.is_control)


class MapPass:
    """The map pass of a :class:`~kafkalog.storage.cleaner.cleaner.Cleaner` (which sets these)."""

    offset_map: OffsetMap
    _map_buffer: memoryview
    _directory: BatchDirectory
    _helper: ThreadPoolExecutor | None
    _load_factor: float
    _check_done: Callable[[str], None]
    _throttler: Throttler | None

    def _throttle(self, io_bytes: int) -> None:
        """Count bytes read or written against log.cleaner.io.max.bytes.per.second (Kafka counts each
        read of the map pass and of the cleaning pass, and each write)."""
        if self._throttler is not None:
            self._throttler.maybe_throttle(io_bytes)

    def _map_newest_first(self, target: Log, dirty: list[LogSegment], start: int, stats: CleanerStats,
                          progress: MapProgress) -> bool:
        """The helper's part of :meth:`_clean_newest_first`: map ``dirty`` newest segment first,
        each whole in C; False at the first thing that cannot be mapped so."""
        max_entries = int(self.offset_map.slots * self._load_factor)
        try:
            for segment in reversed(dirty):
                self._check_done(target.dir.name)
                if progress.stopped or not self._map_segment_newest(segment, start, max_entries, stats):
                    return False
                progress.mapped(segment.base_offset)
            return True
        finally:
            progress.finish()

    def _map_segment_newest(self, segment: LogSegment, start: int, max_entries: int,
                            stats: CleanerStats) -> bool:
        local = segment.log.local_descriptor()
        if local is None:
            return False
        position = segment.offset_index.lookup(start).position
        end = segment.log.size_in_bytes
        while position < end:
            walk = self._put_windows_c(local, segment, position, self.offset_map, start, max_entries,
                                       newest=True)
            self._walked(segment, walk, stats)
            position += walk.consumed
            # A window cut inside a batch (an index entry that is not a batch's start) ends the
            # call short: the next one starts at that batch.
            if walk.stop is not WalkStop.END or not walk.consumed:
                return False  # a batch for the Python path, one bigger than a window, the map full
        return True

    # --- the offset map ----------------------------------------------------------------------------

    def build_offset_map(self, target: Log, start: int, end: int, offset_map: OffsetMap,
                         stats: CleanerStats) -> None:
        """Map the latest offset of each key in [start, end), as far as the map's load factor allows."""
        offset_map.clear()
        self._directory.clear()
        dirty = target.segments.values(start, end) if start < end else []
        transaction_metadata = CleanedTransactionMetadata()
        transaction_metadata.add_aborted_transactions(target.collect_aborted_transactions(start, end))
        max_entries = int(offset_map.slots * self._load_factor)
        for i, segment in enumerate(dirty):
            self._check_done(target.dir.name)
            if self._map_segment(target, segment, offset_map, start, max_entries, transaction_metadata,
                                 stats):
                log.debug("Offset map of %s is full: segment %d partially mapped", target.dir.name,
                          segment.base_offset)
                return
            # A segment mapped whole covers every offset below the next one's base (or the end of
            # the range): past a gap at its end, as Kafka's cleaner does, so that the round's end
            # offset is not left inside a gap no record will ever fill.
            offset_map.update_latest_offset((dirty[i + 1].base_offset if i + 1 < len(dirty) else end) - 1)

    def _map_segment(self, target: Log, segment: LogSegment, offset_map: OffsetMap, start: int,
                     max_entries: int, transaction_metadata: CleanedTransactionMetadata,
                     stats: CleanerStats) -> bool:
        """Map one segment from ``start``; True when the map filled. With the C module, plain batches
        are mapped a buffer at a time and the Python path takes the others."""
        source = segment.log
        position = segment.offset_index.lookup(start).position
        if not offset_map.walks_batches:
            return any(self._map_batch(batch, offset_map, start, max_entries, transaction_metadata, stats)
                       for batch in self._read_batches(source, position))
        end = source.size_in_bytes
        while position < end:
            walk = self._put_read(segment, position, offset_map, start, max_entries)
            self._walked(segment, walk, stats)
            position += walk.consumed
            if walk.stop is WalkStop.FULL:
                return True
            if walk.stop is WalkStop.END and walk.consumed:
                continue
            taken = 0  # the Python path: at least one batch (C refused it, or it outgrew the buffer)
            for batch in self._read_batches(source, position):
                if taken and plain_batch(batch):
                    break
                taken += 1
                puts = offset_map.puts
                if self._map_batch(batch, offset_map, start, max_entries, transaction_metadata, stats):
                    return True
                self._directory.add_batch(segment.base_offset, position, batch, offset_map.puts - puts, start)
                position += batch.size_in_bytes
            if not taken:
                break  # nothing whole is left
        return False

    def _put_read(self, segment: LogSegment, position: int, offset_map: OffsetMap, start: int,
                  max_entries: int) -> BatchWalk:
        """``put_batches`` over whole batches of ``segment`` from ``position``: on this thread alone
        one buffer at a time, or with the helper thread (when the buffer is big enough to pay for
        the hand-overs) over many windows (:meth:`_put_windows`)."""
        source = segment.log
        buffer = self._map_buffer
        if self._helper is not None and len(buffer) >= MIN_SPLIT_READ:
            walk = self._put_windows(segment, position, offset_map, start, max_entries)
            if walk.consumed or walk.stop is not WalkStop.END:
                return walk
            # A batch bigger than a window: the whole buffer may hold it.
        return offset_map.put_batches(source.read_into(position, buffer), start, max_entries, position)

    def _window_sizes(self) -> tuple[int, int]:
        """The most bytes of this thread's window of a pair and of the helper's: the map buffer
        holds one of this thread's and two of the helper's (one being hashed, one waiting)."""
        pair = int(len(self._map_buffer) / (2 - MAP_SHARE))
        mine = int(pair * MAP_SHARE)
        return mine, (len(self._map_buffer) - mine) // 2

    def _windows(self, segment: LogSegment, position: int) -> Iterator[tuple[int, int, int]]:
        """From ``position``, pairs of consecutive windows of the segment's log, each ending where
        an offset index entry says a batch starts (or at the end): (start, end of this thread's
        window, end of the helper's), in the sizes of :meth:`_window_sizes`."""
        end = segment.log.size_in_bytes
        starts = segment.offset_index.positions()
        mine, theirs = self._window_sizes()
        while position < end:
            middle = _window_end(starts, end, position, mine)
            last = _window_end(starts, end, middle, theirs) if middle < end else end
            yield position, middle, last
            position = last

    def _put_windows(self, segment: LogSegment, position: int, offset_map: OffsetMap, start: int,
                     max_entries: int) -> BatchWalk:
        """The map pass on two threads from ``position``: in C where the segment is a local file
        (``_map_pass.c``: windows of a quarter of the map buffer, cut where batches start, shared by
        the two threads through a ring, with no GIL), else :meth:`_put_windows_py` (fixed pairs of
        windows); the same map and the same answer either way."""
        local = segment.log.local_descriptor() if offset_map_module.map_pass is not None else None
        if local is None:
            return self._put_windows_py(segment, position, offset_map, start, max_entries)
        return self._put_windows_c(local, segment, position, offset_map, start, max_entries)

    def _put_windows_c(self, local: tuple[int, int], segment: LogSegment, position: int,
                       offset_map: OffsetMap, start: int, max_entries: int, *,
                       newest: bool = False) -> BatchWalk:
        """One call of the C map pass over ``segment`` (its file ``local``: descriptor, base) from
        ``position``, in windows of a quarter of the map buffer (see :meth:`OffsetMap.put_windows`)."""
        room = len(self._map_buffer) // MAP_SLOTS
        cuts = self._cuts(segment, position, room)
        return offset_map.put_windows(*local, cuts, self._map_buffer, room, start, max_entries, newest=newest)

    def _walked(self, segment: LogSegment, walk: BatchWalk, stats: CleanerStats) -> None:
        """What a map-pass walk over ``segment`` read: its batches into the directory, its bytes and
        records into the stats and against the I/O rate."""
        self._directory.add(segment.base_offset, walk.batches)
        stats.map_bytes_read += walk.consumed
        stats.map_messages_read += walk.records_read
        self._throttle(walk.consumed)

    @staticmethod
    def _cuts(segment: LogSegment, position: int, room: int) -> array[int]:
        """The windows of one C map-pass call from ``position``: at most ``room`` bytes each, cut
        where the offset index says batches start, up to ``MAP_CALL_BYTES`` in all."""
        end = segment.log.size_in_bytes
        starts = segment.offset_index.positions()
        cuts = array("q", [position])
        while position < end and cuts[-1] - cuts[0] < MAP_CALL_BYTES:
            position = _window_end(starts, end, position, room)
            cuts.append(position)
        return cuts

    def _put_windows_py(self, segment: LogSegment, position: int, offset_map: OffsetMap, start: int,
                        max_entries: int) -> BatchWalk:
        """The map pass on two threads, over pairs of windows (:meth:`_windows`): the helper reads
        and hashes (no table, no GIL: ``hash_batches``) its window of each pair, up to two pairs
        ahead, while this thread reads and maps its own (``put_batches``) and then puts the
        helper's hashes (``put_hashes``), so the table sees one thread, in offset order -- the map
        ``put_batches`` alone builds. Pairs go on while each window was mapped whole; at anything
        else (a batch for the Python path, one bigger than a window, an index entry that is not a
        batch's start, the map full) the walk stops there and the caller goes on from it."""
        helper = self._helper
        assert helper is not None
        source = segment.log
        size, theirs = self._window_sizes()
        mine = self._map_buffer[:size]
        free = [self._map_buffer[size:size + theirs], self._map_buffer[size + theirs:size + 2 * theirs]]
        pairs = self._windows(segment, position)
        ahead: deque[tuple[tuple[int, int, int], memoryview, Future[HashedChunk] | None]] = deque()

        def submit_next() -> None:
            pair = next(pairs, None)
            if pair is None:
                return
            _, middle, last = pair
            buffer = free.pop()
            hashing = None
            if last > middle:
                hashing = helper.submit(_read_and_hash, source, middle, buffer[:last - middle], offset_map,
                                        start)
            ahead.append((pair, buffer, hashing))

        at, records, stop = position, 0, WalkStop.END
        batches: list[bytes] = []
        submit_next()
        submit_next()
        try:
            while ahead:
                (first_at, middle, last), buffer, hashing = ahead[0]
                walk = offset_map.put_batches(source.read_into(first_at, mine[:middle - first_at]), start,
                                              max_entries, first_at)
                at, records, stop = at + walk.consumed, records + walk.records_read, walk.stop
                batches.append(walk.batches)
                if stop is not WalkStop.END or at != middle or hashing is None:
                    break
                hashed = hashing.result()
                walk = offset_map.put_hashes(hashed, start, max_entries)
                at, records, stop = at + walk.consumed, records + walk.records_read, walk.stop
                batches.append(walk.batches)
                if stop is not WalkStop.END or at != last:
                    break
                ahead.popleft()
                free.append(buffer)
                submit_next()
        finally:
            # The helper's reads fill these buffers: none may still run when they are read again.
            futures.wait([hashing for _, _, hashing in ahead if hashing is not None])
        return BatchWalk(at - position, stop, records, b"".join(batches))

    @staticmethod
    def _map_batch(batch: RecordBatch, offset_map: OffsetMap, start: int, max_entries: int,
                   transaction_metadata: CleanedTransactionMetadata, stats: CleanerStats) -> bool:
        """Map one batch; True when the map filled within it."""
        if batch.is_control:
            transaction_metadata.on_control_batch_read(batch)
            stats.map_messages_read += 1
        elif transaction_metadata.on_batch_read(batch):
            stats.map_messages_read += batch.record_count  # aborted: not mapped
        else:
            consumed = offset_map.put_batch(batch, start, max_entries)
            stats.map_messages_read += consumed
            if consumed < batch.record_count:
                return True
        if batch.last_offset >= start:
            offset_map.update_latest_offset(batch.last_offset)
        stats.map_bytes_read += batch.size_in_bytes
        return False

    def _read_batches(self, source: FileRecords, position: int) -> Iterator[RecordBatch]:
        """Whole batches of a (non-active, hence immutable) segment from ``position``, checked."""
        for batch in source.batches(position, load_full=True):
            self._throttle(batch.size_in_bytes)
            batch.ensure_valid()
            yield batch
