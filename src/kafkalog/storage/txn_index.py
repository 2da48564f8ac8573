"""The ``.txnindex`` file: aborted transactions whose ABORT marker lies in a segment (spec §4.4).

Each entry is 34 bytes: ``version i16 (0), producer_id i64, first_offset i64, last_offset i64,
last_stable_offset i64``. Unlike the offset and time indexes the file is not preallocated and not
mapped: it is created by the first append and written with plain appends. A trailing partial entry
is ignored by readers, as Kafka's iterator does.

Like Kafka's current ``TransactionIndex`` the file is the source of truth: ``close()`` only drops the
file handle, and a later read or append reopens it (a closed index is not an error here).

An index given a ``storage.filesystem.FileSystem`` (the read-only segments of a reader) reads the
file whole through it and never writes.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final, Self

from kafkalog.errors import CorruptIndexError, InvalidOffsetError, KafkaStorageError
from kafkalog.storage.files import delete_file_if_exists, replace_file
from kafkalog.storage.filesystem import FileSystem

__all__ = ["ABORTED_TXN_SIZE", "AbortedTxn", "TransactionIndex", "TxnIndexSearchResult", "aborted_txn_slots"]

ABORTED_TXN_SIZE: Final = 34
_ABORTED_TXN = struct.Struct(">hqqqq")
# Kafka reads the version as ONE signed byte at offset 0, although it writes an i16 (spec §12.13).
_VERSION_BYTE = struct.Struct(">b")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its offsets and the last stable offset when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    CURRENT_VERSION: ClassVar[int] = 0
    SIZE: ClassVar[int] = ABORTED_TXN_SIZE

    @property
    def version(self) -> int:
        return self.CURRENT_VERSION

    def to_bytes(self) -> bytes:
        """The 34-byte on-disk entry."""
        return _ABORTED_TXN.pack(self.CURRENT_VERSION, self.producer_id, self.first_offset,
                                 self.last_offset, self.last_stable_offset)

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> AbortedTxn:
        """Parse the entry at ``offset`` (the version is not checked here; see ``read_version``)."""
        _, producer_id, first_offset, last_offset, lso = _ABORTED_TXN.unpack_from(buf, offset)
        return cls(producer_id, first_offset, last_offset, lso)

    @staticmethod
    def read_version(buf: bytes | bytearray | memoryview, offset: int = 0) -> int:
        """The version as Kafka reads it: the first byte only, signed."""
        version: int = _VERSION_BYTE.unpack_from(buf, offset)[0]
        return version


def aborted_txn_slots(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, AbortedTxn]]:
    """(position, version as Kafka reads it, entry) of every whole entry of ``.txnindex`` bytes; a
    trailing partial entry is skipped, as Kafka's iterator does. Versions are not checked here."""
    for position in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        yield position, AbortedTxn.read_version(data, position), AbortedTxn.from_bytes(data, position)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a fetch range, and whether later segments can be skipped.

    Unpacks like a pair: ``txns, is_complete = index.collect_aborted_txns(...)``.
    """

    aborted_transactions: list[AbortedTxn]
    is_complete: bool

    def __iter__(self) -> Iterator[object]:
        yield self.aborted_transactions
        yield self.is_complete


class TransactionIndex:
    """Kafka's TransactionIndex over ``path``; ``start_offset`` is the segment's base offset."""

    def __init__(self, path: Path | str, start_offset: int, *, fs: FileSystem | None = None) -> None:
        self._path = Path(path)
        self._fs = fs
        self._start_offset = start_offset
        self._lock = threading.RLock()
        self._fd: int | None = None
        # Only appends made through this object are checked for order (Kafka does not read the file).
        self._last_offset: int | None = None

    # --- file handle ----------------------------------------------------------------------------

    def _open_fd(self) -> int:
        """The open descriptor, (re)opening — and creating — the file if needed. Caller holds the lock."""
        if self._fd is None:
            if self._fs is not None:
                raise KafkaStorageError(
                    f"Transaction index {self._fs.describe(self._path)} is opened read-only")
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise KafkaStorageError(f"Cannot open transaction index {self._path}: {e}") from e
        return self._fd

    def _read_all(self) -> bytes:
        """The whole file, or b'' if it does not exist (without creating it).

        Without a handle left by a write, a temporary read-only descriptor is used, so readers work on
        files they may not write (another process's partition, a read-only mount).
        """
        with self._lock:
            if self._fs is not None:
                return self._fs.read_file(self._path) or b""
            if not self._path.exists():
                return b""
            own_fd = self._fd is None
            try:
                fd = os.open(self._path, os.O_RDONLY) if own_fd else self._fd
                assert fd is not None
                try:
                    size = os.fstat(fd).st_size
                    chunks: list[bytes] = []
                    done = 0
                    while done < size:
                        chunk = os.pread(fd, size - done, done)
                        if not chunk:
                            break
                        chunks.append(chunk)
                        done += len(chunk)
                finally:
                    if own_fd:
                        os.close(fd)
            except FileNotFoundError:
                return b""  # deleted between the check and the open
            except OSError as e:
                raise KafkaStorageError(f"Failed to read from the transaction index {self._path}: {e}") from e
            return b"".join(chunks)

    def _entries_with_position(self) -> Iterator[tuple[AbortedTxn, int]]:
        for position, version, txn in aborted_txn_slots(self._read_all()):
            if version > AbortedTxn.CURRENT_VERSION:
                raise CorruptIndexError(
                    f"Unexpected aborted transaction version {version} in transaction index {self._path} "
                    f"at position {position}, current version is {AbortedTxn.CURRENT_VERSION}")
            yield txn, position

    # --- properties -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def start_offset(self) -> int:
        return self._start_offset

    def is_empty(self) -> bool:
        return next(self._entries_with_position(), None) is None

    # --- writes ---------------------------------------------------------------------------------

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Append an entry; its last offset must exceed the previous append's. Creates the file."""
        with self._lock:
            if self._last_offset is not None and self._last_offset >= aborted_txn.last_offset:
                raise InvalidOffsetError(
                    f"The last offset of appended transactions must increase sequentially, but "
                    f"{aborted_txn.last_offset} is not greater than current last offset {self._last_offset} "
                    f"of index {self._path}")
            fd = self._open_fd()
            data = aborted_txn.to_bytes()
            try:
                position = os.fstat(fd).st_size
                written = 0
                while written < len(data):
                    written += os.pwrite(fd, data[written:], position + written)
            except OSError as e:
                raise KafkaStorageError(f"Cannot append to transaction index {self._path}: {e}") from e
            self._last_offset = aborted_txn.last_offset

    def _truncate_file(self, size: int) -> None:
        fd = self._open_fd()
        try:
            os.ftruncate(fd, size)
        except OSError as e:
            raise KafkaStorageError(f"Cannot truncate transaction index {self._path} to {size}: {e}") from e

    def truncate_to(self, offset: int) -> None:
        """Cut the file at the first entry whose last offset is ≥ ``offset``."""
        with self._lock:
            new_last_offset: int | None = None
            for txn, position in self._entries_with_position():
                if txn.last_offset >= offset:
                    self._truncate_file(position)
                    self._last_offset = new_last_offset
                    return
                new_last_offset = txn.last_offset

    def reset(self) -> None:
        """Remove every entry; a file that does not exist yet is not created."""
        with self._lock:
            if self._path.exists():
                self._truncate_file(0)
            self._last_offset = None

    # --- reads ----------------------------------------------------------------------------------

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for txn, _ in self._entries_with_position()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset); complete once an entry's last stable
        offset reaches the upper bound (no later segment can hold a relevant abort)."""
        found: list[AbortedTxn] = []
        for txn, _ in self._entries_with_position():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """CorruptIndexError if an entry ends below the segment's start offset."""
        for txn, position in self._entries_with_position():
            if txn.last_offset < self._start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} at position {position} in index {self._path} "
                    f"is less than start offset {self._start_offset}")

    # --- file lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.fsync(self._fd)
                except OSError as e:
                    raise KafkaStorageError(f"Cannot flush transaction index {self._path}: {e}") from e

    def close(self) -> None:
        """Close the handle; the index stays usable (it reopens the file on demand)."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    def delete_if_exists(self) -> bool:
        with self._lock:
            self.close()
            return delete_file_if_exists(self._path, "transaction index")

    def rename_to(self, path: Path | str) -> None:
        """Move the file if it exists; the index follows the new name even if the move fails."""
        target = Path(path)
        with self._lock:
            try:
                # Not preallocated: a segment without aborted transactions never created the file.
                replace_file(self._path, target, "transaction index", missing_ok=True)
            finally:
                self._path = target

    def update_parent_dir(self, parent_dir: Path | str) -> None:
        with self._lock:
            self._path = Path(parent_dir) / self._path.name

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TransactionIndex({self._path.name}, start_offset={self._start_offset})"
