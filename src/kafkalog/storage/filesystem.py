"""Read-only file access for logs that are not (or not only) on a local disk.

Kafka data lives on brokers' disks, in backups and in object storage (tiered-storage uploaders copy
``.log``/``.index``/``.timeindex`` verbatim). The read-only paths of the storage layer (``Log.open``
with ``read_only``, the loader, segments, ``FileRecords``, the indexes, checkpoints and snapshots)
take a :class:`FileSystem` and only ever list a directory, ask whether a path is a directory, read a
small file whole, or read byte ranges of an open file. Writable logs never come here: they keep their
descriptors, maps, ``pwrite`` and ``sendfile``.

Two implementations:

* :class:`LocalFileSystem`: ``os.scandir`` and ``os.pread`` (what read-only logs always did).
* :class:`ArrowFileSystem`: any ``pyarrow.fs`` filesystem (S3, GCS, HDFS, ...), reading with
  ``RandomAccessFile.read_at``. An object store charges per request, so a ``.log`` file is read
  through one read-ahead block (``readahead`` bytes, bounded): a header walk, the entries it loads
  and the next headers come out of one ranged GET. Indexes and small files are read exactly.

Every implementation counts what it fetched (:class:`FetchStats`), so a reader can report how many
bytes a narrowed read cost. Paths are ``pathlib.Path`` values in the filesystem's own namespace
(``bucket/prefix/topic-0/...`` for S3); :meth:`FileSystem.describe` turns one back into a URI for
messages.
"""

from __future__ import annotations

import importlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from kafkalog.errors import InvalidConfigError, KafkaStorageError, NoSuchFileError

__all__ = [
    "DEFAULT_READAHEAD",
    "FILESYSTEM_OPTIONS",
    "ArrowFileSystem",
    "FetchStats",
    "FileStatus",
    "LOCAL_FILESYSTEM",
    "FileSystem",
    "LocalFileSystem",
    "ReadableFile",
    "is_local_uri",
    "local_path",
    "resolve_filesystem",
]

# Read-ahead of a remote .log file: large enough that a scan costs one request per MiB, small enough
# that a read narrowed to a few batches does not pull in much more than it needs.
DEFAULT_READAHEAD: Final = 1 << 20
MAX_READAHEAD: Final = 16 << 20
# Whole-file reads (checkpoints, snapshots, indexes) above this are refused: an index is at most
# segment.index.bytes (10 MiB by default), the rest is far smaller.
_MAX_SMALL_FILE: Final = 1 << 30


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One directory entry: its name, whether it is a directory, and its size in bytes (files)."""

    name: str
    is_dir: bool
    size: int


class FetchStats:
    """Bytes and requests a filesystem has fetched (thread-safe counters)."""

    __slots__ = ("_bytes", "_lock", "_requests")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes = 0
        self._requests = 0

    def add(self, nbytes: int) -> None:
        with self._lock:
            self._bytes += nbytes
            self._requests += 1

    @property
    def bytes_read(self) -> int:
        return self._bytes

    @property
    def requests(self) -> int:
        return self._requests

    def __repr__(self) -> str:
        return f"FetchStats(bytes_read={self._bytes}, requests={self._requests})"


class ReadableFile(ABC):
    """A file opened for positional reads. ``size`` is what the file held when it was opened (or
    last refreshed); reads past it return fewer bytes."""

    @property
    @abstractmethod
    def size(self) -> int: ...

    @abstractmethod
    def read_at(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes at ``position``; shorter only at the end of the file."""

    @abstractmethod
    def refresh_size(self) -> int:
        """Re-read the file's length (a writer in another process may have appended)."""

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def closed(self) -> bool: ...


class FileSystem(ABC):
    """The read-only operations the storage layer's readers need."""

    def __init__(self) -> None:
        self.stats = FetchStats()

    @abstractmethod
    def describe(self, path: Path) -> str:
        """``path`` as the user would write it (for messages)."""

    @abstractmethod
    def list_dir(self, path: Path) -> list[FileStatus]:
        """The entries of a directory, sorted by name; ``NoSuchFileError`` if it does not exist."""

    @abstractmethod
    def is_dir(self, path: Path) -> bool: ...

    @abstractmethod
    def open_read(self, path: Path, *, size: int | None = None, sequential: bool = False) -> ReadableFile:
        """Open a file for positional reads; ``NoSuchFileError`` if it does not exist.

        ``size``: the length a directory listing reported (spares a remote filesystem a request;
        the file is opened lazily). ``sequential``: the file is mostly walked forward in small
        reads (a ``.log``), so a remote filesystem reads ahead; otherwise reads are exact.
        """

    def read_file(self, path: Path) -> bytes | None:
        """A whole (small) file, or None if it does not exist."""
        try:
            f = self.open_read(path)
        except NoSuchFileError:
            return None
        try:
            length = f.size
            if length > _MAX_SMALL_FILE:
                raise KafkaStorageError(
                    f"File {self.describe(path)} is too large to read whole ({length} bytes)")
            data = f.read_at(length, 0) if length else b""
            if len(data) < length:
                raise KafkaStorageError(
                    f"File {self.describe(path)} shrank while being read ({len(data)} of {length} bytes)")
            return data
        finally:
            f.close()


# --- local ----------------------------------------------------------------------------------------


class _LocalFile(ReadableFile):
    __slots__ = ("_fd", "_path", "_size", "_stats")

    def fileno(self) -> int:
        """The descriptor (``FileRecords.write_to`` can still ``sendfile`` from a local reader)."""
        return self._descriptor()

    def __init__(self, path: Path, fd: int, stats: FetchStats) -> None:
        self._path = path
        self._fd: int | None = fd
        self._stats = stats
        self._size = 0
        self._size = self.refresh_size()

    def _descriptor(self) -> int:
        fd = self._fd
        if fd is None:
            raise KafkaStorageError(f"File {self._path} is closed")
        return fd

    @property
    def size(self) -> int:
        return self._size

    def refresh_size(self) -> int:
        try:
            self._size = os.fstat(self._descriptor()).st_size
        except OSError as e:
            raise KafkaStorageError(f"Cannot stat {self._path}: {e}") from e
        return self._size

    def read_at(self, size: int, position: int) -> bytes:
        fd = self._descriptor()
        try:
            data = os.pread(fd, size, position)
            if len(data) < size and data:
                parts = [data]
                done = len(data)
                while done < size:
                    more = os.pread(fd, size - done, position + done)
                    if not more:
                        break
                    parts.append(more)
                    done += len(more)
                data = b"".join(parts)
        except OSError as e:
            raise KafkaStorageError(
                f"Failed to read {size} bytes at position {position} from {self._path}: {e}") from e
        self._stats.add(len(data))
        return data

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class LocalFileSystem(FileSystem):
    """The local filesystem through ``os`` calls (no maps: a writer may shrink a file under us)."""

    def describe(self, path: Path) -> str:
        return str(path)

    def list_dir(self, path: Path) -> list[FileStatus]:
        found = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                        size = 0 if is_dir else entry.stat().st_size
                    except FileNotFoundError:
                        continue  # deleted while we listed
                    found.append(FileStatus(entry.name, is_dir, size))
        except FileNotFoundError as e:
            raise NoSuchFileError(f"Directory {path} does not exist") from e
        except OSError as e:
            raise KafkaStorageError(f"Cannot list directory {path}: {e}") from e
        found.sort(key=lambda s: s.name)
        return found

    def is_dir(self, path: Path) -> bool:
        return os.path.isdir(path)

    def open_read(self, path: Path, *, size: int | None = None, sequential: bool = False) -> ReadableFile:
        # The page cache is the read-ahead here; the size is re-read from the descriptor.
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise NoSuchFileError(f"File {path} does not exist") from e
        except OSError as e:
            raise KafkaStorageError(f"Cannot open {path} for reading: {e}") from e
        try:
            return _LocalFile(path, fd, self.stats)
        except BaseException:
            os.close(fd)
            raise


# --- pyarrow.fs ---------------------------------------------------------------------------------


def _pyarrow_fs() -> Any:
    """``pyarrow.fs``, imported when first needed (pyarrow is an optional dependency of the core)."""
    return importlib.import_module("pyarrow.fs")


class _ArrowFile(ReadableFile):
    """A remote file read in ranges, through one read-ahead block; opened at the first read when the
    listing already gave its size. Reads may come from several threads (the block is locked)."""

    def __init__(self, owner: ArrowFileSystem, path: Path, size: int | None, readahead: int) -> None:
        self._owner = owner
        self._path = path
        self._readahead = readahead
        self._lock = threading.Lock()
        self._handle: Any = None
        self._closed = False
        self._block = b""
        self._block_start = 0
        if size is None:
            self._handle = owner.open_handle(path)
            size = int(self._handle.size())
        self._size = size

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    def refresh_size(self) -> int:
        size = self._owner.file_size(self._path)
        with self._lock:
            if size != self._size:
                # A rewritten object: the block and the handle may be of the old one.
                self._drop_handle()
                self._block = b""
                self._size = size
        return self._size

    def _drop_handle(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except Exception:  # closing a remote handle is best effort
                pass

    def _fetch(self, size: int, position: int) -> bytes:
        """Exactly one ranged request (caller holds the lock)."""
        if self._closed:
            raise KafkaStorageError(f"File {self._owner.describe(self._path)} is closed")
        if self._handle is None:
            self._handle = self._owner.open_handle(self._path)
        try:
            data = bytes(self._handle.read_at(size, position))
        except OSError as e:
            raise KafkaStorageError(
                f"Failed to read {size} bytes at position {position} from "
                f"{self._owner.describe(self._path)}: {e}") from e
        self._owner.stats.add(len(data))
        return data

    def read_at(self, size: int, position: int) -> bytes:
        end = min(position + size, self._size)
        if size <= 0 or position >= end:
            return b""
        with self._lock:
            block, start = self._block, self._block_start
            if start <= position and end <= start + len(block):
                return block[position - start:end - start]
            if not self._readahead:
                return self._fetch(end - position, position)
            # Keep what the block already holds of the range; fetch the rest plus read-ahead.
            have = b""
            fetch_from = position
            if start <= position < start + len(block):
                have = block[position - start:]
                fetch_from = start + len(block)
            fetch_to = min(self._size, max(end, fetch_from + self._readahead))
            block = have + self._fetch(fetch_to - fetch_from, fetch_from)
            self._block, self._block_start = block, position
            return block[:end - position]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._block = b""
            self._drop_handle()


class ArrowFileSystem(FileSystem):
    """A ``pyarrow.fs.FileSystem`` (S3, GCS, HDFS, ...); paths are in its namespace (``bucket/key``)."""

    def __init__(self, filesystem: Any, *, uri_prefix: str = "", readahead: int = DEFAULT_READAHEAD) -> None:
        super().__init__()
        if not 0 <= readahead <= MAX_READAHEAD:
            raise InvalidConfigError(f"Read-ahead {readahead} is not in [0, {MAX_READAHEAD}]")
        self._fs = filesystem
        self._uri_prefix = uri_prefix
        self._readahead = readahead

    @property
    def arrow_filesystem(self) -> Any:
        return self._fs

    def describe(self, path: Path) -> str:
        return f"{self._uri_prefix}{path.as_posix()}"

    def _info(self, path: Path) -> Any:
        try:
            return self._fs.get_file_info(path.as_posix())
        except OSError as e:
            raise KafkaStorageError(f"Cannot stat {self.describe(path)}: {e}") from e

    def file_size(self, path: Path) -> int:
        FileType = _pyarrow_fs().FileType

        info = self._info(path)
        if info.type == FileType.NotFound:
            raise NoSuchFileError(f"File {self.describe(path)} does not exist")
        return int(info.size or 0)

    def open_handle(self, path: Path) -> Any:
        try:
            return self._fs.open_input_file(path.as_posix())
        except FileNotFoundError as e:
            raise NoSuchFileError(f"File {self.describe(path)} does not exist") from e
        except OSError as e:
            raise KafkaStorageError(f"Cannot open {self.describe(path)} for reading: {e}") from e

    def list_dir(self, path: Path) -> list[FileStatus]:
        pafs = _pyarrow_fs()
        FileSelector, FileType = pafs.FileSelector, pafs.FileType

        try:
            infos = self._fs.get_file_info(FileSelector(path.as_posix(), recursive=False))
        except FileNotFoundError as e:
            raise NoSuchFileError(f"Directory {self.describe(path)} does not exist") from e
        except OSError as e:
            raise KafkaStorageError(f"Cannot list directory {self.describe(path)}: {e}") from e
        found = [FileStatus(info.base_name, info.type == FileType.Directory, int(info.size or 0))
                 for info in infos if info.type in (FileType.File, FileType.Directory)]
        found.sort(key=lambda s: s.name)
        return found

    def is_dir(self, path: Path) -> bool:
        FileType = _pyarrow_fs().FileType

        return bool(self._info(path).type == FileType.Directory)

    def open_read(self, path: Path, *, size: int | None = None, sequential: bool = False) -> ReadableFile:
        return _ArrowFile(self, path, size, self._readahead if sequential else 0)


# --- resolving a user's path ----------------------------------------------------------------------

# Options (case-insensitive) that configure an S3 filesystem; the AWS environment variables and
# config files apply for whatever is not given.
S3_ENDPOINT: Final = "s3.endpoint"
S3_REGION: Final = "s3.region"
S3_ACCESS_KEY: Final = "s3.accessKey"
S3_SECRET_KEY: Final = "s3.secretKey"
S3_SESSION_TOKEN: Final = "s3.sessionToken"
S3_ANONYMOUS: Final = "s3.anonymous"
READAHEAD_BYTES: Final = "readaheadBytes"
FILESYSTEM_OPTIONS: Final = (S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY, S3_SESSION_TOKEN,
                             S3_ANONYMOUS, READAHEAD_BYTES)


def is_local_uri(uri: str) -> bool:
    """A plain path or a ``file:`` URI (a Windows drive letter is not a scheme)."""
    scheme = urlsplit(uri).scheme
    return not scheme or scheme == "file" or len(scheme) == 1


def local_path(uri: str) -> Path:
    """The local path of a plain path or ``file:`` URI."""
    if uri.startswith("file://"):
        return Path(uri[len("file://"):])
    if uri.startswith("file:"):
        return Path(uri[len("file:"):])
    return Path(uri)


def _bool_option(options: Mapping[str, str], name: str) -> bool:
    raw = options.get(name.lower(), "false").strip().lower()
    if raw not in ("true", "false"):
        raise InvalidConfigError(f"kafkalog option '{name}': expected true or false, got {raw!r}")
    return raw == "true"


def readahead_option(options: Mapping[str, str]) -> int:
    """The ``readaheadBytes`` option (default 1 MiB, at most 16 MiB)."""
    raw = options.get(READAHEAD_BYTES.lower())
    if raw is None:
        return DEFAULT_READAHEAD
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_READAHEAD:
        raise InvalidConfigError(
            f"kafkalog option '{READAHEAD_BYTES}': expected a byte count in [0, {MAX_READAHEAD}], "
            f"got {raw!r}")
    return value


def _s3_filesystem(options: Mapping[str, str]) -> Any:
    S3FileSystem = _pyarrow_fs().S3FileSystem

    kwargs: dict[str, Any] = {}
    endpoint = options.get(S3_ENDPOINT.lower())
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = parts.netloc
        kwargs["scheme"] = parts.scheme
    region = options.get(S3_REGION.lower())
    if region:
        kwargs["region"] = region
    access, secret = options.get(S3_ACCESS_KEY.lower()), options.get(S3_SECRET_KEY.lower())
    if (access is None) != (secret is None):
        raise InvalidConfigError(
            f"kafkalog options '{S3_ACCESS_KEY}' and '{S3_SECRET_KEY}' go together: give both or neither")
    if access is not None:
        kwargs["access_key"] = access
        kwargs["secret_key"] = secret
        token = options.get(S3_SESSION_TOKEN.lower())
        if token:
            kwargs["session_token"] = token
    if _bool_option(options, S3_ANONYMOUS):
        kwargs["anonymous"] = True
    return S3FileSystem(**kwargs)


def resolve_filesystem(uri: str, options: Mapping[str, str] | None = None) -> tuple[FileSystem, Path]:
    """The filesystem and the path inside it of a data directory URI.

    A plain path or ``file:`` URI is local. ``s3://bucket/prefix`` uses the ``s3.*`` options (keys
    compared case-insensitively) and the usual AWS environment; any other scheme ``pyarrow.fs``
    resolves (``gs://``, ``hdfs://``, ...) is configured by the URI and environment alone.
    """
    opts = {k.lower(): v for k, v in (options or {}).items()}
    if is_local_uri(uri):
        return LocalFileSystem(), local_path(uri)
    try:
        pafs = _pyarrow_fs()
    except ImportError as e:
        raise InvalidConfigError(f"Reading {uri} needs pyarrow (pip install 'kafkalog[spark]')") from e
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    readahead = readahead_option(opts)
    try:
        if scheme in ("s3", "s3a"):
            arrow_fs = _s3_filesystem(opts)
            inner = f"{parts.netloc}{parts.path}".rstrip("/")
            return (ArrowFileSystem(arrow_fs, uri_prefix=f"{parts.scheme}://", readahead=readahead),
                    Path(inner))
        arrow_fs, inner = pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError, TypeError) as e:
        raise InvalidConfigError(f"Cannot open the filesystem of {uri}: {e}") from e
    return (ArrowFileSystem(arrow_fs, uri_prefix=f"{parts.scheme}://", readahead=readahead),
            Path(str(inner).rstrip("/")))


# The filesystem of read-only opens that name none: the local one (its counters are process-wide).
LOCAL_FILESYSTEM: Final = LocalFileSystem()
