"""``LogSegment`` (spec §5) and the ``LogSegments`` map (§5.9); file names come from ``log_file_utils``.

A segment is a ``.log`` file (``FileRecords``) with three indexes named after its base offset:
``.index`` (offset → position), ``.timeindex`` (time → offset) and ``.txnindex`` (aborted
transactions). The offset and time indexes are opened lazily (Kafka's ``LazyIndex``): a segment that
is only renamed or deleted never maps them.

The index rule of ``append`` and the rebuild cadence of ``recover`` are Kafka's exactly, so a
segment written by kafkalog has the same ``.index``/``.timeindex`` bytes Kafka would write.

Thread safety follows Kafka's: ``append``/``truncate_to``/``recover``/``on_become_inactive_segment``
are for the single writer (the caller holds the partition lock); ``read``, ``translate_offset``,
``find_offset_by_timestamp`` and ``read_next_offset`` may run concurrently with it.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Generic, Self, TypeVar

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import (
    CorruptRecordError,
    IllegalArgumentError,
    InvalidRecordError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
    NoSuchFileError,
    SegmentReplacedError,
)
from kafkalog.records.batch import RecordBatch
from kafkalog.records.types import MAGIC_V2
from kafkalog.storage.file_records import FileRecords, LogOffsetPosition, TimestampAndOffset, as_bytes_view
from kafkalog.storage.files import create_empty_file, delete_file_if_exists, replace_file
from kafkalog.storage.filesystem import LOCAL_FILESYSTEM, FileSystem, LocalFileSystem
from kafkalog.storage.index import AbstractIndex, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from kafkalog.storage.log_file_utils import (
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

__all__ = [
    "FetchDataInfo",
    "LazyIndex",
    "LogOffsetMetadata",
    "LogSegment",
    "LogSegments",
    "RollParams",
]

log = logging.getLogger(__name__)

LONG_MAX: Final = 2**63 - 1

# Kafka's appendFromFile copies whole batches through a 1 MiB buffer; the chunking decides where
# index entries fall, so it is kept.
_APPEND_FROM_FILE_CHUNK: Final = 1024 * 1024


def _replace_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    text = str(path)
    if not text.endswith(old_suffix):
        raise IllegalArgumentError(f"Expected string to end with {old_suffix!r} but string is {text!r}")
    return Path(text[: len(text) - len(old_suffix)] + new_suffix)


# --- value types --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """Kafka's ``LogOffsetMetadata``: an offset and, when known, where it lives on disk."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1 and self.relative_position_in_segment == -1

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            return False
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            return False
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        if not self.on_same_segment(that):
            raise KafkaStorageError(f"{self} cannot compare its segment position with {that}")
        return self.relative_position_in_segment - that.relative_position_in_segment


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returns: where it started and the bytes (a ``FileRecords`` slice, possibly empty).

    ``first_entry_incomplete`` is set when ``max_size`` cut the first batch short.
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: Any  # a FileRecords slice here; the log layer may put MemoryRecords
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(frozen=True, slots=True)
class RollParams:
    """The facts ``LogSegment.should_roll`` decides on (Kafka's ``RollParams``)."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


# --- lazy index ---------------------------------------------------------------------------------

I = TypeVar("I", bound=AbstractIndex)  # noqa: E741 - Kafka's type parameter name


def _check_current(log: FileRecords, base_offset: int) -> None:
    if not log.is_current_file():
        raise SegmentReplacedError(
            f"Segment {base_offset} ({log.path}) was replaced or deleted on disk after it was opened")


class LazyIndex(Generic[I]):
    """An index that is only opened (and, if missing, created) when first used.

    Until then renames and deletes work on the path alone, so a segment being deleted or swapped
    never maps (or creates) an index it does not need. ``verify``, if given, runs once an index is
    loaded and before it is used; an exception from it leaves the index unloaded.
    """

    __slots__ = ("_index", "_loader", "_lock", "_path", "_verify")

    def __init__(self, path: Path, loader: Callable[[Path], I],
                 verify: Callable[[], None] | None = None) -> None:
        self._path = path
        self._loader = loader
        self._verify = verify
        self._index: I | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_offset(cls, path: Path, base_offset: int, max_index_size: int, writable: bool = True,
                   fs: FileSystem | None = None, verify: Callable[[], None] | None = None
                   ) -> LazyIndex[OffsetIndex]:
        return LazyIndex(path, lambda p: OffsetIndex(p, base_offset, max_index_size, writable, fs=fs), verify)

    @classmethod
    def for_time(cls, path: Path, base_offset: int, max_index_size: int, writable: bool = True,
                 fs: FileSystem | None = None, verify: Callable[[], None] | None = None
                 ) -> LazyIndex[TimeIndex]:
        return LazyIndex(path, lambda p: TimeIndex(p, base_offset, max_index_size, writable, fs=fs), verify)

    @property
    def path(self) -> Path:
        index = self._index
        return index.path if index is not None else self._path

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self) -> I:
        index = self._index
        if index is not None:
            return index
        with self._lock:
            if self._index is None:
                loaded = self._loader(self._path)
                if self._verify is not None:
                    self._verify()
                self._index = loaded
            return self._index

    def _create_empty_if_missing(self) -> bool:
        """Unloaded and without a file yet: create the file empty, which is what an index with no entry
        trims to (no preallocation, map and cut back). Returns whether it did; call with the lock."""
        return create_empty_file(self._path, "index")

    def flush(self) -> None:
        """Flush the index if it is loaded. One never loaded whose file exists holds nothing unwritten;
        one without a file yet is loaded, as Kafka's ``LogSegment.flush`` loads both indexes: created
        preallocated, so the segment can still take appends, and trimmed to no entry (an empty file)
        when it is closed."""
        with self._lock:
            index = self._index
            if index is None and self._path.exists():
                return
        self.get().flush()

    def trim_to_valid_size(self) -> None:
        """The index's ``trim_to_valid_size``. One never loaded whose file does not exist yet holds no
        entry: its trimmed form, an empty file, is created as it is."""
        with self._lock:
            if self._index is None and self._create_empty_if_missing():
                return
        self.get().trim_to_valid_size()

    def rename_to(self, path: Path) -> None:
        with self._lock:
            if self._index is not None:
                self._index.rename_to(path)
                return
            try:  # an index never created is fine: only the name changes
                replace_file(self._path, path, "index", missing_ok=True)
            finally:
                self._path = path

    def delete_if_exists(self) -> bool:
        with self._lock:
            if self._index is not None:
                return self._index.delete_if_exists()
            return delete_file_if_exists(self._path, "index")

    def update_parent_dir(self, parent_dir: Path) -> None:
        with self._lock:
            if self._index is not None:
                self._index.update_parent_dir(parent_dir)
            self._path = parent_dir / self._path.name

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()

    def close_handler(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close_handler()


# --- the segment --------------------------------------------------------------------------------

# Called for every v2 batch during recovery. The producer-state hook returns the aborted
# transaction the batch completes, if any, which the segment writes to its transaction index.
ProducerStateHook = Callable[[RecordBatch], AbortedTxn | None]
LeaderEpochHook = Callable[[RecordBatch], None]


class LogSegment:
    """One segment of a partition: its ``.log`` and indexes (Kafka's ``LogSegment``)."""

    def __init__(
        self,
        log: FileRecords,
        lazy_offset_index: LazyIndex[OffsetIndex],
        lazy_time_index: LazyIndex[TimeIndex],
        txn_index: TransactionIndex,
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        time: Time = SYSTEM_TIME,
        read_only: bool = False,
    ) -> None:
        self._log = log
        self._lazy_offset_index = lazy_offset_index
        self._lazy_time_index = lazy_time_index
        self._txn_index = txn_index
        self._base_offset = base_offset
        self._index_interval_bytes = index_interval_bytes
        self._roll_jitter_ms = roll_jitter_ms
        self._time = time
        self._read_only = read_only
        self._created = time.milliseconds()
        # Max timestamp of the first batch: what time-based rolling measures from.
        self._rolling_based_timestamp: int | None = None
        # (max timestamp, last offset of the first batch holding it); None until first needed, then
        # read from the time index's last entry (which may map the time index).
        self._max_timestamp_and_offset_so_far: TimestampOffset | None = None
        self._bytes_since_last_index_entry = 0

    @classmethod
    def open(
        cls,
        directory: Path | str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        time: Time = SYSTEM_TIME,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
        file_suffix: str = "",
        read_only: bool = False,
        fs: FileSystem | None = None,
        log_size: int | None = None,
    ) -> LogSegment:
        """Open (or create) the segment ``base_offset`` in ``directory``. Indexes are opened lazily.

        ``read_only`` is for readers in another process: nothing is created, written or trimmed,
        and the indexes count only their plausible entries (see ``storage.index``). Its files are
        read through ``fs`` (default: the local filesystem); ``log_size`` is the ``.log`` length a
        directory listing gave. A writable segment must be local.
        """
        directory = Path(directory)
        if read_only:
            fs = fs or LOCAL_FILESYSTEM
        elif fs is not None and not isinstance(fs, LocalFileSystem):
            raise KafkaStorageError(f"Segment {base_offset} of {fs.describe(directory)}: "
                                    "writes need a local directory")
        records = FileRecords.open(
            log_file(directory, base_offset, file_suffix),
            file_already_exists=file_already_exists or read_only,
            init_file_size=init_file_size,
            preallocate=preallocate,
            read_only=read_only,
            fs=fs if read_only else None,
            size=log_size,
        )
        writable = not read_only
        index_fs = fs if read_only else None
        # A reader's indexes are read when first needed, maybe after a writer in another process
        # replaced the segment: each is checked, once read, to belong to the .log this segment reads
        # (the writer renames the .log before its indexes, so a .log still in place vouches for them).
        verify = (lambda: _check_current(records, base_offset)) if read_only else None
        return cls(
            records,
            LazyIndex.for_offset(offset_index_file(directory, base_offset, file_suffix), base_offset,
                                 max_index_size, writable, index_fs, verify),
            LazyIndex.for_time(time_index_file(directory, base_offset, file_suffix), base_offset,
                               max_index_size, writable, index_fs, verify),
            TransactionIndex(transaction_index_file(directory, base_offset, file_suffix), base_offset,
                             fs=index_fs),
            base_offset,
            index_interval_bytes,
            roll_jitter_ms,
            time,
            read_only,
        )

    @staticmethod
    def delete_files_if_exist(directory: Path | str, base_offset: int, file_suffix: str = "") -> None:
        """Delete a segment's four files by name, without opening them."""
        for path in (offset_index_file(directory, base_offset, file_suffix),
                     time_index_file(directory, base_offset, file_suffix),
                     transaction_index_file(directory, base_offset, file_suffix),
                     log_file(directory, base_offset, file_suffix)):
            delete_file_if_exists(path)

    # --- accessors ----------------------------------------------------------------------------

    @property
    def log(self) -> FileRecords:
        return self._log

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index, opened (or created) on first use."""
        return self._lazy_offset_index.get()

    @property
    def time_index(self) -> TimeIndex:
        """The time index, opened (or created) on first use."""
        return self._lazy_time_index.get()

    @property
    def txn_index(self) -> TransactionIndex:
        return self._txn_index

    @property
    def offset_index_file(self) -> Path:
        return self._lazy_offset_index.path

    @property
    def time_index_file(self) -> Path:
        return self._lazy_time_index.path

    @property
    def txn_index_file(self) -> Path:
        return self._txn_index.path

    @property
    def roll_jitter_ms(self) -> int:
        return self._roll_jitter_ms

    @property
    def index_interval_bytes(self) -> int:
        return self._index_interval_bytes

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def size_in_bytes(self) -> int:
        """Bytes of data in the ``.log`` (not the preallocated file length)."""
        return self._log.size_in_bytes

    size = size_in_bytes

    def __repr__(self) -> str:
        # Like Kafka's toString, this must not map the time index.
        known = self._max_timestamp_and_offset_so_far
        return (f"LogSegment(base_offset={self._base_offset}, size={self._log.size_in_bytes}, "
                f"last_modified_time={self._log.last_modified_ms}, "
                f"largest_record_timestamp={known.timestamp if known is not None else -1})")

    def _check_writable(self) -> None:
        if self._read_only:
            raise KafkaStorageError(f"Segment {self._log.path} is opened read-only")

    # --- max timestamp bookkeeping -------------------------------------------------------------

    def read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        known = self._max_timestamp_and_offset_so_far
        if known is None:
            known = self._max_timestamp_and_offset_so_far = self.time_index.last_entry
        return known

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp appended so far (-1 if none); may map the time index."""
        return self.read_max_timestamp_and_offset_so_far().timestamp

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        """Last offset of the first batch holding ``max_timestamp_so_far``."""
        return self.read_max_timestamp_and_offset_so_far().offset

    @property
    def largest_record_timestamp(self) -> int | None:
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else None

    @property
    def largest_timestamp(self) -> int:
        """The max record timestamp, or the ``.log`` file's mtime when no record has one."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified

    @property
    def last_modified(self) -> int:
        return self._log.last_modified_ms

    def set_last_modified(self, ms: int) -> None:
        """Set the mtime of the ``.log`` and of those index files that exist."""
        ns = ms * 1_000_000
        for path in (self._log.path, self.offset_index_file, self.time_index_file):
            if path is not self._log.path and not path.exists():
                continue  # a lazy index never created
            try:
                os.utime(path, ns=(ns, ns))
            except OSError as e:
                raise KafkaStorageError(f"Cannot set the modification time of {path}: {e}") from e

    # --- appending ----------------------------------------------------------------------------

    def _can_convert_to_relative_offset(self, offset: int) -> bool:
        # Asked of the offset index, as Kafka does: this is what creates the .index of a new segment
        # on its first append, so a closed segment always has one (else Kafka would recover it).
        return self.offset_index.can_append_offset(offset)

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self._can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {offset} in segment {self._log.path} "
                f"(base offset {self._base_offset})")

    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records: Any) -> None:
        """Append ``records`` (bytes-like or ``MemoryRecords``) whose last offset is ``largest_offset``.

        Index rule (spec §5.1): when more than ``index_interval_bytes`` were appended since the last
        index entry — counted *before* this append — the offset index gets (``largest_offset``,
        position where this append starts) and the time index the max timestamp so far.
        """
        view = as_bytes_view(records)
        size = len(view)
        if size == 0:
            return
        if self._read_only:
            self._check_writable()
        log = self._log
        physical_position = log.size_in_bytes
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        # _ensure_offset_in_range, with the index kept for the entry below (once per batch).
        offset_index = self._lazy_offset_index.get()
        if not offset_index.can_append_offset(largest_offset):
            self._ensure_offset_in_range(largest_offset)
        log.append(view)
        known = self._max_timestamp_and_offset_so_far
        if known is None:
            known = self.read_max_timestamp_and_offset_so_far()
        if largest_timestamp > known.timestamp:
            known = self._max_timestamp_and_offset_so_far = TimestampOffset(largest_timestamp,
                                                                            shallow_offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self._index_interval_bytes:
            offset_index.append(largest_offset, physical_position)
            self._lazy_time_index.get().maybe_append(known.timestamp, known.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def append_from_file(self, records: FileRecords, start: int) -> int:
        """Copy whole batches of ``records`` from ``start`` while their offsets fit this segment;
        returns the bytes copied (less than the rest of ``records`` if an offset would overflow)."""
        position = start
        while True:
            appended = self._append_chunk_from_file(records, position)
            if appended == 0:
                return position - start
            position += appended

    def _append_chunk_from_file(self, records: FileRecords, position: int) -> int:
        bytes_to_append = 0
        max_timestamp = shallow_offset = max_offset = -(2**63)
        for batch in records.batches(position):
            size = batch.size_in_bytes
            if not self._can_convert_to_relative_offset(batch.last_offset):
                break
            if bytes_to_append and bytes_to_append + size >= _APPEND_FROM_FILE_CHUNK:
                break
            if batch.max_timestamp > max_timestamp:
                max_timestamp = batch.max_timestamp
                shallow_offset = batch.last_offset
            max_offset = batch.last_offset
            bytes_to_append += size
        if bytes_to_append > 0:
            self.append(max_offset, max_timestamp, shallow_offset,
                        records.read_bytes(position, bytes_to_append))
        return bytes_to_append

    def update_txn_index(self, aborted_txn: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker is in this segment."""
        self._check_writable()
        self._txn_index.append(aborted_txn)

    # --- reading ------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is ≥ ``offset``, as (its last offset, position, size);
        the search starts at the index's floor entry or ``starting_position``, whichever is later."""
        mapping = self.offset_index.lookup(offset)
        return self._log.search_for_offset_with_size(offset, max(mapping.position, starting_position))

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> FetchDataInfo | None:
        """Up to ``max_size`` bytes from the batch holding ``start_offset`` (or the next one), not past
        ``max_position`` (default: the segment size); None if ``start_offset`` is beyond the data.

        Batch-granular start, byte-granular end: the slice may stop inside a batch, then
        ``first_entry_incomplete`` tells whether it is the first one. ``min_one_message`` widens
        ``max_size`` to the first batch.
        """
        if max_size < 0:
            raise IllegalArgumentError(f"Invalid max size {max_size} for log read from segment {self._log!r}")
        if max_position is None:
            max_position = self._log.size_in_bytes
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_position = found.position
        metadata = LogOffsetMetadata(start_offset, self._base_offset, start_position)
        adjusted_max_size = max(max_size, found.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return FetchDataInfo(metadata, self._log.slice(start_position, 0))
        fetch_size = min(max_position - start_position, adjusted_max_size)
        return FetchDataInfo(metadata, self._log.slice(start_position, fetch_size),
                             adjusted_max_size < found.size)

    def fetch_upper_bound_offset(self, start_offset_position: OffsetPosition, fetch_size: int) -> int | None:
        entry = self.offset_index.fetch_upper_bound_offset(start_offset_position, fetch_size)
        return entry.offset if entry is not None else None

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> TimestampAndOffset | None:
        """The first record (in offset order, from the time index's hint) with timestamp ≥ ``timestamp``
        and offset ≥ ``starting_offset``; None if there is none in this segment."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self._log.search_for_timestamp(timestamp, position, starting_offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch (scans from the last index entry); base offset if empty."""
        fetch = self.read(self.offset_index.last_offset, self._log.size_in_bytes)
        if fetch is None and self._read_only:
            # A reader's index may have been mapped after its view of the .log was sized, while a
            # writer in another process went on appending: the entry can point past the visible data.
            fetch = FetchDataInfo(LogOffsetMetadata(self._base_offset), self._log)
        if fetch is None:
            return self._base_offset
        last = fetch.records.last_batch()
        return last.next_offset if last is not None else self._base_offset

    def has_overflow(self) -> bool:
        """Whether the last offset does not fit the 32-bit relative range (a legacy-era segment)."""
        next_offset = self.read_next_offset()
        return next_offset > self._base_offset and not self._can_convert_to_relative_offset(next_offset - 1)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        found = self._txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
        if self._read_only:
            _check_current(self._log, self._base_offset)  # the file just read belongs to our .log
        return found

    # --- rolling ------------------------------------------------------------------------------

    def should_roll(self, roll_params: RollParams) -> bool:
        """Whether the next append (described by ``roll_params``) must go to a new segment (§5.7)."""
        p = roll_params
        return self.should_roll_for(p.max_segment_ms, p.max_segment_bytes, p.max_timestamp_in_messages,
                                    p.max_offset_in_messages, p.messages_size, p.now)

    def should_roll_for(self, max_segment_ms: int, max_segment_bytes: int, max_timestamp_in_messages: int,
                        max_offset_in_messages: int, messages_size: int, now: int) -> bool:
        """:meth:`should_roll` with the ``RollParams`` fields as arguments (the per-append call)."""
        size = self._log.size_in_bytes
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0 and (self.time_waited_for_roll(now, max_timestamp_in_messages)
                         > max_segment_ms - self._roll_jitter_ms):
            return True
        offset_index = self._lazy_offset_index.get()
        return (offset_index.is_full()
                or self._lazy_time_index.get().is_full()
                or not offset_index.can_append_offset(max_offset_in_messages))

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            first = self._log.first_batch()
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Message time since the first batch's timestamp if it has one, else wall time since creation."""
        ts = self._rolling_based_timestamp
        if ts is None:
            self._load_first_batch_timestamp()
            ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self._created

    def get_first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, or Long.MAX when it has none (or the segment is empty)."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else LONG_MAX

    def on_become_inactive_segment(self) -> None:
        """At roll: write the final time-index entry and trim both indexes and the ``.log``."""
        self._check_writable()
        if self._log.size_in_bytes:  # an empty segment has no entry to write (nor indexes to map)
            known = self.read_max_timestamp_and_offset_so_far()
            self.time_index.maybe_append(known.timestamp, known.offset, skip_full_check=True)
        self._lazy_offset_index.trim_to_valid_size()
        self._lazy_time_index.trim_to_valid_size()
        self._log.trim()

    def resize_indexes(self, size: int) -> None:
        self._check_writable()
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # --- truncation and recovery --------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above ``offset`` — whole batches: the batch holding ``offset`` goes
        too — and make the segment active again (indexes back to full size). Returns bytes removed."""
        self._check_writable()
        mapping = self.translate_offset(offset)  # before the index shrinks, to keep the scan short
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self._txn_index.truncate_to(offset)
        offset_index.resize(offset_index.max_index_size)
        time_index.resize(time_index.max_index_size)
        truncated = 0 if mapping is None else self._log.truncate_to(mapping.position)
        if self._log.size_in_bytes == 0:
            self._created = self._time.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._max_timestamp_and_offset_so_far = self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> TimestampOffset:
        last_entry = self.time_index.last_entry
        position = self.offset_index.lookup(last_entry.offset).position
        after = self._log.largest_timestamp_after(position)
        if after.timestamp > last_entry.timestamp:
            return TimestampOffset(after.timestamp, after.offset)
        return last_entry

    def recover(self, producer_state_hook: ProducerStateHook | None = None,
                leader_epoch_hook: LeaderEpochHook | None = None,
                invalid_hook: Callable[[str], None] | None = None) -> int:
        """Rebuild the indexes from the ``.log`` and cut it at the first invalid or incomplete batch
        (spec §5.6). Returns the bytes truncated.

        ``leader_epoch_hook(batch)`` and ``producer_state_hook(batch)`` are called for each valid v2
        batch, in order; an ``AbortedTxn`` returned by the latter goes into the transaction index.
        ``invalid_hook(message)`` hears why the first invalid batch was refused.
        """
        self._check_writable()
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.reset()
        time_index.reset()
        self._txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        self._max_timestamp_and_offset_so_far = None
        try:
            for batch in self._log.batches(load_full=True):
                batch.ensure_valid()
                last_offset = batch.last_offset
                self._ensure_offset_in_range(last_offset)
                max_timestamp = batch.max_timestamp
                if max_timestamp > self.max_timestamp_so_far:
                    self._max_timestamp_and_offset_so_far = TimestampOffset(max_timestamp, last_offset)
                # Kafka's rebuild cadence: bytes since the *position* of the last entry, per batch.
                if valid_bytes - last_index_entry > self._index_interval_bytes:
                    offset_index.append(last_offset, valid_bytes)
                    known = self.read_max_timestamp_and_offset_so_far()
                    time_index.maybe_append(known.timestamp, known.offset)
                    last_index_entry = valid_bytes
                valid_bytes += batch.size_in_bytes
                if batch.magic >= MAGIC_V2:
                    if leader_epoch_hook is not None:
                        leader_epoch_hook(batch)
                    if producer_state_hook is not None:
                        aborted = producer_state_hook(batch)
                        if aborted is not None:
                            self._txn_index.append(aborted)
        except (CorruptRecordError, InvalidRecordError) as e:
            log.warning("Found invalid messages in log segment %s at byte offset %d: %s",
                        self._log.path, valid_bytes, e)
            if invalid_hook is not None:
                invalid_hook(str(e))
        truncated = self._log.size_in_bytes - valid_bytes
        if truncated > 0:
            log.debug("Truncated %d invalid bytes at the end of segment %s during recovery",
                      truncated, self._log.path)
        self._log.truncate_to(valid_bytes)
        offset_index.trim_to_valid_size()
        # A cleanly closed segment ends with its max timestamp in the time index; so does a recovered one.
        known = self.read_max_timestamp_and_offset_so_far()
        time_index.maybe_append(known.timestamp, known.offset, skip_full_check=True)
        time_index.trim_to_valid_size()
        return truncated

    def sanity_check(self, time_index_file_newly_created: bool) -> None:
        """Load-time check: the ``.index`` must exist (else ``NoSuchFileError``: recover this segment);
        a just-created time index is shrunk to 0; only the txn index is validated."""
        if not self.offset_index_file.exists():
            raise NoSuchFileError(f"Offset index file {self.offset_index_file} does not exist")
        if time_index_file_newly_created:
            self.time_index.resize(0)
        self._txn_index.sanity_check()

    # --- file lifecycle -----------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the ``.log`` and all indexes."""
        if self._read_only:
            return
        self._log.flush()
        self._lazy_offset_index.flush()
        self._lazy_time_index.flush()
        self._txn_index.flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files from ``old_suffix`` to ``new_suffix`` (e.g. "" → ".deleted").
        Indexes never loaded are renamed by path only; a missing txn index is fine."""
        self._check_writable()
        self._log.rename_to(_replace_suffix(self._log.path, old_suffix, new_suffix))
        self._lazy_offset_index.rename_to(_replace_suffix(self.offset_index_file, old_suffix, new_suffix))
        self._lazy_time_index.rename_to(_replace_suffix(self.time_index_file, old_suffix, new_suffix))
        self._txn_index.rename_to(_replace_suffix(self._txn_index.path, old_suffix, new_suffix))

    def has_suffix(self, suffix: str) -> bool:
        return all(p.name.endswith(suffix) for p in (self._log.path, self.offset_index_file,
                                                     self.time_index_file, self._txn_index.path))

    def update_parent_dir(self, directory: Path | str) -> None:
        directory = Path(directory)
        self._log.update_parent_dir(directory)
        self._lazy_offset_index.update_parent_dir(directory)
        self._lazy_time_index.update_parent_dir(directory)
        self._txn_index.update_parent_dir(directory)

    def delete_if_exists(self) -> None:
        """Delete the ``.log`` and the three index files (each only if present)."""
        errors: list[BaseException] = []
        for action in (self._log.delete_if_exists, self._lazy_offset_index.delete_if_exists,
                       self._lazy_time_index.delete_if_exists, self._txn_index.delete_if_exists):
            try:
                action()
            except KafkaStorageError as e:
                errors.append(e)
        if errors:
            raise errors[0]

    @property
    def deleted(self) -> bool:
        return not any(p.exists() for p in (self._log.path, self.offset_index_file,
                                            self.time_index_file, self._txn_index.path))

    def close(self) -> None:
        """Write the final time-index entry (if the max timestamp is known), trim and close everything."""
        if self._read_only:
            self.close_handlers()
            return
        if self._max_timestamp_and_offset_so_far is not None:
            try:
                known = self._max_timestamp_and_offset_so_far
                self.time_index.maybe_append(known.timestamp, known.offset, skip_full_check=True)
            except Exception as e:  # closing must go on, as in Kafka
                log.warning("Failed to append the final time index entry of %s: %s", self._log.path, e)
        for what, action in (("offset index", self._lazy_offset_index.close),
                             ("time index", self._lazy_time_index.close),
                             ("log", self._log.close),
                             ("txn index", self._txn_index.close)):
            try:
                action()
            except Exception as e:  # close the rest regardless
                log.warning("Failed to close the %s of %s: %s", what, self._log.path, e)

    def close_handlers(self) -> None:
        """Drop file handles without flushing or trimming (a failed disk, or a read-only segment)."""
        self._lazy_offset_index.close_handler()
        self._lazy_time_index.close_handler()
        self._log.close_handlers()
        self._txn_index.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# --- the segment map ----------------------------------------------------------------------------


class LogSegments:
    """Segments of one partition keyed by base offset, in order (Kafka's ``LogSegments``).

    Copy-on-write: every change installs a new (sorted bases, map) pair, so readers on other threads
    always see a consistent snapshot without locking. Changes (roll, deletion) are rare.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (sorted base offsets, base offset -> segment), replaced as a whole by every change.
        self._frozen: tuple[list[int], dict[int, LogSegment]] = ([], {})

    def _install(self, bases: list[int], segments: dict[int, LogSegment]) -> None:
        self._frozen = (bases, segments)

    # --- changes ------------------------------------------------------------------------------

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Add ``segment``; a segment with the same base offset is replaced (and returned)."""
        with self._lock:
            bases, segments = self._frozen
            new_segments = dict(segments)
            previous = new_segments.get(segment.base_offset)
            new_segments[segment.base_offset] = segment
            new_bases = bases if previous is not None else sorted([*bases, segment.base_offset])
            self._install(new_bases, new_segments)
            return previous

    def remove(self, base_offset: int) -> None:
        with self._lock:
            bases, segments = self._frozen
            if base_offset not in segments:
                return
            new_segments = dict(segments)
            del new_segments[base_offset]
            self._install([b for b in bases if b != base_offset], new_segments)

    def clear(self) -> None:
        with self._lock:
            self._install([], {})

    # --- lookups ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._frozen[0])

    @property
    def number_of_segments(self) -> int:
        return len(self)

    @property
    def is_empty(self) -> bool:
        return not self._frozen[0]

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._frozen[1]

    def contains(self, base_offset: int) -> bool:
        return base_offset in self._frozen[1]

    def get(self, base_offset: int) -> LogSegment | None:
        return self._frozen[1].get(base_offset)

    def base_offsets(self) -> list[int]:
        return list(self._frozen[0])

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """All segments, or with both bounds: those that may hold offsets in [from, to) — from the
        segment holding ``from_offset`` (or the first) up to, excluding, base offset ``to_offset``."""
        bases, segments = self._frozen
        if from_offset is None and to_offset is None:
            return [segments[b] for b in bases]
        if from_offset is None or to_offset is None:
            raise IllegalArgumentError("values() needs both from_offset and to_offset, or neither")
        if from_offset == to_offset:
            return []
        if to_offset < from_offset:
            raise IllegalArgumentError(
                f"Invalid log segment range: requested segments from offset {from_offset} which is "
                f"greater than limit offset {to_offset}")
        lo = bisect.bisect_right(bases, from_offset) - 1
        lo = max(lo, 0)
        hi = bisect.bisect_left(bases, to_offset)
        return [segments[b] for b in bases[lo:hi]]

    def non_active_log_segments_from(self, from_offset: int) -> list[LogSegment]:
        active = self.active_segment
        if from_offset > active.base_offset:
            return []
        return self.values(from_offset, active.base_offset)

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset ≤ ``offset``."""
        bases, segments = self._frozen
        i = bisect.bisect_right(bases, offset)
        return segments[bases[i - 1]] if i else None

    def lower_segment(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset < ``offset``."""
        bases, segments = self._frozen
        i = bisect.bisect_left(bases, offset)
        return segments[bases[i - 1]] if i else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        bases, segments = self._frozen
        i = bisect.bisect_right(bases, offset)
        return segments[bases[i]] if i < len(bases) else None

    def higher_segments(self, base_offset: int) -> list[LogSegment]:
        """Every segment whose base offset is > ``base_offset``."""
        bases, segments = self._frozen
        return [segments[b] for b in bases[bisect.bisect_right(bases, base_offset):]]

    @property
    def first_segment(self) -> LogSegment | None:
        bases, segments = self._frozen
        return segments[bases[0]] if bases else None

    @property
    def first_segment_base_offset(self) -> int | None:
        bases = self._frozen[0]
        return bases[0] if bases else None

    @property
    def last_segment(self) -> LogSegment | None:
        bases, segments = self._frozen
        return segments[bases[-1]] if bases else None

    @property
    def active_segment(self) -> LogSegment:
        """The last segment; ``KafkaStorageError`` if there is none."""
        last = self.last_segment
        if last is None:
            raise KafkaStorageError("The log has no segments")
        return last

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size_in_bytes for s in self.values())

    def filter(self, predicate: Callable[[LogSegment], bool]) -> list[LogSegment]:
        return [s for s in self.values() if predicate(s)]

    # --- bulk lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        for segment in self.values():
            segment.close()

    def close_handlers(self) -> None:
        for segment in self.values():
            segment.close_handlers()

    def update_parent_dir(self, directory: Path | str) -> None:
        for segment in self.values():
            segment.update_parent_dir(directory)

    def __repr__(self) -> str:
        return f"LogSegments({self._frozen[0]})"
