"""The names of things in a data directory (spec §1.1, §1.2): topics, partition directories and
segment files (Kafka's ``Topic``, ``LocalLog``'s directory names and ``LogFileUtils``).

* a topic name is 1-249 of ``[a-zA-Z0-9._-]`` and neither ``.`` nor ``..`` (``Topic.validate``);
* a partition directory is ``<topic>-<partition>``, or ``<topic>-<partition>.<uuid>-delete`` /
  ``-future`` / ``-stray`` (the **last** ``-`` separates topic and partition);
* a segment file is its base offset in at least 20 zero-padded digits plus a suffix (``.log``,
  ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot``; ``.deleted``/``.cleaned``/``.swap`` while
  a file is being replaced).

Building a name validates its parts, so a name can never escape the data directory.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from kafkalog.errors import IllegalArgumentError, InvalidConfigError, InvalidTopicError, KafkaStorageError
from kafkalog.storage._java_text import INT32_MAX, INT32_MIN, JAVA_WS, java_int

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "INTERNAL_TOPICS",
    "LOG_FILE_SUFFIX",
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "PartitionDirKind",
    "PartitionDirName",
    "check_client_append",
    "filename_prefix_from_offset",
    "is_index_file",
    "is_log_file",
    "is_valid_topic_name",
    "log_delete_dir_name",
    "log_file",
    "log_future_dir_name",
    "log_stray_dir_name",
    "offset_from_file",
    "offset_from_file_name",
    "offset_index_file",
    "parse_partition_dir_name",
    "parse_topic_partition",
    "producer_snapshot_file",
    "sibling_segment_file",
    "time_index_file",
    "topic_partition_dir_name",
    "transaction_index_file",
    "validate_topic_name",
]

# --- topic names and partition directories (§1.1) -------------------------------------------------

# Kafka's Topic.isInternal: the coordinators' topics (its admin client does not list them), the
# share-group coordinator's (KIP-932) among them although kafkalog serves no share groups.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

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


def check_client_append(topic: str) -> None:
    """Raise ``InvalidTopicError`` for a client's append to an internal topic: only the coordinators
    write there (Kafka's ``appendToLocalLog`` with ``internalTopicsAllowed`` false)."""
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot append to internal topic {topic}")


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


_NS = f"[^{JAVA_WS}]+"  # Java's \S+
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
    partition = java_int(partition_text, INT32_MIN, INT32_MAX)
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
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT32_MAX:
        raise InvalidConfigError(f"Partition must be an int in [0, {INT32_MAX}], got {partition!r}")
    return partition


def topic_partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>`` after validating both (so the name can never escape the data dir)."""
    validate_topic_name(topic)
    return f"{topic}-{_check_partition(partition)}"


def _unique_id(unique_id: str | None) -> str:
    if unique_id is None:
        return uuid.uuid4().hex  # Kafka: UUID.randomUUID().toString() without dashes
    if not re.fullmatch(f"[^{JAVA_WS}.]+", unique_id):
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


# --- segment file names (Kafka's LogFileUtils, §1.2) ------------------------------------------

LOG_FILE_SUFFIX: Final = ".log"
INDEX_FILE_SUFFIX: Final = ".index"
TIME_INDEX_FILE_SUFFIX: Final = ".timeindex"
TXN_INDEX_FILE_SUFFIX: Final = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX: Final = ".snapshot"
DELETED_FILE_SUFFIX: Final = ".deleted"
CLEANED_FILE_SUFFIX: Final = ".cleaned"
SWAP_FILE_SUFFIX: Final = ".swap"


def filename_prefix_from_offset(offset: int) -> str:
    """The offset in decimal, at least 20 digits, zero-padded (a sign, if any, comes first)."""
    return f"-{-offset:020d}" if offset < 0 else f"{offset:020d}"


def offset_from_file_name(file_name: str) -> int:
    """The number before the first '.' of a segment file name."""
    prefix = file_name.split(".", 1)[0]
    try:
        return int(prefix, 10)
    except ValueError:
        raise IllegalArgumentError(f"File name {file_name!r} does not start with an offset") from None


def offset_from_file(path: Path | str) -> int:
    return offset_from_file_name(Path(path).name)


def log_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def transaction_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


def producer_snapshot_file(directory: Path | str, offset: int) -> Path:
    return Path(directory) / f"{filename_prefix_from_offset(offset)}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"


def is_log_file(path: Path | str) -> bool:
    return str(path).endswith(LOG_FILE_SUFFIX)


def is_index_file(path: Path | str) -> bool:
    name = Path(path).name
    return name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))


def sibling_segment_file(path: Path | str, suffix: str) -> Path:
    """The file of the same segment with another suffix (``…/0…100.index`` → ``…/0…100.log``)."""
    path = Path(path)
    return path.parent / (path.name.split(".", 1)[0] + suffix)
