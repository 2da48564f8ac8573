"""Memory-mapped segment indexes: ``.index`` (offset → position) and ``.timeindex`` (time → offset).

Both follow Kafka's ``AbstractIndex`` family (spec §4.1-4.3) byte for byte:

* A **new** file is preallocated with zeros to ``max_index_size`` rounded down to a whole number of
  entries; an **existing** file opened for writing is trusted as is: ``entries = length // entry_size``
  (this is why Kafka trims indexes on roll/close, and why a crashed active segment needs recovery).
* Lookups use Kafka's "warm/cold" binary search: the last 8192 bytes of entries are searched first.
  The answer equals a plain floor search; the split only keeps page-cache access patterns Kafka-like,
  and, for ``smallest-upper-bound``, reproduces one Kafka quirk (see ``fetch_upper_bound_offset``).

Read-only opens (``writable=False``) serve readers in *other processes* while a writer may still be
appending to a preallocated file. There the file length says nothing about how many entries are real,
so the entry count is the longest prefix of plausible entries instead:

* a first entry that is all zero bytes is the unused tail, not an entry (a real all-zero entry would
  say "offset = base offset at position 0 / timestamp 0", which a lookup answers the same way anyway);
* after it, offset-index entries count while relative offset **and** position strictly increase;
  time-index entries count while the timestamp strictly increases and the relative offset does not
  decrease. A torn entry being written by another process fails these tests and ends the prefix.

``refresh()`` re-reads the file (length and count) for a reader that wants to see later appends, and
should follow a writer's trim (roll): a reader only touches its own counted entries, which a trim keeps,
but a map longer than the file must not be read past the file's end.
A read-only open of a missing file is an empty index and creates nothing; read-only indexes are never
resized, trimmed or written. They read through a ``storage.filesystem.FileSystem`` (local by default),
so an index in object storage is fetched in exact ranges: the valid prefix, not a preallocated tail.

Concurrency (one writer, many readers): an append writes the entry's bytes first and only then
increments ``entries``, so a lookup — which reads ``entries`` once — never sees a half-written entry.
Mutations are serialised by ``_lock``; anything that replaces or drops the map (resize, close) also
holds ``_remap_lock``, which every reader holds while it touches the map.

``read_offset_index_file``/``read_time_index_file`` read a file's slots *without* trusting them, for
the tools that must show damage (``dump-log``, ``verify``); the sanity rules
(``offset_index_sanity_failure``/``time_index_sanity_failure``) are the ones ``sanity_check`` raises.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import threading
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final, Self

from kafkalog.errors import (
    CorruptIndexError,
    IllegalIndexOperationError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    KafkaStorageError,
    NoSuchFileError,
)
from kafkalog.records.types import NO_TIMESTAMP
from kafkalog.storage.files import delete_file_if_exists, replace_file
from kafkalog.storage.filesystem import LOCAL_FILESYSTEM, FileSystem, LocalFileSystem

__all__ = [
    "OFFSET_INDEX_ENTRY_SIZE",
    "TIME_INDEX_ENTRY_SIZE",
    "WARM_SECTION_BYTES",
    "AbstractIndex",
    "IndexFileSlots",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
    "offset_index_sanity_failure",
    "read_offset_index_file",
    "read_time_index_file",
    "time_index_sanity_failure",
]

INT32_MAX: Final = 2**31 - 1
# Kafka keeps the last 8 KiB of entries "warm" (AbstractIndex.warmEntries = 8192 / entrySize).
WARM_SECTION_BYTES: Final = 8192
OFFSET_INDEX_ENTRY_SIZE: Final = 8
TIME_INDEX_ENTRY_SIZE: Final = 12

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, physical position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MADV_RANDOM: Final = getattr(mmap, "MADV_RANDOM", None)  # not on every platform
# What an index reads entries from: its writable map, or the bytes a read-only index was read into.
IndexBuffer = mmap.mmap | bytes | bytearray


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An offset-index entry: the append whose last offset is ``offset`` starts at byte ``position``."""

    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A time-index entry: no record with a timestamp above ``timestamp`` has an offset ≤ ``offset``."""

    timestamp: int
    offset: int

    # Kafka's TimestampOffset.UNKNOWN: what LogSegment holds before its max timestamp is known.
    UNKNOWN: ClassVar[TimestampOffset]


TimestampOffset.UNKNOWN = TimestampOffset(-1, -1)


# --- raw reading and sanity rules (shared by the index classes and the tools) -------------------


@dataclass(frozen=True, slots=True)
class IndexFileSlots:
    """An index file's slots as stored, not trusted: what a dump or a verification must show.

    ``entries`` holds the ``used`` slots that precede the zero-filled tail a writer preallocates
    (Kafka's dump stops at the first slot with relative offset 0 after the first), as (offset,
    position) for an offset index or (timestamp, offset) for a time index, offsets made absolute;
    ``slots`` counts every whole slot and ``last_slot`` is the last of them as stored (Kafka opens a
    file as that many entries). ``dirty_tail`` is the byte position of the first non-zero byte inside
    the tail, if any. The zero tail is not decoded slot by slot: an active segment's preallocated
    index holds a million of them.
    """

    path: Path
    base_offset: int
    time_index: bool
    length: int
    entries: list[tuple[int, int]]
    used: int
    dirty_tail: int | None
    slots: int
    last_slot: tuple[int, int] | None

    def entries_in_use(self) -> list[tuple[int, int]]:
        """The first ``used`` slots, except that a file whose every slot is zero bytes has none: it
        is a preallocated index with no entry yet (a segment open in a writer, or left open by a
        crash), not an entry for the base offset — which would be harmless anyway, sending lookups
        to the segment's start. (Kafka's dump still prints that first slot; ``used`` keeps it.)"""
        zero_slot = (0, self.base_offset) if self.time_index else (self.base_offset, 0)
        if self.used == 1 and self.entries[0] == zero_slot:
            return []
        return self.entries[: self.used]

    def sanity_failure(self) -> str | None:
        """Kafka's sanity check over the file as Kafka opens it (every whole slot is an entry)."""
        first = self.entries[0] if self.entries else None
        last = self.last_slot
        if self.time_index:
            return time_index_sanity_failure(self.path, self.base_offset, self.length,
                                             None if first is None else first[0], last)
        return offset_index_sanity_failure(self.path, self.base_offset, self.length,
                                           None if last is None else last[0])

    def damage(self) -> list[tuple[str, int | None]]:
        """What is wrong with the file itself, whatever the log holds, as (message, byte position):
        Kafka's sanity failure (for a time index only when no zero-filled tail follows the entries:
        its zero slots would fail the check) or else a length that is not whole entries, and non-zero
        bytes after the entries (a damaged entry that reads as the end of the entries)."""
        found: list[tuple[str, int | None]] = []
        entry_size = TIME_INDEX_ENTRY_SIZE if self.time_index else OFFSET_INDEX_ENTRY_SIZE
        failure = self.sanity_failure()
        if failure is not None and (not self.time_index or self.used == self.slots):
            found.append((failure, None))
        elif self.length % entry_size:
            found.append((f"length {self.length} is not a multiple of {entry_size}", None))
        if self.dirty_tail is not None:
            found.append(("non-zero bytes after the last entry, where only zeros may follow "
                          "(a damaged entry or a tail that is not zero-filled)", self.dirty_tail))
        return found


def _read_slots(path: Path, base_offset: int, entry: struct.Struct, offset_column: int) -> IndexFileSlots:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KafkaStorageError(f"Cannot read index file {path}: {e}") from e
    count = len(data) // entry.size

    def absolute(first: int, second: int) -> tuple[int, int]:
        return (first, base_offset + second) if offset_column else (base_offset + first, second)

    entries = []
    for i, (first, second) in enumerate(entry.iter_unpack(memoryview(data)[: count * entry.size])):
        if i > 0 and (second if offset_column else first) == 0:
            break  # the zero-filled tail begins
        entries.append(absolute(first, second))
    used = len(entries)
    last_slot = absolute(*entry.unpack_from(data, (count - 1) * entry.size)) if count else None
    tail = data[used * entry.size :]
    stripped = tail.lstrip(b"\0")
    dirty_tail = None if not stripped else used * entry.size + len(tail) - len(stripped)
    return IndexFileSlots(path, base_offset, bool(offset_column), len(data), entries, used, dirty_tail,
                          count, last_slot)


def read_offset_index_file(path: Path, base_offset: int) -> IndexFileSlots:
    """Every slot of an ``.index`` file as (absolute offset, position)."""
    return _read_slots(path, base_offset, _OFFSET_ENTRY, 0)


def read_time_index_file(path: Path, base_offset: int) -> IndexFileSlots:
    """Every slot of a ``.timeindex`` file as (timestamp, absolute offset)."""
    return _read_slots(path, base_offset, _TIME_ENTRY, 1)


def offset_index_sanity_failure(path: Path, base_offset: int, length: int,
                                last_offset: int | None) -> str | None:
    """Kafka's ``OffsetIndex.sanityCheck``: why the index is corrupt, or None. ``last_offset`` is that
    of the last entry (None: no entries)."""
    if last_offset is not None and last_offset < base_offset:
        return (f"Corrupt index found, index file ({path}) has non-zero size but the last offset is "
                f"{last_offset} which is less than the base offset {base_offset}")
    if length % OFFSET_INDEX_ENTRY_SIZE != 0:
        return (f"Index file {path} is corrupt, found {length} bytes which is neither positive nor a "
                f"multiple of {OFFSET_INDEX_ENTRY_SIZE}")
    return None


def time_index_sanity_failure(path: Path, base_offset: int, length: int, first_timestamp: int | None,
                              last: tuple[int, int] | None) -> str | None:
    """Kafka's ``TimeIndex.sanityCheck``: why the index is corrupt, or None. ``last`` is the last
    entry's (timestamp, offset) (None: no entries); ``first_timestamp`` the first entry's."""
    if last is not None:
        last_timestamp, last_offset = last
        if first_timestamp is not None and last_timestamp < first_timestamp:
            return (f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"timestamp is {last_timestamp} which is less than the first timestamp {first_timestamp}")
        if last_offset < base_offset:
            return (f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"offset is {last_offset} which is less than the first offset {base_offset}")
    if length % TIME_INDEX_ENTRY_SIZE != 0:
        return (f"Time index file {path} is corrupt, found {length} bytes which is neither positive nor a "
                f"multiple of {TIME_INDEX_ENTRY_SIZE}")
    return None


def _map_writable(fd: int, length: int) -> mmap.mmap | None:
    """A shared writable map of the first ``length`` bytes of ``fd`` (None when empty).

    Index access is binary searches and appends at the tail, never a sequential read, so the kernel's
    read-around is switched off: the first fault would otherwise read ``read_ahead_kb`` around the
    page (8 MiB on some virtual disks), which for a new, preallocated index is milliseconds spent on
    zeros at the segment's first appends — more than a thousand appends' worth of index work.
    """
    if not length:
        return None
    mm = mmap.mmap(fd, length, access=mmap.ACCESS_WRITE)
    if _MADV_RANDOM is not None:
        try:
            mm.madvise(_MADV_RANDOM)
        except OSError:
            pass  # only a hint
    return mm


def _round_down_to_exact_multiple(number: int, factor: int) -> int:
    """``factor * (number / factor)`` with Java's truncating int division (so -1 → 0, not -factor)."""
    quotient = number // factor if number >= 0 else -((-number) // factor)
    return factor * quotient


class AbstractIndex(ABC):
    """What the offset and time indexes share: the mapped file, its size, entry count and searches.

    ``max_index_size`` only matters when the file is created (or on ``reset``); an existing file keeps
    its length. Use as a context manager: leaving it calls ``close()``, which trims a writable index.
    """

    ENTRY_SIZE: ClassVar[int]
    _KIND: ClassVar[str] = "index"

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int = -1,
                 writable: bool = True, *, fs: FileSystem | None = None) -> None:
        self._path = Path(path)
        if writable and fs is not None and not isinstance(fs, LocalFileSystem):
            raise KafkaStorageError(f"{self._KIND} {fs.describe(self._path)}: writes need a local directory")
        self._fs = fs or LOCAL_FILESYSTEM
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._lock = threading.RLock()
        self._remap_lock = threading.RLock()
        self._mm: IndexBuffer | None = None
        self._closed = False
        self._length = 0
        self._max_entries = 0
        self._entries = 0
        self._warm_entries = WARM_SECTION_BYTES // self.ENTRY_SIZE
        self._open()

    # --- opening and mapping ------------------------------------------------------------------

    def _open(self) -> None:
        size = self.ENTRY_SIZE
        if not self._writable:
            self._map_read_only()
            return
        try:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                newly_created = True
            except FileExistsError:
                fd = os.open(self._path, os.O_RDWR)
                newly_created = False
            try:
                if newly_created:
                    if self._max_index_size < size:
                        # Checked after O_EXCL so an existing file is never touched; remove what we made.
                        os.close(fd)
                        fd = -1
                        os.unlink(self._path)
                        raise IllegalIndexOperationError(
                            f"Invalid max index size {self._max_index_size} for new {self._KIND} "
                            f"{self._path} (entry size {size})")
                    os.ftruncate(fd, _round_down_to_exact_multiple(self._max_index_size, size))
                length = os.fstat(fd).st_size
                self._mm = _map_writable(fd, length)
            finally:
                if fd >= 0:
                    os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"Cannot open {self._KIND} {self._path}: {e}") from e
        self._length = length
        self._max_entries = length // size
        # A pre-existing index is assumed valid up to its last whole entry (Kafka does no scan).
        self._entries = 0 if newly_created else length // size

    def _map_read_only(self) -> None:
        """(Re)load for reading; a missing file is an empty index. Caller holds both locks or is __init__.

        Read-only indexes are *read* (pread) into memory rather than mapped: the writer in another
        process may trim or truncate the file at any moment, and touching a mapped page past the new
        end of file kills the reader with SIGBUS. Only the valid prefix of entries is kept; the chunk
        size doubles so a large index costs about twice its size, a preallocated empty one one read.
        """
        fs = self._fs
        try:
            f = fs.open_read(self._path)
        except NoSuchFileError:
            self._mm, self._length, self._max_entries, self._entries = None, 0, 0, 0
            return
        except KafkaStorageError as e:
            raise KafkaStorageError(
                f"Cannot open {self._KIND} {fs.describe(self._path)} for reading: {e}") from e
        size = self.ENTRY_SIZE
        try:
            length = f.size
            buf = bytearray()
            count = 0
            chunk = 8192 * size
            while len(buf) < length:
                data = f.read_at(min(chunk, length - len(buf)), len(buf))
                if not data:
                    break
                buf += data
                whole = len(buf) // size
                count = self._count_valid_prefix(buf, whole)
                if count < whole:
                    break
                chunk *= 2
        finally:
            f.close()
        self._mm = bytes(buf[: count * size]) if count else None
        self._length = length
        self._max_entries = length // size
        self._entries = count

    @abstractmethod
    def _count_valid_prefix(self, mm: IndexBuffer, limit: int) -> int:
        """How many leading entries look real (read-only opens; see the module docstring)."""

    @abstractmethod
    def _offset_at(self, mm: IndexBuffer, n: int) -> int:
        """The absolute offset of entry ``n`` (the key of offset-index searches, the value of time-index
        entries)."""

    def _unmap(self) -> None:
        mm, self._mm = self._mm, None
        if isinstance(mm, mmap.mmap):  # read-only indexes hold plain bytes
            mm.close()

    # --- guards --------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"{self._KIND} {self._path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise KafkaStorageError(f"{self._KIND} {self._path} is opened read-only")

    # --- plain properties ---------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """Length of the file (and of the map), in bytes."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes actually used by entries."""
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # --- offsets -------------------------------------------------------------------------------

    def _to_relative(self, offset: int) -> int | None:
        relative = offset - self._base_offset
        return relative if 0 <= relative <= INT32_MAX else None

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``; IndexOffsetOverflowError unless it fits 0..Int.MAX."""
        relative = self._to_relative(offset)
        if relative is None:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} (base offset {self._base_offset}, {self._path})")
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return self._to_relative(offset) is not None

    # --- size management ----------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file to ``new_size`` rounded down to whole entries and remap; False if unchanged.

        The entries are kept; a size that would cut off entries is refused (Kafka would shrink the
        file first and fail afterwards).
        """
        with self._lock, self._remap_lock:
            self._check_writable()
            size = self.ENTRY_SIZE
            rounded = _round_down_to_exact_multiple(new_size, size)
            if rounded < 0 or rounded < self._entries * size:
                raise IllegalIndexOperationError(
                    f"Cannot resize {self._KIND} {self._path} to {new_size} bytes: it holds "
                    f"{self._entries} entries of {size} bytes")
            if rounded == self._length:
                return False
            self._unmap()
            try:
                fd = os.open(self._path, os.O_RDWR)
                try:
                    os.ftruncate(fd, rounded)
                    self._mm = _map_writable(fd, rounded)
                finally:
                    os.close(fd)
            except OSError as e:
                # The old map is gone and no new one exists: the index cannot be used any more.
                self._closed = True
                raise KafkaStorageError(f"Cannot resize {self._KIND} {self._path} to {rounded}: {e}") from e
            self._length = rounded
            self._max_entries = rounded // size
            return True

    def trim_to_valid_size(self) -> None:
        """Cut the file down to its entries (roll, close, end of recovery). No-op when closed/read-only."""
        with self._lock:
            if self._closed or not self._writable:
                return
            self.resize(self._entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Drop every entry and grow the file back to ``max_index_size``."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    def truncate_to(self, offset: int) -> None:
        """Remove all entries with an offset ≥ ``offset``; truncating above the last entry does nothing."""
        with self._lock:
            self._check_writable()
            with self._remap_lock:
                mm = self._mm
                entries = self._entries
                slot = self._slot_for(mm, entries, self._offset_at, offset, False)
                if slot < 0 or mm is None:
                    new_entries = 0
                elif self._offset_at(mm, slot) == offset:
                    new_entries = slot  # an exact match goes too
                else:
                    new_entries = slot + 1
            self._truncate_to_entries(new_entries)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its size)."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            self._check_writable()
            self._entries = entries
            self._after_truncate()

    @abstractmethod
    def _after_truncate(self) -> None:
        """Refresh cached last-entry state after the entry count went down."""

    @abstractmethod
    def sanity_check(self) -> None:
        """CorruptIndexError if the file fails Kafka's sanity check."""

    # --- file lifecycle -----------------------------------------------------------------------

    def flush(self) -> None:
        with self._lock:
            self._check_open()
            if isinstance(self._mm, mmap.mmap) and self._writable:
                try:
                    self._mm.flush()
                except OSError as e:
                    raise KafkaStorageError(f"Cannot flush {self._KIND} {self._path}: {e}") from e

    def refresh(self) -> int:
        """Read-only indexes: re-map the file at its current length and recount; returns ``entries``."""
        with self._lock, self._remap_lock:
            self._check_open()
            if self._writable:
                raise IllegalIndexOperationError(f"refresh() is for read-only indexes ({self._path})")
            self._map_read_only()
            self._after_truncate()
            return self._entries

    def close_handler(self) -> None:
        """Drop the map without trimming (Kafka's closeHandler)."""
        with self._lock, self._remap_lock:
            self._unmap()
            self._closed = True

    def close(self) -> None:
        """Trim a writable index to its entries, then unmap. Safe to call twice."""
        with self._lock:
            self.trim_to_valid_size()
            self.close_handler()

    def delete_if_exists(self) -> bool:
        """Unmap and delete the file; True if a file was deleted."""
        self.close_handler()
        return delete_file_if_exists(self._path, self._KIND)

    def rename_to(self, path: Path | str) -> None:
        """Move the file; the index follows the new name even if the move fails (as Kafka does)."""
        target = Path(path)
        try:
            replace_file(self._path, target, self._KIND)
        finally:
            self._path = target

    def update_parent_dir(self, parent_dir: Path | str) -> None:
        self._path = Path(parent_dir) / self._path.name

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("rw" if self._writable else "ro")
        return (f"{type(self).__name__}({self._path.name}, base_offset={self._base_offset}, "
                f"entries={self._entries}/{self._max_entries}, {state})")

    # --- searching ----------------------------------------------------------------------------

    def _reader_map(self) -> IndexBuffer | None:
        """The map for a lookup; caller holds ``_remap_lock``."""
        self._check_open()
        return self._mm

    def _slot_for(self, mm: IndexBuffer | None, entries: int, read: Callable[[IndexBuffer, int], int],
                  target: int, smallest_upper_bound: bool) -> int:
        """Kafka's indexSlotRangeFor: warm section first, then the cold part; -1 when nothing fits."""
        if entries == 0 or mm is None:
            return -1
        first_hot = max(0, entries - 1 - self._warm_entries)
        if read(mm, first_hot) < target:
            return self._binary_search(mm, entries, read, target, smallest_upper_bound,
                                       first_hot, entries - 1)
        if read(mm, 0) > target:
            return 0 if smallest_upper_bound else -1
        return self._binary_search(mm, entries, read, target, smallest_upper_bound, 0, first_hot)

    @staticmethod
    def _binary_search(mm: IndexBuffer, entries: int, read: Callable[[IndexBuffer, int], int], target: int,
                       smallest_upper_bound: bool, lo: int, hi: int) -> int:
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = read(mm, mid)
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        if not smallest_upper_bound:
            return lo
        # Kafka never compares entry[lo] here, so an exact match on the first entry of the range
        # yields the slot after it; reproduced on purpose (callers only need *an* upper bound).
        return -1 if lo == entries - 1 else lo + 1

    def _check_entry_number(self, n: int, entries: int) -> None:
        if n < 0 or n >= entries:
            raise IllegalIndexOperationError(
                f"Attempt to fetch the {n}th entry from {self._KIND} {self._path}, which has size {entries}")


class OffsetIndex(AbstractIndex):
    """``.index``: 8-byte entries (relative offset i32, position i32), Kafka's OffsetIndex."""

    ENTRY_SIZE: ClassVar[int] = OFFSET_INDEX_ENTRY_SIZE
    _KIND: ClassVar[str] = "offset index"

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int = -1,
                 writable: bool = True, *, fs: FileSystem | None = None) -> None:
        self._last_offset = base_offset
        super().__init__(path, base_offset, max_index_size, writable, fs=fs)
        self._last_offset = self._last_entry().offset

    # Column readers used by the searches (absolute offset = key, position = value).
    def _offset_at(self, mm: IndexBuffer, n: int) -> int:
        relative: int = _I32.unpack_from(mm, n * 8)[0]
        return self._base_offset + relative

    @staticmethod
    def _position_at(mm: IndexBuffer, n: int) -> int:
        position: int = _I32.unpack_from(mm, n * 8 + 4)[0]
        return position

    def _parse_entry(self, mm: IndexBuffer, n: int) -> OffsetPosition:
        relative, position = _OFFSET_ENTRY.unpack_from(mm, n * 8)
        return OffsetPosition(self._base_offset + relative, position)

    def _count_valid_prefix(self, mm: IndexBuffer, limit: int) -> int:
        count = 0
        prev_rel = prev_pos = -1
        for relative, position in _OFFSET_ENTRY.iter_unpack(mm[: limit * 8]):
            if count == 0:
                if (relative == 0 and position == 0) or relative < 0 or position < 0:
                    break
            elif relative <= prev_rel or position <= prev_pos:
                break
            prev_rel, prev_pos = relative, position
            count += 1
        return count

    def _last_entry(self) -> OffsetPosition:
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            if entries == 0 or mm is None:
                return OffsetPosition(self._base_offset, 0)
            return self._parse_entry(mm, entries - 1)

    def _after_truncate(self) -> None:
        self._last_offset = self._last_entry().offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset ≤ ``target_offset``; ``(base_offset, 0)`` if there is none."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            slot = self._slot_for(mm, entries, self._offset_at, target_offset, False)
            if slot == -1 or mm is None:
                return OffsetPosition(self._base_offset, 0)
            return self._parse_entry(mm, slot)

    def lookup_ceiling(self, target_offset: int) -> OffsetPosition | None:
        """Smallest entry with offset ≥ ``target_offset``, or None (the CEILING twin of ``lookup``)."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            slot = self._slot_for(mm, entries, self._offset_at, target_offset, False)
            if mm is None or entries == 0:
                return None
            if slot == -1:
                slot = 0  # every entry is above the target
            elif self._offset_at(mm, slot) != target_offset:
                slot += 1
                if slot >= entries:
                    return None
            return self._parse_entry(mm, slot)

    def positions(self) -> array[int]:
        """Every entry's position, ascending: where batches start, for a reader that cuts the
        segment there (the cleaner's map-pass windows) without a search per cut."""
        with self._remap_lock:
            mm = self._reader_map()
            words = array("i")
            if mm is not None and self._entries:
                words.frombytes(mm[:self._entries * 8])
                if sys.byteorder == "little":
                    words.byteswap()
        return words[1::2]

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry (0-based)."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            self._check_entry_number(n, entries)
            assert mm is not None  # entries > 0 implies a map
            return self._parse_entry(mm, n)

    def entries_list(self) -> list[OffsetPosition]:
        """All entries, oldest first (diagnostics and tests)."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            if mm is None or entries == 0:
                return []
            base = self._base_offset
            return [OffsetPosition(base + rel, pos)
                    for rel, pos in _OFFSET_ENTRY.iter_unpack(mm[: entries * 8])]

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition,
                                 fetch_size: int) -> OffsetPosition | None:
        """An entry whose position is ≥ ``fetch_offset.position + fetch_size``: an offset surely past the
        fetched bytes (Kafka's smallest-upper-bound search by position, quirk included), or None."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            slot = self._slot_for(mm, entries, self._position_at, fetch_offset.position + fetch_size, True)
            if slot == -1 or mm is None:
                return None
            return self._parse_entry(mm, slot)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; the offset must be above the last entry's."""
        with self._lock:
            # Runs once per appended batch: the checks of _check_writable, is_full and relative_offset
            # are inlined (same order, same errors).
            if self._closed or not self._writable:
                self._check_writable()
            entries = self._entries
            if entries >= self._max_entries:
                raise IllegalIndexOperationError(
                    f"Attempt to append to a full offset index (size = {entries}) {self._path}")
            if entries != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset {offset} to position {entries} no larger than the "
                    f"last offset appended ({self._last_offset}) to {self._path}")
            relative = offset - self._base_offset
            if not 0 <= relative <= INT32_MAX:
                self.relative_offset(offset)  # raises IndexOffsetOverflowError
            if not 0 <= position <= INT32_MAX:
                raise IllegalIndexOperationError(
                    f"Position {position} of offset {offset} does not fit an offset index entry "
                    f"({self._path})")
            mm = self._mm
            assert mm is not None  # not full implies a non-empty map
            # Bytes first, count second: a concurrent lookup sees the old count or a complete entry.
            _OFFSET_ENTRY.pack_into(mm, entries * 8, relative, position)
            self._last_offset = offset
            self._entries = entries + 1

    def sanity_check(self) -> None:
        """CorruptIndexError if the last offset is below the base offset or the length is not 8·n."""
        self._check_open()
        failure = offset_index_sanity_failure(self._path, self._base_offset, self._length,
                                              self._last_offset if self._entries else None)
        if failure is not None:
            raise CorruptIndexError(failure)

class TimeIndex(AbstractIndex):
    """``.timeindex``: 12-byte entries (timestamp i64, relative offset i32), Kafka's TimeIndex."""

    ENTRY_SIZE: ClassVar[int] = TIME_INDEX_ENTRY_SIZE
    _KIND: ClassVar[str] = "time index"

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int = -1,
                 writable: bool = True, *, fs: FileSystem | None = None) -> None:
        self._last_entry = TimestampOffset(NO_TIMESTAMP, base_offset)
        super().__init__(path, base_offset, max_index_size, writable, fs=fs)
        self._last_entry = self._last_entry_from_file()

    @staticmethod
    def _timestamp_at(mm: IndexBuffer, n: int) -> int:
        timestamp: int = _I64.unpack_from(mm, n * 12)[0]
        return timestamp

    def _offset_at(self, mm: IndexBuffer, n: int) -> int:
        relative: int = _I32.unpack_from(mm, n * 12 + 8)[0]
        return self._base_offset + relative

    def _parse_entry(self, mm: IndexBuffer, n: int) -> TimestampOffset:
        timestamp, relative = _TIME_ENTRY.unpack_from(mm, n * 12)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def _count_valid_prefix(self, mm: IndexBuffer, limit: int) -> int:
        count = 0
        prev_ts = prev_rel = -1
        for timestamp, relative in _TIME_ENTRY.iter_unpack(mm[: limit * 12]):
            if count == 0:
                # The first real entry has a timestamp > -1 (maybe_append's rule) and is not all zeros.
                if (timestamp == 0 and relative == 0) or timestamp < 0 or relative < 0:
                    break
            elif timestamp <= prev_ts or relative < prev_rel:
                break
            prev_ts, prev_rel = timestamp, relative
            count += 1
        return count

    def _last_entry_from_file(self) -> TimestampOffset:
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            if entries == 0 or mm is None:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._parse_entry(mm, entries - 1)

    def _after_truncate(self) -> None:
        self._last_entry = self._last_entry_from_file()

    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment is rolled or closed.
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """Last entry, or ``(-1, base_offset)`` when empty."""
        return self._last_entry

    def entry(self, n: int) -> TimestampOffset:
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            self._check_entry_number(n, entries)
            assert mm is not None
            return self._parse_entry(mm, n)

    def entries_list(self) -> list[TimestampOffset]:
        """All entries, oldest first (diagnostics and tests)."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            if mm is None or entries == 0:
                return []
            base = self._base_offset
            return [TimestampOffset(ts, base + rel)
                    for ts, rel in _TIME_ENTRY.iter_unpack(mm[: entries * 12])]

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp ≤ target; ``(-1, base_offset)`` if there is none."""
        with self._remap_lock:
            mm = self._reader_map()
            entries = self._entries
            slot = self._slot_for(mm, entries, self._timestamp_at, target_timestamp, False)
            if slot == -1 or mm is None:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._parse_entry(mm, slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's (spec §4.3).

        ``skip_full_check`` is for the entry written at roll/close, which may use the reserved slot.
        An equal timestamp is silently ignored; going backwards in offset or time is an error.
        """
        with self._lock:
            if self._closed or not self._writable:
                self._check_writable()
            if not skip_full_check and self.is_full():
                raise IllegalIndexOperationError(
                    f"Attempt to append to a full time index (size = {self._entries}) {self._path}")
            last = self._last_entry
            if self._entries != 0 and offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than the last "
                    f"offset appended ({last.offset}) to {self._path}")
            if self._entries != 0 and timestamp < last.timestamp:
                raise IllegalIndexOperationError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than the "
                    f"last timestamp appended ({last.timestamp}) to {self._path}")
            if timestamp <= last.timestamp:
                return  # equal → the roll/close re-append of an existing entry; nothing to do
            relative = self.relative_offset(offset)
            if self._entries >= self._max_entries:
                raise IllegalIndexOperationError(
                    f"Time index {self._path} has no room left ({self._entries} entries)")
            mm = self._mm
            assert mm is not None
            _TIME_ENTRY.pack_into(mm, self._entries * 12, timestamp, relative)
            self._last_entry = TimestampOffset(timestamp, offset)
            self._entries += 1

    def resize(self, new_size: int) -> bool:
        with self._lock:
            if super().resize(new_size):
                self._last_entry = self._last_entry_from_file()
                return True
            return False

    def sanity_check(self) -> None:
        """CorruptIndexError if last timestamp < first, last offset < base offset, or length ≠ 12·n."""
        with self._remap_lock:
            mm = self._reader_map()
            last = self._last_entry
            first_timestamp = self._timestamp_at(mm, 0) if self._entries != 0 and mm is not None else None
            failure = time_index_sanity_failure(
                self._path, self._base_offset, self._length, first_timestamp,
                (last.timestamp, last.offset) if self._entries != 0 else None)
            if failure is not None:
                raise CorruptIndexError(failure)
