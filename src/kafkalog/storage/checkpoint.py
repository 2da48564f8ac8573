"""Kafka's side files (spec §7) and partition-directory names (§1.1), byte-compatible both ways.

* offset checkpoints (``recovery-point-offset-checkpoint`` ...) and ``leader-epoch-checkpoint``:
  ``0\\n<count>\\n`` then one entry per line, written via ``<file>.tmp`` + fsync + rename + dir fsync;
* ``partition.metadata``: ``version: 0\\ntopic_id: <base64url uuid>`` with no trailing newline;
* ``meta.properties``: ``java.util.Properties`` text as Kafka's ``PropertiesUtils`` stores it;
* ``.kafka_cleanshutdown``: ``{"version":0,"brokerEpoch":N}``;
* producer-state snapshots ``<offset>.snapshot``: version 1, CRC-32C, 46-byte entries.

Readers follow Kafka's parsing rules (Java ``readLine`` line ends, ``Integer.parseInt``,
whitespace splitting) so that whatever Kafka accepts is accepted here, and report every failure as
one kafkalog exception that names the file and, for text files, the line.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

import crc32c

from kafkalog.errors import (
    CorruptSnapshotError,
    InvalidConfigError,
    InvalidTopicError,
    KafkaStorageError,
)
from kafkalog.storage.filesystem import FileSystem

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "META_PROPERTIES_FILE",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_OFFSET_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "CleanShutdownFile",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "METADATA_TOPIC_ID",
    "MetaProperties",
    "ONE_UUID",
    "OffsetCheckpointFile",
    "PartitionDirKind",
    "PartitionDirName",
    "PartitionMetadata",
    "PartitionMetadataFile",
    "ProducerSnapshot",
    "ProducerSnapshotEntry",
    "ZERO_UUID",
    "Uuid",
    "fsync_directory",
    "is_valid_topic_name",
    "load_properties",
    "log_delete_dir_name",
    "log_future_dir_name",
    "log_stray_dir_name",
    "parse_partition_dir_name",
    "parse_topic_partition",
    "read_meta_properties",
    "read_properties_file",
    "store_properties",
    "topic_partition_dir_name",
    "validate_topic_name",
    "write_file_atomically",
    "write_meta_properties",
    "write_properties_file",
]

# --- file names ------------------------------------------------------------------------------------

RECOVERY_POINT_OFFSET_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1

# --- low-level helpers -----------------------------------------------------------------------------

# Java's \s and \S (ASCII only), unlike Python's Unicode-aware classes.
_JAVA_WS = " \t\n\x0b\f\r"
_JAVA_WS_RUN = re.compile(f"[{_JAVA_WS}]+")
_JAVA_LINE_END = re.compile(r"\r\n|\r|\n")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def fsync_directory(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable (Kafka's ``Utils.flushDir``)."""
    if os.name != "posix":  # Windows cannot open directories; Kafka skips it too.
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: Path | str, data: bytes, *, sync: bool = True) -> None:
    """Write ``<path>.tmp``, fsync it, rename it over ``path`` and fsync the directory.

    A crash leaves either the old or the new content, never a mixture (Kafka's checkpoint writes).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if sync:
            fsync_directory(path.parent)
    except OSError as e:
        raise KafkaStorageError(f"Error while writing file {path}: {e}") from e


def _java_lines(text: str) -> list[str]:
    """Lines as Java's ``BufferedReader.readLine`` yields them (\\n, \\r or \\r\\n end a line)."""
    if not text:
        return []
    lines = _JAVA_LINE_END.split(text)
    if lines[-1] == "":  # a terminator at the very end does not start another line
        lines.pop()
    return lines


def _java_split_ws(line: str) -> list[str]:
    """Java's ``Pattern.compile("\\\\s+").split(line)``: a leading separator yields an empty first
    field, trailing empty fields are dropped."""
    parts = _JAVA_WS_RUN.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts or [""]


def _java_int(text: str, lo: int, hi: int) -> int | None:
    """``Integer.parseInt`` / ``Long.parseLong`` (no surrounding whitespace, optional sign) or None."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def _read_text(path: Path, what: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise KafkaStorageError(f"Error while reading {what} {path}: {e}") from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KafkaStorageError(f"Error while reading {what} {path}: not valid UTF-8 ({e})") from e


def _check_int(value: object, lo: int, hi: int, what: str, where: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise KafkaStorageError(f"Cannot write {what} {value!r} to {where}: must be an int in [{lo}, {hi}]")
    return value


# --- topic names and partition directories (§1.1) -------------------------------------------------

_MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def _invalid_topic_reason(name: object) -> str | None:
    if not isinstance(name, str):
        return f"{name!r} is not a string"
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > _MAX_TOPIC_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {_MAX_TOPIC_NAME_LENGTH}"
    if not _LEGAL_TOPIC_CHARS.fullmatch(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def is_valid_topic_name(name: str) -> bool:
    """Kafka's ``Topic.isValid``."""
    return _invalid_topic_reason(name) is None


def validate_topic_name(name: str) -> str:
    """Kafka's ``Topic.validate``: return ``name`` or raise ``InvalidTopicError`` with the reason."""
    reason = _invalid_topic_reason(name)
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}")
    return name


class PartitionDirKind(Enum):
    """What a partition directory is, from its suffix."""

    LIVE = ""  # <topic>-<partition>
    DELETE = "-delete"  # <topic>-<partition>.<uuid>-delete: scheduled for async deletion
    FUTURE = "-future"  # <topic>-<partition>.<uuid>-future: replica being moved between log dirs
    STRAY = "-stray"  # <topic>-<partition>.<uuid>-stray: replica the controller does not know


@dataclass(frozen=True, slots=True)
class PartitionDirName:
    """A parsed partition directory name; ``unique_id`` is set for the suffixed kinds only.

    For ``DELETE``/``STRAY`` the topic may be a truncated prefix of the real name (the whole
    directory name is capped at 255 characters).
    """

    topic: str
    partition: int
    kind: PartitionDirKind = PartitionDirKind.LIVE
    unique_id: str | None = None


_NS = f"[^{_JAVA_WS}]+"  # Java's \S+
_SUFFIX_PATTERNS = {
    kind: re.compile(f"({_NS})-({_NS})\\.({_NS}){re.escape(kind.value)}")
    for kind in (PartitionDirKind.DELETE, PartitionDirKind.FUTURE, PartitionDirKind.STRAY)
}


def _bad_dir_name(dir_name: str) -> KafkaStorageError:
    return KafkaStorageError(
        f"Directory name {dir_name!r} is not in the form of topic-partition or "
        "topic-partition.uniqueId-delete/-future/-stray; a Kafka data directory should only contain "
        "topic data"
    )


def parse_partition_dir_name(dir_name: str) -> PartitionDirName:
    """Parse any partition directory name the way Kafka's ``LocalLog.parseTopicPartitionName`` does.

    The **last** ``-`` separates topic and partition; for the suffixed kinds the part before the
    last ``.`` is parsed. Raises ``KafkaStorageError`` for anything else.
    """
    if not dir_name or "-" not in dir_name:
        raise _bad_dir_name(dir_name)
    kind = PartitionDirKind.LIVE
    unique_id = None
    name = dir_name
    for candidate, pattern in _SUFFIX_PATTERNS.items():
        if dir_name.endswith(candidate.value):
            match = pattern.fullmatch(dir_name)
            if match is None:
                raise _bad_dir_name(dir_name)
            kind = candidate
            dot = dir_name.rindex(".")
            name = dir_name[:dot]
            unique_id = dir_name[dot + 1 : -len(candidate.value)]
            break
    index = name.rfind("-")
    topic, partition_text = name[:index], name[index + 1 :]
    if index < 0 or not topic or not partition_text:
        raise _bad_dir_name(dir_name)
    partition = _java_int(partition_text, _INT32_MIN, _INT32_MAX)
    if partition is None:
        raise _bad_dir_name(dir_name)
    return PartitionDirName(topic, partition, kind, unique_id)


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``(topic, partition)`` of a live partition directory ``<topic>-<partition>``.

    Directories marked ``-delete``, ``-future`` or ``-stray`` are rejected with a
    ``KafkaStorageError`` that says which kind they are; use ``parse_partition_dir_name`` to handle
    them.
    """
    parsed = parse_partition_dir_name(dir_name)
    if parsed.kind is not PartitionDirKind.LIVE:
        raise KafkaStorageError(
            f"Directory {dir_name!r} is a {parsed.kind.value[1:]} directory of "
            f"{parsed.topic}-{parsed.partition}, not a live partition directory"
        )
    return parsed.topic, parsed.partition


def _check_partition(partition: int) -> int:
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= _INT32_MAX:
        raise InvalidConfigError(f"Partition must be an int in [0, {_INT32_MAX}], got {partition!r}")
    return partition


def topic_partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>`` after validating both (so the name can never escape the data dir)."""
    validate_topic_name(topic)
    return f"{topic}-{_check_partition(partition)}"


def _unique_id(unique_id: str | None) -> str:
    if unique_id is None:
        return uuid.uuid4().hex  # Kafka: UUID.randomUUID().toString() without dashes
    if not re.fullmatch(f"[^{_JAVA_WS}.]+", unique_id):
        raise InvalidConfigError(f"unique_id {unique_id!r} must be non-empty, without whitespace or '.'")
    return unique_id


def _capped_dir_name(topic: str, partition: int, kind: PartitionDirKind, unique_id: str | None) -> str:
    validate_topic_name(topic)
    suffix = f"-{_check_partition(partition)}.{_unique_id(unique_id)}{kind.value}"
    # The topic is cut so that the whole name fits the usual 255-character file-name limit.
    return topic[: max(0, min(len(topic), 255 - len(suffix)))] + suffix


def log_delete_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-delete``, topic truncated so the name is at most 255 chars."""
    return _capped_dir_name(topic, partition, PartitionDirKind.DELETE, unique_id)


def log_stray_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-stray``, topic truncated so the name is at most 255 chars."""
    return _capped_dir_name(topic, partition, PartitionDirKind.STRAY, unique_id)


def log_future_dir_name(topic: str, partition: int, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-future`` (Kafka does not cap this one)."""
    base = topic_partition_dir_name(topic, partition)
    return f"{base}.{_unique_id(unique_id)}{PartitionDirKind.FUTURE.value}"


# --- text checkpoint files (§7.1, §7.2) ------------------------------------------------------------


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
                    lines = _java_lines(raw.decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise KafkaStorageError(f"Error while reading checkpoint file "
                                            f"{self._fs.describe(self._path)}: not valid UTF-8 ({e})") from e
            elif not self._path.exists():
                return []
            else:
                lines = _java_lines(_read_text(self._path, "checkpoint file"))
        if not lines:
            return []
        version = _java_int(lines[0], _INT32_MIN, _INT32_MAX)
        if version is None:
            raise self._malformed(1, lines[0], "version is not an int")
        if version != self.VERSION:
            raise KafkaStorageError(
                f"Unrecognised version {version} (expected {self.VERSION}) in checkpoint file {self._path}"
            )
        if len(lines) < 2:
            return []
        expected = _java_int(lines[1], 0, _INT32_MAX)
        if expected is None:
            raise self._malformed(2, lines[1], "entry count is not a non-negative int")
        entries = [(i + 3, line) for i, line in enumerate(lines[2:])]
        if len(entries) != expected:
            raise KafkaStorageError(
                f"Expected [{expected}] entries in checkpoint file [{self._path}], "
                f"but found only [{len(entries)}]"
            )
        return entries

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
            parts = _java_split_ws(line)
            if len(parts) != 3:
                raise self._malformed(line_no, line, "expected '<topic> <partition> <offset>'")
            partition = _java_int(parts[1], _INT32_MIN, _INT32_MAX)
            offset = _java_int(parts[2], _INT64_MIN, _INT64_MAX)
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
            if not isinstance(topic, str) or not topic or _JAVA_WS_RUN.search(topic):
                raise KafkaStorageError(
                    f"Cannot write topic {topic!r} to {self._path}: empty or has whitespace"
                )
            _check_int(partition, _INT32_MIN, _INT32_MAX, "partition", self._path)
            _check_int(offset, _INT64_MIN, _INT64_MAX, "offset", self._path)
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
            parts = _java_split_ws(line)
            if len(parts) != 2:
                raise self._malformed(line_no, line, "expected '<epoch> <start offset>'")
            epoch = _java_int(parts[0], _INT32_MIN, _INT32_MAX)
            start_offset = _java_int(parts[1], _INT64_MIN, _INT64_MAX)
            if epoch is None or start_offset is None:
                raise self._malformed(line_no, line, "epoch must be an int and start offset a long")
            result.append(EpochEntry(epoch, start_offset))
        return result

    def write(self, entries: Iterable[EpochEntry]) -> None:
        lines = []
        for entry in entries:
            _check_int(entry.epoch, _INT32_MIN, _INT32_MAX, "epoch", self._path)
            _check_int(entry.start_offset, _INT64_MIN, _INT64_MAX, "start offset", self._path)
            lines.append(f"{entry.epoch} {entry.start_offset}")
        self._write_lines(lines)


# --- Kafka's Uuid and partition.metadata (§7.3) ----------------------------------------------------

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


@dataclass(frozen=True, slots=True)
class Uuid:
    """Kafka's ``org.apache.kafka.common.Uuid``: 16 bytes, printed as unpadded base64url (22 chars)."""

    bytes: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.bytes, bytes) or len(self.bytes) != 16:
            raise InvalidConfigError(f"A Uuid needs exactly 16 bytes, got {self.bytes!r}")

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.bytes).rstrip(b"=").decode("ascii")

    @property
    def most_significant_bits(self) -> int:
        return int.from_bytes(self.bytes[:8], "big", signed=True)

    @property
    def least_significant_bits(self) -> int:
        return int.from_bytes(self.bytes[8:], "big", signed=True)

    @classmethod
    def from_bits(cls, most_significant_bits: int, least_significant_bits: int) -> Uuid:
        return cls(struct.pack(">qq", most_significant_bits, least_significant_bits))

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Kafka's ``Uuid.fromString``: at most 24 chars of base64url (padding optional) -> 16 bytes."""
        if not isinstance(text, str):
            raise InvalidConfigError(f"Uuid string expected, got {text!r}")
        if len(text) > 24:
            raise InvalidConfigError(
                f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID"
            )
        if not _BASE64URL.fullmatch(text):
            raise InvalidConfigError(f"Input string `{text}` is not base64url")
        padded = text if "=" in text else text + "=" * (-len(text) % 4)
        try:
            raw = base64.b64decode(padded, altchars=b"-_", validate=True)
        except ValueError as e:
            raise InvalidConfigError(f"Input string `{text}` is not valid base64url: {e}") from None
        if len(raw) != 16:
            raise InvalidConfigError(
                f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the expected "
                "16 bytes of a base64-encoded UUID"
            )
        return cls(raw)

    @classmethod
    def random(cls) -> Uuid:
        """Kafka's ``Uuid.randomUuid``: a version-4 UUID that is not reserved (all-zero, 1) and whose
        string form does not start with '-' (it would look like a command-line option)."""
        while True:
            candidate = cls(uuid.uuid4().bytes)
            if candidate not in _RESERVED_UUIDS and not str(candidate).startswith("-"):
                return candidate


ZERO_UUID = Uuid(bytes(16))
ONE_UUID = Uuid(bytes(15) + b"\x01")
METADATA_TOPIC_ID = ONE_UUID
_RESERVED_UUIDS = frozenset({ZERO_UUID, ONE_UUID})


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """Content of ``partition.metadata``."""

    version: int
    topic_id: Uuid

    def encode(self) -> str:
        return f"version: {self.version}\ntopic_id: {self.topic_id}"


_COLON_WS = re.compile(f":[{_JAVA_WS}]+")


def _split_colon(line: str) -> list[str]:
    parts = _COLON_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class PartitionMetadataFile:
    """A partition's ``partition.metadata`` (topic id), read and written like Kafka does."""

    CURRENT_VERSION = 0

    def __init__(self, path: Path | str) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        return self._path.exists()

    def delete(self) -> None:
        try:
            self._path.unlink(missing_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"Error while deleting partition metadata file {self._path}: {e}") from e

    def write(self, topic_id: Uuid) -> None:
        """Write version 0 and ``topic_id`` (tmp + fsync + rename, no trailing newline)."""
        if not isinstance(topic_id, Uuid):
            raise KafkaStorageError(f"Cannot write {topic_id!r} to {self._path}: a Uuid is required")
        text = PartitionMetadata(self.CURRENT_VERSION, topic_id).encode()
        write_file_atomically(self._path, text.encode("utf-8"))

    def read(self) -> PartitionMetadata:
        text = _read_text(self._path, "partition metadata file")
        lines = _java_lines(text)

        def malformed(line_no: int, reason: str) -> KafkaStorageError:
            line = lines[line_no - 1] if line_no <= len(lines) else "<missing>"
            return KafkaStorageError(
                f"Malformed line {line_no} in partition metadata file {self._path}: {line!r} ({reason})"
            )

        # Like Kafka, only the values after ':' are checked, not the key names.
        version_parts = _split_colon(lines[0]) if lines else []
        if len(version_parts) != 2:
            raise malformed(1, "expected 'version: <n>'")
        version = _java_int(version_parts[1], _INT32_MIN, _INT32_MAX)
        if version is None:
            raise malformed(1, "version is not an int")
        # Newer versions are accepted (downgrade compatibility); only negative ones are unknown.
        if version < self.CURRENT_VERSION:
            raise KafkaStorageError(
                f"Unrecognized version of partition metadata file {self._path}: {version}"
            )
        id_parts = _split_colon(lines[1]) if len(lines) > 1 else []
        if len(id_parts) != 2:
            raise malformed(2, "expected 'topic_id: <uuid>'")
        try:
            topic_id = Uuid.from_string(id_parts[1])
        except InvalidConfigError as e:
            raise malformed(2, str(e)) from None
        if topic_id == ZERO_UUID:
            raise KafkaStorageError(f"Invalid topic ID in partition metadata file ({self._path})")
        return PartitionMetadata(version, topic_id)


# --- java.util.Properties text (meta.properties, server.properties) -------------------------------

_PROPS_WS = " \t\f"
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _logical_lines(text: str) -> list[str]:
    """Java ``Properties.LineReader``: skip blanks and comments, join backslash-continued lines."""
    result: list[str] = []
    pending: str | None = None
    for natural in _java_lines(text):
        stripped = natural.lstrip(_PROPS_WS)
        if pending is None and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        continued = trailing % 2 == 1  # an odd number of trailing backslashes escapes the line end
        body = stripped[:-1] if continued else stripped
        pending = body if pending is None else pending + body
        if not continued:
            result.append(pending)
            pending = None
    if pending is not None:
        result.append(pending)
    return result


def _unescape(text: str, where: str) -> str:
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone trailing backslash is dropped, as Java does
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not re.fullmatch("[0-9a-fA-F]{4}", digits):
                raise KafkaStorageError(f"Malformed \\uxxxx encoding in {where}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
    # Java strings are UTF-16: \\ud83d\\ude00 escapes form one character.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def load_properties(text: str, where: str = "properties") -> dict[str, str]:
    """Parse ``java.util.Properties.load`` text (``key=value``, ``key: value``, ``key value``)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:  # the key ends at the first unescaped '=', ':' or whitespace
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:" or c in _PROPS_WS:
                break
            i += 1
        key_end = min(i, n)
        j = key_end
        while j < n and line[j] in _PROPS_WS:
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in _PROPS_WS:
                j += 1
        props[_unescape(line[:key_end], where)] = _unescape(line[j:], where)
    return props


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for index, c in enumerate(text):
        if c == " ":
            out.append("\\ " if is_key or index == 0 else " ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif " " < c <= "~":
            out.append(c)
        else:
            # Escaped like Properties.store(OutputStream): readable whatever charset the reader assumes.
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[k]:02X}{units[k + 1]:02X}" for k in range(0, len(units), 2))
    return "".join(out)


def _java_date(moment: datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``Fri Oct 25 03:33:01 UTC 2024``."""
    moment = moment.astimezone(UTC)
    return (
        f"{_DAY_NAMES[moment.weekday()]} {_MONTH_NAMES[moment.month - 1]} {moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} UTC {moment.year}"
    )


def store_properties(
    props: Mapping[str, str], comments: str | None = "", date: datetime | None = None
) -> str:
    """Text as ``Properties.store`` writes it: optional comment line, ``#<date>``, then sorted entries.

    Kafka's ``PropertiesUtils.writePropertiesFile`` passes an empty comment, hence a bare ``#`` line.
    Entries are sorted by key (what JDK 18+ does; older JDKs used hash order, which reads the same).
    """
    lines = []
    if comments is not None:
        lines.extend("#" + part for part in _java_lines(comments) or [""])
    lines.append("#" + _java_date(date or datetime.now(UTC)))
    for key in sorted(props):
        lines.append(f"{_escape(key, is_key=True)}={_escape(props[key], is_key=False)}")
    return "".join(line + "\n" for line in lines)


def read_properties_file(path: Path | str) -> dict[str, str]:
    """Read a ``.properties`` file. Like Java's ``Properties.load(InputStream)`` bytes are ISO-8859-1
    (non-ASCII must be ``\\uXXXX``-escaped)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("latin-1")
    except OSError as e:
        raise KafkaStorageError(f"Error while reading properties file {path}: {e}") from e
    return load_properties(text, str(path))


def write_properties_file(
    path: Path | str, props: Mapping[str, str], *, date: datetime | None = None, sync: bool = True
) -> None:
    """Write like Kafka's ``PropertiesUtils.writePropertiesFile``: tmp file, fsync, atomic rename."""
    for key, value in props.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise KafkaStorageError(
                f"Cannot write property {key!r}={value!r} to {path}: keys and values must be str"
            )
    write_file_atomically(Path(path), store_properties(props, "", date).encode("ascii"), sync=sync)


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """``meta.properties`` of a data directory (Kafka's ``MetaProperties``).

    Version 0 (ZooKeeper era) stores the node id as ``broker.id`` and makes every field optional;
    version 1 (KRaft) requires ``cluster.id`` and ``node.id``.
    """

    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: Uuid | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise InvalidConfigError(f"Unknown meta.properties version number {self.version!r}")
        if self.node_id is not None and (
            isinstance(self.node_id, bool) or not isinstance(self.node_id, int)
            or not _INT32_MIN <= self.node_id <= _INT32_MAX
        ):
            raise InvalidConfigError(f"meta.properties node id must be a 32-bit int, got {self.node_id!r}")
        if self.version == 1:
            if self.cluster_id is None:
                raise InvalidConfigError("cluster.id was not found (required by meta.properties version 1)")
            if self.node_id is None:
                raise InvalidConfigError("node.id was not found (required by meta.properties version 1)")

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = str(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], where: str = "meta.properties") -> MetaProperties:
        def fail(reason: str) -> KafkaStorageError:
            return KafkaStorageError(f"Invalid {where}: {reason}")

        version_text = props.get("version", "0").strip()
        version = _java_int(version_text, _INT32_MIN, _INT32_MAX)
        if version is None:
            raise fail(f"invalid version string {props.get('version')!r}")
        if version not in (0, 1):
            raise fail(f"unknown version number {version}")
        id_key = "broker.id" if version == 0 else "node.id"
        node_id = None
        if id_key in props:
            node_id = _java_int(props[id_key], _INT32_MIN, _INT32_MAX)
            if node_id is None:
                raise fail(f"unable to read {id_key} {props[id_key]!r} as a base-10 number")
        elif version == 1:
            raise fail("node.id was not found")
        directory_id = None
        if "directory.id" in props:
            try:
                directory_id = Uuid.from_string(props["directory.id"])
            except InvalidConfigError as e:
                raise fail(f"unable to read directory.id as a Uuid: {e}") from None
        try:
            return cls(version, props.get("cluster.id"), node_id, directory_id)
        except InvalidConfigError as e:
            raise fail(str(e)) from None


def read_meta_properties(path: Path | str) -> MetaProperties:
    """Read a ``meta.properties`` file (give the file's path)."""
    path = Path(path)
    return MetaProperties.from_properties(read_properties_file(path), str(path))


def write_meta_properties(path: Path | str, meta: MetaProperties, *, date: datetime | None = None) -> None:
    """Write ``meta.properties`` as Kafka does (``#``, ``#<date>``, then the entries)."""
    write_properties_file(path, meta.to_properties(), date=date)


# --- .kafka_cleanshutdown (§7.5) ---------------------------------------------------------------------


class CleanShutdownFile:
    """The clean-shutdown marker of a data directory (Kafka's ``CleanShutdownFileHandler``)."""

    CURRENT_VERSION = 0

    def __init__(self, data_dir: Path | str) -> None:
        self._path = Path(data_dir) / CLEAN_SHUTDOWN_FILE

    @property
    def path(self) -> Path:
        return self._path

    def write(self, broker_epoch: int = -1) -> None:
        """Write ``{"version":0,"brokerEpoch":N}`` and fsync it (-1 = no broker epoch, as without KRaft)."""
        _check_int(broker_epoch, _INT64_MIN, _INT64_MAX, "broker epoch", self._path)
        data = f'{{"version":{self.CURRENT_VERSION},"brokerEpoch":{broker_epoch}}}'.encode("ascii")
        try:
            with open(self._path, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            fsync_directory(self._path.parent)
        except OSError as e:
            raise KafkaStorageError(f"Error while writing clean shutdown file {self._path}: {e}") from e

    def read(self) -> int | None:
        """The broker epoch recorded in the marker, or None when it is absent or unreadable (Kafka
        treats every read failure as "no epoch")."""
        try:
            content = json.loads(self._path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not _INT64_MIN <= epoch <= _INT64_MAX:
            return None
        return epoch

    def exists(self) -> bool:
        return self._path.exists()

    def delete(self) -> None:
        try:
            self._path.unlink(missing_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"Error while deleting clean shutdown file {self._path}: {e}") from e


# --- producer-state snapshot (§7.4) -----------------------------------------------------------------

_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
_SNAPSHOT_CRC_START = 6  # the CRC covers everything after version and CRC, entry count included


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer's state as stored in a snapshot (``current_txn_first_offset`` -1: no open txn)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = -1


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    """A ``<offset>.snapshot`` file's content; entries keep their file order."""

    entries: tuple[ProducerSnapshotEntry, ...] = ()

    def to_bytes(self) -> bytes:
        body = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(self.entries))
        _SNAPSHOT_HEADER.pack_into(body, 0, _SNAPSHOT_VERSION, 0, len(self.entries))
        for i, e in enumerate(self.entries):
            try:
                _SNAPSHOT_ENTRY.pack_into(
                    body, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size, e.producer_id, e.producer_epoch,
                    e.last_sequence, e.last_offset, e.offset_delta, e.timestamp, e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
            except struct.error as err:
                raise KafkaStorageError(
                    f"Producer snapshot entry {e} does not fit its field sizes: {err}"
                ) from None
        struct.pack_into(">I", body, 2, crc32c.crc32c(bytes(body[_SNAPSHOT_CRC_START:])))
        return bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, source: str = "<bytes>") -> ProducerSnapshot:
        """Parse and verify a snapshot; any defect raises ``CorruptSnapshotError`` naming ``source``."""
        data = bytes(data)
        if len(data) < 2:
            raise CorruptSnapshotError(
                f"Snapshot {source} failed schema validation: {len(data)} bytes, no version"
            )
        (version,) = struct.unpack_from(">h", data)
        if version != _SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"Snapshot {source} contained an unknown file version {version}")
        if len(data) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError(f"Snapshot {source} failed schema validation: truncated header")
        _, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(data)
        remaining = len(data) - _SNAPSHOT_HEADER.size
        if count < 0 or count * _SNAPSHOT_ENTRY.size > remaining:
            raise CorruptSnapshotError(
                f"Snapshot {source} failed schema validation: {count} entries declared, "
                f"{remaining} bytes remain"
            )
        computed = crc32c.crc32c(data[_SNAPSHOT_CRC_START:])
        if stored_crc != computed:
            raise CorruptSnapshotError(
                f"Snapshot {source} is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
                f"Computed crc: {computed}"
            )
        entries = tuple(
            ProducerSnapshotEntry(*fields)
            for fields in _SNAPSHOT_ENTRY.iter_unpack(
                data[_SNAPSHOT_HEADER.size : _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size]
            )
        )
        return cls(entries)

    @classmethod
    def read(cls, path: Path | str) -> ProducerSnapshot:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise KafkaStorageError(f"Error while reading producer snapshot {path}: {e}") from e
        return cls.from_bytes(data, str(path))

    def write(self, path: Path | str, *, sync: bool = True) -> None:
        """Write the snapshot in place like Kafka (no tmp file: a torn one fails its CRC at load and is
        deleted, while a stray ``.tmp`` would never be cleaned up by Kafka)."""
        path = Path(path)
        data = self.to_bytes()
        try:
            with open(path, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
        except OSError as e:
            raise KafkaStorageError(f"Error while writing producer snapshot {path}: {e}") from e
