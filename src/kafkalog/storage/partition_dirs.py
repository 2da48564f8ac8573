"""Finding the partitions of a data directory (the directory scan of Kafka's ``LogManager.loadLogs``).

``scan_partition_dirs`` parses every sub-directory once, with Kafka's rules (a foreign directory or
a negative partition is a ``KafkaStorageError``); ``LogManager`` loads from it, and
``list_topic_partitions`` answers "which topic-partitions are there?" read-only, without opening,
locking, creating or deleting anything (what the Spark source and sink plan with). Given a
``storage.filesystem.FileSystem``, both list through it (a data directory in object storage).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafkalog.errors import KafkaStorageError
from kafkalog.storage.filesystem import FileSystem
from kafkalog.storage.log_file_utils import (
    LOG_FILE_SUFFIX,
    PartitionDirKind,
    PartitionDirName,
    parse_partition_dir_name,
)

__all__ = ["METADATA_TOPIC", "PartitionDir", "list_topic_partitions", "scan_partition_dirs"]

# KRaft's metadata log lives in a data directory like a partition but is not a topic.
METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True, slots=True)
class PartitionDir:
    """A sub-directory of a data directory and what its name says."""

    path: Path
    name: PartitionDirName

    @property
    def is_topic_partition(self) -> bool:
        """A live partition of a topic (not marked -delete/-future/-stray, not the metadata log)."""
        return self.name.kind is PartitionDirKind.LIVE and self.name.topic != METADATA_TOPIC

    def has_segment(self, fs: FileSystem | None = None) -> bool:
        """False while a writer is still creating the partition: not readable yet."""
        if fs is not None:
            return any(not s.is_dir and s.name.endswith(LOG_FILE_SUFFIX) for s in fs.list_dir(self.path))
        return any(self.path.glob("*" + LOG_FILE_SUFFIX))


def scan_partition_dirs(data_dir: Path | str, *, fs: FileSystem | None = None) -> list[PartitionDir]:
    """Every sub-directory of ``data_dir``, sorted by name, with its parsed name (listed through
    ``fs`` when given)."""
    root = Path(data_dir)
    if fs is not None:
        children = [root / s.name for s in fs.list_dir(root) if s.is_dir]
    else:
        children = [child for child in sorted(root.iterdir()) if child.is_dir()]
    found = []
    for child in children:
        parsed = parse_partition_dir_name(child.name)  # KafkaStorageError for foreign directories
        if parsed.kind is PartitionDirKind.LIVE and parsed.topic != METADATA_TOPIC and parsed.partition < 0:
            raise KafkaStorageError(f"Directory {child.name!r} names a negative partition")
        found.append(PartitionDir(child, parsed))
    return found


def list_topic_partitions(data_dir: Path | str, *, readable_only: bool = True,
                          fs: FileSystem | None = None) -> dict[str, list[int]]:
    """``{topic: [partitions]}``, both sorted, of the topic-partitions in ``data_dir``.

    ``readable_only`` leaves out partitions that have no segment yet (being created by a writer), as
    a read-only ``LogManager`` does; without it, every partition directory counts. ``fs``: list
    through that filesystem (a reader's, maybe remote; default: the local one directly).
    """
    found: dict[str, list[int]] = {}
    for entry in scan_partition_dirs(data_dir, fs=fs):
        if entry.is_topic_partition and (not readable_only or entry.has_segment(fs)):
            found.setdefault(entry.name.topic, []).append(entry.name.partition)
    return {topic: sorted(partitions) for topic, partitions in sorted(found.items())}
