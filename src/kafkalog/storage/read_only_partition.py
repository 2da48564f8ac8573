"""One partition of a data directory opened read-only, as a read-only ``LogManager`` opens it -- its
topic's config from the topic-config file, its log start offset from the checkpoint -- without
loading every other partition of the directory: for readers in other processes that touch a few
partitions (the Spark source's tasks). Through any ``storage.filesystem``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkalog.errors import KafkaLogError, UnknownTopicOrPartitionError
from kafkalog.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalog.storage.config import LogConfig, read_topic_configs
from kafkalog.storage.filesystem import FileSystem
from kafkalog.storage.log import Log
from kafkalog.storage.log_file_utils import topic_partition_dir_name

__all__ = ["DataDirFiles", "open_partition_read_only"]


@dataclass(frozen=True, slots=True)
class DataDirFiles:
    """The data directory's files a read-only open takes its settings from, read once for many
    partitions: topic configs, and the log start offsets checkpoint."""

    topic_configs: Mapping[str, Mapping[str, str]]
    log_start_offsets: Mapping[tuple[str, int], int]

    @classmethod
    def read(cls, fs: FileSystem, root: Path) -> DataDirFiles:
        try:
            starts: Mapping[tuple[str, int], int] = OffsetCheckpointFile(
                root / LOG_START_OFFSET_CHECKPOINT_FILE, fs=fs).read()
        except (KafkaLogError, OSError):
            starts = {}  # unreadable: every log starts at its first segment (what recovery would give)
        return cls(read_topic_configs(root, fs=fs), starts)


def open_partition_read_only(fs: FileSystem, root: Path, topic: str, partition: int,
                             files: DataDirFiles | None = None) -> Log:
    """``<root>/<topic>-<partition>`` opened read-only with its topic config and checkpointed log
    start offset (``files``: already read, when opening several partitions)."""
    # the validated name: a topic like "../x" must not reach outside the data directory
    directory = root / topic_partition_dir_name(topic, partition)
    if not fs.is_dir(directory):
        raise UnknownTopicOrPartitionError(
            f"Partition {topic}-{partition} does not exist in {fs.describe(root)}")
    if files is None:
        files = DataDirFiles.read(fs, root)
    config = LogConfig.from_props(dict(files.topic_configs.get(topic, {})))
    return Log.open(directory, config, log_start_offset=files.log_start_offsets.get((topic, partition), 0),
                    read_only=True, fs=fs)
