"""One partition opened read-only with the settings a read-only LogManager would give it, without
opening the rest of the data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import UnknownTopicOrPartitionError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.storage.filesystem import LOCAL_FILESYSTEM
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.read_only_partition import DataDirFiles, open_partition_read_only


def test_config_and_log_start_come_from_the_data_directory(tmp_path: Path) -> None:
    with LogManager(tmp_path) as manager:
        manager.create_topic("t", 2, {"segment.bytes": "1000", "cleanup.policy": "compact"})
        log = manager.get_log("t", 1)
        for i in range(30):
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, [SimpleRecord(b"v%d" % i, b"k%d" % i, 1000)]))
        log.maybe_increment_log_start_offset(7)  # DeleteRecords would refuse a compacted topic
        manager.checkpoint()
    files = DataDirFiles.read(LOCAL_FILESYSTEM, tmp_path)
    opened = open_partition_read_only(LOCAL_FILESYSTEM, tmp_path, "t", 1, files)
    try:
        assert opened.read_only and opened.config.segment_bytes == 1000 and opened.config.compact
        assert opened.log_start_offset == 7 and opened.log_end_offset == 30
        assert [r.offset for r in opened.records(0)][:2] == [7, 8]
    finally:
        opened.close()
    with pytest.raises(UnknownTopicOrPartitionError, match="t-5"):
        open_partition_read_only(LOCAL_FILESYSTEM, tmp_path, "t", 5)
