"""Kafka's text checkpoint files (spec §7.1, §7.2; Kafka's ``checkpoint`` package), byte-compatible
both ways.

Offset checkpoints (``recovery-point-offset-checkpoint`` ...) and ``leader-epoch-checkpoint`` are
``0\\n<count>\\n`` then one entry per line, written via ``<file>.tmp`` + fsync + rename + dir fsync.
Readers follow Kafka's parsing rules (Java ``readLine`` line ends, ``Integer.parseInt``, whitespace
splitting) so that whatever Kafka accepts is accepted here, and report every failure as one
``KafkaStorageError`` that names the file and the line.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkalog.errors import KafkaStorageError
from kafkalog.storage._java_text import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    JAVA_WS_RUN,
    check_int,
    java_int,
    java_lines,
    java_split_ws,
    read_text,
)
from kafkalog.storage.files import create_empty_file, write_file_atomically
from kafkalog.storage.filesystem import FileSystem

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "RECOVERY_POINT_OFFSET_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
]

RECOVERY_POINT_OFFSET_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"



class _CheckpointFile:
    """``0\\n<count>\\n`` + one line per entry, the framing shared by Kafka's text checkpoints."""

    VERSION = 0

    def __init__(self, path: Path | str, *, fs: FileSystem | None = None) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        # Readers may read through a filesystem (object storage); such a file is never written.
        self._fs = fs

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._path)!r})"

    def _malformed(self, line_no: int, line: str, reason: str = "") -> KafkaStorageError:
        detail = f" ({reason})" if reason else ""
        return KafkaStorageError(
            f"Malformed line {line_no} in checkpoint file {self._path}: {line!r}{detail}"
        )

    def _read_lines(self) -> list[tuple[int, str]]:
        """The entry lines with their 1-based line numbers, after checking version and count.

        A missing or empty file reads as no entries: Kafka creates the file empty when it opens it.
        """
        with self._lock:
            if self._fs is not None:
                raw = self._fs.read_file(self._path)
                if raw is None:
                    return []
                try:
                    lines = java_lines(raw.decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise KafkaStorageError(f"Error while reading checkpoint file "
                                            f"{self._fs.describe(self._path)}: not valid UTF-8 ({e})") from e
            elif not self._path.exists():
                return []
            else:
                lines = java_lines(read_text(self._path, "checkpoint file"))
        if not lines:
            return []
        version = java_int(lines[0], INT32_MIN, INT32_MAX)
        if version is None:
            raise self._malformed(1, lines[0], "version is not an int")
        if version != self.VERSION:
            raise KafkaStorageError(
                f"Unrecognised version {version} (expected {self.VERSION}) in checkpoint file {self._path}"
            )
        if len(lines) < 2:
            return []
        expected = java_int(lines[1], 0, INT32_MAX)
        if expected is None:
            raise self._malformed(2, lines[1], "entry count is not a non-negative int")
        entries = [(i + 3, line) for i, line in enumerate(lines[2:])]
        if len(entries) != expected:
            raise KafkaStorageError(
                f"Expected [{expected}] entries in checkpoint file [{self._path}], "
                f"but found only [{len(entries)}]"
            )
        return entries

    def create_if_missing(self) -> bool:
        """Create the file empty if it does not exist (returns whether it did), as constructing Kafka's
        ``CheckpointFile`` does; an empty file reads as no entries, here and in Kafka."""
        if self._fs is not None:
            raise KafkaStorageError(f"Checkpoint file {self._fs.describe(self._path)} is opened read-only")
        with self._lock:
            return create_empty_file(self._path, "checkpoint file")

    def _write_lines(self, lines: list[str]) -> None:
        text = f"{self.VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        if self._fs is not None:
            raise KafkaStorageError(f"Checkpoint file {self._fs.describe(self._path)} is opened read-only")
        with self._lock:
            write_file_atomically(self._path, text.encode("utf-8"))


class OffsetCheckpointFile(_CheckpointFile):
    """A per-data-dir map (topic, partition) -> offset: ``<topic> <partition> <offset>`` lines.

    Used for ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
    ``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint``. Entries are written in the
    mapping's iteration order and read back in file order (a repeated key: the last line wins).
    """

    def read(self) -> dict[tuple[str, int], int]:
        result: dict[tuple[str, int], int] = {}
        for line_no, line in self._read_lines():
            parts = java_split_ws(line)
            if len(parts) != 3:
                raise self._malformed(line_no, line, "expected '<topic> <partition> <offset>'")
            partition = java_int(parts[1], INT32_MIN, INT32_MAX)
            offset = java_int(parts[2], INT64_MIN, INT64_MAX)
            if partition is None or offset is None:
                raise self._malformed(line_no, line, "partition must be an int and offset a long")
            result[(parts[0], partition)] = offset
        return result

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = []
        for key, offset in offsets.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise KafkaStorageError(
                    f"Cannot write key {key!r} to {self._path}: expected (topic, partition)"
                )
            topic, partition = key
            if not isinstance(topic, str) or not topic or JAVA_WS_RUN.search(topic):
                raise KafkaStorageError(
                    f"Cannot write topic {topic!r} to {self._path}: empty or has whitespace"
                )
            check_int(partition, INT32_MIN, INT32_MAX, "partition", self._path)
            check_int(offset, INT64_MIN, INT64_MAX, "offset", self._path)
            lines.append(f"{topic} {partition} {offset}")
        self._write_lines(lines)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One leader epoch and the first offset written in it (Kafka's ``EpochEntry``)."""

    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile(_CheckpointFile):
    """A partition's ``leader-epoch-checkpoint``: ``<epoch> <startOffset>`` lines, in file order."""

    def read(self) -> list[EpochEntry]:
        result = []
        for line_no, line in self._read_lines():
            parts = java_split_ws(line)
            if len(parts) != 2:
                raise self._malformed(line_no, line, "expected '<epoch> <start offset>'")
            epoch = java_int(parts[0], INT32_MIN, INT32_MAX)
            start_offset = java_int(parts[1], INT64_MIN, INT64_MAX)
            if epoch is None or start_offset is None:
                raise self._malformed(line_no, line, "epoch must be an int and start offset a long")
            if epoch < 0 or start_offset < 0:
                # Kafka's reader takes it, but its epoch cache refuses the entry (an
                # IllegalArgumentException) and the log does not load: named here, with its line.
                raise self._malformed(line_no, line, "a negative epoch or start offset")
            result.append(EpochEntry(epoch, start_offset))
        return result

    def write(self, entries: Iterable[EpochEntry]) -> None:
        lines = []
        for entry in entries:
            check_int(entry.epoch, INT32_MIN, INT32_MAX, "epoch", self._path)
            check_int(entry.start_offset, INT64_MIN, INT64_MAX, "start offset", self._path)
            lines.append(f"{entry.epoch} {entry.start_offset}")
        self._write_lines(lines)

